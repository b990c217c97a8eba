package main

import (
	"context"
	"net"
	"os"
	"strconv"
	"time"
)

// systemd's notify protocol (sd_notify(3)), for Type=notify and
// WatchdogSec= in the unit: READY=1 once the daemon runs, WATCHDOG=1 while
// its round loop moves, STOPPING=1 when it stops. With no NOTIFY_SOCKET
// (not under systemd) every call is a no-op.

func sdNotify(state string) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return
	}
	if path[0] == '@' {
		path = "\x00" + path[1:] // abstract socket
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = conn.Write([]byte(state))
}

// watchdogInterval is half of systemd's WATCHDOG_USEC (0: no watchdog).
func watchdogInterval() time.Duration {
	usec, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || usec <= 0 {
		return 0
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0
	}
	return time.Duration(usec) * time.Microsecond / 2
}

// feedWatchdog pings systemd every interval while alive() is recent: a
// round loop stuck for longer than the watchdog gets no ping, and systemd
// kills the daemon (then ExecStopPost= fails open and Restart= restarts it).
func feedWatchdog(ctx context.Context, interval time.Duration, alive func() time.Time) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if a := alive(); !a.IsZero() && time.Since(a) < 2*interval {
				sdNotify("WATCHDOG=1")
			}
		}
	}
}
