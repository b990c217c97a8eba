package docs

import (
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// ratio is one column of a summary table: num's field over den's, where
// field 0 is a policy row's makespan and 1 its average JCT (the first two
// numbers of every `hadar simulate --markdown` row).
type ratio struct {
	num, den string
	field    int
}

// The summary tables of results.md are written by hand from the generated
// tables below them, after each regeneration; a summary left from an
// earlier run would say one thing above and another below. Every cell must
// be the ratio of the tables' own numbers, to the second decimal.
func TestResultsSummariesMatchTables(t *testing.T) {
	b, err := os.ReadFile("results.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	const mk, jct = 0, 1
	for _, c := range []struct {
		summary          string // heading above the summary table
		tables, tablesTo string // headings around the tables
		level            string // the tables' heading level
		cols             []ratio
	}{
		{
			summary: "## Summary: Hadar against Gavel", tables: "## Traces", level: "###",
			cols: []ratio{{"gavel", "hadar", mk}, {"hadar", "gavel-makespan", mk}, {"hadar", "gavel", jct}},
		},
		{
			summary: "### Summary on the daemon path", tables: "### Daemon-path tables", tablesTo: "## Summary: Hadar against Gavel", level: "####",
			cols: []ratio{{"gavel", "hadar", mk}, {"hadar", "gavel-makespan", mk}, {"hadar", "gavel", jct},
				{"gavel, preemption on", "hadar, preemption on", mk}, {"hadar, preemption on", "gavel-makespan", mk},
				{"hadar, preemption on", "gavel, preemption on", jct}},
		},
	} {
		t.Run(c.summary, func(t *testing.T) {
			rows := summaryRows(between(t, text, c.summary, ""))
			tables := policyTables(between(t, text, c.tables, c.tablesTo), c.level)
			if len(rows) == 0 || len(rows) != len(tables) {
				t.Fatalf("%d summary rows, %d tables under %q", len(rows), len(tables), c.tables)
			}
			seed := regexp.MustCompile(`seed \d+`)
			for i, row := range rows {
				tab := tables[i]
				if s := seed.FindString(row[0]); s != "" && !strings.Contains(tab.title, s) {
					t.Errorf("summary row %q is in the place of table %q", row[0], tab.title)
					continue
				}
				if len(row) != 2+len(c.cols) {
					t.Errorf("summary row %q has %d cells, want %d", row[0], len(row), 2+len(c.cols))
					continue
				}
				for k, col := range c.cols {
					num, okN := tab.rows[col.num]
					den, okD := tab.rows[col.den]
					if !okN || !okD || den[col.field] == 0 {
						t.Errorf("table %q: no %q or %q row", tab.title, col.num, col.den)
						continue
					}
					want := num[col.field] / den[col.field]
					got, err := strconv.ParseFloat(strings.Trim(row[2+k], "*"), 64)
					// The tables' numbers are rounded to 0.01 h; their ratio
					// may round either way.
					if err != nil || math.Abs(got-want) > 0.0101 {
						t.Errorf("summary %q column %d (%s / %s): %s, the table gives %.3f", row[0], k+3, col.num, col.den, row[2+k], want)
					}
				}
			}
		})
	}
}

// between returns text from the line that is heading to the next line
// that is end (end "": the end of text).
func between(t *testing.T, text, heading, end string) string {
	t.Helper()
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("results.md has no heading %q", heading)
	}
	rest := text[i+1:]
	if end != "" {
		if j := strings.Index(rest, "\n"+end+"\n"); j >= 0 {
			rest = rest[:j]
		}
	}
	return rest
}

// summaryRows returns the cells of the first table in text, without its
// header and separator.
func summaryRows(text string) [][]string {
	var rows [][]string
	in := false
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "|") {
			if in {
				break
			}
			continue
		}
		if !in {
			in = true // the header
			continue
		}
		if strings.HasPrefix(line, "|---") {
			continue
		}
		rows = append(rows, cells(line))
	}
	return rows
}

type policyTable struct {
	title string
	rows  map[string][2]float64 // policy -> makespan, average JCT
}

// policyTables returns the tables of text under headings of level, each
// policy row's first two numbers.
func policyTables(text, level string) []policyTable {
	var out []policyTable
	for _, line := range strings.Split(text, "\n") {
		if title, ok := strings.CutPrefix(line, level+" "); ok {
			out = append(out, policyTable{title: title, rows: map[string][2]float64{}})
			continue
		}
		if len(out) == 0 || !strings.HasPrefix(line, "| ") {
			continue
		}
		c := cells(line)
		if len(c) < 3 {
			continue
		}
		a, errA := strconv.ParseFloat(c[1], 64)
		b, errB := strconv.ParseFloat(c[2], 64)
		if errA != nil || errB != nil {
			continue
		}
		out[len(out)-1].rows[c[0]] = [2]float64{a, b}
	}
	return out
}

// cells returns a Markdown table row's cells, trimmed.
func cells(line string) []string {
	var out []string
	for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
		out = append(out, strings.TrimSpace(c))
	}
	return out
}
