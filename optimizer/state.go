package optimizer

import (
	"encoding/json"
	"fmt"
	"time"
)

// StatefulPolicy is a policy whose bookkeeping between rounds can be saved
// and restored, so that a restarted daemon, `hadar plan` and `hadar
// explain` plan with the same state as the running daemon.
type StatefulPolicy interface {
	SaveState() ([]byte, error)
	LoadState([]byte) error
}

// unwrapper is a policy wrapping another (guarded).
type unwrapper interface{ Unwrap() Policy }

// Unwrap implements unwrapper.
func (g guarded) Unwrap() Policy { return g.Policy }

func stateful(p Policy) (StatefulPolicy, bool) {
	for p != nil {
		if s, ok := p.(StatefulPolicy); ok {
			return s, true
		}
		u, ok := p.(unwrapper)
		if !ok {
			return nil, false
		}
		p = u.Unwrap()
	}
	return nil, false
}

// SaveState returns p's state, and false if p keeps none that can be saved.
func SaveState(p Policy) ([]byte, bool, error) {
	s, ok := stateful(p)
	if !ok {
		return nil, false, nil
	}
	b, err := s.SaveState()
	return b, true, err
}

// LoadState restores a state SaveState returned (a policy that keeps no
// savable state ignores it).
func LoadState(p Policy, b []byte) error {
	s, ok := stateful(p)
	if !ok || len(b) == 0 {
		return nil
	}
	return s.LoadState(b)
}

// hadarState is Hadar's bookkeeping: the last balanced prices (the next
// round's start), the last fluid plan with its age, and the jobs' progress
// in the virtual fair-sharing system (fairDeadlines), and its probes.
type hadarState struct {
	Prices map[string]float64            `json:"prices,omitempty"`
	Share  map[string]map[string]float64 `json:"fluid_share,omitempty"`
	End    time.Time                     `json:"fluid_end"`
	Age    int                           `json:"fluid_age"`
	// FairDone is each job's fraction done under fair sharing as of FairAt.
	FairDone map[string]float64 `json:"fair_done,omitempty"`
	FairAt   time.Time          `json:"fair_at"`
	// Probing is the GPU type each job is being tried on, ProbeHome the
	// GPUs held for its return, Probed the types each job has tried.
	Probing   map[string]string   `json:"probing,omitempty"`
	ProbeHome map[string][]Task   `json:"probe_home,omitempty"`
	Probed    map[string][]string `json:"probed,omitempty"`
}

// SaveState implements StatefulPolicy.
func (p *Hadar) SaveState() ([]byte, error) {
	return json.Marshal(hadarState{Prices: p.prices, Share: p.fluid.share, End: p.fluid.end, Age: p.fluid.age,
		FairDone: p.fairDone, FairAt: p.fairAt, Probing: p.probing, ProbeHome: p.probeHome, Probed: p.probed})
}

// LoadState implements StatefulPolicy.
func (p *Hadar) LoadState(b []byte) error {
	var st hadarState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("hadar policy state: %w", err)
	}
	p.prices = st.Prices
	p.fluid = fluidPlan{share: st.Share, end: st.End, age: st.Age}
	p.fairDone, p.fairAt = st.FairDone, st.FairAt
	p.probing, p.probeHome, p.probed = st.Probing, st.ProbeHome, st.Probed
	return nil
}

// SaveState implements StatefulPolicy: HadarE's state is its Hadar's.
func (p *HadarE) SaveState() ([]byte, error) { return p.Hadar.SaveState() }

// LoadState implements StatefulPolicy.
func (p *HadarE) LoadState(b []byte) error { return p.Hadar.LoadState(b) }

// pyRandomState is a pyRandom's generator state.
type pyRandomState struct {
	MT  [624]uint32 `json:"mt"`
	Idx int         `json:"idx"`
}

func (r *pyRandom) state() pyRandomState { return pyRandomState{MT: r.mt, Idx: r.idx} }

func (r *pyRandom) restore(st pyRandomState) error {
	if st.Idx < 0 || st.Idx > len(st.MT) {
		return fmt.Errorf("random state index %d out of range", st.Idx)
	}
	r.mt, r.idx = st.MT, st.Idx
	return nil
}

// statefulAllocator is an allocator that keeps state between solves.
type statefulAllocator interface {
	saveState() (json.RawMessage, error)
	loadState(json.RawMessage) error
}

// gavelState is the bookkeeping of Gavel's round mechanism: its clock, the
// last allocation, the time each job ran on each type, the deficits, its
// random stream and its allocator's state.
type gavelState struct {
	Started    bool                          `json:"started"`
	Origin     time.Time                     `json:"origin"`
	LastNow    time.Time                     `json:"last_now"`
	Clock      float64                       `json:"clock"`
	RoundStart float64                       `json:"round_start"`
	Allocation allocation                    `json:"allocation"`
	LastReset  float64                       `json:"last_reset"`
	NeedUpdate bool                          `json:"need_update"`
	Prev       map[string]prevJobState       `json:"prev"`
	JobTime    map[string]map[string]float64 `json:"job_time"`
	WorkerTime map[string]float64            `json:"worker_time"`
	Deficits   map[string]map[string]float64 `json:"deficits"`
	Random     pyRandomState                 `json:"random"`
	Allocator  json.RawMessage               `json:"allocator,omitempty"`
}

type prevJobState struct {
	Job  Job     `json:"job"`
	Type string  `json:"type"`
	Rate float64 `json:"rate"`
}

// SaveState implements StatefulPolicy.
func (g *gavelRounds) SaveState() ([]byte, error) {
	st := gavelState{
		Started: g.started, Origin: g.origin, LastNow: g.lastNow, Clock: g.clock, RoundStart: g.roundStart,
		Allocation: g.allocation, LastReset: g.lastReset, NeedUpdate: g.needUpdate,
		Prev:    make(map[string]prevJobState, len(g.prev)),
		JobTime: g.jobTime, WorkerTime: g.workerTime, Deficits: g.deficits, Random: g.rng.state(),
	}
	for id, p := range g.prev {
		st.Prev[id] = prevJobState{Job: p.job, Type: p.typ, Rate: p.rate}
	}
	if a, ok := g.alloc.(statefulAllocator); ok {
		b, err := a.saveState()
		if err != nil {
			return nil, fmt.Errorf("%s policy state: %w", g.name, err)
		}
		st.Allocator = b
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("%s policy state: %w", g.name, err)
	}
	return b, nil
}

// LoadState implements StatefulPolicy.
func (g *gavelRounds) LoadState(b []byte) error {
	var st gavelState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("%s policy state: %w", g.name, err)
	}
	if err := g.rng.restore(st.Random); err != nil {
		return fmt.Errorf("%s policy state: %w", g.name, err)
	}
	if a, ok := g.alloc.(statefulAllocator); ok && len(st.Allocator) > 0 {
		if err := a.loadState(st.Allocator); err != nil {
			return fmt.Errorf("%s policy state: %w", g.name, err)
		}
	}
	g.started, g.origin, g.lastNow, g.clock, g.roundStart = st.Started, st.Origin, st.LastNow, st.Clock, st.RoundStart
	g.allocation, g.lastReset, g.needUpdate = st.Allocation, st.LastReset, st.NeedUpdate
	g.prev = make(map[string]prevJob, len(st.Prev))
	for id, p := range st.Prev {
		g.prev[id] = prevJob{job: p.Job, typ: p.Type, rate: p.Rate}
	}
	g.jobTime, g.workerTime, g.deficits = orEmpty(st.JobTime), orEmpty(st.WorkerTime), orEmpty(st.Deficits)
	return nil
}

// orEmpty returns m, or an empty map for a nil one (a saved empty map
// loads as nil, which could not be written to).
func orEmpty[M ~map[K]V, K comparable, V any](m M) M {
	if m == nil {
		return M{}
	}
	return m
}

func (a maxMinAllocator) saveState() (json.RawMessage, error) {
	if a.split == nil {
		return nil, nil
	}
	return json.Marshal(a.split.state())
}

func (a maxMinAllocator) loadState(b json.RawMessage) error {
	if a.split == nil {
		return nil
	}
	var st pyRandomState
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	return a.split.restore(st)
}

type ftfState struct {
	IsolatedElapsed map[string]float64 `json:"isolated_elapsed"`
	PrevRemaining   map[string]float64 `json:"prev_remaining"`
	PrevIsolated    map[string]float64 `json:"prev_isolated"`
}

func (f *ftfAllocator) saveState() (json.RawMessage, error) {
	return json.Marshal(ftfState{IsolatedElapsed: f.isolatedElapsed, PrevRemaining: f.prevRemaining, PrevIsolated: f.prevIso})
}

func (f *ftfAllocator) loadState(b json.RawMessage) error {
	var st ftfState
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	f.isolatedElapsed, f.prevRemaining, f.prevIso = orEmpty(st.IsolatedElapsed), orEmpty(st.PrevRemaining), orEmpty(st.PrevIsolated)
	return nil
}

type fifoState struct {
	Random   pyRandomState     `json:"random"`
	Assigned map[string]string `json:"assigned"`
	Arrival  map[string]int    `json:"arrival_rank"`
	Next     int               `json:"next"`
}

func (f *fifoAllocator) saveState() (json.RawMessage, error) {
	return json.Marshal(fifoState{Random: f.rng.state(), Assigned: f.assigned, Arrival: f.seq, Next: f.next})
}

func (f *fifoAllocator) loadState(b json.RawMessage) error {
	var st fifoState
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	if err := f.rng.restore(st.Random); err != nil {
		return err
	}
	f.assigned, f.seq, f.next = orEmpty(st.Assigned), orEmpty(st.Arrival), st.Next
	return nil
}

// tiresiasState is Tiresias's bookkeeping: when each job last ran, the
// service forgiven by promotion, and its random stream.
type tiresiasState struct {
	Random  []byte               `json:"random"`
	LastRun map[string]time.Time `json:"last_run"`
	Offset  map[string]float64   `json:"offset"`
}

// SaveState implements StatefulPolicy.
func (t *Tiresias) SaveState() ([]byte, error) {
	rnd, err := t.src.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("tiresias policy state: %w", err)
	}
	return json.Marshal(tiresiasState{Random: rnd, LastRun: t.lastRun, Offset: t.offset})
}

// LoadState implements StatefulPolicy.
func (t *Tiresias) LoadState(b []byte) error {
	var st tiresiasState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("tiresias policy state: %w", err)
	}
	if err := t.src.UnmarshalBinary(st.Random); err != nil {
		return fmt.Errorf("tiresias policy state: %w", err)
	}
	t.lastRun, t.offset = orEmpty(st.LastRun), orEmpty(st.Offset)
	return nil
}

// SaveState implements StatefulPolicy: E-LAS keeps only its random stream
// (its ranking is read from each job's progress).
func (e *ELAS) SaveState() ([]byte, error) {
	rnd, err := e.src.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("elas policy state: %w", err)
	}
	return json.Marshal(struct {
		Random []byte `json:"random"`
	}{rnd})
}

// LoadState implements StatefulPolicy.
func (e *ELAS) LoadState(b []byte) error {
	var st struct {
		Random []byte `json:"random"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("elas policy state: %w", err)
	}
	if err := e.src.UnmarshalBinary(st.Random); err != nil {
		return fmt.Errorf("elas policy state: %w", err)
	}
	return nil
}
