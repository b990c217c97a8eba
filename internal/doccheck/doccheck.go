// Package doccheck reads the shell commands out of hadar's Markdown docs so
// that tests can run them (the blocks marked <!-- tested -->) or check
// them against the CLI definitions (every hadar and hadar-slurmd command
// line), and the docs cannot rot. Only tests import it.
package doccheck

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Block is a fenced code block.
type Block struct {
	File string
	Line int    // of the opening fence
	Lang string // info string ("sh", "" ...)
	Text string
	// Tested is set when the block follows a <!-- tested --> comment;
	// Fails when that comment is <!-- tested: fails --> (the block's last
	// command must fail).
	Tested, Fails bool
}

// ShellLangs are the info strings of blocks holding shell commands.
var ShellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// Blocks returns the fenced code blocks of a Markdown file.
func Blocks(path string) ([]Block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Block
	var cur *Block
	var body []string
	tested, fails := false, false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		t := strings.TrimSpace(l)
		if cur != nil {
			if strings.HasPrefix(t, "```") {
				cur.Text = strings.Join(body, "\n")
				out = append(out, *cur)
				cur, body = nil, nil
				continue
			}
			body = append(body, l)
			continue
		}
		switch {
		case strings.HasPrefix(t, "```"):
			cur = &Block{File: path, Line: n, Lang: strings.TrimSpace(strings.TrimPrefix(t, "```")), Tested: tested, Fails: fails}
			tested, fails = false, false
		case t == "<!-- tested -->":
			tested = true
		case t == "<!-- tested: fails -->":
			tested, fails = true, true
		case t != "":
			tested, fails = false, false
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: code block not closed", path, cur.Line)
	}
	return out, sc.Err()
}

// Command is one simple command of a doc's shell block.
type Command struct {
	File string
	Line int
	// Args are the words, program first (its base name: "bin/hadar" ->
	// "hadar"), after env assignments and sudo.
	Args []string
	// Raw is the line it came from.
	Raw string
}

func (c Command) String() string { return fmt.Sprintf("%s:%d: %s", c.File, c.Line, c.Raw) }

// Commands returns the commands that run one of programs in the shell
// blocks of files (and, in blocks without an info string, lines that start
// with one of them at the first column). A command substitution ($(...),
// <(...)) is one word.
func Commands(files []string, programs ...string) ([]Command, error) {
	want := map[string]bool{}
	for _, p := range programs {
		want[p] = true
	}
	var out []Command
	for _, file := range files {
		blocks, err := Blocks(file)
		if err != nil {
			return nil, err
		}
		for _, b := range blocks {
			if !ShellLangs[b.Lang] && b.Lang != "" {
				continue
			}
			lines := strings.Split(b.Text, "\n")
			for i := 0; i < len(lines); i++ {
				start := i
				l := lines[i]
				for strings.HasSuffix(l, `\`) && i+1 < len(lines) {
					i++
					l = strings.TrimSuffix(l, `\`) + " " + strings.TrimSpace(lines[i])
				}
				if b.Lang == "" && (l == "" || l[0] == ' ' || l[0] == '\t') {
					continue
				}
				l = strings.TrimPrefix(strings.TrimSpace(l), "$ ")
				for _, words := range splitCommands(l) {
					words = stripPrefix(words)
					if len(words) == 0 || !want[filepath.Base(words[0])] {
						continue
					}
					words[0] = filepath.Base(words[0])
					out = append(out, Command{File: file, Line: b.Line + 1 + start, Args: words, Raw: l})
				}
			}
		}
	}
	return out, nil
}

// stripPrefix drops leading VAR=value words, sudo (and its -u USER) and
// time/exec/env.
func stripPrefix(words []string) []string {
	for len(words) > 0 {
		w := words[0]
		switch {
		case w == "sudo" || w == "time" || w == "exec" || w == "env" || w == "!":
			words = words[1:]
			if w == "sudo" && len(words) > 1 && words[0] == "-u" {
				words = words[2:]
			}
		case strings.Contains(w, "=") && !strings.HasPrefix(w, "-") && isName(w[:strings.Index(w, "=")]):
			words = words[1:]
		default:
			return words
		}
	}
	return words
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// splitCommands splits a shell line into simple commands (at ;, &&, ||,
// |, &), each a list of words with quotes removed; a # starting a word
// ends the line; redirections are dropped.
func splitCommands(line string) [][]string {
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord := false
	flushWord := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	flushCmd := func() {
		flushWord()
		if len(words) > 0 {
			cmds = append(cmds, dropRedirections(words))
		}
		words = nil
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case (c == '$' || c == '<' || c == '>') && i+1 < len(line) && line[i+1] == '(':
			// $(...), <(...): one word, up to the matching parenthesis
			depth, j := 0, i+1
			for ; j < len(line); j++ {
				if line[j] == '(' {
					depth++
				} else if line[j] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			w.WriteString(line[i:min(j+1, len(line))])
			inWord = true
			i = j
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				j = len(line) - i - 1
			}
			w.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			inWord = true
			for i++; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte(`"\$`+"`", line[i+1]) >= 0 {
					i++
				}
				w.WriteByte(line[i])
			}
		case c == '\\' && i+1 < len(line):
			i++
			w.WriteByte(line[i])
			inWord = true
		case c == '#' && !inWord:
			flushCmd()
			return cmds
		case c == ' ' || c == '\t':
			flushWord()
		case c == '&' && (i > 0 && line[i-1] == '>' || i+1 < len(line) && line[i+1] == '>'):
			w.WriteByte(c) // 2>&1, &>file
			inWord = true
		case c == ';' || c == '|' || c == '&':
			flushCmd()
			if i+1 < len(line) && (line[i+1] == '|' || line[i+1] == '&') {
				i++
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	flushCmd()
	return cmds
}

// dropRedirections removes >FILE, > FILE, 2>&1, <FILE and the like.
func dropRedirections(words []string) []string {
	var out []string
	for i := 0; i < len(words); i++ {
		w := strings.TrimLeft(words[i], "0123456789")
		if (strings.HasPrefix(w, ">") || strings.HasPrefix(w, "<")) && !strings.HasPrefix(w[1:], "(") {
			if w == ">" || w == ">>" || w == "<" {
				i++ // the file is the next word
			}
			continue
		}
		out = append(out, words[i])
	}
	return out
}

// DocFiles are the Markdown files whose commands are checked: docs/*.md
// and the README, relative to the repository root root.
func DocFiles(root string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	return append(files, filepath.Join(root, "README.md")), nil
}
