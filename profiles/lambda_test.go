package profiles

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hadar-sched/hadar/optimizer"
)

func TestLambdaMatrix(t *testing.T) {
	m := Lambda()
	wantTypes := []string{"a10", "a100", "a100-pcie", "h100", "h100-pcie", "rtx3090", "rtx4090", "rtx6000ada", "rtx8000", "rtxa6000", "v100"}
	if diff := cmp.Diff(wantTypes, m.GPUTypes()); diff != "" {
		t.Errorf("GPU types (-want +got):\n%s", diff)
	}
	wantJobs := []string{"bert_base_squad", "bert_large_squad", "gnmt", "ncf", "resnet50", "ssd", "tacotron2", "transformerxlbase", "transformerxllarge", "waveglow"}
	if diff := cmp.Diff(wantJobs, m.JobTypes()); diff != "" {
		t.Errorf("job types (-want +got):\n%s", diff)
	}
	approx := cmpopts.EquateApprox(1e-9, 0)
	for _, tc := range []struct {
		name    string
		job, gt string
		workers int
		want    float64
	}{
		// One step is one 1-GPU V100 batch: resnet50's is 128 samples.
		{"reference row", "resnet50", "v100", 1, 369.0 / 128},
		{"one vendor row", "resnet50", "a100", 1, 1066.0 / 128},
		// The two A100 PCIe cards merge: the median of two is their mean.
		{"a100-pcie merged", "resnet50", "a100-pcie", 1, (882.0 + 1014.0) / 2 / 128},
		// Six H100 SXM5 servers at 1 GPU: 1753, 1893 x3, 1894, 1898.
		{"h100 vendor median", "resnet50", "h100", 1, 1893.0 / 128},
		// Zeros are missing runs: only the plain and LambdaCloud 8-GPU rows
		// ran transformerxlbase.
		{"zeros dropped", "transformerxlbase", "h100", 8, (363567.0 + 376793.0) / 2 / 8},
		// The vendors' 8-GPU NCF rows (300x their 1-GPU rate) are dropped.
		{"broken scaling dropped", "ncf", "h100", 8, 575115610.0 / 1280000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := m[tc.job][tc.gt][tc.workers]
			if !ok || !cmp.Equal(tc.want, got, approx) {
				t.Errorf("%s on %d x %s = %v (present %v), want %v", tc.job, tc.workers, tc.gt, got, ok, tc.want)
			}
		})
	}
	if _, ok := m["transformerxlbase"]["h100"][1]; !ok {
		t.Error("transformerxlbase on 1 h100: the plain row measured it")
	}
	if _, ok := m["resnet50"]["a10"][2]; ok {
		t.Error("resnet50 on 2 a10: never measured, must not be a cell")
	}
	// Every multi-GPU cell scales at most lambdaMaxScaling x linearly.
	for jt, byType := range m {
		for gt, byW := range byType {
			for w, r := range byW {
				if one := byW[1]; one > 0 && r > lambdaMaxScaling*float64(w)*one {
					t.Errorf("%s on %d x %s: %.1fx the 1-GPU rate", jt, w, gt, r/one)
				}
			}
		}
	}
	// fp16 steps are the fp16 V100 batch (256 samples for resnet50).
	if got, want := LambdaFP16()["resnet50"]["v100"][1], 833.0/256; !cmp.Equal(want, got, approx) {
		t.Errorf("fp16 resnet50 on v100 = %v, want %v", got, want)
	}
}

func TestParseLambdaErrors(t *testing.T) {
	head := "name_gpu,num_gpu,watt,price,resnet50\n"
	ref := head + "LambdaCloud V100 16GB,1,300,1,128\n"
	tests := []struct{ name, thr, bs, want string }{
		{"unknown GPU", head + "Tesla K40,1,1,1,5\n", ref, `"Tesla K40"`},
		{"no reference batch", ref, head + "RTX 3090,1,1,1,64\n", "no 1-GPU batch size"},
		{"negative", head + "RTX 3090,1,1,1,-5\n", ref, "want a number"},
		{"bad header", "gpu,n\nx,1\n", ref, "header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseLambda(strings.NewReader(tc.thr), strings.NewReader(tc.bs))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseLambda = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestMatrix(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.json")
	if err := os.WriteFile(file, []byte(`{"h100": {"('llm', 1)": {"null": 2.5}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		want    func() optimizer.Throughputs
		wantErr error
	}{
		{"", Default, nil},
		{"gavel", Default, nil},
		{" lambda ", Lambda, nil},
		{"lambda-fp16", LambdaFP16, nil},
		{file, func() optimizer.Throughputs { return optimizer.Throughputs{"llm": {"h100": {1: 2.5}}} }, nil},
		{"lamda", nil, ErrUnknownMatrix},
		{filepath.Join(dir, "missing.json"), nil, ErrUnknownMatrix},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Matrix(tc.name)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), "gavel, lambda, lambda-fp16") {
					t.Fatalf("Matrix(%q) error = %v; want %v listing the names", tc.name, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want(), got); diff != "" {
				t.Errorf("Matrix(%q) (-want +got):\n%s", tc.name, diff)
			}
		})
	}
	// A file that is not Gavel's format is an error about the file.
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`[1]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Matrix(bad); err == nil || errors.Is(err, ErrUnknownMatrix) {
		t.Errorf("Matrix(bad file) = %v; want a parse error", err)
	}
}
