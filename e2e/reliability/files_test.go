package reliability

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
)

// listeningAddrs returns the local addresses of the TCP sockets pid listens on.
func listeningAddrs(t *testing.T, pid int) []string {
	inodes := map[string]bool{}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 || fs[3] != "0A" || !inodes[fs[9]] { // 0A: LISTEN
				continue
			}
			out = append(out, decodeProcAddr(fs[1]))
		}
	}
	return out
}

// decodeProcAddr turns /proc/net/tcp's "0100007F:264C" into "127.0.0.1:9804".
func decodeProcAddr(s string) string {
	h, p, _ := strings.Cut(s, ":")
	port, _ := strconv.ParseUint(p, 16, 16)
	raw, _ := hex.DecodeString(h)
	ip := make(net.IP, len(raw))
	for i := 0; i+4 <= len(raw); i += 4 { // each 32-bit word is little-endian
		ip[i], ip[i+1], ip[i+2], ip[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))
}

func mode(t *testing.T, p string) os.FileMode {
	st, err := os.Stat(p)
	if err != nil {
		t.Errorf("%s: %v", p, err)
		return 0
	}
	return st.Mode().Perm() | st.Mode()&os.ModeSticky
}

// 10. Files and endpoints: the state and throughput databases are 0600 in
// a 0750 data dir; a world-writable config is refused; the metrics
// endpoint binds loopback by default; nothing secret is logged.
func TestFilesAndEndpoints(t *testing.T) {
	tc := need(t)
	cfg := defaultDaemonConfig()
	cfg.Metrics = nil // the default listen address
	const defaultMetrics = "127.0.0.1:9788"
	if ln, err := net.Listen("tcp", defaultMetrics); err != nil {
		t.Skipf("%s is taken by another process; the default metrics address cannot be checked here", defaultMetrics)
	} else {
		ln.Close()
	}
	d := tc.newDaemon("d", cfg)

	// A config writable by everyone is refused before anything starts.
	bad := filepath.Join(d.dir, "world-writable.toml")
	cfgText, err := os.ReadFile(d.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, cfgText, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(bad, 0o666)
	r := e2eutil.Run(0, nil, filepath.Join(binDir, "hadar-slurmd"), "--config", bad, "--once", "--dry-run")
	if r.Err == nil || !strings.Contains(r.Err.Error(), "exit status 2") || !strings.Contains(r.Err.Error(), "writable by every user") {
		t.Errorf("world-writable config: %v %s", r.Err, r.Stdout)
	}
	if _, err := os.Stat(filepath.Join(d.dir, "data")); err == nil {
		t.Error("the refused config still created the data dir")
	}

	ids := []string{tc.submit(tagged(t, "a3c", 1, 3)), tc.submit(tagged(t, "resnet50-bs64", 2, 3))}
	d.start()
	if !d.waitRounds(1, 20*time.Second) {
		t.Fatal("no round")
	}
	data := filepath.Join(d.dir, "data")
	modes := map[string]os.FileMode{data: 0o750, filepath.Join(data, "state.db"): 0o600, filepath.Join(data, "hadar.db"): 0o600}
	for p, want := range modes {
		if got := mode(t, p); got != want {
			t.Errorf("%s: mode %v, want %v", p, got, want)
		}
	}
	extra, _ := filepath.Glob(filepath.Join(data, "*"))
	for _, p := range extra {
		if m := mode(t, p); m&0o077 != 0 {
			t.Errorf("%s: mode %v is open to group or others", p, m)
		}
	}
	if got := mode(t, filepath.Join(d.dir, "spool", "progress")); got != 0o777|os.ModeSticky {
		t.Errorf("progress dir: %v, want 1777 (every job reports; sticky: none replaces another's)", got)
	}

	// Metrics: loopback only by default.
	var addrs []string
	e2eutil.WaitFor(10*time.Second, func() bool {
		d.mu.Lock()
		pid := d.cmd.Process.Pid
		d.mu.Unlock()
		addrs = listeningAddrs(t, pid)
		return len(addrs) > 0
	})
	if len(addrs) == 0 {
		t.Error("the daemon listens nowhere (metrics endpoint missing?)")
	}
	for _, a := range addrs {
		if !strings.HasPrefix(a, "127.0.0.1:") && !strings.HasPrefix(a, "[::1]:") {
			t.Errorf("the daemon listens on %s, want loopback only", a)
		}
	}
	resp, err := http.Get("http://" + defaultMetrics + "/metrics")
	metricsOK := false
	if err != nil {
		t.Errorf("metrics: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		metricsOK = resp.StatusCode == 200 && bytes.Contains(body, []byte("hadar_rounds_total"))
		if !metricsOK {
			t.Errorf("metrics: %d %.200s", resp.StatusCode, body)
		}
	}
	waitDone(t, ids, 60*time.Second)
	d.term()

	// Nothing secret in the log: there are no secrets in hadar's config;
	// check that munge's key (path or contents) never shows up.
	logb, err := os.ReadFile(d.logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"munge.key", "/etc/munge"} {
		if bytes.Contains(logb, []byte(s)) {
			t.Errorf("the log names %q", s)
		}
	}
	keyChecked := false
	if key, err := os.ReadFile("/etc/munge/munge.key"); err == nil && len(key) >= 32 {
		keyChecked = true
		chunk := key[:32]
		for _, enc := range [][]byte{chunk, []byte(hex.EncodeToString(chunk)), []byte(base64.StdEncoding.EncodeToString(chunk)[:40])} {
			if bytes.Contains(logb, enc) {
				t.Error("the log holds munge key material")
			}
		}
	}
	record(t, "data dir 0750, state.db and hadar.db 0600 (WAL files no wider); progress dir 1777; world-writable config refused (exit 2); metrics on %s only (GET /metrics ok: %v); no munge key path or material in the log (key read: %v)",
		strings.Join(addrs, ","), metricsOK, keyChecked)
}
