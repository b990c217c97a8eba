// Package slurm is the only package of hadar that runs Slurm commands. It
// has one seam to the outside world, Runner (ExecRunner runs the binaries by
// argv, never through a shell; FakeRunner serves fixtures in tests), pure
// parsers over io.Reader for what the bridge reads, and a Client with the
// few verbs the bridge needs.
//
// # What hadar reads (one command each, per round)
//
//	jobs:    JobQueryArgs       squeue -h -a -r -t PD,R,S,CG,CF -o JobFormat   -> ParseJobs
//	nodes:   NodeQueryArgs      scontrol -a -d -o show node                    -> ParseNodes
//	details: JobDetailQueryArgs scontrol -a -d -o show job (GRES indexes)      -> ParseJobDetails
//	(alt.)   SinfoQueryArgs     sinfo -a -h -N -O SinfoFormat                  -> ParseSinfo
//
// On a cluster with slurmdbd (not read by the daemon yet): reservations
// (ReservationQueryArgs -> ParseReservations), association and QOS limits
// (AssocQueryArgs -> ParseAssociations, QOSQueryArgs -> ParseQOS, TRES
// strings by ParseTRES) and fairshare (SharesQueryArgs -> ParseShares).
// Limits.CheckGPUJob predicts, from those limits and the running jobs,
// whether a job of N GPUs would pend on a limit and on which (Slurm's
// reason, e.g. QOSMaxGRESPerUser).
//
// What hadar changes: Client.Release, Hold and RequeueHold take any number
// of jobs in one scontrol call; PlaceOnNodes pins one pending job
// (scontrol takes NodeList for one job per call); UpdateJobs sets the fields
// 22.05 accepts for a list of jobs; Cancel runs scancel. Ids must match
// ^[0-9]+(_[0-9]+)?$ and are checked before anything runs.
//
// # Hostile input
//
// Job names, comments, work directories and admin reasons are text that
// users (or admins) choose: any bytes but NUL, including '|', quotes,
// newlines, invalid UTF-8 and text that imitates Slurm's own output. The
// parsers are built so that such text can corrupt at most its own field:
//
//   - squeue (ParseJobs): the Slurm-generated fields come first, each ended
//     by '|'; the two user fields, %64j and %512k, come last and have fixed
//     widths. squeue prints a field of width N as exactly N bytes (C's
//     "%.Ns" plus padding), so a record's length is known before reading
//     user bytes: the parser walks the output by byte counts, and a '|' or
//     newline or a whole forged record inside a comment stays inside that
//     comment. Longer names/comments are cut (Job.CommentTruncated). The
//     Slurm-generated fields are validated (ids numeric, state upper case);
//     a record that does not fit is reported and skipped, and the same job
//     listed twice is reported (ErrDuplicate).
//   - scontrol -o (ParseNodes, ParseJobDetails): "Key=value" records where
//     some values have spaces. The parsers know the order in which Slurm
//     prints keys and which values are free text: inside free text only a
//     known key that Slurm prints later ends the value, so "Reason=x
//     State=IDLE" cannot change a node's state. For jobs the parser is
//     strict: a record in which a key hadar reads appears twice, or a known
//     key appears out of order, is rejected (ErrAmbiguous), and a job listed
//     twice is dropped entirely (a comment holding "\nJobId=..." forges a
//     second record for a real job). A line that does not start a record
//     continues the previous one. Even so, identity and tags come from
//     squeue; JoinDetails attaches details only where they agree with it.
//   - sinfo (ParseSinfoFormat) walks rows by the -O specification; a value
//     sinfo cut at a fixed width fails to parse and marks the node
//     Incomplete rather than reading a wrong GPU count.
//   - Every value hadar writes is one argv element. UpdateJobs refuses
//     control characters; SetAdminComment sanitises free text.
//
// A parse error costs one record, never the read: the record is skipped (or
// marked Incomplete, which makes Node.Schedulable false) and the Client logs
// at most 20 warnings per command. Only when no record at all parses does a
// Client read fail (ErrMalformed), so output of an unexpected shape stops a
// round instead of looking like an empty cluster.
//
// # Errors
//
// Slurm's stderr is classified in one place (Classify, errors.go) into
// sentinels such as ErrInvalidJobID, ErrJobNotPending, ErrJobHeld,
// ErrControllerDown and ErrAccessDenied; a *CommandError with the argv, exit
// code and stderr stays in the chain for errors.As.
//
// # Environment
//
// ExecRunner removes variables that change the clients' output (SQUEUE_*,
// SINFO_*, SCONTROL_*, SCANCEL_*, SLURM_TIME_FORMAT, SLURM_CLUSTERS, ...)
// and sets SLURM_TIME_FORMAT=standard, so output matches what the parsers
// expect wherever hadar is started from. SLURM_CONF and PATH pass through.
//
// # Fixtures
//
// testdata/<command>/<slurm-version>-<case>.txt hold verbatim output with
// the producing command on line 1 ("# scontrol show node -o -d") and
// optional further "# " header lines (source, exit status). The tests parse
// every fixture with the parser its line-1 command calls for and compare
// with testdata/golden/ (regenerate with go test ./slurm -run TestFixtures -update).
package slurm
