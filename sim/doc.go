// Package sim is hadar's deterministic, round-based trace simulator: it replays
// a job trace (Gavel's format, see ParseTrace) against a simulated cluster,
// asks an optimizer.Policy for a plan every round, checks it, advances jobs by
// the shared throughput model and reports the metrics every policy is judged
// by. Given the same trace, cluster, policy and seed it produces the same
// result, and it never reads a wall clock to decide anything.
//
// With Config.Truth and Config.Learn the plan and the truth differ: jobs
// progress at Truth's rates while the policy plans with what hadar-slurmd
// would know, the imported matrix, the prior and what it learns from the
// simulated progress (Learning; docs/learning.md).
//
// The package also generates Gavel-style synthetic traces (Generate), embeds
// Gavel's public traces (EmbeddedTrace) and draws result plots (PlotJCTCDF,
// PlotUtilization, PlotMetricBars).
package sim
