#!/usr/bin/env python3
"""train_digits.py: a small real training job for hadar's HadarE copies (CPU only).

An MLP (64-128-10) learns sklearn's bundled 8x8 digits (1797 images, no download):
75% for training, a fixed stratified 25% held out, whose accuracy is printed at the end.
Seeds are fixed: the same run gives the same model (copies differ only in which
batches each draws, seeded by round and copy index).

It is written against the copy protocol (hadar_copies.py beside it): run as a job
array whose tag allows copies, each array task is one copy; run as a plain job, it
trains alone, checkpointing every 30 s of work so a requeue resumes it.

On the test cluster the GPUs are fake, so the script *paces* itself to the throughput
of the GPU type Slurm gave it: it reads its node's GRES type (as contrib/examples/toyjob
does) and asks `hadar profiles rate --embedded` for the steps/s of the tag's model on
that type with its GPU count, and never trains faster. A copy on a v100 node then does
~4x the steps of one on a k80 node in the same time, as a real job would.

    sbatch --gres=gpu:1 --comment="hadar model=lm-bs20 steps=3000" \
        --wrap "python3 train_digits.py"                                 # one job
    sbatch --array=0-3 --gres=gpu:1 --comment="hadar copies=4 model=lm-bs20 steps=3000" \
        --wrap "python3 train_digits.py"                                 # four copies

With --combine adaptive the copies combine only when they have drifted apart (at
most every --max-interval rounds) and a copy whose work does not lower the loss on a
validation split of the training data is left out and then dropped
(hadar_copies.AdaptiveCombining; docs/hadare.md, "Adaptive combining").

Environment: HADAR (path of the hadar binary, default `hadar`), HADAR_SPOOL (hadar-slurmd's
spool_dir), TRAIN_RATE (steps/s: overrides the pacing; 0 = no pacing).
Prints `result: accuracy=<percent> steps=<n> ...` and writes <sync dir>/result.json.
"""

import argparse
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # run from a shared checkout: leave no __pycache__ in it
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hadar_copies  # noqa: E402


def load_data(validation=0):
    """(train x, y, held-out x, y, validation x, y): the validation split (the
    adaptive drop rule's) is taken from the training 75%, never from the
    held-out 25%."""
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    xtr, xte, ytr, yte = train_test_split(x / 16.0, y, test_size=0.25, random_state=0, stratify=y)
    xva, yva = xtr[:0], ytr[:0]
    if validation:
        xtr, xva, ytr, yva = train_test_split(xtr, ytr, test_size=validation, random_state=0, stratify=ytr)
    f = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    return f(xtr), torch.tensor(ytr), f(xte), torch.tensor(yte), f(xva), torch.tensor(yva)


def build(lr, seed):
    import torch
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    return model, opt


def accuracy(model, x, y):
    import torch
    with torch.no_grad():
        return 100.0 * (model(x).argmax(1) == y).float().mean().item()


class Pace:
    """Never more than rate steps/s (rate <= 0: no pacing)."""

    def __init__(self, rate):
        self.rate = rate
        self.t0 = time.monotonic()
        self.k = 0

    def step(self):
        self.k += 1
        if self.rate > 0:
            ahead = self.t0 + self.k / self.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)


def gpu_rate(model_name, hadar):
    """steps/s of model_name on this node's GPU type with this job's GPUs."""
    if os.environ.get("TRAIN_RATE") is not None:
        return float(os.environ["TRAIN_RATE"]), "TRAIN_RATE"
    gtype = hadar_copies.node_gpu_type()
    if not gtype or not model_name:
        return 0.0, "unknown"
    gpus = hadar_copies.allocated_gpus()
    out = subprocess.run([hadar, "profiles", "rate", "--embedded", "--model", model_name, "--gpu-type", gtype,
                          "--workers", str(gpus)], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        print("train_digits: no rate for %s on %s: %s" % (model_name, gtype, out.stderr.strip()), file=sys.stderr)
        return 0.0, gtype
    return float(out.stdout.strip()), "%s x%d" % (gtype, gpus)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, help="total steps (default: the tag's steps=)")
    ap.add_argument("--model", help="model of the matrix to pace as (default: the tag's model=)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--combine", choices=["every", "adaptive"], default="every",
                    help="combine the copies every round (default) or adaptively")
    ap.add_argument("--threshold", type=float, default=0.02,
                    help="adaptive: divergence that triggers a combine (default 0.02)")
    ap.add_argument("--max-interval", type=int, default=8, help="adaptive: combine at least every N rounds")
    ap.add_argument("--drop-below", type=float, default=0.0,
                    help="adaptive: a copy's cost, as a fraction of the round's improvement in validation loss")
    args = ap.parse_args()

    import torch
    torch.set_num_threads(1)
    tag = hadar_copies.read_tag()
    model_name = args.model or tag.get("model")
    rate, where = gpu_rate(model_name, os.environ.get("HADAR", "hadar"))
    xtr, ytr, xte, yte, xva, yva = load_data(validation=200 if args.combine == "adaptive" else 0)
    loss_fn = torch.nn.CrossEntropyLoss()
    rule = None
    if args.combine == "adaptive":
        probe, _ = build(args.lr, args.seed)

        def validation_loss(state):
            probe.load_state_dict(state["model"])
            with torch.no_grad():
                return loss_fn(probe(xva), yva).item()

        rule = hadar_copies.AdaptiveCombining(threshold=args.threshold, max_interval=args.max_interval,
                                              evaluate=validation_loss, drop_below=args.drop_below)
    cp = hadar_copies.Copies(total_steps=args.steps, rate=rate or None, adaptive=rule)
    print("train_digits: job %s copy %s node %s gpu %s rate %.1f steps/s, %s mode, %d steps in total, sync %s"
          % (cp.job, cp.index, cp.node, where, rate, "copy" if cp.copy_mode else "solo", cp.total_steps,
             cp.sync_dir), flush=True)

    model, opt = build(args.lr, args.seed)
    trained = 0
    start = time.time()
    while True:
        rnd = cp.next_round()
        if rnd is None:
            if cp.dropped:
                print("train_digits: dropped from the job after %d steps of this copy" % trained, flush=True)
                cp.close()
                return 0
            break
        base = rnd.load()
        if base is not None:
            model.load_state_dict(base["model"])
            opt.load_state_dict(base["optim"])
        gen = torch.Generator().manual_seed(args.seed * 1000003 + rnd.round * 1009 + int(cp.index) + 1)
        pace = Pace(rate)
        done = 0
        while done < rnd.steps and not cp.stop_requested():
            idx = torch.randint(0, len(xtr), (args.batch,), generator=gen)
            opt.zero_grad()
            loss = loss_fn(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            done += 1
            pace.step()
        trained += done
        print("train_digits: round %d: %d/%d steps (%d copies), %.1f s, loss %.3f"
              % (rnd.round, done, rnd.steps, rnd.count, time.time() - rnd.started, loss.item()), flush=True)
        comb = cp.finish_round(rnd, {"model": model.state_dict(), "optim": opt.state_dict()}, done)
        if comb is None:
            print("train_digits: stopped; %d steps of this copy are left for the others" % done, flush=True)
            cp.close()
            return 0

    comb, rounds = cp.latest()
    final = cp.final_state()
    if final is None:
        print("train_digits: the job has no combined model", file=sys.stderr)
        return 1
    model.load_state_dict(final["model"])
    acc = accuracy(model, xte, yte)
    result = {"accuracy": acc, "steps": comb["steps_done"], "rounds": rounds, "copy_mode": cp.copy_mode,
              "trained_by_this_copy": trained, "seconds": time.time() - start}
    cp.write_result(result)
    cp.close()
    print("result: accuracy=%.2f steps=%d rounds=%d copy=%s trained_here=%d"
          % (acc, comb["steps_done"], rounds, cp.index, trained), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
