// Package hadare holds the Go side of the tests of HadarE's PyTorch example
// (train_digits.py, the copy helper hadar_copies.py and
// measure_copy_efficiency.py; docs/hadare.md and docs/hadare-slurm.md):
// `go test ./contrib/examples/hadare/` runs the helper's unittest suite
// (test_hadar_copies.py: the adaptive combining rule, and the copy
// protocol with two copies as threads over a temporary sync directory, no
// Slurm). It has no code outside its tests.
package hadare
