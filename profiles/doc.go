// Package profiles keeps hadar's heterogeneity matrix, the steps per second
// of every job type on every GPU type at every worker count, in a small
// SQLite database, and hands it to the optimizer as a plain value
// (optimizer.Throughputs). Nothing outside this package sees the database.
//
// # Sources and precedence
//
// Each cell (job type, GPU type, workers) holds up to one row per source:
//
//   - imported: a published matrix, by default Gavel's
//     simulation_throughputs.json (embedded, see Default), loaded when the
//     database is created (WithSeedMatrix picks another) or with
//     ImportGavel.
//   - learned: a robust aggregate of the rates the daemon observes on this
//     cluster (RecordObservation; see Learning).
//   - measured: a value an administrator set by hand with Set.
//
// Throughputs resolves each cell as follows: a measured value always wins;
// otherwise a learned value is used once it rests on at least
// WithMinLearnedSamples observations (default 3) from at least
// WithMinLearnedUsers users (default 2); otherwise the imported value. A
// cell with none of these has no value here: the daemon plans it with the
// prior (WithPrior). A stored rate outside [MinRate, MaxRate] (other than a
// measured or imported 0, "cannot run") is never used, and Set and
// ImportGavel refuse one.
//
// # Learning
//
// An observation is Steps progressed in Seconds by a job running Workers
// workers on one GPU type, over an interval the daemon's clock bounds; its
// rate is Steps/Seconds, and it names the job and its user. The store keeps
// it as a sample of its cell unless it is out of bounds:
//
//   - outside [MinRate, MaxRate]: ErrInvalid;
//   - outside [a/MaxSampleRatio, a*MaxSampleRatio], where a is the cell's
//     imported value, else the rate the daemon planned with
//     (Observation.Expected, the prior's for a new cell): ErrOutlier. An
//     imported anchor never moves, so repeated lies cannot ratchet it.
//
// A cell keeps the newest samples within three caps: WithSampleCaps per job
// (default 4) and per user (default 8), and WithLearningWindow in all
// (default 20). Its learned value is the median over users of each user's
// median rate: every user has one vote, however many jobs or samples he
// has, so one user cannot outvote two others. (Of an even count the median
// is the geometric mean of the middle two.) Old samples leave the window as
// new ones come, so the value follows drift (driver upgrades, throttling).
// PurgeUser removes one user's samples and recomputes the cells.
//
// # Matrices, the catalogue and the prior
//
// Matrix resolves a matrix by name, the one resolver every command and the
// daemon use: "gavel" (Default), "lambda" (Lambda, Lambda's fp32 PyTorch
// benchmark of 11 current GPU types, converted by ParseLambda), "lambda-fp16"
// or a file in Gavel's format. Catalog is the GPU catalogue (catalog.csv:
// tensor and FP32 TFLOPS, memory, bandwidth and the datasheet of every
// canonical type). WithPrior fills every cell a matrix lacks from the
// model's other rates and the catalogue's figures (prior.go documents the
// rule; docs/prior.md its measured error, from LeaveOneTypeOut); it is a
// pure function over a matrix, not a stored source.
//
// # GPU type names
//
// Canonical GPU types are short lowercase names (k80, v100, a100). Sites name
// their GPUs in Slurm's GRES configuration however they like
// ("tesla_v100-sxm2-32gb", "NVlink_A100_40GB"); the gpu_aliases table maps
// such names to canonical types, and ResolveGPUType documents how a name is
// looked up. A new database is seeded with every catalogue type and the
// names Slurm's AutoDetect=nvml and common gres.conf files give them
// (DefaultAliases). An alias must point to a type the database or the
// catalogue knows.
//
// # Schema
//
// The schema lives in embedded, numbered migrations (migrations/NNNN_*.sql),
// applied in order in one transaction by Open and recorded in
// schema_migrations, so opening a database again is a no-op. The database
// file is created with mode 0600 in a directory created with mode 0750;
// connections use WAL and a busy timeout so the daemon and the hadar command
// can use it at the same time.
package profiles
