package profiles

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// SystemDir is where the database lives when hadar runs as root.
const SystemDir = "/var/lib/hadar"

// DBFile is the database's file name.
const DBFile = "hadar.db"

// DefaultPath returns where hadar keeps its database unless told otherwise:
// /var/lib/hadar/hadar.db when running as root and that directory is
// writable (or can be created), else $XDG_DATA_HOME/hadar/hadar.db, with
// XDG_DATA_HOME defaulting to ~/.local/share. The daemon and the hadar
// command share it.
func DefaultPath() (string, error) {
	return defaultPath(os.Geteuid(), os.Getenv, os.UserHomeDir, writable)
}

func defaultPath(euid int, getenv func(string) string, home func() (string, error), canWrite func(string) bool) (string, error) {
	if euid == 0 && canWrite(SystemDir) {
		return filepath.Join(SystemDir, DBFile), nil
	}
	// The XDG spec says a relative XDG_DATA_HOME is invalid: ignore it.
	if dir := getenv("XDG_DATA_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "hadar", DBFile), nil
	}
	h, err := home()
	if err != nil {
		return "", fmt.Errorf("default database path: %w", err)
	}
	if h == "" {
		return "", errors.New("default database path: no home directory")
	}
	return filepath.Join(h, ".local", "share", "hadar", DBFile), nil
}

// writable reports whether dir is a writable directory or, if it does not
// exist, whether its parent is one (so Open can create it).
func writable(dir string) bool {
	st, err := os.Stat(dir)
	switch {
	case err == nil:
		return st.IsDir() && syscall.Access(dir, 2 /* W_OK */) == nil
	case errors.Is(err, os.ErrNotExist):
		parent := filepath.Dir(dir)
		st, err := os.Stat(parent)
		return err == nil && st.IsDir() && syscall.Access(parent, 2) == nil
	}
	return false
}
