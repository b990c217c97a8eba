package optimizer

import (
	"errors"
	"testing"
	"time"
)

func checkSnapshot() *Snapshot {
	return &Snapshot{
		Now:   time.Unix(0, 0),
		Round: time.Minute,
		Nodes: []Node{{Name: "n1", Type: "v100", GPUs: 4}, {Name: "n2", Type: "k80", GPUs: 4}},
		Jobs: []Job{
			{ID: "a", Type: "m", Workers: 2, RemainingSteps: 1},
			{ID: "b", Type: "m", Workers: 4, RemainingSteps: 1, MaxCopies: 2},
		},
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		plan    map[string][]Task
		wantErr bool
	}{
		{name: "empty plan", plan: map[string][]Task{}},
		{name: "gang on one node", plan: map[string][]Task{"a": {{Node: "n1", Type: "v100", GPUs: 2}}}},
		{name: "gang across types", plan: map[string][]Task{"b": {{Node: "n1", Type: "v100", GPUs: 2}, {Node: "n2", Type: "k80", GPUs: 2}}}},
		{name: "two copies on two nodes", plan: map[string][]Task{"b": {{Node: "n1", Type: "v100", GPUs: 4, Copy: 1}, {Node: "n2", Type: "k80", GPUs: 4, Copy: 2}}}},
		{name: "unknown job", plan: map[string][]Task{"zz": {{Node: "n1", Type: "v100", GPUs: 2}}}, wantErr: true},
		{name: "unknown node", plan: map[string][]Task{"a": {{Node: "n9", Type: "v100", GPUs: 2}}}, wantErr: true},
		{name: "wrong type for node", plan: map[string][]Task{"a": {{Node: "n1", Type: "k80", GPUs: 2}}}, wantErr: true},
		{name: "over capacity", plan: map[string][]Task{"a": {{Node: "n1", Type: "v100", GPUs: 2}}, "b": {{Node: "n1", Type: "v100", GPUs: 4}}}, wantErr: true},
		{name: "partial gang", plan: map[string][]Task{"b": {{Node: "n1", Type: "v100", GPUs: 3}}}, wantErr: true},
		{name: "gang too big", plan: map[string][]Task{"a": {{Node: "n1", Type: "v100", GPUs: 3}}}, wantErr: true},
		{name: "zero-GPU task", plan: map[string][]Task{"a": {{Node: "n1", Type: "v100", GPUs: 2}, {Node: "n2", Type: "k80", GPUs: 0}}}, wantErr: true},
		{name: "two copies on one node", plan: map[string][]Task{"b": {{Node: "n1", Type: "v100", GPUs: 2, Copy: 1}, {Node: "n1", Type: "v100", GPUs: 2, Copy: 2}}}, wantErr: true},
		{name: "more copies than allowed", plan: map[string][]Task{"a": {{Node: "n1", Type: "v100", GPUs: 1, Copy: 1}, {Node: "n2", Type: "k80", GPUs: 1, Copy: 2}}}, wantErr: true},
		{name: "copy larger than the job", plan: map[string][]Task{"a": {{Node: "n1", Type: "v100", GPUs: 3, Copy: 1}}}, wantErr: true},
		{name: "copies mixed with gang", plan: map[string][]Task{"b": {{Node: "n1", Type: "v100", GPUs: 2, Copy: 1}, {Node: "n2", Type: "k80", GPUs: 2}}}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(checkSnapshot(), &Plan{Assignments: tc.plan})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Check() error = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvariant) {
				t.Errorf("error %v does not wrap ErrInvariant", err)
			}
		})
	}
	if err := Check(checkSnapshot(), nil); err == nil {
		t.Error("Check(nil plan) = nil, want error")
	}
}
