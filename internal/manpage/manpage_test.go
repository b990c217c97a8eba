package manpage

import (
	"flag"
	"os"
	"strings"
	"testing"
)

func TestInline(t *testing.T) {
	for in, want := range map[string]string{
		"run `hadar config check -q` first": `run \fBhadar config check \-q\fR first`,
		`.starts with a dot \n`:             `\&.starts with a dot \en`,
		"'quote":                            `\&'quote`,
	} {
		if got := inline(in); got != want {
			t.Errorf("inline(%q) = %q, want %q", in, got, want)
		}
	}
	r := newRoff("x", "1", "M")
	r.text("para one\nwraps `a\nb`\n\n  verbatim -x\n  two\n\npara two")
	got := r.String()
	for _, want := range []string{".PP\npara one wraps \\fBa b\\fR\n", ".RS 4\n.nf\nverbatim \\-x\ntwo\n.fi\n.RE\n", ".PP\npara two\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("text: no %q in\n%s", want, got)
		}
	}
}

func TestCleanDoc(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"Round", "Round is the time between\ntwo rounds. Default 360s.\n", "The time between two rounds. Default 360s."},
		{"DryRun", "DryRun logs the actions.", "Logs the actions."},
		{"Policy", "Policy is the policy, a name from optimizer.Names().\n\nSecond.", "The policy, a name `hadar policies` lists.\n\nSecond."},
	} {
		if got := cleanDoc(c.name, c.doc); got != c.want {
			t.Errorf("cleanDoc(%q) = %q, want %q", c.doc, got, c.want)
		}
	}
}

// A field without a doc comment, or a key the compiled type does not
// have, stops the generation.
func TestConfigDocsDrift(t *testing.T) {
	src, err := os.ReadFile("../../config/config.go")
	if err != nil {
		t.Fatal(err)
	}
	keys, tables, err := configDocs(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 15 || len(tables) < 4 || keys[0].Name != "policy" || keys[0].Default != `"hadar"` {
		t.Errorf("keys %+v tables %+v", keys[:1], tables)
	}
	undocumented := strings.Replace(string(src), "\t// Round is the time between two scheduling rounds. Default 360s.\n", "", 1)
	if undocumented == string(src) {
		t.Fatal("the doc comment of Round changed: update this test")
	}
	if _, _, err := configDocs([]byte(undocumented)); err == nil || !strings.Contains(err.Error(), "Round (round) has no doc comment") {
		t.Errorf("undocumented field: %v", err)
	}
	extra := strings.Replace(string(src), "\tDryRun bool `toml:\"dry_run\"`", "\tDryRun bool `toml:\"dry_run\"`\n\t// Extra is new.\n\tExtra bool `toml:\"extra\"`", 1)
	if _, _, err := configDocs([]byte(extra)); err == nil || !strings.Contains(err.Error(), "extra") {
		t.Errorf("key not in the type: %v", err)
	}
}

func TestFlagSetDocs(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("config", "/etc/x", "config file")
	fs.Bool("once", false, "run once")
	fs.Duration("round", 0, "round `LENGTH`")
	docs := flagSetDocs(fs, map[string]string{"config": "FILE"})
	var tags []string
	for _, d := range docs {
		tags = append(tags, d.tag()+" | "+d.text())
	}
	want := []string{
		`\fB\-\-config\fR \fIFILE\fR | Config file. Default: /etc/x.`,
		`\fB\-\-once\fR | Run once.`,
		`\fB\-\-round\fR \fILENGTH\fR | Round LENGTH.`,
	}
	if strings.Join(tags, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(tags, "\n"), strings.Join(want, "\n"))
	}
}
