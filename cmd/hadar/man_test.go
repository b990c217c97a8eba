package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hadar-sched/hadar/internal/manpage"
)

// The committed man pages hadar.1 and hadar.toml.5, and docs/config.md,
// are what the code generates (`make man` rewrites them).
func TestManPages(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "")
	page, err := manpage.Hadar(newApp())
	if err != nil {
		t.Fatal(err)
	}
	manpage.Lint(t, manpage.HadarFile, page)
	manpage.CheckGolden(t, filepath.Join("..", "..", "man", manpage.HadarFile), page)

	src, err := os.ReadFile(filepath.Join("..", "..", "config", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	page, err = manpage.HadarToml(src)
	if err != nil {
		t.Fatal(err)
	}
	manpage.Lint(t, manpage.HadarTomlFile, page)
	manpage.CheckGolden(t, filepath.Join("..", "..", "man", manpage.HadarTomlFile), page)

	md, err := manpage.ConfigMarkdown(src)
	if err != nil {
		t.Fatal(err)
	}
	manpage.CheckGolden(t, filepath.Join("..", "..", "docs", "config.md"), md)
}
