package profiles

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// GPU names resolve to the part they name: the PCIe and NVL H100s are not
// the SXM one, whose figures are a third higher; an unknown name gets the
// closest known names.
func TestResolveVariantGPUNames(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hadar.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, want := range map[string]string{
		"nvidia_h100_pcie_80gb": "h100-pcie",
		"NVIDIA_H100_PCIe_80GB": "h100-pcie",
		"nvidia_h100_nvl_94gb":  "h100-nvl",
		"nvidia_h100_80gb_hbm3": "h100",
		"h100_sxm5_80gb":        "h100",
		"tesla_v100-sxm2-32gb":  "v100",
		"V100":                  "v100",
	} {
		got, err := ResolveDefault(name)
		if err != nil || got != want {
			t.Errorf("ResolveDefault(%q) = %q, %v; want %q", name, got, err, want)
		}
		got, err = s.ResolveGPUType(ctx, name)
		if err != nil || got != want {
			t.Errorf("ResolveGPUType(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	for name, hint := range map[string]string{
		"nvidia_h800": "closest known names: h100, h200",
		"nosuchgpu":   "no known GPU type resembles it",
	} {
		_, err := ResolveDefault(name)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), hint) {
			t.Errorf("ResolveDefault(%q) = %v; want ErrNotFound with %q", name, err, hint)
		}
		_, err = s.ResolveGPUType(ctx, name)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), hint) {
			t.Errorf("ResolveGPUType(%q) = %v; want ErrNotFound with %q", name, err, hint)
		}
	}
}
