package slurm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// The bridge reads the whole queue every round: parsing must stay a small
// part of a round at the load (2,000 pending jobs).
func BenchmarkParseJobs(b *testing.B) {
	for _, n := range []int{100, 500, 2000} {
		rows := make([]map[string]string, n)
		for i := range rows {
			rows[i] = row(fmt.Sprint(i+1), "k", "hadar model=resnet50 steps=1000")
		}
		in := squeueEmulator(b, JobFormat, rows...)
		jobs, errs := ParseJobs(bytes.NewReader(in))
		if len(jobs) != n || len(errs) != 0 {
			b.Fatalf("setup: %d jobs, %v", len(jobs), errs)
		}
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for i := 0; i < b.N; i++ {
				ParseJobs(bytes.NewReader(in))
			}
		})
	}
}

func BenchmarkParseJobDetails(b *testing.B) {
	var sb strings.Builder
	const n = 2000
	for i := 0; i < n; i++ {
		sb.WriteString(detailLine(fmt.Sprint(i+1), "alice(1001)", "RUNNING", "train", "hadar model=vae"))
	}
	in := []byte(sb.String())
	if d, errs := ParseJobDetails(bytes.NewReader(in)); len(d) != n || len(errs) != 0 {
		b.Fatalf("setup: %d details, %v", len(d), errs)
	}
	b.SetBytes(int64(len(in)))
	for i := 0; i < b.N; i++ {
		ParseJobDetails(bytes.NewReader(in))
	}
}

func BenchmarkParseNodes(b *testing.B) {
	var sb strings.Builder
	const n = 1000
	for i := 0; i < n; i++ {
		sb.WriteString(nodeLine(fmt.Sprintf("node%d", i), "MIXED", "gpu:v100:8(S:0-1)", "gpu:v100:3(IDX:0,2-3)", ""))
	}
	in := []byte(sb.String())
	if nodes, errs := ParseNodes(bytes.NewReader(in)); len(nodes) != n || len(errs) != 0 {
		b.Fatalf("setup: %d nodes, %v", len(nodes), errs)
	}
	b.SetBytes(int64(len(in)))
	for i := 0; i < b.N; i++ {
		ParseNodes(bytes.NewReader(in))
	}
}

// pathologicalInputs are hostile shapes of input: each must parse without
// a crash and in time linear in its size.
func pathologicalInputs() map[string][]byte {
	big := 1 << 18
	return map[string][]byte{
		"one long line":      bytes.Repeat([]byte("a|"), big/2),
		"only newlines":      bytes.Repeat([]byte("\n"), big),
		"many short lines":   bytes.Repeat([]byte("1|\n"), big/3),
		"key lookalikes":     []byte("NodeName=x " + strings.Repeat("State=IDLE ", big/11)),
		"job key lookalikes": []byte("JobId=1 JobName=" + strings.Repeat("a=b ", big/4)),
		"continuations":      []byte("JobId=1 JobName=x\n" + strings.Repeat("x\n", big/2)),
		"gres entries":       []byte("NodeName=x State=IDLE Gres=" + strings.Repeat("gpu:a:1(IDX:0-16000),", 2000)),
		"parens":             []byte("NodeName=x State=IDLE Gres=" + strings.Repeat("(", big)),
	}
}

func parseEveryWay(in []byte) {
	ParseJobs(bytes.NewReader(in))
	ParseNodes(bytes.NewReader(in))
	ParseJobDetails(bytes.NewReader(in))
	ParseSinfo(bytes.NewReader(in))
	ParseSinfoFormat(bytes.NewReader(in), "NodeList:64,Gres:64,GresUsed:64,StateLong:32")
}

// TestPathologicalInputs parses every hostile shape every way: no panic,
// no hang (the test's timeout). Their speed is BenchmarkPathologicalInputs'
// (time per byte stays flat as the input grows: linear).
func TestPathologicalInputs(t *testing.T) {
	for name, in := range pathologicalInputs() {
		t.Run(name, func(t *testing.T) { parseEveryWay(in) })
	}
}

// BenchmarkPathologicalInputs: go test -bench Pathological ./slurm/ (about
// 0.1-0.3 s per input of 256 KiB on a 2-core machine, measured 2026-12).
func BenchmarkPathologicalInputs(b *testing.B) {
	for name, in := range pathologicalInputs() {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for i := 0; i < b.N; i++ {
				parseEveryWay(in)
			}
		})
	}
}
