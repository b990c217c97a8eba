package jobproto

import (
	"go/build"
	"strings"
	"testing"
)

// TestStandardLibraryOnly: the job protocol links nothing but the standard
// library, so what a job runs (`hadar report`) never links the daemon.
func TestStandardLibraryOnly(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") {
			t.Errorf("jobproto imports %s; it must import only the standard library", imp)
		}
	}
}
