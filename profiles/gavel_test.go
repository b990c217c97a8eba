package profiles

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/optimizer"
)

func TestDefaultMatchesJSON(t *testing.T) {
	// Read the embedded file independently of ParseGavel.
	var raw map[string]map[string]map[string]any
	if err := json.Unmarshal(gavelJSON, &raw); err != nil {
		t.Fatal(err)
	}
	want := raw["v100"]["('ResNet-18 (batch size 128)', 1)"]["null"].(float64)
	if want != 17.994906225052176 {
		t.Fatalf("embedded JSON changed: v100 ResNet-18 bs128 = %v", want)
	}
	d := Default()
	if got := d.Rate("ResNet-18 (batch size 128)", "v100", 1); got != want {
		t.Errorf("Rate(ResNet-18 (batch size 128), v100, 1) = %v, want %v", got, want)
	}
	if got, want := d.Rate("Transformer (batch size 64)", "k80", 4), raw["k80"]["('Transformer (batch size 64)', 4)"]["null"].(float64); got != want {
		t.Errorf("Rate(Transformer (batch size 64), k80, 4) = %v, want %v", got, want)
	}
	if diff := cmp.Diff([]string{"k80", "p100", "v100"}, d.GPUTypes()); diff != "" {
		t.Errorf("GPU types (-want +got):\n%s", diff)
	}

	// Every value of every consolidated GPU type is in the matrix.
	cells := 0
	for gpu, byKey := range raw {
		if strings.HasSuffix(gpu, "_unconsolidated") {
			continue
		}
		for key, v := range byKey {
			jt, w, err := parseGavelKey(key)
			if err != nil {
				t.Fatal(err)
			}
			if got := d[jt][gpu][w]; got != v["null"].(float64) {
				t.Errorf("%s %s: got %v, want %v", gpu, key, got, v["null"])
			}
			cells++
		}
	}
	got := 0
	for _, byGPU := range d {
		for _, byW := range byGPU {
			got += len(byW)
		}
	}
	if got != cells || cells != 3*83 {
		t.Errorf("matrix has %d cells, JSON %d, want %d", got, cells, 3*83)
	}

	single := 0
	for _, jt := range d.JobTypes() {
		for _, gpu := range []string{"k80", "p100", "v100"} {
			if _, ok := d[jt][gpu][1]; !ok {
				t.Errorf("%s has no single-worker rate on %s", jt, gpu)
			}
		}
		single++
	}
	if single != 26 {
		t.Errorf("%d single-worker job types, want 26", single)
	}
	for _, family := range []string{"ResNet-18", "ResNet-50", "Transformer", "LM"} {
		found := false
		for _, jt := range d.JobTypes() {
			if !strings.HasPrefix(jt, family+" (") {
				continue
			}
			found = true
			for _, w := range []int{2, 4, 8} {
				if _, ok := d[jt]["v100"][w]; !ok {
					t.Errorf("%s has no %d-worker rate on v100", jt, w)
				}
			}
		}
		if !found {
			t.Errorf("no %s job types", family)
		}
	}
	for _, jt := range []string{"A3C", "CycleGAN", "Recommendation (batch size 512)"} {
		if _, ok := d[jt]["v100"][2]; ok {
			t.Errorf("%s has a 2-worker rate; Gavel has none", jt)
		}
	}
}

func TestDefaultReturnsCopy(t *testing.T) {
	a := Default()
	a.Set("ResNet-18 (batch size 128)", "v100", 1, -1)
	delete(a, "A3C")
	b := Default()
	if got := b.Rate("ResNet-18 (batch size 128)", "v100", 1); got != 17.994906225052176 {
		t.Errorf("Default changed after a caller mutated its result: %v", got)
	}
	if _, ok := b["A3C"]; !ok {
		t.Error("Default lost A3C after a caller deleted it from its copy")
	}
}

func TestParseGavel(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    optimizer.Throughputs
		wantErr string // substring; "" means success
	}{
		{
			name: "isolated rates, colocation and unconsolidated ignored",
			in: `{
				"v100": {
					"('ResNet-18 (batch size 128)', 1)": {"null": 18.5, "('A3C', 1)": [1.0, 2.0]},
					"('ResNet-18 (batch size 128)', 4)": {"null": 60},
					"(\"A3C\", 1)": {"null": 0.5}
				},
				"v100_unconsolidated": {"('A3C', 1)": {"null": 99}}
			}`,
			want: optimizer.Throughputs{
				"ResNet-18 (batch size 128)": {"v100": {1: 18.5, 4: 60}},
				"A3C":                        {"v100": {1: 0.5}},
			},
		},
		{name: "no tuple", in: `{"v100": {"A3C": {"null": 1}}}`, wantErr: `malformed key "A3C"`},
		{name: "unquoted job type", in: `{"v100": {"(A3C, 1)": {"null": 1}}}`, wantErr: `malformed key "(A3C, 1)"`},
		{name: "zero workers", in: `{"v100": {"('A3C', 0)": {"null": 1}}}`, wantErr: `malformed key "('A3C', 0)"`},
		{name: "workers not a number", in: `{"v100": {"('A3C', two)": {"null": 1}}}`, wantErr: `malformed key "('A3C', two)"`},
		{name: "empty job type", in: `{"v100": {"('', 1)": {"null": 1}}}`, wantErr: `malformed key "('', 1)"`},
		{name: "no isolated rate", in: `{"v100": {"('A3C', 1)": {"('A3C', 1)": [1, 2]}}}`, wantErr: `no "null"`},
		{name: "null rate", in: `{"v100": {"('A3C', 1)": {"null": null}}}`, wantErr: "not a number"},
		{name: "string rate", in: `{"v100": {"('A3C', 1)": {"null": "fast"}}}`, wantErr: "not a number"},
		{name: "negative rate", in: `{"v100": {"('A3C', 1)": {"null": -1}}}`, wantErr: "out of range"},
		{name: "not JSON", in: `nope`, wantErr: "gavel throughputs"},
		{name: "empty", in: `{}`, wantErr: "no rates"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseGavel(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadGavelFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.json")
	if err := os.WriteFile(path, []byte(`{"a100": {"('LM (batch size 20)', 2)": {"null": 7.5}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LoadGavelFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(optimizer.Throughputs{"LM (batch size 20)": {"a100": {2: 7.5}}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := LoadGavelFile(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v, want not-exist", err)
	}
}
