package jobproto

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxLogLine is the longest line a LogFollower returns; the rest of a longer
// line is dropped.
const MaxLogLine = 64 << 10

// maxRead bounds what one Lines call reads, so a huge log is read in
// pieces between writes of progress.
const maxRead = 4 << 20

// A LogFollower reads a log file as it grows, like tail -F: it waits for the
// file to exist, starts at its beginning, reads from the start again when
// the file is truncated (copytruncate, or a job restarted with `> log`),
// and moves to the new file when the path is replaced (rotation by
// rename), after reading the old one to its end. Lines end at "\n" or
// "\r" (tqdm redraws its bar after a "\r"). It is not safe for concurrent
// use.
type LogFollower struct {
	path    string
	f       *os.File
	off     int64
	partial []byte
	shown   bool // partial was returned as a line already
	long    bool // dropping the rest of a line longer than MaxLogLine
}

// NewLogFollower returns a LogFollower of path. Nothing is opened until Lines.
func NewLogFollower(path string) *LogFollower { return &LogFollower{path: path} }

// Lines returns the lines completed since the last call. An unterminated
// last line is returned too once it has stopped growing (a tqdm bar
// between redraws), or when final is true (the last call, when the
// follower stops). A file that does not exist yet is no lines and no
// error.
func (fl *LogFollower) Lines(final bool) ([]string, error) {
	var lines []string
	grew := false
	for range 2 { // the current file, then the one that replaced it
		if fl.f == nil {
			f, err := os.Open(fl.path)
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if err != nil {
				return lines, fmt.Errorf("follow %s: %w", fl.path, err)
			}
			fl.f, fl.off = f, 0
		}
		st, err := fl.f.Stat()
		if err != nil {
			return lines, fmt.Errorf("follow %s: %w", fl.path, err)
		}
		if !st.Mode().IsRegular() {
			return lines, fmt.Errorf("follow %s: not a regular file", fl.path)
		}
		if st.Size() < fl.off { // truncated: start again
			fl.off, fl.partial, fl.shown, fl.long = 0, nil, false, false
		}
		n, err := fl.read(&lines)
		if err != nil {
			return lines, err
		}
		grew = grew || n > 0
		if n == maxRead {
			return lines, nil // more next call
		}
		cur, err := os.Stat(fl.path)
		if err != nil || os.SameFile(cur, st) {
			break // same file, or the path is gone for now: keep the old one
		}
		// Replaced: the old file is read to its end; go on with the new one.
		fl.flushPartial(&lines)
		fl.f.Close()
		fl.f = nil
	}
	if len(fl.partial) > 0 && !fl.shown && (final || !grew) {
		lines = append(lines, string(fl.partial))
		fl.shown = true
	}
	return lines, nil
}

// read reads from the current offset to the end of the file (at most
// maxRead bytes) and splits what it read into lines.
func (fl *LogFollower) read(lines *[]string) (int, error) {
	buf := make([]byte, 64<<10)
	total := 0
	for total < maxRead {
		n, err := fl.f.ReadAt(buf[:min(len(buf), maxRead-total)], fl.off)
		fl.off += int64(n)
		total += n
		fl.split(buf[:n], lines)
		if err == io.EOF || n == 0 {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("follow %s: %w", fl.path, err)
		}
	}
	return total, nil
}

func (fl *LogFollower) split(b []byte, lines *[]string) {
	for _, c := range b {
		if c == '\n' || c == '\r' {
			fl.flushPartial(lines)
			fl.long = false
			continue
		}
		if fl.long {
			continue
		}
		if len(fl.partial) == MaxLogLine {
			fl.long = true
			continue
		}
		fl.partial = append(fl.partial, c)
		fl.shown = false
	}
}

// flushPartial ends the line being read (unless it is empty or was
// returned already and has not grown since).
func (fl *LogFollower) flushPartial(lines *[]string) {
	if len(fl.partial) > 0 && !fl.shown {
		*lines = append(*lines, string(fl.partial))
	}
	fl.partial, fl.shown = fl.partial[:0], false
}

// Close closes the file being followed.
func (fl *LogFollower) Close() error {
	if fl.f == nil {
		return nil
	}
	err := fl.f.Close()
	fl.f = nil
	return err
}
