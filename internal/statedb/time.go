package statedb

import "time"

// TimeFormat is how every timestamp column is written: RFC 3339, UTC, with
// a fixed nine fractional digits. A fixed width makes text order time order
// (the history queries compare times as text), and nanoseconds keep a
// progress report's time exactly as the job wrote it (the bridge compares
// it with the next report's).
const TimeFormat = "2006-01-02T15:04:05.000000000Z"

// formatTime writes t in TimeFormat; the zero time is "".
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeFormat)
}

// parseTime reads a stored time: TimeFormat, or the variable-width RFC
// 3339 of databases not yet migrated (OpenHistory does not migrate). A
// value that is neither is the zero time.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}
