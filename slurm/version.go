package slurm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// VersionArgs is the command whose output ParseVersion reads. Every Slurm
// client prints the same line ("slurm 24.11.5", Debian's "slurm-wlm
// 22.05.8"); scontrol is the one hadar already runs. It reads slurm.conf
// first (22.05 fails without one), so it needs the same SLURM_CONF as the
// other commands.
var VersionArgs = []string{"scontrol", "--version"}

// Version is a Slurm release as its clients print it.
type Version struct {
	// Major and Minor name the release series ("24.11"); Micro the
	// maintenance release (0 when not printed).
	Major, Minor, Micro int
	// Raw is the version word as printed ("24.05.0-0rc1").
	Raw string
}

// String is the version as printed.
func (v Version) String() string { return v.Raw }

// AtLeast reports whether v is release series major.minor or later.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// maxVersionLine bounds what ParseVersion reads: the line is ~20 bytes.
const maxVersionLine = 256

// ParseVersion reads the output of `scontrol --version` (or sinfo's,
// squeue's: the same line): a package name starting with "slurm", then
// MAJOR.MINOR[.MICRO] and an optional suffix ("-0rc1", "-2"). Blank lines
// before it are skipped; anything else is an error.
func ParseVersion(r io.Reader) (Version, error) {
	sc := bufio.NewScanner(io.LimitReader(r, 4*maxVersionLine))
	sc.Buffer(make([]byte, 0, maxVersionLine), maxVersionLine)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 || !strings.HasPrefix(strings.ToLower(f[0]), "slurm") {
			return Version{}, fmt.Errorf("slurm version: %w: %q", ErrMalformed, snippet(line))
		}
		return parseVersionWord(f[1])
	}
	if err := sc.Err(); err != nil {
		return Version{}, fmt.Errorf("slurm version: %w: %v", ErrMalformed, err)
	}
	return Version{}, fmt.Errorf("slurm version: %w: empty output", ErrMalformed)
}

// parseVersionWord reads "24.11.5", "24.05.0-0rc1", "22.05".
func parseVersionWord(word string) (Version, error) {
	v := Version{Raw: word}
	num, _, _ := strings.Cut(word, "-")
	parts := strings.Split(num, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("slurm version: %w: %q is not MAJOR.MINOR[.MICRO]", ErrMalformed, snippet(word))
	}
	dst := []*int{&v.Major, &v.Minor, &v.Micro}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || !allDigits(p) || n > 9999 {
			return Version{}, fmt.Errorf("slurm version: %w: %q is not MAJOR.MINOR[.MICRO]", ErrMalformed, snippet(word))
		}
		*dst[i] = n
	}
	return v, nil
}

// SlurmVersion runs `scontrol --version` (VersionArgs) and parses it.
func (c *Client) SlurmVersion(ctx context.Context) (Version, error) {
	out, err := c.run(ctx, VersionArgs)
	if err != nil {
		return Version{}, fmt.Errorf("slurm version: %w", err)
	}
	return ParseVersion(bytes.NewReader(out))
}
