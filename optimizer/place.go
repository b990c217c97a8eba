package optimizer

import "sort"

// freePool tracks the GPUs still free in the round being planned.
type freePool struct {
	nodes  []Node // sorted by type, then name
	free   map[string]int
	byType map[string]int
}

func nodeKey(name, gpuType string) string { return name + "\x00" + gpuType }

func newFreePool(nodes []Node) *freePool {
	p := &freePool{free: map[string]int{}, byType: map[string]int{}}
	p.nodes = append(p.nodes, nodes...)
	sort.Slice(p.nodes, func(a, b int) bool {
		if p.nodes[a].Type != p.nodes[b].Type {
			return p.nodes[a].Type < p.nodes[b].Type
		}
		return p.nodes[a].Name < p.nodes[b].Name
	})
	for _, n := range p.nodes {
		p.free[nodeKey(n.Name, n.Type)] += n.GPUs
		p.byType[n.Type] += n.GPUs
	}
	return p
}

// Free returns the free GPUs of type h.
func (p *freePool) Free(h string) int { return p.byType[h] }

// Total returns the free GPUs of every type.
func (p *freePool) Total() int {
	n := 0
	for _, f := range p.byType {
		n += f
	}
	return n
}

func (p *freePool) use(t Task) {
	p.free[nodeKey(t.Node, t.Type)] -= t.GPUs
	p.byType[t.Type] -= t.GPUs
}

// keep reserves the job's current tasks of type h again (lease extension) if
// they hold exactly w GPUs of that type and are all still free.
func (p *freePool) keep(h string, w int, current []Task) ([]Task, bool) {
	if len(current) == 0 || TaskGPUs(current) != w {
		return nil, false
	}
	need := map[string]int{}
	for _, t := range current {
		if t.Type != h || t.Copy != 0 {
			return nil, false
		}
		need[nodeKey(t.Node, t.Type)] += t.GPUs
	}
	for k, n := range need {
		if p.free[k] < n {
			return nil, false
		}
	}
	out := make([]Task, 0, len(current))
	for _, t := range current {
		t2 := Task{Node: t.Node, Type: t.Type, GPUs: t.GPUs}
		p.use(t2)
		out = append(out, t2)
	}
	return out, true
}

// take reserves w GPUs of type h on as few nodes as possible: the
// tightest single node that fits, else the emptiest nodes first. It returns
// nil if fewer than w GPUs of type h are free.
func (p *freePool) take(h string, w int) []Task {
	if w <= 0 || p.byType[h] < w {
		return nil
	}
	best := -1
	for i, n := range p.nodes {
		if n.Type != h {
			continue
		}
		f := p.free[nodeKey(n.Name, n.Type)]
		if f >= w && (best < 0 || f < p.free[nodeKey(p.nodes[best].Name, h)]) {
			best = i
		}
	}
	if best >= 0 {
		t := Task{Node: p.nodes[best].Name, Type: h, GPUs: w}
		p.use(t)
		return []Task{t}
	}
	var idx []int
	for i, n := range p.nodes {
		if n.Type == h && p.free[nodeKey(n.Name, h)] > 0 {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool {
		return p.free[nodeKey(p.nodes[idx[a]].Name, h)] > p.free[nodeKey(p.nodes[idx[b]].Name, h)]
	})
	var out []Task
	left := w
	for _, i := range idx {
		f := p.free[nodeKey(p.nodes[i].Name, h)]
		n := min(f, left)
		t := Task{Node: p.nodes[i].Name, Type: h, GPUs: n}
		p.use(t)
		out = append(out, t)
		left -= n
		if left == 0 {
			break
		}
	}
	return out
}

// placeOnType reserves w GPUs of type h for a job, keeping its current
// nodes when it can.
func (p *freePool) placeOnType(h string, w int, current []Task) []Task {
	if tasks, ok := p.keep(h, w, current); ok {
		return tasks
	}
	return p.take(h, w)
}

// currentType returns the single GPU type a job runs on now, or "".
func currentType(tasks []Task) string {
	h := ""
	for _, t := range tasks {
		if h != "" && t.Type != h {
			return ""
		}
		h = t.Type
	}
	return h
}
