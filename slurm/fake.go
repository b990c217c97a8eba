package slurm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
)

// FakeRunner is a Runner for tests, in this package and in others (the bridge
// drives a real Client over it). Responses are keyed by the argv joined with
// single spaces ("scontrol release 5,7"); every call is recorded, in order,
// as the exact argv slice, so tests can check that user text stayed one
// argv element.
//
// A call with no response configured fails with an error naming the argv.
// FakeRunner is safe for concurrent use.
type FakeRunner struct {
	mu        sync.Mutex
	responses map[string]FakeResponse
	calls     [][]string
}

// FakeResponse is what FakeRunner returns for one argv.
type FakeResponse struct {
	Out []byte
	Err error
}

// NewFakeRunner returns an empty FakeRunner.
func NewFakeRunner() *FakeRunner {
	return &FakeRunner{responses: map[string]FakeResponse{}}
}

// FakeKey is the map key FakeRunner uses for argv.
func FakeKey(argv ...string) string { return strings.Join(argv, " ") }

// Set makes argv return out and err.
func (f *FakeRunner) Set(argv []string, out []byte, err error) *FakeRunner {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.responses == nil {
		f.responses = map[string]FakeResponse{}
	}
	f.responses[FakeKey(argv...)] = FakeResponse{Out: out, Err: err}
	return f
}

// SetOutput makes argv succeed with out.
func (f *FakeRunner) SetOutput(argv []string, out string) *FakeRunner {
	return f.Set(argv, []byte(out), nil)
}

// SetError makes argv fail with err.
func (f *FakeRunner) SetError(argv []string, err error) *FakeRunner {
	return f.Set(argv, nil, err)
}

// SetFixture makes argv succeed with the output stored in a fixture file
// (see LoadFixture).
func (f *FakeRunner) SetFixture(argv []string, path string) error {
	fx, err := LoadFixture(path)
	if err != nil {
		return err
	}
	f.Set(argv, fx.Output, nil)
	return nil
}

// Run implements Runner.
func (f *FakeRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	argv := append([]string{name}, args...)
	f.mu.Lock()
	f.calls = append(f.calls, argv)
	resp, ok := f.responses[FakeKey(argv...)]
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", quoteArgv(argv), err)
	}
	if !ok {
		return nil, fmt.Errorf("FakeRunner: no response for %s", quoteArgv(argv))
	}
	return bytes.Clone(resp.Out), resp.Err
}

// Calls returns a copy of every argv run so far, in order.
func (f *FakeRunner) Calls() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]string, len(f.calls))
	for i, c := range f.calls {
		out[i] = append([]string(nil), c...)
	}
	return out
}

// Reset forgets the recorded calls (responses are kept).
func (f *FakeRunner) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

// Fixture is one file of testdata: verbatim command output with a header.
//
// Layout: line 1 is "# " followed by the producing command; the following
// lines that start with "# " are further header lines (source, exit status);
// the output starts at the first line that does not. Nothing else is
// stripped: trailing spaces, a missing final newline and odd bytes are part
// of the output.
type Fixture struct {
	// Command is line 1 without its "# ".
	Command string
	// Header holds the other header lines without their "# ".
	Header []string
	// Output is the verbatim output.
	Output []byte
}

// LoadFixture reads a fixture file.
func LoadFixture(path string) (Fixture, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Fixture{}, err
	}
	fx, err := ParseFixture(b)
	if err != nil {
		return Fixture{}, fmt.Errorf("%s: %w", path, err)
	}
	return fx, nil
}

// ParseFixture splits a fixture's bytes into header and output.
func ParseFixture(b []byte) (Fixture, error) {
	var fx Fixture
	if !bytes.HasPrefix(b, []byte("# ")) {
		return fx, fmt.Errorf("fixture: line 1 must be \"# <command>\"")
	}
	first := true
	for len(b) > 0 && bytes.HasPrefix(b, []byte("# ")) {
		line := b
		rest := []byte(nil)
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, rest = b[:i], b[i+1:]
		}
		text := string(line[2:])
		if first {
			fx.Command = text
			first = false
		} else {
			fx.Header = append(fx.Header, text)
		}
		b = rest
	}
	fx.Output = b
	if fx.Output == nil {
		fx.Output = []byte{}
	}
	return fx, nil
}
