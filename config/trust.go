package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hadar-sched/hadar/internal/pathtrust"
	"github.com/hadar-sched/hadar/profiles"
)

// SlurmPrograms are the Slurm clients hadar-slurmd runs (package slurm),
// from slurm.bin_dir when it is set.
var SlurmPrograms = []string{"squeue", "scontrol", "scancel", "sinfo"}

// CheckTrusted checks that no one but root or uid can change what cfg
// makes hadar-slurmd trust: the config file at path ("" when the defaults
// are used), slurm.bin_dir and the Slurm programs in it (which the daemon
// runs), and a throughputs file. Each must be owned by root or uid and
// not writable by group or others, and so must every directory above it
// (see package pathtrust: symlinks are followed only when root or uid owns
// them, and sticky directories like /tmp are allowed above). A missing
// throughputs file or Slurm program is read or run by no one: only its
// directory is checked.
// The daemon passes its effective uid; the error names the file and the
// fix.
func CheckTrusted(path string, cfg Config, uid int) error {
	check := func(what, p string, wantDir bool) error {
		st, err := pathtrust.Check(p, uid)
		if err == nil && wantDir != st.IsDir() {
			kind := "a regular file"
			if wantDir {
				kind = "a directory"
			}
			err = fmt.Errorf("%s is not %s", p, kind)
		}
		if err == nil && !wantDir && !st.Mode().IsRegular() {
			err = fmt.Errorf("%s is not a regular file", p)
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %w (hadar-slurmd runs as root and trusts it)", ErrInvalid, what, err)
		}
		return nil
	}
	if path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return fmt.Errorf("config %s: %w", path, err)
		}
		if err := check("config file", abs, false); err != nil {
			return err
		}
	}
	if cfg.Slurm.BinDir != "" {
		if err := check("slurm.bin_dir", cfg.Slurm.BinDir, true); err != nil {
			return err
		}
		for _, prog := range SlurmPrograms {
			p := filepath.Join(cfg.Slurm.BinDir, prog)
			if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
				continue // no one else can add it: bin_dir is trusted
			}
			if err := check("slurm.bin_dir", p, false); err != nil {
				return err
			}
		}
	}
	if !profiles.IsBuiltinMatrix(cfg.Throughputs) && filepath.IsAbs(cfg.Throughputs) {
		// A missing file is read by no one (seeding from it fails on its
		// own), as long as no one else can create it.
		if _, err := os.Lstat(cfg.Throughputs); errors.Is(err, fs.ErrNotExist) {
			return check("throughputs", filepath.Dir(cfg.Throughputs), true)
		}
		if err := check("throughputs", cfg.Throughputs, false); err != nil {
			return err
		}
	}
	return nil
}
