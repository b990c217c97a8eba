package bridge

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the single-instance lock in data_dir.
const LockFile = "hadar-slurmd.lock"

// ErrLocked means another hadar-slurmd holds the data directory's lock.
var ErrLocked = errors.New("another hadar-slurmd is running with this data_dir")

// InstanceLock is the one-daemon-per-cluster guard: an exclusive flock on
// data_dir/hadar-slurmd.lock, held for the life of the process (the kernel
// drops it when the process dies, however it dies), with the holder's pid
// in the file for the error message.
type InstanceLock struct {
	f *os.File
}

// AcquireLock takes the lock or fails at once with ErrLocked (naming the
// holder's pid). Nothing else is touched: a second daemon exits before it
// opens a database or reads Slurm.
func AcquireLock(dataDir string) (*InstanceLock, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	path := filepath.Join(dataDir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(holder))
			if pid == "" {
				pid = "unknown"
			}
			return nil, fmt.Errorf("%w (pid %s holds %s)", ErrLocked, pid, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &InstanceLock{f: f}, nil
}

// Release drops the lock.
func (l *InstanceLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
