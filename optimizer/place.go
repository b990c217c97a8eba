package optimizer

import (
	"slices"
	"sort"
)

// freePool tracks the GPUs (and, where nodes give them, CPUs and memory)
// still free in the round being planned. Every placement a policy makes goes
// through it, so every policy honours a job's Shape the same way. Free GPUs
// are counted in a slice indexed by node, not a map keyed by name: a round
// for 10,000 jobs places thousands of gangs, each looking at every node of
// its types.
type freePool struct {
	nodes []Node // sorted by type, then name
	// slot is nodes[i]'s counter in free; a (name, type) listed twice
	// shares one, as its GPUs add up.
	slot   []int
	free   []int
	size   []int           // GPUs per slot, free or not
	index  map[nodeRef]int // (name, type) -> slot
	span   map[string]nodeSpan
	byType map[string]int
	// cpus and mem are free per node name; a node absent is not tracked.
	cpus map[string]int
	mem  map[string]int64
	// scratch is takeAcross's candidate list, reused between calls.
	scratch []cand
}

// nodeRef names a node's GPUs of one type (a node with two GPU types is two
// Nodes); a struct key hashes without building a string.
type nodeRef struct{ name, gpuType string }

// nodeSpan is the range [lo, hi) of a GPU type's nodes in freePool.nodes.
type nodeSpan struct{ lo, hi int }

// cand is a node a gang may use: its index in freePool.nodes, its room for
// the job, and the rank of its type in the order asked for.
type cand struct{ i, room, rank int }

func nodeKey(name, gpuType string) string { return name + "\x00" + gpuType }

func newFreePool(nodes []Node) *freePool {
	p := &freePool{index: make(map[nodeRef]int, len(nodes)), span: map[string]nodeSpan{}, byType: map[string]int{}}
	p.nodes = append(p.nodes, nodes...)
	// slices.SortFunc is sort.Slice's algorithm (one template, only "less"
	// tested), so nodes listed twice keep the order they always had.
	slices.SortFunc(p.nodes, func(a, b Node) int {
		if a.Type < b.Type || a.Type == b.Type && a.Name < b.Name {
			return -1
		}
		return 0
	})
	p.slot = make([]int, len(p.nodes))
	for i, n := range p.nodes {
		ref := nodeRef{n.Name, n.Type}
		k, ok := p.index[ref]
		if !ok {
			k = len(p.free)
			p.index[ref] = k
			p.free = append(p.free, 0)
			p.size = append(p.size, 0)
		}
		p.slot[i] = k
		p.free[k] += n.GPUs
		p.size[k] += n.GPUs
		p.byType[n.Type] += n.GPUs
		sp, ok := p.span[n.Type]
		if !ok {
			sp.lo = i
		}
		sp.hi = i + 1
		p.span[n.Type] = sp
		// The maps are made only for nodes that track CPUs or memory
		// (reading a nil map finds nothing, and only found entries are
		// written).
		if n.CPUs > 0 {
			if p.cpus == nil {
				p.cpus = map[string]int{}
			}
			p.cpus[n.Name] = n.CPUs
		}
		if n.MemMB > 0 {
			if p.mem == nil {
				p.mem = map[string]int64{}
			}
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

// freeOn returns the free GPUs of type gpuType on the named node (0 for a
// node the pool does not hold).
func (p *freePool) freeOn(name, gpuType string) int {
	if k, ok := p.index[nodeRef{name, gpuType}]; ok {
		return p.free[k]
	}
	return 0
}

// nodeGPUs returns the GPUs of type gpuType on the named node, free or
// not (0 for a node the pool does not hold).
func (p *freePool) nodeGPUs(name, gpuType string) int {
	if k, ok := p.index[nodeRef{name, gpuType}]; ok {
		return p.size[k]
	}
	return 0
}

// add changes a task's node's free GPUs by n; a node the pool does not
// hold only changes its type's total, as nothing can be placed there.
func (p *freePool) add(t Task, n int) {
	if k, ok := p.index[nodeRef{t.Node, t.Type}]; ok {
		p.free[k] += n
	}
	p.byType[t.Type] += n
}

func (p *freePool) use(t Task) { p.add(t, -t.GPUs) }

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

// holds reports whether every task's GPUs are free in the pool.
func (p *freePool) holds(tasks []Task) bool {
	need := map[nodeRef]int{}
	for _, t := range tasks {
		need[nodeRef{t.Node, t.Type}] += t.GPUs
	}
	for k, n := range need {
		if p.freeOn(k.name, k.gpuType) < n {
			return false
		}
	}
	return true
}

// releaseFor undoes useFor: task t of job j is free again.
func (p *freePool) releaseFor(j *Job, t Task) {
	p.add(t, t.GPUs)
	if c, ok := p.cpus[t.Node]; ok && j.Shape.CPUsPerNode > 0 {
		p.cpus[t.Node] = c + j.Shape.CPUsPerNode
	}
	if m, ok := p.mem[t.Node]; ok && j.Shape.MemMBPerNode > 0 {
		p.mem[t.Node] = m + j.Shape.MemMBPerNode
	}
}

// room is how many GPUs of node p.nodes[i] job j may take now: 0 if its
// shape rules the node out or the node lacks the CPUs or memory it needs.
func (p *freePool) room(j *Job, i int) int {
	if j != nil && !j.Shape.Free() {
		n := &p.nodes[i]
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
	return p.free[p.slot[i]]
}

// keep reserves the job's current tasks of type h again (lease extension) if
// they hold exactly its gang of that type and are all still free.
func (p *freePool) keep(j *Job, h string) ([]Task, bool) {
	current := j.Current
	if len(current) == 0 || TaskGPUs(current) != j.Workers {
		return nil, false
	}
	for _, t := range current {
		if t.Type != h || t.Copy != 0 {
			return nil, false
		}
	}
	if !p.holds(current) {
		return nil, false
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
	cands, ok := p.candidates(j, types)
	if !ok {
		return nil
	}
	if g := j.Shape.GPUsPerNode; g > 0 {
		return p.takeNodes(j, cands, g)
	}
	// Free layout: the tightest single node of the first type that holds the
	// gang, else the emptiest nodes first.
	for _, h := range types {
		best := -1
		for i, c := range cands {
			if p.nodes[c.i].Type == h && c.room >= w && (best < 0 || c.room < cands[best].room) {
				best = i
			}
		}
		if best >= 0 {
			t := Task{Node: p.nodes[cands[best].i].Name, Type: h, GPUs: w}
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
	stableSort(cands, func(x, y cand) bool {
		if x.rank != y.rank {
			return x.rank < y.rank
		}
		return x.room > y.room
	})
	var out []Task
	left := w
	for _, c := range cands {
		n := min(c.room, left)
		t := Task{Node: p.nodes[c.i].Name, Type: p.nodes[c.i].Type, GPUs: n}
		p.useFor(j, t)
		out = append(out, t)
		left -= n
		if left == 0 {
			break
		}
	}
	return out
}

// candidates lists, in node order, the nodes of types that have room for
// job j, each with the rank of its type (its first place in types); ok is
// false when the types together have fewer free GPUs than the gang. The
// list is the pool's scratch space, valid until the next call.
func (p *freePool) candidates(j *Job, types []string) (cands []cand, ok bool) {
	var spans []nodeSpan
	var ranks []int
	total := 0
	for i, h := range types {
		if indexOf(types[:i], h) >= 0 {
			continue
		}
		total += p.byType[h]
		if sp, ok := p.span[h]; ok {
			spans = append(spans, sp)
			ranks = append(ranks, i)
		}
	}
	if total < j.Workers {
		return nil, false
	}
	// p.nodes is sorted by type, so visiting the types' spans in node order
	// visits their nodes in the order a scan of every node would.
	order := make([]int, len(spans))
	for k := range order {
		order[k] = k
	}
	sort.Slice(order, func(a, b int) bool { return spans[order[a]].lo < spans[order[b]].lo })
	cands = p.scratch[:0]
	for _, k := range order {
		for i := spans[k].lo; i < spans[k].hi; i++ {
			if r := p.room(j, i); r > 0 {
				cands = append(cands, cand{i: i, room: r, rank: ranks[k]})
			}
		}
	}
	p.scratch = cands
	return cands, true
}

// takeNodes reserves a gang of exactly nodes x g GPUs (Slurm's --nodes and
// --gres=gpu:g) among cands, or returns nil.
func (p *freePool) takeNodes(j *Job, cands []cand, g int) []Task {
	k := max(j.Shape.Nodes, 1)
	if k*g != j.Workers {
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
	stableSort(fit, func(x, y cand) bool {
		if x.rank != y.rank {
			return x.rank < y.rank
		}
		nx, ny := p.nodes[x.i].Name, p.nodes[y.i].Name
		if onNow[nx] != onNow[ny] {
			return onNow[nx]
		}
		if x.room != y.room {
			return x.room < y.room
		}
		return nx < ny
	})
	var out []Task
	used := map[string]bool{}
	for _, c := range fit {
		if len(out) == k {
			break
		}
		n := &p.nodes[c.i]
		if used[n.Name] {
			continue // one task per node: Slurm's --nodes counts hosts
		}
		used[n.Name] = true
		out = append(out, Task{Node: n.Name, Type: n.Type, GPUs: g})
	}
	if len(out) < k {
		return nil
	}
	for _, t := range out {
		p.useFor(j, t)
	}
	return out
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
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
