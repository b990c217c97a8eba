package jobproto

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A symlink planted where the daemon makes a shared spool directory
// (progress, copies) is refused and not followed: the directory it points
// to keeps its mode. A planted file is refused too.
func TestSharedDirsRefuseSymlinks(t *testing.T) {
	for _, tc := range []struct {
		sub    string
		ensure func(spool string) error
	}{
		{ProgressSubdir, EnsureProgressDir},
		{CopiesSubdir, EnsureCopiesDir},
	} {
		t.Run(tc.sub, func(t *testing.T) {
			spool := t.TempDir()
			victim := filepath.Join(t.TempDir(), "root-only")
			if err := os.Mkdir(victim, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, filepath.Join(spool, tc.sub)); err != nil {
				t.Fatal(err)
			}
			err := tc.ensure(spool)
			if err == nil || !strings.Contains(err.Error(), "is a symlink or not a directory; refusing") {
				t.Errorf("through a symlink: %v, want a refusal", err)
			}
			if st, err := os.Stat(victim); err != nil || st.Mode().Perm() != 0o700 || st.Mode()&os.ModeSticky != 0 {
				t.Errorf("the link's target is now %v (%v), want it left 0700", st.Mode(), err)
			}

			file := t.TempDir()
			if err := os.WriteFile(filepath.Join(file, tc.sub), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := tc.ensure(file); err == nil {
				t.Error("a file in place of the directory: no error")
			}

			fresh := t.TempDir()
			if err := tc.ensure(fresh); err != nil {
				t.Fatal(err)
			}
			if st, err := os.Lstat(filepath.Join(fresh, tc.sub)); err != nil || st.Mode().Perm() != 0o777 || st.Mode()&os.ModeSticky == 0 {
				t.Errorf("created %v (%v), want drwxrwxrwt", st.Mode(), err)
			}
		})
	}
}
