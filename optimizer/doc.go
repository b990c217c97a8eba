// Package optimizer holds hadar's scheduling policies: Hadar, HadarE and the
// baselines it is measured against (Gavel's LP policies, LAS, YARN-CS,
// Tiresias, E-LAS).
//
// Every policy is pure: it takes a Snapshot (cluster, jobs, throughput matrix
// and the current time as a field) and returns a Plan for the next round. It
// runs no commands, opens no database, reads no clock and starts no goroutine.
// The simulator (package sim) and the live Slurm bridge (package bridge) are
// thin drivers of the same policies:
//
//	        +-----------+    Snapshot     +--------+     Plan     +-------+    +---------+
//	round ->|  observe  | --------------> | Policy | -----------> | Check | -> | enforce |
//	        +-----------+                 +--------+              +-------+    +---------+
//	         sim: trace                                                          sim: advance jobs
//	         bridge: squeue/sinfo                                                bridge: scontrol
//
// Some policies (Gavel's round mechanism, Tiresias) keep bookkeeping between
// rounds, as Gavel's own policies do; a policy's output depends only on the
// sequence of snapshots it was given, never on wall time.
package optimizer
