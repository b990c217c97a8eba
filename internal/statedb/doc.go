// Package statedb is hadar-slurmd's state database (state.db in data_dir,
// SQLite, mode 0600, separate from the throughput matrix): the history of
// rounds, decisions and actions, where hadar placed the jobs it released,
// each job's progress, learned-throughput samples, the policy's saved
// state, and the GPU, queue and job-run history `hadar history` draws.
//
// It stores and reads rows; what goes into them is the bridge's business.
// Everything the daemon must not lose on a restart is re-derived from
// Slurm, so losing the database loses history and estimates, never jobs:
// Open moves a file that is not SQLite or fails its integrity check aside
// and starts a new one.
//
// The schema is a numbered list of migrations (schema.go), applied in
// order by one runner when the daemon opens the database and recorded in
// schema_migrations; a database written by an older hadar-slurmd is
// brought up to date, one written by a newer one is refused. Every
// timestamp column holds one format, TimeFormat: RFC 3339 in UTC with
// nine fractional digits, so times sort as text and keep their precision.
// OpenHistory reads a database read-only, while the daemon writes it
// (`hadar history`, the end-to-end tests).
package statedb
