package bridge

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
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

// Lock roles: what the holder does, written beside its pid.
const (
	// LockDaemon is a running daemon (or --once): the lock is held for long.
	LockDaemon = "daemon"
	// LockReleaseAll is a fail-open (--release-all, the guardian's): done
	// within seconds, so a starting daemon waits for it (AcquireLockWaiting).
	LockReleaseAll = "release-all"
)

// AcquireLockWaiting is AcquireLock, but while the holder is a fail-open
// (LockReleaseAll) it retries for up to wait: a daemon restarted right
// after a kill -9 waits for its guardian's release, not refuses to start.
func AcquireLockWaiting(dataDir, role string, wait time.Duration) (*InstanceLock, error) {
	deadline := time.Now().Add(wait)
	for {
		l, err := AcquireLock(dataDir, role)
		if err == nil || !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), " "+LockReleaseAll+")") || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// AcquireLock takes the lock for role or fails at once with ErrLocked
// (naming the holder's pid and role). Nothing else is touched: a second
// daemon exits before it opens a database or reads Slurm.
func AcquireLock(dataDir, role string) (*InstanceLock, error) {
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	path := filepath.Join(dataDir, LockFile)
	// O_NOFOLLOW: the lock is truncated and written, so a symlink planted
	// in its place must not send that to another file.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("lock: %s is a symlink; refusing to follow it (remove it)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("lock: %s is not a regular file; refusing to use it (remove it)", path)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := make([]byte, 64)
		n, _ := f.ReadAt(holder, 0)
		holder = holder[:n]
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.Fields(string(holder))
			pid, what := "unknown", LockDaemon
			if len(who) > 0 {
				pid = who[0]
			}
			if len(who) > 1 {
				what = who[1]
			}
			return nil, fmt.Errorf("%w (pid %s holds %s as %s)", ErrLocked, pid, path, what)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+" "+role+"\n"), 0)
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
