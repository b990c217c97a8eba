package profiles

import (
	"errors"
	"testing"
)

func TestDefaultPath(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	home := func() (string, error) { return "/home/ann", nil }
	tests := []struct {
		name     string
		euid     int
		env      map[string]string
		home     func() (string, error)
		writable bool
		want     string
		wantErr  bool
	}{
		{name: "root, writable", euid: 0, writable: true, home: home, want: "/var/lib/hadar/hadar.db"},
		{name: "root, read-only /var", euid: 0, writable: false, home: home, want: "/home/ann/.local/share/hadar/hadar.db"},
		{name: "user ignores /var", euid: 1000, writable: true, home: home, want: "/home/ann/.local/share/hadar/hadar.db"},
		{name: "XDG_DATA_HOME", euid: 1000, env: map[string]string{"XDG_DATA_HOME": "/data"}, home: home, want: "/data/hadar/hadar.db"},
		{name: "relative XDG_DATA_HOME ignored", euid: 1000, env: map[string]string{"XDG_DATA_HOME": "data"}, home: home, want: "/home/ann/.local/share/hadar/hadar.db"},
		{name: "no home", euid: 1000, home: func() (string, error) { return "", errors.New("$HOME is not defined") }, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := defaultPath(tc.euid, env(tc.env), tc.home, func(string) bool { return tc.writable })
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("defaultPath = %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
	if p, err := DefaultPath(); err != nil || p == "" {
		t.Errorf("DefaultPath() = %q, %v", p, err)
	}
}

func TestWritable(t *testing.T) {
	dir := t.TempDir()
	if !writable(dir) {
		t.Errorf("writable(%s) = false", dir)
	}
	if !writable(dir + "/new") {
		t.Errorf("writable(%s/new) = false; its parent is writable", dir)
	}
	if writable(dir + "/a/b") {
		t.Errorf("writable(%s/a/b) = true; its parent does not exist", dir)
	}
}
