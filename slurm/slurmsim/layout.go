package slurmsim

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Layout is a test cluster's nodes, in the order of the layout file
// (contrib/testcluster/layouts/*.layout).
type Layout []LayoutNode

// LayoutNode is one node of a layout: its GPUs by type, in the order given
// (none for a CPU-only node).
type LayoutNode struct {
	Name string
	GPUs []GPUGroup
}

// GPUGroup is a node's GPUs of one type.
type GPUGroup struct {
	Type  string
	Count int
}

// ParseLayout reads a layout: one node a line, "NODENAME [GPUTYPE COUNT]...";
// '#' starts a comment. A type named twice on a node adds up. name labels
// errors.
func ParseLayout(r io.Reader, name string) (Layout, error) {
	var l Layout
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		if len(f)%2 != 1 {
			return nil, fmt.Errorf("%s:%d: want NODENAME [GPUTYPE COUNT]..., got %q", name, line, strings.TrimSpace(text))
		}
		if seen[f[0]] {
			return nil, fmt.Errorf("%s:%d: node %s given twice", name, line, f[0])
		}
		seen[f[0]] = true
		n := LayoutNode{Name: f[0]}
		for i := 1; i+1 < len(f); i += 2 {
			c, err := strconv.Atoi(f[i+1])
			if err != nil || c < 0 {
				return nil, fmt.Errorf("%s:%d: GPU count %q of %s is not a number >= 0", name, line, f[i+1], f[i])
			}
			n.add(f[i], c)
		}
		l = append(l, n)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(l) == 0 {
		return nil, fmt.Errorf("%s: no nodes", name)
	}
	return l, nil
}

func (n *LayoutNode) add(gpuType string, count int) {
	for i := range n.GPUs {
		if n.GPUs[i].Type == gpuType {
			n.GPUs[i].Count += count
			return
		}
	}
	n.GPUs = append(n.GPUs, GPUGroup{Type: gpuType, Count: count})
}

// ReadLayout reads the layout file at path.
func ReadLayout(path string) (Layout, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("layout: %w", err)
	}
	defer f.Close()
	return ParseLayout(f, path)
}

// GenerateLayout is the layout of a cluster given as GPUs per type: nodes of
// perNode GPUs of one type (the last node of a type may have fewer), named
// TYPE-01, TYPE-02, ..., the types in name order.
func GenerateLayout(gpus map[string]int, perNode int) Layout {
	perNode = max(perNode, 1)
	types := make([]string, 0, len(gpus))
	for t := range gpus {
		types = append(types, t)
	}
	sort.Strings(types)
	var l Layout
	for _, t := range types {
		for i, left := 1, gpus[t]; left > 0; i++ {
			c := min(left, perNode)
			l = append(l, LayoutNode{Name: fmt.Sprintf("%s-%02d", t, i), GPUs: []GPUGroup{{Type: t, Count: c}}})
			left -= c
		}
	}
	return l
}

// GPUs is the layout's GPUs per type.
func (l Layout) GPUs() map[string]int {
	out := map[string]int{}
	for _, n := range l {
		for _, g := range n.GPUs {
			out[g.Type] += g.Count
		}
	}
	return out
}

// MaxGPUsPerNode is the most GPUs any node has.
func (l Layout) MaxGPUsPerNode() int {
	m := 0
	for _, n := range l {
		c := 0
		for _, g := range n.GPUs {
			c += g.Count
		}
		m = max(m, c)
	}
	return m
}

// String prints the layout in its file format.
func (l Layout) String() string {
	var b strings.Builder
	for _, n := range l {
		b.WriteString(n.Name)
		for _, g := range n.GPUs {
			fmt.Fprintf(&b, " %s %d", g.Type, g.Count)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
