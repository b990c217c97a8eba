package slurm

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseGRES(t *testing.T) {
	gpu := func(typ string, n int, idx ...int) GRES {
		g := GRES{Name: "gpu", Type: typ, Count: n}
		if len(idx) > 0 {
			g.Indexes = idx
		}
		return g
	}
	tests := []struct {
		name    string
		in      string
		want    []GRES
		wantErr string // substring; "" means no error
	}{
		{"typed", "gpu:v100:4", []GRES{gpu("v100", 4)}, ""},
		{"untyped", "gpu:8", []GRES{gpu("", 8)}, ""},
		{"sockets", "gpu:a100:4(S:0-1)", []GRES{{Name: "gpu", Type: "a100", Count: 4, Sockets: "0-1"}}, ""},
		{"indexes with comma", "gpu:a6000:3(IDX:0,2-3)", []GRES{gpu("a6000", 3, 0, 2, 3)}, ""},
		{"IDX N/A", "gpu:model_a:0(IDX:N/A)", []GRES{gpu("model_a", 0)}, ""},
		{"IDX empty (22.05 per-node GRES)", "gpu:NVlink_A100_40GB:0(IDX:)", []GRES{gpu("NVlink_A100_40GB", 0)}, ""},
		{"null type", "gpu:(null):0(IDX:N/A)", []GRES{gpu("", 0)}, ""},
		{"several types", "gpu:v100:2(IDX:0-1),gpu:k80:2(IDX:2-3)",
			[]GRES{gpu("v100", 2, 0, 1), gpu("k80", 2, 2, 3)}, ""},
		{"bad count keeps the rest", "gpu:h100:1,shard:h10", []GRES{gpu("h100", 1)}, `"shard:h10"`},
		{"(null)", "(null)", nil, ""},
		{"N/A", "N/A", nil, ""},
		{"empty", "", nil, ""},
		{"blank", "   ", nil, ""},
		{"squeue 22.05 prefix", "gres:gpu:v100:2", []GRES{gpu("v100", 2)}, ""},
		{"squeue later prefix", "gres/gpu:2", []GRES{gpu("", 2)}, ""},
		{"TRES spelling", "gres/gpu:v100=2", []GRES{gpu("v100", 2)}, ""},
		{"site type with dashes", "gpu:tesla_v100-sxm2-32gb:4", []GRES{gpu("tesla_v100-sxm2-32gb", 4)}, ""},
		{"site type with dots", "gpu:nvidia_a100_1g.5gb:21(S:0-1)", []GRES{{Name: "gpu", Type: "nvidia_a100_1g.5gb", Count: 21, Sockets: "0-1"}}, ""},
		{"mixed case type", "gpu:NVlink_A100_40GB:2(IDX:0,3)", []GRES{gpu("NVlink_A100_40GB", 2, 0, 3)}, ""},
		{"shard use per GPU", "gpu:1(IDX:0),shard:8(-/5,5/5,3/5,0/5)",
			[]GRES{gpu("", 1, 0), {Name: "shard", Count: 8}}, ""},
		{"shard configured", "gpu:4,shard:20", []GRES{gpu("", 4), {Name: "shard", Count: 20}}, ""},
		{"two slurmrestd types", "gpu:fake1:1(S:0),gpu:fake2:1(S:0)",
			[]GRES{{Name: "gpu", Type: "fake1", Count: 1, Sockets: "0"}, {Name: "gpu", Type: "fake2", Count: 1, Sockets: "0"}}, ""},
		{"sockets and indexes", "gpu:a100:2(S:0)(IDX:0-1)", []GRES{{Name: "gpu", Type: "a100", Count: 2, Sockets: "0", Indexes: []int{0, 1}}}, ""},
		{"no count with IDX", "gpu:v100(IDX:0-1)", []GRES{gpu("v100", 2, 0, 1)}, ""},
		{"name only", "gpu", []GRES{gpu("", 1)}, ""},
		{"count suffix", "mps:1K", []GRES{{Name: "mps", Count: 1024}}, ""},
		{"cut by sinfo", "gpu:a:2(IDX:0-1),gpu:b:1(IDX:2", []GRES{gpu("a", 2, 0, 1)}, "unclosed parenthesis"},
		{"backwards range", "gpu:a:2(IDX:3-1)", nil, "backwards"},
		{"huge range", "gpu:a:2(IDX:0-99999999)", nil, "more than"},
		{"huge count", "gpu:a:99999999999999", nil, "out of range"},
		{"negative count", "gpu:a:-1", nil, "not a number"},
		{"garbage", "gpu:a:b:c:d", nil, "too many"},
		{"space in type", "gpu:a b:1", nil, "bad type"},
		{"empty entries", "gpu:1,,gpu:a:2", []GRES{gpu("", 1), gpu("a", 2)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseGRES(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseGRES(%q) (-want +got):\n%s", tt.in, diff)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("ParseGRES(%q) error %v, want none", tt.in, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("ParseGRES(%q) error %v, want one containing %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestGPUsByType(t *testing.T) {
	gres, err := ParseGRES("gpu:v100:2(IDX:0-1),gpu:k80:2(IDX:2-3),gpu:3,shard:20,gpu:v100:1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"v100": 3, "k80": 2, "": 3}
	if diff := cmp.Diff(want, GPUsByType(gres)); diff != "" {
		t.Errorf("GPUsByType (-want +got):\n%s", diff)
	}
	if got := GPUsByType(nil); len(got) != 0 {
		t.Errorf("GPUsByType(nil) = %v, want empty", got)
	}
}

func TestGRESString(t *testing.T) {
	for _, tt := range []struct {
		g    GRES
		want string
	}{
		{GRES{Name: "gpu", Count: 2}, "gpu:2"},
		{GRES{Name: "gpu", Type: "v100", Count: 1, Indexes: []int{3}}, "gpu:v100:1"},
	} {
		if got := tt.g.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.g, got, tt.want)
		}
	}
}

func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", nil, false},
		{"(null)", nil, false},
		{"node1", []string{"node1"}, false},
		{"node[1-3]", []string{"node1", "node2", "node3"}, false},
		{"node[1-2,5],gpu-a-[08-10]", []string{"node1", "node2", "node5", "gpu-a-08", "gpu-a-09", "gpu-a-10"}, false},
		{"rack[1-2]-n[1-2]", []string{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}, false},
		{"a,b", []string{"a", "b"}, false},
		{"node[3-1]", nil, true},
		{"node[1-", nil, true},
		{"node]1", nil, true},
		{"node[0-99999999]", nil, true},
		{"bad name", nil, true},
		{"n[1-300]-m[1-300]", nil, true},
	}
	for _, tt := range tests {
		got, err := ExpandHostlist(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ExpandHostlist(%q) error %v, wantErr %v", tt.in, err, tt.wantErr)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ExpandHostlist(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}
