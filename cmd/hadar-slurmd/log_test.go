package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hadar-sched/hadar/config"
)

// --log-format picks slog's JSON or text handler; --log-level filters.
func TestLogFormat(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "")
	for _, c := range []struct {
		args   []string
		isJSON bool
	}{
		{[]string{"--log-format", "json"}, true},
		{[]string{"--log-format", "text"}, false},
		{nil, false}, // [log] format's default
	} {
		o, err := parseFlags(c.args, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		o.config = "/nonexistent/hadar.toml" // the default path, missing: defaults
		cfg, _, err := loadConfig(o)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		log := newLogger(cfg, &buf)
		log.Info("decision", "job", "12", "decision", "place", "from", "-", "to", "node3:2", "reason", "the policy's placement")
		log.Debug("not shown at info")
		out := strings.TrimSuffix(buf.String(), "\n")
		if strings.Count(out, "\n") != 0 {
			t.Errorf("%v: want one line, got %q", c.args, out)
		}
		var m map[string]any
		jsonErr := json.Unmarshal([]byte(out), &m)
		switch {
		case c.isJSON && (jsonErr != nil || m["job"] != "12" || m["to"] != "node3:2" || m["reason"] != "the policy's placement"):
			t.Errorf("%v: %q (%v)", c.args, out, jsonErr)
		case !c.isJSON && (jsonErr == nil || !strings.Contains(out, "msg=decision job=12 decision=place from=- to=node3:2 reason=\"the policy's placement\"")):
			t.Errorf("%v: %q", c.args, out)
		}
	}
	cfg := config.Default()
	cfg.Log.Level = "debug"
	var buf bytes.Buffer
	newLogger(cfg, &buf).Debug("shown")
	if !strings.Contains(buf.String(), "shown") {
		t.Errorf("debug level: %q", buf.String())
	}
	var stderr bytes.Buffer
	if code := run([]string{"--log-format", "yaml", "--config", "/nonexistent/x.toml"}, &bytes.Buffer{}, &stderr); code != 2 {
		t.Errorf("--log-format yaml: exit %d, %q", code, stderr.String())
	}
	o, _ := parseFlags([]string{"--log-format", "yaml"}, &bytes.Buffer{})
	o.config = "/nonexistent/hadar.toml"
	if _, _, err := loadConfig(o); err == nil || !strings.Contains(err.Error(), "log.format") {
		t.Errorf("--log-format yaml: %v", err)
	}
}
