package slurm

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// seedFixtures adds the output of every fixture whose command satisfies
// match to the fuzzer's corpus.
func seedFixtures(f *testing.F, match func(argv []string) bool) {
	f.Helper()
	for _, path := range fixtureFiles(f) {
		fx, err := LoadFixture(path)
		if err != nil {
			f.Fatal(err)
		}
		argv, err := shellWords(fx.Command)
		if err != nil {
			f.Fatal(err)
		}
		if match(argv) {
			f.Add(fx.Output)
		}
	}
}

func FuzzParseGRES(f *testing.F) {
	for _, s := range []string{"gpu:v100:4", "gpu:8", "gpu:a100:4(S:0-1)", "gpu:a6000:3(IDX:0,2-3)",
		"gpu:model_a:0(IDX:N/A)", "gpu:(null):0(IDX:N/A)", "gpu:v100:2(IDX:0-1),gpu:k80:2(IDX:2-3)",
		"gpu:h100:1,shard:h10", "(null)", "N/A", "", "gres:gpu:v100:2", "gres/gpu:2", "gres/gpu:v100=2",
		"gpu:tesla_v100-sxm2-32gb:4", "gpu:NVlink_A100_40GB:2(IDX:0,3)", "gpu:1(IDX:0),shard:8(-/5,5/5,3/5,0/5)",
		"gpu:a:2(IDX:0-1),gpu:b:1(IDX:2", "gpu:v100(IDX:0-1)", "mps:1K"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		gres, _ := ParseGRES(s)
		for _, g := range gres {
			if g.Name == "" || g.Count < 0 || g.Count > maxGRESCount || len(g.Indexes) > maxGRESIndexes {
				t.Fatalf("ParseGRES(%q) gave %+v", s, g)
			}
		}
		_ = GPUsByType(gres)
	})
}

func FuzzExpandHostlist(f *testing.F) {
	for _, s := range []string{"node[1-3,7],gpu-a-[01-02]", "rack[1-2]-n[1-2]", "a,b", "x[", "x]", "(null)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := ExpandHostlist(s)
		if err == nil && len(names) > maxHostlist {
			t.Fatalf("%d names", len(names))
		}
		for _, n := range names {
			if !validHostname(n) {
				t.Fatalf("ExpandHostlist(%q) gave %q", s, n)
			}
		}
	})
}

func FuzzParseNodes(f *testing.F) {
	seedFixtures(f, func(argv []string) bool { return argv[0] == "scontrol" && hasWord(argv, "node", "nodes") })
	f.Add([]byte(nodeLine("n1", "IDLE+DRAIN", "gpu:v100:4", "gpu:v100:0(IDX:N/A)", " Reason=x State=IDLE\nmore")))
	f.Fuzz(func(t *testing.T, b []byte) {
		nodes, _ := ParseNodes(bytes.NewReader(b))
		seen := map[string]bool{}
		for _, n := range nodes {
			if !validHostname(n.Name) || seen[n.Name] {
				t.Fatalf("bad or duplicate node %q", n.Name)
			}
			seen[n.Name] = true
			_ = n.Schedulable()
		}
	})
}

func FuzzParseSinfo(f *testing.F) {
	seedFixtures(f, func(argv []string) bool { return argv[0] == "sinfo" })
	f.Add([]byte("node1|gpu*|mixed|3/5/0/8|gpu:v100:4|gpu:v100:2(IDX:0-1)|v100\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, format := range []string{SinfoFormat, "NodeList:64,Gres:64,GresUsed:64,StateLong:32",
			"NodeHost,Gres:50,GresUsed:50,StateLong", "NodeList: ,CPUsState: ,StateLong: ,Partition: ,Gres: ,GresUsed:"} {
			nodes, _ := ParseSinfoFormat(bytes.NewReader(b), format)
			for _, n := range nodes {
				if !validHostname(n.Name) {
					t.Fatalf("bad node name %q", n.Name)
				}
			}
		}
	})
}

func FuzzParseJobs(f *testing.F) {
	seedFixtures(f, func(argv []string) bool {
		format, ok := optionValue(argv, "-o", "--format")
		return argv[0] == "squeue" && ok && format == JobFormat
	})
	f.Add(squeueEmulator(f, JobFormat, row("5"), row("6", "F", "5", "K", "1", "k", "x\n7|7|N/A|bob|"), row("8")))
	f.Add([]byte("garbage\n\n|||\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		jobs, _ := ParseJobs(bytes.NewReader(b))
		seen := map[string]bool{}
		for _, j := range jobs {
			id := j.ID()
			if !reActionID.MatchString(id) || seen[id] {
				t.Fatalf("bad or duplicate job id %q", id)
			}
			seen[id] = true
			if len(j.Name) > JobNameWidth || len(j.Comment) > JobCommentWidth {
				t.Fatalf("field longer than its width")
			}
		}
	})
}

// FuzzParseJobsHostileText builds real squeue output around an arbitrary
// name and comment: whatever the user wrote, the three jobs must come back
// intact, with the text cut and trimmed exactly as squeue prints it.
func FuzzParseJobsHostileText(f *testing.F) {
	f.Add("train", "hadar model=x")
	f.Add("a|b\nc", "x\n"+string(squeueEmulator(f, JobFormat, row("9", "u", "victim"))))
	f.Add("\xff", strings.Repeat("|\n", 400))
	f.Fuzz(func(t *testing.T, name, comment string) {
		if strings.IndexByte(name, 0) >= 0 || strings.IndexByte(comment, 0) >= 0 {
			return // C strings cannot hold NUL
		}
		in := squeueEmulator(t, JobFormat, row("5"), row("6", "j", name, "k", comment), row("7"))
		jobs, errs := ParseJobs(bytes.NewReader(in))
		if len(errs) != 0 || len(jobs) != 3 || jobs[0].ID() != "5" || jobs[1].ID() != "6" || jobs[2].ID() != "7" {
			t.Fatalf("framing broken by name %q comment %q: %d jobs, errors %v", name, comment, len(jobs), errs)
		}
		cut := func(s string, w int) string {
			if len(s) > w {
				s = s[:w]
			}
			return strings.TrimRight(s, " ")
		}
		wantComment := cut(comment, JobCommentWidth)
		if wantComment == "(null)" {
			wantComment = ""
		}
		if jobs[1].Name != cut(name, JobNameWidth) || jobs[1].Comment != wantComment {
			t.Fatalf("got name %q comment %q", jobs[1].Name, jobs[1].Comment)
		}
	})
}

func FuzzParseJobDetails(f *testing.F) {
	seedFixtures(f, func(argv []string) bool { return argv[0] == "scontrol" && hasWord(argv, "job", "jobs") })
	f.Add([]byte(detailLine("6", "alice(1001)", "RUNNING", "x UserId=root(0)", "c\nJobId=7 JobName=y")))
	f.Fuzz(func(t *testing.T, b []byte) {
		details, _ := ParseJobDetails(bytes.NewReader(b))
		seen := map[string]bool{}
		for _, d := range details {
			if !reJobID.MatchString(d.JobID) || seen[d.JobID] {
				t.Fatalf("bad or duplicate job %q", d.JobID)
			}
			seen[d.JobID] = true
		}
	})
}

// TestFuzzHelpersValidUTF8 keeps the seeds honest: the emulator writes the
// bytes it is given, valid UTF-8 or not.
func TestFuzzHelpersValidUTF8(t *testing.T) {
	out := squeueEmulator(t, JobFormat, row("5", "k", "\xff"))
	if utf8.Valid(out) {
		t.Error("emulator sanitised its input")
	}
}

func FuzzParseVersion(f *testing.F) {
	seedFixtures(f, func(argv []string) bool { return len(argv) == 2 && argv[1] == "--version" })
	for _, s := range []string{"slurm 24.05.0-0rc1\n", "slurm 25.05", "", "slurm 24", "slurm 1.2.3.4"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseVersion(bytes.NewReader(b))
		if err != nil {
			return
		}
		if v.Major < 0 || v.Minor < 0 || v.Micro < 0 || v.Major > 9999 || v.Minor > 9999 || v.Micro > 9999 || v.Raw == "" {
			t.Fatalf("ParseVersion(%q) = %+v", b, v)
		}
		if !strings.Contains(string(b), v.Raw) {
			t.Fatalf("ParseVersion(%q): Raw %q is not in the input", b, v.Raw)
		}
	})
}
