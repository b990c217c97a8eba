package e2eutil

import "time"

// WaitFor calls cond every 200 ms until it holds and reports whether it
// did before timeout passed.
func WaitFor(timeout time.Duration, cond func() bool) bool {
	return WaitEvery(timeout, 200*time.Millisecond, cond)
}

// WaitEvery calls cond every interval until it holds and reports whether
// it did before timeout passed. cond runs at least once.
func WaitEvery(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}
