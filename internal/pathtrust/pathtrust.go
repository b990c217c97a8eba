// Package pathtrust checks that a path hadar-slurmd acts on as root (its
// config file, the Slurm programs it runs, its data and spool directories)
// can be changed by no one but root or the daemon's own user, as sshd's
// StrictModes does for authorized_keys.
//
// A path is trusted when the file and every directory above it, up to /,
// are owned by root or the given uid and are not writable by group or
// others. A directory above the last component may be writable by others
// if it is sticky and trusted (like /tmp): others can then add entries but
// not rename or remove the ones root owns, and the next component is
// checked in turn. A symlink on the way is followed only if root or uid
// owns it; its target is checked the same way. Every step uses lstat, so a
// link is never followed unchecked.
package pathtrust

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrUntrusted marks a path that someone other than root or the expected
// uid could change.
var ErrUntrusted = errors.New("untrusted path")

// maxLinks bounds the symlinks followed in one check (the kernel's
// MAXSYMLINKS is 40).
const maxLinks = 40

// Check verifies that path can be changed only by root or uid, and returns
// the lstat of what it finally names (a symlink's target). A missing
// component is an error wrapping fs.ErrNotExist.
func Check(path string, uid int) (fs.FileInfo, error) {
	return walk(path, uid, false)
}

// MkdirAll creates the directory path (and its missing parents) with
// perm, as os.MkdirAll does, but only below a trusted directory, and then
// checks the whole path: a directory a user created first, or a symlink a
// user planted on the way, is refused, and nothing is created through it.
func MkdirAll(path string, perm fs.FileMode, uid int) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%w: %s is not an absolute path", ErrUntrusted, path)
	}
	path = filepath.Clean(path)
	existing := path
	for {
		if _, err := os.Lstat(existing); err == nil || !errors.Is(err, fs.ErrNotExist) || existing == "/" {
			break
		}
		existing = filepath.Dir(existing)
	}
	if existing != path {
		// The deepest existing directory will be the new ones' parent:
		// sticky is fine there, as for any directory above.
		if _, err := walk(existing, uid, true); err != nil {
			return err
		}
	}
	// One directory at a time, each checked before the next goes in it:
	// os.MkdirAll would follow a link planted meanwhile in a sticky parent.
	for _, name := range components(strings.TrimPrefix(path, existing)) {
		existing = filepath.Join(existing, name)
		if err := os.Mkdir(existing, perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		st, err := os.Lstat(existing)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return fmt.Errorf("%w: %s is not a directory (mode %v)", ErrUntrusted, existing, st.Mode())
		}
		if err := checkOne(existing, st, uid, false); err != nil {
			return err
		}
	}
	st, err := walk(path, uid, false)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", path)
	}
	return nil
}

// walk checks path component by component. leafIsParent checks the last
// component as a directory above another (sticky allowed).
func walk(path string, uid int, leafIsParent bool) (fs.FileInfo, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%w: %s is not an absolute path", ErrUntrusted, path)
	}
	cur := "/"
	st, err := os.Lstat(cur)
	if err != nil {
		return nil, err
	}
	rest := components(path)
	if err := checkOne(cur, st, uid, len(rest) == 0 && !leafIsParent); err != nil {
		return nil, err
	}
	links := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		if name == ".." {
			// cur holds no symlink, so its parent is its real parent.
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		if st, err = os.Lstat(next); err != nil {
			return nil, err
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			if owner := ownerOf(st); owner != 0 && owner != uid {
				return nil, untrusted(next, fmt.Sprintf("is a symlink owned by uid %d, not %s", owner, trustedOwners(uid)),
					"remove it, or replace it with a link root owns")
			}
			if links++; links > maxLinks {
				return nil, fmt.Errorf("%s: too many levels of symbolic links", path)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return nil, err
			}
			if filepath.IsAbs(target) {
				cur = "/"
			}
			rest = append(components(target), rest...)
			continue
		}
		leaf := len(rest) == 0
		if err := checkOne(next, st, uid, leaf && !leafIsParent); err != nil {
			return nil, err
		}
		if !leaf && !st.IsDir() {
			return nil, fmt.Errorf("%s: %w", next, syscall.ENOTDIR)
		}
		cur = next
	}
	return st, nil
}

// components splits a path into its names, without empty ones and ".".
func components(path string) []string {
	var out []string
	for _, c := range strings.Split(path, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// checkOne checks one file or directory (not a symlink). A sticky
// directory may be writable by others unless it is the leaf itself (the
// daemon creates files in a leaf directory: no one else may).
func checkOne(path string, st fs.FileInfo, uid int, leaf bool) error {
	if owner := ownerOf(st); owner != 0 && owner != uid {
		return untrusted(path, fmt.Sprintf("is owned by uid %d, not %s", owner, trustedOwners(uid)), "chown root "+path)
	}
	perm := st.Mode().Perm()
	if perm&0o022 == 0 {
		return nil
	}
	if st.IsDir() && st.Mode()&fs.ModeSticky != 0 && !leaf {
		return nil
	}
	who := "its group"
	switch {
	case perm&0o022 == 0o022:
		who = "its group and every user"
	case perm&0o002 != 0:
		who = "every user"
	}
	return untrusted(path, fmt.Sprintf("is writable by %s (mode %04o)", who, uint32(st.Mode().Perm())|stickyBit(st)), "chmod go-w "+path)
}

func stickyBit(st fs.FileInfo) uint32 {
	if st.Mode()&fs.ModeSticky != 0 {
		return 0o1000
	}
	return 0
}

func ownerOf(st fs.FileInfo) int {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(sys.Uid)
	}
	return -1
}

func trustedOwners(uid int) string {
	if uid == 0 {
		return "root"
	}
	return fmt.Sprintf("root or uid %d", uid)
}

func untrusted(path, problem, fix string) error {
	return fmt.Errorf("%w: %s %s; fix with: %s", ErrUntrusted, path, problem, fix)
}
