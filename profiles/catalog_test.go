package profiles

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCatalogCoversIssueTypes(t *testing.T) {
	want := []string{"a10", "a100", "a100-40gb", "a100-pcie", "a30", "a40", "b200", "gh200", "h100", "h100-nvl", "h100-pcie",
		"h200", "k80", "l4", "l40", "l40s", "mi210", "mi250x", "mi300x", "p100", "rtx3090", "rtx4090", "rtx6000ada",
		"rtx8000", "rtxa6000", "t4", "v100"}
	if diff := cmp.Diff(want, CatalogTypes()); diff != "" {
		t.Errorf("catalogue types (-want +got):\n%s", diff)
	}
	for _, s := range Catalog() {
		if !strings.Contains(s.Source, "datasheet") && !strings.Contains(s.Source, "whitepaper") {
			t.Errorf("%s: source %q names no datasheet or whitepaper", s.Type, s.Source)
		}
		// Tensor cores never make FP16 slower than FP32.
		if s.FP16TFLOPS < s.FP32TFLOPS {
			t.Errorf("%s: FP16 %.1f below FP32 %.1f", s.Type, s.FP16TFLOPS, s.FP32TFLOPS)
		}
	}
}

func TestLookupGPU(t *testing.T) {
	tests := []struct {
		name   string
		wantOK bool
		mem    float64
	}{
		{"h100", true, 80},
		{" H100-PCIE ", true, 80},
		{"a100-pcie", true, 40},
		{"mi300x", true, 192},
		{"k80", true, 12},
		{"h1000", false, 0},
		{"", false, 0},
	}
	for _, tc := range tests {
		mem, ok := GPUMemoryGB(tc.name)
		if ok != tc.wantOK || mem != tc.mem {
			t.Errorf("GPUMemoryGB(%q) = %v, %v; want %v, %v", tc.name, mem, ok, tc.mem, tc.wantOK)
		}
	}
}

func TestParseCatalogErrors(t *testing.T) {
	head := strings.Join(catalogHeader, ",") + "\n"
	tests := []struct{ name, in, want string }{
		{"no header", "a,b,c,d,e,f,g,h,i\n", "header"},
		{"upper-case type", head + "H100,nvidia,H100,1,1,1,1,src,\n", "lowercase"},
		{"zero figure", head + "h100,nvidia,H100,1,0,1,1,src,\n", "fp32_tflops"},
		{"no source", head + "h100,nvidia,H100,1,1,1,1,,\n", "source"},
		{"twice", head + "h100,nvidia,H100,1,1,1,1,src,\nh100,nvidia,H100,1,1,1,1,src,\n", "twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseCatalog(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parseCatalog = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}
