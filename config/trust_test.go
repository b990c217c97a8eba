package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// site lays out a config file, a bin_dir with squeue and scontrol, and a
// throughputs file under a fresh directory, all 0755/0644.
type site struct {
	dir, conf, bin, matrix string
}

func newSite(t *testing.T) site {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := site{dir: dir, conf: filepath.Join(dir, "etc", "hadar.toml"), bin: filepath.Join(dir, "bin"), matrix: filepath.Join(dir, "etc", "matrix.json")}
	for _, d := range []string{filepath.Dir(s.conf), s.bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for path, mode := range map[string]fs.FileMode{s.conf: 0o644, s.matrix: 0o644,
		filepath.Join(s.bin, "squeue"): 0o755, filepath.Join(s.bin, "scontrol"): 0o755} {
		if err := os.WriteFile(path, []byte("x"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := CheckTrusted(s.conf, s.cfg(), os.Geteuid()); err != nil {
		t.Skipf("the temporary directory itself is not trusted here: %v", err)
	}
	return s
}

func (s site) cfg() Config {
	cfg := Default()
	cfg.Slurm.BinDir = s.bin
	cfg.Throughputs = s.matrix
	return cfg
}

func TestCheckTrusted(t *testing.T) {
	chmod := func(rel string, mode fs.FileMode) func(*testing.T, site) {
		return func(t *testing.T, s site) {
			if err := os.Chmod(filepath.Join(s.dir, rel), mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name  string
		spoil func(*testing.T, site)
		// want is a substring of the error ("" for none).
		want string
	}{
		{"all root's, 0755 and 0644", func(*testing.T, site) {}, ""},
		{"config writable by its group", chmod("etc/hadar.toml", 0o664),
			"config file: untrusted path: DIR/etc/hadar.toml is writable by its group (mode 0664); fix with: chmod go-w DIR/etc/hadar.toml"},
		{"config directory writable by its group", chmod("etc", 0o775),
			"config file: untrusted path: DIR/etc is writable by its group (mode 0775); fix with: chmod go-w DIR/etc"},
		{"config in a sticky directory", chmod("etc", 0o777|fs.ModeSticky), ""},
		{"bin_dir writable by everyone", chmod("bin", 0o777),
			"slurm.bin_dir: untrusted path: DIR/bin is writable by its group and every user (mode 0777)"},
		{"sticky bin_dir", chmod("bin", 0o777|fs.ModeSticky),
			"slurm.bin_dir: untrusted path: DIR/bin is writable by its group and every user (mode 1777)"},
		{"squeue writable by its group", chmod("bin/squeue", 0o775),
			"slurm.bin_dir: untrusted path: DIR/bin/squeue is writable by its group (mode 0775)"},
		{"throughputs file writable by everyone", chmod("etc/matrix.json", 0o646),
			"throughputs: untrusted path: DIR/etc/matrix.json is writable by every user (mode 0646)"},
		{"config a symlink into a directory everyone writes", func(t *testing.T, s site) {
			open := filepath.Join(s.dir, "open")
			if err := os.Mkdir(open, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(open, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(s.conf, filepath.Join(open, "hadar.toml")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(open, "hadar.toml"), s.conf); err != nil {
				t.Fatal(err)
			}
		}, "config file: untrusted path: DIR/open is writable by its group and every user (mode 0777)"},
		{"bin_dir a regular file", func(t *testing.T, s site) {
			if err := os.RemoveAll(s.bin); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(s.bin, nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "slurm.bin_dir: DIR/bin is not a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSite(t)
			tc.spoil(t, s)
			err := CheckTrusted(s.conf, s.cfg(), os.Geteuid())
			want := strings.ReplaceAll(tc.want, "DIR", s.dir)
			switch {
			case want == "" && err != nil:
				t.Errorf("CheckTrusted: %v, want nil", err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrInvalid)):
				t.Errorf("CheckTrusted: %v\nwant an ErrInvalid with %q", err, want)
			}
		})
	}
}

// A config file owned by another user is refused. Without root the test
// cannot chown, so it expects another uid instead (the test's own files
// are then the foreign ones).
func TestCheckTrustedOwner(t *testing.T) {
	s := newSite(t)
	expect := os.Geteuid()
	if expect == 0 {
		if err := os.Chown(s.conf, 5001, -1); err != nil {
			t.Fatal(err)
		}
	} else {
		expect++
	}
	err := CheckTrusted(s.conf, s.cfg(), expect)
	if err == nil || !strings.Contains(err.Error(), "is owned by uid ") || !strings.Contains(err.Error(), "fix with: chown root ") {
		t.Errorf("config owned by another user: %v", err)
	}
}

// A missing throughputs file is fine if no one else can create it.
func TestCheckTrustedMissingMatrix(t *testing.T) {
	s := newSite(t)
	cfg := s.cfg()
	cfg.Throughputs = filepath.Join(s.dir, "etc", "missing.json")
	if err := CheckTrusted("", cfg, os.Geteuid()); err != nil {
		t.Errorf("missing matrix in a trusted directory: %v", err)
	}
	if err := os.Chmod(filepath.Join(s.dir, "etc"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := CheckTrusted("", cfg, os.Geteuid()); err == nil || !strings.Contains(err.Error(), "throughputs: ") {
		t.Errorf("missing matrix in a directory everyone writes: %v", err)
	}
}
