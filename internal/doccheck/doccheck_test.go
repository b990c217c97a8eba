package doccheck

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitCommands(t *testing.T) {
	for line, want := range map[string][][]string{
		`hadar config check -q && echo valid`:                                         {{"hadar", "config", "check", "-q"}, {"echo", "valid"}},
		`sudo hadar-slurmd --release-all # comment`:                                   {{"sudo", "hadar-slurmd", "--release-all"}},
		`hadar profiles show "ResNet-50 (batch size 64)" | head`:                      {{"hadar", "profiles", "show", "ResNet-50 (batch size 64)"}, {"head"}},
		`X=1 hadar history --since 24h >out.txt 2>&1; ls`:                             {{"X=1", "hadar", "history", "--since", "24h"}, {"ls"}},
		`printf 'a b\n' > bad.toml`:                                                   {{"printf", `a b\n`}},
		`sbatch --comment="hadar model=x" --wrap 'sleep 1' &`:                         {{"sbatch", "--comment=hadar model=x", "--wrap", "sleep 1"}},
		`hadar simulate --trace <(hadar trace generate --jobs $n 2>/dev/null) --json`: {{"hadar", "simulate", "--trace", "<(hadar trace generate --jobs $n 2>/dev/null)", "--json"}},
		`echo $(hadar a | b) x`:                                                       {{"echo", "$(hadar a | b)", "x"}},
	} {
		if diff := cmp.Diff(want, splitCommands(line)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", line, diff)
		}
	}
}

func TestCommandsAndBlocks(t *testing.T) {
	md := "# x\n\n<!-- tested -->\n```sh\nsudo bin/hadar status --json\nhadar explain \\\n  42\n```\n\n" +
		"text\n\n```\nhadar policies\n  hadar diagram: not a command\n```\n\n<!-- tested: fails -->\n\n```bash\nFOO=1 hadar-slurmd --nope\necho $(hadar x)\n```\n" +
		"```toml\nhadar = 1\n```\n"
	path := filepath.Join(t.TempDir(), "x.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, err := Blocks(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 4 || !blocks[0].Tested || blocks[0].Fails || blocks[1].Tested || !blocks[2].Tested || !blocks[2].Fails || blocks[3].Tested {
		t.Errorf("blocks %+v", blocks)
	}
	cmds, err := Commands([]string{path}, "hadar", "hadar-slurmd")
	if err != nil {
		t.Fatal(err)
	}
	var got [][]string
	var lines []int
	for _, c := range cmds {
		got = append(got, c.Args)
		lines = append(lines, c.Line)
	}
	want := [][]string{{"hadar", "status", "--json"}, {"hadar", "explain", "42"}, {"hadar", "policies"}, {"hadar-slurmd", "--nope"}}
	// (echo $(hadar x) is an echo.)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{5, 6, 13, 20}, lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
