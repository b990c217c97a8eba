package slurm

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Version
		wantErr  bool
	}{
		{name: "debian 12", in: "slurm-wlm 22.05.8\n", want: Version{Major: 22, Minor: 5, Micro: 8, Raw: "22.05.8"}},
		{name: "upstream build", in: "slurm 24.11.5\n", want: Version{Major: 24, Minor: 11, Micro: 5, Raw: "24.11.5"}},
		{name: "release candidate", in: "slurm 24.05.0-0rc1\n", want: Version{Major: 24, Minor: 5, Raw: "24.05.0-0rc1"}},
		{name: "no micro, blank lines first", in: "\n\n  slurm 25.05\n", want: Version{Major: 25, Minor: 5, Raw: "25.05"}},
		{name: "no trailing newline", in: "slurm 23.11.10", want: Version{Major: 23, Minor: 11, Micro: 10, Raw: "23.11.10"}},
		{name: "empty", in: "", wantErr: true},
		{name: "an error message", in: "scontrol: fatal: Could not establish a configuration source\n", wantErr: true},
		{name: "not slurm", in: "pbs 22.05.8\n", wantErr: true},
		{name: "one number", in: "slurm 24\n", wantErr: true},
		{name: "four numbers", in: "slurm 24.11.5.1\n", wantErr: true},
		{name: "sign", in: "slurm +24.11\n", wantErr: true},
		{name: "huge", in: "slurm 99999999999999999999.1\n", wantErr: true},
		{name: "extra words", in: "slurm 24.11.5 extra\n", wantErr: true},
		{name: "overlong line", in: "slurm " + strings.Repeat("1", 1000) + "\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseVersion(strings.NewReader(tc.in))
			if tc.wantErr {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("ParseVersion(%q) = %+v, %v; want ErrMalformed", tc.in, got, err)
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

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		v            Version
		major, minor int
		want         bool
	}{
		{Version{Major: 22, Minor: 5}, 24, 0, false},
		{Version{Major: 23, Minor: 11}, 24, 0, false},
		{Version{Major: 24, Minor: 0}, 24, 0, true},
		{Version{Major: 24, Minor: 11}, 24, 0, true},
		{Version{Major: 25, Minor: 5}, 24, 11, true},
		{Version{Major: 24, Minor: 5}, 24, 11, false},
	} {
		if got := tc.v.AtLeast(tc.major, tc.minor); got != tc.want {
			t.Errorf("%+v.AtLeast(%d, %d) = %v, want %v", tc.v, tc.major, tc.minor, got, tc.want)
		}
	}
}

// The Client runs exactly VersionArgs and parses its output.
func TestClientSlurmVersion(t *testing.T) {
	r := &FakeRunner{}
	if err := r.SetFixture(VersionArgs, "testdata/scontrol-version/22.05.8-debian12.txt"); err != nil {
		t.Fatal(err)
	}
	got, err := NewClient(r, nil).SlurmVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Version{Major: 22, Minor: 5, Micro: 8, Raw: "22.05.8"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
