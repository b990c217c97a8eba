package manpage

import (
	"flag"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
)

// flagDoc is one option as a man page shows it.
type flagDoc struct {
	names       []string // without dashes, long first
	placeholder string   // "" for a switch
	usage       string
	def         string // "" when there is nothing worth showing
	env         []string
}

// tag is the .TP tag: \fB\-\-out\fR, \fB\-o\fR \fIFILE\fR.
func (f flagDoc) tag() string {
	var parts []string
	for _, n := range f.names {
		dash := "--"
		if len(n) == 1 {
			dash = "-"
		}
		parts = append(parts, bold(dash+n))
	}
	s := strings.Join(parts, ", ")
	if f.placeholder != "" {
		s += " " + italic(f.placeholder)
	}
	return s
}

// text is the body: usage, default, environment.
func (f flagDoc) text() string {
	s := strings.TrimSpace(f.usage)
	if s != "" && !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, ")") {
		s += "."
	} else if strings.HasSuffix(s, ")") {
		s += "."
	}
	s = capitalize(s)
	if f.def != "" {
		s += " Default: " + f.def + "."
	}
	if len(f.env) > 0 {
		var envs []string
		for _, e := range f.env {
			envs = append(envs, "$"+e)
		}
		s += " Environment: " + strings.Join(envs, ", ") + "."
	}
	return s
}

// capitalize upper-cases the first letter, except of a command name
// ("hadar-slurmd's config").
func capitalize(s string) string {
	if s == "" || strings.HasPrefix(s, "hadar") {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// cliFlagDoc describes a urfave/cli flag; ok is false for hidden flags.
// defaultText may replace a default (e.g. one that depends on the user).
func cliFlagDoc(f cli.Flag, defaultText func(name, def string) string) (flagDoc, bool) {
	if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
		return flagDoc{}, false
	}
	d := flagDoc{names: f.Names()}
	sort.SliceStable(d.names, func(a, b int) bool { return len(d.names[a]) > 1 && len(d.names[b]) == 1 })
	dg, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return d, true
	}
	placeholder, usage := unquoteUsage(dg.GetUsage())
	d.usage = usage
	d.env = dg.GetEnvVars()
	if dg.TakesValue() {
		if placeholder == "" {
			placeholder = "VALUE"
		}
		d.placeholder = placeholder
		def := strings.Trim(dg.GetDefaultText(), `"`)
		if defaultText != nil {
			def = defaultText(d.names[0], def)
		}
		if def != "" && def != "0" && def != "0s" && def != "[]" {
			d.def = def
		}
	}
	return d, true
}

// unquoteUsage takes the `NAME` placeholder out of a usage string, as
// urfave/cli and package flag do.
func unquoteUsage(usage string) (string, string) {
	i := strings.IndexByte(usage, '`')
	if i < 0 {
		return "", usage
	}
	j := strings.IndexByte(usage[i+1:], '`')
	if j < 0 {
		return "", usage
	}
	name := usage[i+1 : i+1+j]
	return name, usage[:i] + name + usage[i+1+j+1:]
}

// flagSetDocs describes every flag of fs, sorted by name. placeholders
// names the value of flags whose usage has no `NAME`.
func flagSetDocs(fs *flag.FlagSet, placeholders map[string]string) []flagDoc {
	var out []flagDoc
	fs.VisitAll(func(f *flag.Flag) {
		d := flagDoc{names: []string{f.Name}}
		name, usage := flag.UnquoteUsage(f)
		d.usage = usage
		if isBool(f) {
			name = ""
		} else if !strings.Contains(f.Usage, "`") {
			if p := placeholders[f.Name]; p != "" {
				name = p
			} else {
				name = strings.ToUpper(name)
			}
		}
		d.placeholder = name
		if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "0s" {
			d.def = def
		}
		out = append(out, d)
	})
	return out
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
