package slurm

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current parsers")

func TestMain(m *testing.M) {
	// Slurm prints local times; make the goldens independent of the machine.
	time.Local = time.UTC
	os.Exit(m.Run())
}

// fixturesWithErrors lists fixtures whose output is expected to contain
// records the parsers report; every other fixture must parse cleanly.
var fixturesWithErrors = map[string]string{
	"sinfo/22.05-site-alloc.txt":       "GresUsed cut at 64 bytes by sinfo runs into the state column",
	"sinfo/22.05-site-idle.txt":        "GresUsed cut at 64 bytes by sinfo",
	"sinfo/23.11.10-2-gpus-total.txt":  `"shard:h10" has no count`,
	"squeue/26.05.2-exporter-jobs.txt": "squeue -O output, not hadar's -o format",
}

// golden is what a fixture parses to.
type golden struct {
	Command string
	Parser  string
	Nodes   []Node      `json:",omitempty"`
	Jobs    []Job       `json:",omitempty"`
	Details []JobDetail `json:",omitempty"`
	// Reservations, Associations, QOS and Shares: the accounting cluster's.
	Reservations []Reservation `json:",omitempty"`
	Associations []Association `json:",omitempty"`
	QOS          []QOS         `json:",omitempty"`
	Shares       []Share       `json:",omitempty"`
	// GRES holds, for sinfo outputs without node names, each row's GRES
	// columns; for slurmrestd JSON, each GRES string.
	GRES [][]GRES `json:",omitempty"`
	// Version is what a --version fixture parses to.
	Version *Version `json:",omitempty"`
	// Classified is the sentinel an errors/ fixture maps to ("" if none).
	Classified string `json:",omitempty"`
	Errors     []string
}

// fixtureFiles lists testdata/**/*.txt outside testdata/golden.
func fixtureFiles(t testing.TB) []string {
	var files []string
	err := filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path == filepath.Join("testdata", "golden") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".txt") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestFixtures parses every fixture with the parser its line-1 command calls
// for and compares the result with testdata/golden/<same path>.json.
func TestFixtures(t *testing.T) {
	files := fixtureFiles(t)
	if len(files) < 11 {
		t.Fatalf("found %d fixtures, want at least the 11 public examples", len(files))
	}
	for _, path := range files {
		rel := filepath.ToSlash(strings.TrimPrefix(path, "testdata"+string(filepath.Separator)))
		t.Run(rel, func(t *testing.T) {
			fx, err := LoadFixture(path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseFixture(fx)
			if err != nil {
				t.Fatal(err)
			}
			if _, expected := fixturesWithErrors[rel]; !expected && len(got.Errors) > 0 {
				t.Errorf("%s parses with errors:\n%s", rel, strings.Join(got.Errors, "\n"))
			}
			if _, expected := fixturesWithErrors[rel]; expected && len(got.Errors) == 0 {
				t.Errorf("%s: expected parse errors (%s), got none", rel, fixturesWithErrors[rel])
			}
			gotJSON, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			gotJSON = append(gotJSON, '\n')
			goldenPath := filepath.Join("testdata", "golden", strings.TrimSuffix(rel, ".txt")+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(goldenPath), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(goldenPath, gotJSON, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatalf("no golden file for %s (review, then run: go test ./slurm -run TestFixtures -update): %v", rel, err)
			}
			if diff := cmp.Diff(string(want), string(gotJSON)); diff != "" {
				t.Errorf("%s differs from %s (-want +got):\n%s", rel, goldenPath, diff)
			}
		})
	}
}

// parseFixture dispatches on the fixture's command.
func parseFixture(fx Fixture) (golden, error) {
	argv, err := shellWords(fx.Command)
	if err != nil {
		return golden{}, err
	}
	// "runuser -u someone -- scontrol ..." captures: the Slurm command follows "--".
	for i, a := range argv {
		if a == "--" {
			argv = argv[i+1:]
			break
		}
	}
	g := golden{Command: fx.Command, Errors: []string{}}
	out := bytes.NewReader(fx.Output)
	if status, ok := headerValue(fx, "exit status:"); ok {
		g.Parser = "Classify"
		code, err := strconv.Atoi(status)
		if err != nil {
			return g, fmt.Errorf("bad exit status %q", status)
		}
		if code != 0 {
			g.Classified = sentinelName(Classify(&CommandError{Argv: argv, ExitCode: code, Stderr: string(fx.Output)}))
		}
		return g, nil
	}
	prog := argv[0]
	switch {
	case hasWord(argv, "--version"):
		g.Parser = "ParseVersion"
		v, err := ParseVersion(out)
		if err != nil {
			g.Errors = []string{err.Error()}
		} else {
			g.Version = &v
		}
	case prog == "scontrol" && hasWord(argv, "node", "nodes"):
		g.Parser = "ParseNodes"
		var errs []error
		g.Nodes, errs = ParseNodes(out)
		g.Errors = errStrings(errs)
	case prog == "scontrol" && hasWord(argv, "reservation", "reservations"):
		g.Parser = "ParseReservations"
		var errs []error
		g.Reservations, errs = ParseReservations(out)
		g.Errors = errStrings(errs)
	case prog == "sacctmgr" && hasWord(argv, "assoc", "association", "associations"):
		g.Parser = "ParseAssociations"
		var errs []error
		g.Associations, errs = ParseAssociations(out)
		g.Errors = errStrings(errs)
	case prog == "sacctmgr" && hasWord(argv, "qos"):
		g.Parser = "ParseQOS"
		var errs []error
		g.QOS, errs = ParseQOS(out)
		g.Errors = errStrings(errs)
	case prog == "sshare":
		g.Parser = "ParseShares"
		var errs []error
		g.Shares, errs = ParseShares(out)
		g.Errors = errStrings(errs)
	case prog == "scontrol" && hasWord(argv, "job", "jobs"):
		g.Parser = "ParseJobDetails"
		var errs []error
		g.Details, errs = ParseJobDetails(out)
		g.Errors = errStrings(errs)
	case prog == "squeue":
		var errs []error
		if format, ok := optionValue(argv, "-o", "--format"); ok {
			g.Parser = "ParseJobsFormat"
			g.Jobs, errs = ParseJobsFormat(out, format)
		} else {
			g.Parser = "ParseJobs"
			g.Jobs, errs = ParseJobs(out)
		}
		g.Errors = errStrings(errs)
	case prog == "sinfo":
		format, ok := optionValue(argv, "-O", "--Format")
		if !ok {
			return g, fmt.Errorf("sinfo fixture without -O: add a case to parseFixture")
		}
		l, err := sinfoLayout(format)
		if err != nil {
			return g, err
		}
		if hasField(l, "nodelist", "nodehost") {
			g.Parser = "ParseSinfoFormat"
			var errs []error
			g.Nodes, errs = ParseSinfoFormat(out, format)
			g.Errors = errStrings(errs)
			break
		}
		// Aggregated rows (no node names): check the GRES columns.
		g.Parser = "ParseGRES(sinfo columns)"
		header := !hasWord(argv, "-h", "--noheader")
		l.records(fx.Output, func(line int, vals []string, _ []bool) {
			if header {
				header = false
				return
			}
			var row []GRES
			for i, f := range l.fields {
				if f.name != "gres" && f.name != "gresused" {
					continue
				}
				gres, err := ParseGRES(strings.TrimSpace(vals[i]))
				if err != nil {
					g.Errors = append(g.Errors, fmt.Sprintf("line %d: %v", line, err))
				}
				row = append(row, gres...)
			}
			g.GRES = append(g.GRES, row)
		}, func(line int, text string, err error) {
			g.Errors = append(g.Errors, fmt.Sprintf("line %d: %v", line, err))
		})
	case prog == "curl":
		// slurmrestd JSON excerpt: check every "gres*" string.
		g.Parser = "ParseGRES(json)"
		re := regexp.MustCompile(`"(gres[a-z_]*)": ("(?:[^"\\]|\\.)*")`)
		for _, m := range re.FindAllStringSubmatch(string(fx.Output), -1) {
			var s string
			if err := json.Unmarshal([]byte(m[2]), &s); err != nil {
				return g, err
			}
			gres, err := ParseGRES(s)
			if err != nil {
				g.Errors = append(g.Errors, err.Error())
			}
			g.GRES = append(g.GRES, gres)
		}
	default:
		return g, fmt.Errorf("no parser for %q: add a case to parseFixture", fx.Command)
	}
	return g, nil
}

func headerValue(fx Fixture, prefix string) (string, bool) {
	for _, h := range fx.Header {
		if strings.HasPrefix(h, prefix) {
			return strings.TrimSpace(strings.TrimPrefix(h, prefix)), true
		}
	}
	return "", false
}

func hasWord(argv []string, words ...string) bool {
	for _, a := range argv {
		for _, w := range words {
			if a == w {
				return true
			}
		}
	}
	return false
}

func hasField(l *layout, names ...string) bool {
	for _, f := range l.fields {
		for _, n := range names {
			if f.name == n {
				return true
			}
		}
	}
	return false
}

// optionValue finds "-o X", "-oX", "--format X" or "--format=X".
func optionValue(argv []string, short, long string) (string, bool) {
	for i, a := range argv {
		switch {
		case a == short || a == long:
			if i+1 < len(argv) {
				return argv[i+1], true
			}
		case strings.HasPrefix(a, long+"="):
			return strings.TrimPrefix(a, long+"="), true
		case strings.HasPrefix(a, short) && len(a) > len(short) && !strings.HasPrefix(a, "--"):
			return a[len(short):], true
		}
	}
	return "", false
}

func errStrings(errs []error) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

var sentinels = map[string]error{
	"ErrInvalidJobID": ErrInvalidJobID, "ErrJobNotPending": ErrJobNotPending, "ErrJobHeld": ErrJobHeld,
	"ErrInvalidNodeName": ErrInvalidNodeName, "ErrControllerDown": ErrControllerDown,
	"ErrAccessDenied": ErrAccessDenied, "ErrNotConfigured": ErrNotConfigured,
	"ErrCommandNotFound": ErrCommandNotFound, "ErrRejectedBySubmitPlugin": ErrRejectedBySubmitPlugin,
	"ErrTimeout": ErrTimeout,
}

func sentinelName(err error) string {
	for name, s := range sentinels {
		if errors.Is(err, s) {
			return name
		}
	}
	return ""
}

// shellWords splits a command line the way sh would for the quoting that
// appears in fixture headers: '...', "..." and backslash escapes.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("empty command")
	}
	return words, nil
}

func TestShellWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`squeue -h -o '%A|%k'`, []string{"squeue", "-h", "-o", "%A|%k"}},
		{`sinfo -O NodeList: ,Gres:`, []string{"sinfo", "-O", "NodeList:", ",Gres:"}},
		{`a "b c" d\ e`, []string{"a", "b c", "d e"}},
	}
	for _, tt := range tests {
		got, err := shellWords(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("shellWords(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}
