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
// round's start) and the last fluid plan with its age.
type hadarState struct {
	Prices map[string]float64            `json:"prices,omitempty"`
	Share  map[string]map[string]float64 `json:"fluid_share,omitempty"`
	End    time.Time                     `json:"fluid_end"`
	Age    int                           `json:"fluid_age"`
}

// SaveState implements StatefulPolicy.
func (p *Hadar) SaveState() ([]byte, error) {
	return json.Marshal(hadarState{Prices: p.prices, Share: p.fluid.share, End: p.fluid.end, Age: p.fluid.age})
}

// LoadState implements StatefulPolicy.
func (p *Hadar) LoadState(b []byte) error {
	var st hadarState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("hadar policy state: %w", err)
	}
	p.prices = st.Prices
	p.fluid = fluidPlan{share: st.Share, end: st.End, age: st.Age}
	return nil
}

// SaveState implements StatefulPolicy: HadarE's state is its Hadar's.
func (p *HadarE) SaveState() ([]byte, error) { return p.Hadar.SaveState() }

// LoadState implements StatefulPolicy.
func (p *HadarE) LoadState(b []byte) error { return p.Hadar.LoadState(b) }
