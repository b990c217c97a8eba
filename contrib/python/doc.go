// Package python holds the Go side of the tests of hadar's Python helpers
// (contrib/python/hadar-progress): `go test ./contrib/python/` runs the
// package's unittest suite, checks that the files it writes are what
// hadar-slurmd reads (jobproto.ReadProgress), and pip-installs it into a
// virtual environment. It has no code outside its tests.
package python
