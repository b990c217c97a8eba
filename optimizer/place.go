package optimizer

import "sort"

// freePool tracks the GPUs (and, where nodes give them, CPUs and memory)
// still free in the round being planned. Every placement a policy makes goes
// through it, so every policy honours a job's Shape the same way.
type freePool struct {
	nodes  []Node // sorted by type, then name
	free   map[string]int
	byType map[string]int
	// cpus and mem are free per node name; a node absent is not tracked.
	cpus map[string]int
	mem  map[string]int64
}

func nodeKey(name, gpuType string) string { return name + "\x00" + gpuType }

func newFreePool(nodes []Node) *freePool {
	p := &freePool{free: map[string]int{}, byType: map[string]int{}, cpus: map[string]int{}, mem: map[string]int64{}}
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
		if n.CPUs > 0 {
			p.cpus[n.Name] = n.CPUs
		}
		if n.MemMB > 0 {
			p.mem[n.Name] = n.MemMB
		}
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

// useFor reserves a task of job j: its GPUs, and the CPUs and memory its
// shape needs on the node.
func (p *freePool) useFor(j *Job, t Task) {
	p.use(t)
	if c, ok := p.cpus[t.Node]; ok && j.Shape.CPUsPerNode > 0 {
		p.cpus[t.Node] = c - j.Shape.CPUsPerNode
	}
	if m, ok := p.mem[t.Node]; ok && j.Shape.MemMBPerNode > 0 {
		p.mem[t.Node] = m - j.Shape.MemMBPerNode
	}
}

// room is how many GPUs of node n job j may take now: 0 if its shape rules
// the node out or the node lacks the CPUs or memory it needs.
func (p *freePool) room(j *Job, n Node) int {
	if j != nil && !j.Shape.Free() {
		if !j.Shape.AllowsType(n.Type) || (j.Shape.Eligible != nil && !j.Shape.Eligible[n.Name]) {
			return 0
		}
		if c, ok := p.cpus[n.Name]; ok && c < j.Shape.CPUsPerNode {
			return 0
		}
		if m, ok := p.mem[n.Name]; ok && m < j.Shape.MemMBPerNode {
			return 0
		}
	}
	return p.free[nodeKey(n.Name, n.Type)]
}

// keep reserves the job's current tasks of type h again (lease extension) if
// they hold exactly its gang of that type and are all still free.
func (p *freePool) keep(j *Job, h string) ([]Task, bool) {
	current := j.Current
	if len(current) == 0 || TaskGPUs(current) != j.Workers {
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
		p.useFor(j, t2)
		out = append(out, t2)
	}
	return out, true
}

// take reserves job j's gang on GPU type h, or returns nil if it does not
// fit now. A job with GPUs per node gets exactly its nodes x GPUs, on the
// tightest nodes that hold them (its current nodes first); any other job
// gets the tightest single node that holds the gang, else the emptiest
// nodes first.
func (p *freePool) take(j *Job, h string) []Task {
	return p.takeAcross(j, []string{h})
}

// takeAcross is take over several GPU types, tried in the order given: a
// gang that fits on no single type spans them (its rate is then its
// slowest worker's). A single-node request never spans types.
func (p *freePool) takeAcross(j *Job, types []string) []Task {
	w := j.Workers
	if w <= 0 {
		return nil
	}
	allowed := map[string]int{}
	total := 0
	for i, h := range types {
		if _, dup := allowed[h]; !dup {
			allowed[h] = i
			total += p.byType[h]
		}
	}
	if total < w {
		return nil
	}
	type cand struct {
		n    Node
		room int
	}
	var cands []cand
	for _, n := range p.nodes {
		if _, ok := allowed[n.Type]; !ok {
			continue
		}
		if r := p.room(j, n); r > 0 {
			cands = append(cands, cand{n, r})
		}
	}
	if g := j.Shape.GPUsPerNode; g > 0 {
		k := max(j.Shape.Nodes, 1)
		if k*g != w {
			return nil // a shape that is not the gang cannot be honoured
		}
		onNow := map[string]bool{}
		for _, t := range j.Current {
			onNow[t.Node] = true
		}
		var fit []cand
		for _, c := range cands {
			if c.room >= g {
				fit = append(fit, c)
			}
		}
		// Earlier types first, then the job's current nodes, then the
		// tightest fit, then by name.
		sort.SliceStable(fit, func(a, b int) bool {
			x, y := fit[a], fit[b]
			if ta, tb := allowed[x.n.Type], allowed[y.n.Type]; ta != tb {
				return ta < tb
			}
			if onNow[x.n.Name] != onNow[y.n.Name] {
				return onNow[x.n.Name]
			}
			if x.room != y.room {
				return x.room < y.room
			}
			return x.n.Name < y.n.Name
		})
		var out []Task
		used := map[string]bool{}
		for _, c := range fit {
			if len(out) == k {
				break
			}
			if used[c.n.Name] {
				continue // one task per node: Slurm's --nodes counts hosts
			}
			used[c.n.Name] = true
			out = append(out, Task{Node: c.n.Name, Type: c.n.Type, GPUs: g})
		}
		if len(out) < k {
			return nil
		}
		for _, t := range out {
			p.useFor(j, t)
		}
		return out
	}
	// Free layout: the tightest single node of the first type that holds the
	// gang, else the emptiest nodes first.
	for _, h := range types {
		best := -1
		for i, c := range cands {
			if c.n.Type == h && c.room >= w && (best < 0 || c.room < cands[best].room) {
				best = i
			}
		}
		if best >= 0 {
			t := Task{Node: cands[best].n.Name, Type: h, GPUs: w}
			p.useFor(j, t)
			return []Task{t}
		}
	}
	room := 0
	for _, c := range cands {
		room += c.room
	}
	if room < w {
		return nil
	}
	sort.SliceStable(cands, func(a, b int) bool {
		x, y := cands[a], cands[b]
		if ta, tb := allowed[x.n.Type], allowed[y.n.Type]; ta != tb {
			return ta < tb
		}
		return x.room > y.room
	})
	var out []Task
	left := w
	for _, c := range cands {
		n := min(c.room, left)
		t := Task{Node: c.n.Name, Type: c.n.Type, GPUs: n}
		p.useFor(j, t)
		out = append(out, t)
		left -= n
		if left == 0 {
			break
		}
	}
	return out
}

// placeOnType reserves job j's gang on type h, keeping its current nodes
// when it can.
func (p *freePool) placeOnType(j *Job, h string) []Task {
	if tasks, ok := p.keep(j, h); ok {
		return tasks
	}
	return p.take(j, h)
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

// PlaceOn lays job j's gang out on nodes (their GPUs, CPUs and memory taken
// as free) on the first of types that holds it, as every policy places it,
// or returns nil. The bridge uses it for the rare placement it must choose
// itself, so that rule too is written once.
func PlaceOn(j *Job, nodes []Node, types []string) []Task {
	p := newFreePool(nodes)
	for _, h := range types {
		if tasks := p.take(j, h); tasks != nil {
			return tasks
		}
	}
	return nil
}
