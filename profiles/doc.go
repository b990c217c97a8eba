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
//   - learned: a running mean of the rates the daemon observes on this
//     cluster, updated by RecordObservation.
//   - measured: a value an administrator set by hand with Set.
//
// Throughputs resolves each cell as follows: a measured value always wins;
// otherwise a learned value is used once it rests on at least MinSamples
// observations (WithMinLearnedSamples, default 3); otherwise the imported
// value; and if there is no imported value either, a learned value with
// fewer samples is used rather than nothing, since a rate of 0 would keep the
// optimizer from ever placing the job there and learning more.
//
// # Learning
//
// An observation is Steps progressed in Seconds of wall time by a job running
// Workers workers on one GPU type; its rate is Steps/Seconds. The learned
// estimate is a sample-count-weighted mean: the n-th observation x moves the
// estimate m to m + (x-m)/min(n, W). For the first W observations
// (WithLearningWindow, default 20) this is the exact arithmetic mean; after
// that it becomes an exponentially weighted mean with weight 1/W, so the
// estimate follows drift (driver upgrades, throttling) instead of freezing.
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
