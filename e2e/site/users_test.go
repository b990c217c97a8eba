package site

import (
	"errors"
	"testing"
)

// The suite refuses a running cluster without the site's users, before any
// test waits on jobs that could never be accounted. sacctmgr's output here
// is hand-written in its -n -P format.
func TestSiteUsers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		out     string
		err     error
		wantErr bool
	}{
		{"both", "alice\nbob\nroot\n", nil, false},
		{"bob missing", "alice\nroot\n", nil, true},
		{"no users", "root\n", nil, true},
		{"no slurmdbd", "", errors.New("sacctmgr: error: Problem talking to the database"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := siteUsers(tc.out, tc.err); (err != nil) != tc.wantErr {
				t.Errorf("siteUsers(%q, %v) = %v, want error %v", tc.out, tc.err, err, tc.wantErr)
			}
		})
	}
}
