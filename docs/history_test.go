package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// historyMarks are what a lab notebook writes and a reference does not:
// numbered work periods, headings that date a change, and variants tried
// and dropped. They belong in CHANGELOG.md (what changed when) and
// docs/decisions/ (why a rule is what it is, with what was measured
// against it), which are not checked.
var historyMarks = []struct {
	name string
	re   *regexp.Regexp
}{
	{"a numbered work-period label", regexp.MustCompile(`(?i)\bsession\s+\d+`)},
	{"a dated history heading", regexp.MustCompile(`(?im)^#{1,6}\s.*(what changed|\d{4}-\d{2}-\d{2})`)},
	{`"not kept"`, regexp.MustCompile(`(?i)\bnot\s+kept\b`)},
}

// historyHits returns a line of text per mark found, prefixed by where.
func historyHits(where, text string, firstLine int) []string {
	var out []string
	for _, m := range historyMarks {
		for _, loc := range m.re.FindAllStringIndex(text, -1) {
			line := firstLine + strings.Count(text[:loc[0]], "\n")
			out = append(out, where+":"+strconv.Itoa(line)+": "+m.name+": "+strings.Join(strings.Fields(text[loc[0]:loc[1]]), " "))
		}
	}
	return out
}

func TestHistoryMarksFindWhatTheyShould(t *testing.T) {
	// Hand-written inputs.
	for text, want := range map[string]int{
		"measured in session 28":                   1,
		"Session 3 found it":                       1,
		"## What changed on 2026-12-06, session 2": 2,
		"#### Moves made as a set (2026-12-03)":    1,
		"a variant, not kept":                      1,
		"Not  kept: the lanes":                     1,
		"a session of the daemon; sessions":        0,
		"dated 2026-12-03 in running text":         0,
		"## What each stage does":                  0,
		"kept on the node; not keeping it":         0,
	} {
		if got := len(historyHits("x", text, 1)); got != want {
			t.Errorf("%q: %d marks, want %d", text, got, want)
		}
	}
}

// The user docs and the code's comments are reference: no history in them.
func TestNoHistoryInDocsOrComments(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(repo, "README.md"))
	var hits []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		hits = append(hits, historyHits(f, string(b), 1)...)
	}
	goFiles := 0
	err = filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != repo && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		goFiles++
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, g := range file.Comments {
			for _, c := range g.List {
				hits = append(hits, historyHits(path, c.Text, fset.Position(c.Pos()).Line)...)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if goFiles < 50 {
		t.Fatalf("only %d Go files under %s", goFiles, repo)
	}
	for _, h := range hits {
		t.Error(h)
	}
	if len(hits) > 0 {
		t.Log("history goes to CHANGELOG.md and docs/decisions/")
	}
}
