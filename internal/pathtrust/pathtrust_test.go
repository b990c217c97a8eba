package pathtrust

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tempDir is a t.TempDir with mode 0755 whatever the umask, so that the
// checks below see only what each case sets up.
func tempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(dir, os.Geteuid()); err != nil {
		t.Skipf("the temporary directory itself is not trusted here: %v", err)
	}
	return dir
}

func write(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	uid := os.Geteuid()
	cases := []struct {
		name string
		// setup builds the case under dir and returns the path to check.
		setup func(t *testing.T, dir string) string
		// bad is a substring of the error, "" for a trusted path.
		bad string
	}{
		{"file 0644", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "hadar.toml"), 0o644)
			return filepath.Join(dir, "hadar.toml")
		}, ""},
		{"file writable by its group", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "hadar.toml"), 0o664)
			return filepath.Join(dir, "hadar.toml")
		}, "hadar.toml is writable by its group (mode 0664); fix with: chmod go-w "},
		{"file writable by every user", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "hadar.toml"), 0o646)
			return filepath.Join(dir, "hadar.toml")
		}, "is writable by every user (mode 0646)"},
		{"parent writable by its group", func(t *testing.T, dir string) string {
			mkdir(t, filepath.Join(dir, "etc"), 0o775)
			write(t, filepath.Join(dir, "etc", "hadar.toml"), 0o644)
			return filepath.Join(dir, "etc", "hadar.toml")
		}, "etc is writable by its group (mode 0775); fix with: chmod go-w"},
		{"sticky parent, like /tmp", func(t *testing.T, dir string) string {
			mkdir(t, filepath.Join(dir, "tmp"), 0o777|fs.ModeSticky)
			write(t, filepath.Join(dir, "tmp", "hadar.toml"), 0o644)
			return filepath.Join(dir, "tmp", "hadar.toml")
		}, ""},
		{"sticky directory as the leaf", func(t *testing.T, dir string) string {
			mkdir(t, filepath.Join(dir, "bin"), 0o777|fs.ModeSticky)
			return filepath.Join(dir, "bin")
		}, "bin is writable by its group and every user (mode 1777)"},
		{"symlink to a trusted file", func(t *testing.T, dir string) string {
			mkdir(t, filepath.Join(dir, "site"), 0o755)
			write(t, filepath.Join(dir, "site", "hadar.toml"), 0o644)
			if err := os.Symlink("site/hadar.toml", filepath.Join(dir, "hadar.toml")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "hadar.toml")
		}, ""},
		{"symlink through .. to a trusted file", func(t *testing.T, dir string) string {
			mkdir(t, filepath.Join(dir, "a"), 0o755)
			mkdir(t, filepath.Join(dir, "b"), 0o755)
			write(t, filepath.Join(dir, "b", "hadar.toml"), 0o644)
			if err := os.Symlink("../b/hadar.toml", filepath.Join(dir, "a", "hadar.toml")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "a", "hadar.toml")
		}, ""},
		{"symlink to a file others can write", func(t *testing.T, dir string) string {
			mkdir(t, filepath.Join(dir, "home"), 0o777)
			write(t, filepath.Join(dir, "home", "evil.toml"), 0o644)
			if err := os.Symlink(filepath.Join(dir, "home", "evil.toml"), filepath.Join(dir, "hadar.toml")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "hadar.toml")
		}, "home is writable by its group and every user (mode 0777)"},
		{"symlink loop", func(t *testing.T, dir string) string {
			if err := os.Symlink("loop", filepath.Join(dir, "loop")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "loop")
		}, "too many levels of symbolic links"},
		{"missing", func(t *testing.T, dir string) string {
			return filepath.Join(dir, "nope", "hadar.toml")
		}, "no such file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.setup(t, tempDir(t))
			_, err := Check(path, uid)
			switch {
			case tc.bad == "" && err != nil:
				t.Errorf("Check(%s): %v, want trusted", path, err)
			case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
				t.Errorf("Check(%s): %v, want an error with %q", path, err, tc.bad)
			}
		})
	}
}

// A path owned by another uid than root or the expected one is refused.
// Without root the test cannot chown, so it expects another uid instead:
// the test's own files are then the foreign ones.
func TestCheckOwner(t *testing.T) {
	dir := tempDir(t)
	path := filepath.Join(dir, "hadar.toml")
	write(t, path, 0o644)
	expect := os.Geteuid()
	if expect == 0 {
		if err := os.Chown(path, 54321, -1); err != nil {
			t.Fatal(err)
		}
	} else {
		expect++
	}
	_, err := Check(path, expect)
	if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "is owned by uid ") || !strings.Contains(err.Error(), "fix with: chown root ") {
		t.Errorf("Check of a file owned by another user: %v", err)
	}
	if os.Geteuid() == 0 {
		// A symlink a user owns is not followed, even to a root file.
		link := filepath.Join(dir, "link.toml")
		good := filepath.Join(dir, "good.toml")
		write(t, good, 0o644)
		if err := os.Symlink(good, link); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(link, 54321, -1); err != nil {
			t.Fatal(err)
		}
		if _, err := Check(link, 0); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "is a symlink owned by uid 54321") {
			t.Errorf("Check through a user's symlink: %v", err)
		}
	}
}

func TestMkdirAll(t *testing.T) {
	uid := os.Geteuid()
	dir := tempDir(t)
	want := filepath.Join(dir, "var", "lib", "hadar")
	if err := MkdirAll(want, 0o750, uid); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(want); err != nil || !st.IsDir() || st.Mode().Perm() != 0o750 {
		t.Errorf("created %v, %v", st, err)
	}
	if err := MkdirAll(want, 0o750, uid); err != nil {
		t.Errorf("again: %v", err)
	}

	// A symlink planted where a directory is to be created: refused, and
	// nothing is created through it.
	sticky := filepath.Join(dir, "scratch")
	mkdir(t, sticky, 0o777|fs.ModeSticky)
	target := filepath.Join(dir, "target")
	mkdir(t, target, 0o755)
	if err := os.Symlink(target, filepath.Join(sticky, "spool")); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(filepath.Join(sticky, "spool"), 54321, -1); err != nil {
			t.Fatal(err)
		}
		err := MkdirAll(filepath.Join(sticky, "spool", "hadar"), 0o755, uid)
		if !errors.Is(err, ErrUntrusted) {
			t.Errorf("MkdirAll through a user's symlink: %v, want ErrUntrusted", err)
		}
		if _, err := os.Lstat(filepath.Join(target, "hadar")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("MkdirAll created %s through the link: %v", filepath.Join(target, "hadar"), err)
		}
	}

	// A leaf directory others can write is refused.
	open := filepath.Join(dir, "open")
	mkdir(t, open, 0o777)
	if err := MkdirAll(open, 0o750, uid); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "chmod go-w "+open) {
		t.Errorf("MkdirAll of a 0777 directory: %v", err)
	}
}
