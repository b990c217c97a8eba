#!/usr/bin/env python3
"""measure_copy_efficiency.py: measure HadarE's copy efficiency with real PyTorch (CPU).

hadar's simulator runs a job forked into copies at the sum of its copies' rates
times a *copy efficiency* (`hadar simulate --copy-efficiency`,
optimizer.Throughputs.CopiesRate). This tool measures that number: it trains one
job alone and as K copies that combine their models the way hadar_copies.py does
(every round, a weighted average of the copies' checkpoints, optimizer state
included; the copies then go on from the average), all in one process, and
counts the steps each needs to reach a target held-out loss.

    efficiency(K) = steps of the job alone / steps of all K copies together

(steps summed over the copies, up to the first point where the average of the
copies' models reaches the target). In the simulator's model K copies of rates
r_i reach the target when efficiency x sum(r_i) x time = the job's steps, which
is this ratio. 1 means the copies' steps count fully; 1/K that K copies are no
faster than one. The average of the copies is evaluated every --eval-every steps
(within rounds too: it is the model a combine there would give), so the count
is not rounded up to whole rounds.

The task is meant not to saturate: sklearn.datasets.make_classification with 10
classes, 30 informative of 40 features, 2 clusters per class and 10% of the
labels flipped (100,000 samples, generated: nothing is downloaded), an MLP
40-64-10, SGD with momentum 0.9, lr 0.01, batch 32. Alone it reaches held-out
loss 1.10 (about 70% accuracy) after 3,000-4,000 steps and 74% after 12,000;
at most about 91% is possible (a tenth of the labels are random).

With --combine it compares ways of combining instead (the table of
docs/hadare.md, "Adaptive combining"): every:N (every N rounds) and adaptive
(hadar_copies.AdaptiveCombining: combine when the copies' divergence reaches
--threshold, at most --max-interval rounds apart, and drop a copy whose
leave-one-out contribution to the loss on a validation split of the training
data is below its cost).
--bad-copy makes the last copy train on shuffled labels (a copy whose work
hurts), to see the drop rule at work.

Examples (minutes each on one CPU core; the first is the measurement of
docs/hadare.md, "Copy efficiency, measured"):

    measure_copy_efficiency.py --copies 2,4,8 --seeds 10                # efficiency
    measure_copy_efficiency.py --copies 4 --seeds 4 --round-steps 1,100,400
    measure_copy_efficiency.py --copies 3 --speeds 1,0.5,0.25          # v100:p100:k80-like
    measure_copy_efficiency.py --copies 4 --seeds 10 \\
        --combine every:1,every:2,every:4,every:8,adaptive:0.02,adaptive:0.05
    measure_copy_efficiency.py --copies 4 --seeds 6 --bad-copy --max-steps 20000 \\
        --combine every:1,adaptive:0,adaptive:0.02

Prints a Markdown table (--json: the per-seed numbers as JSON).
"""

import argparse
import json
import math
import os
import random
import sys
import time

sys.dont_write_bytecode = True  # run from a shared checkout: leave no __pycache__ in it
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hadar_copies  # noqa: E402


# ------------------------------------------------------------------- the task --

class Task:
    """The data (train, validation for the drop rule, held-out test) and model."""

    def __init__(self, samples=100000, features=40, informative=30, classes=10, flip=0.1, data_seed=0,
                 hidden=64, lr=0.01, batch=32):
        import torch
        from sklearn.datasets import make_classification
        from sklearn.model_selection import train_test_split

        x, y = make_classification(n_samples=samples, n_features=features, n_informative=informative,
                                   n_redundant=min(5, features - informative), n_classes=classes,
                                   n_clusters_per_class=2, flip_y=flip, class_sep=1.0, random_state=data_seed)
        x = (x - x.mean(0)) / x.std(0)
        xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.1, random_state=data_seed, stratify=y)
        xtr, xva, ytr, yva = train_test_split(xtr, ytr, test_size=2000, random_state=data_seed, stratify=ytr)
        f = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
        self.xtr, self.ytr = f(xtr), torch.tensor(ytr)
        self.xva, self.yva = f(xva), torch.tensor(yva)
        self.xte, self.yte = f(xte), torch.tensor(yte)
        self.features, self.classes, self.hidden = features, classes, hidden
        self.lr, self.batch = lr, batch
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self._eval_model = self.model(0)

    def model(self, seed):
        import torch
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(self.features, self.hidden), torch.nn.ReLU(),
                                   torch.nn.Linear(self.hidden, self.classes))

    def optimizer(self, model):
        import torch
        return torch.optim.SGD(model.parameters(), lr=self.lr, momentum=0.9)

    def loss(self, model_state, x, y):
        import torch
        self._eval_model.load_state_dict(model_state)
        with torch.no_grad():
            out = self._eval_model(x)
            return self.loss_fn(out, y).item(), (out.argmax(1) == y).float().mean().item()

    def test(self, model_state):
        return self.loss(model_state, self.xte, self.yte)

    def validate(self, state):
        """Validation loss of a checkpoint: AdaptiveCombining's evaluate."""
        return self.loss(state["model"], self.xva, self.yva)[0]


class Copy:
    def __init__(self, task, seed, index, bad=False):
        import torch
        self.task = task
        self.model = task.model(seed)  # the same initial model in every copy
        self.opt = task.optimizer(self.model)
        self.gen = torch.Generator().manual_seed(seed * 1000003 + index + 1)
        self.labels = task.ytr
        if bad:
            self.labels = task.ytr[torch.randperm(len(task.ytr), generator=torch.Generator().manual_seed(seed + 7))]
        self.steps = 0

    def train(self, n):
        import torch
        t = self.task
        for _ in range(n):
            idx = torch.randint(0, len(t.xtr), (t.batch,), generator=self.gen)
            self.opt.zero_grad()
            t.loss_fn(self.model(t.xtr[idx]), self.labels[idx]).backward()
            self.opt.step()
        self.steps += n

    def state(self):
        return {"model": self.model.state_dict(), "optim": self.opt.state_dict()}

    def load(self, state):
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optim"])


# ------------------------------------------------------------------- one run --

def run(task, k, seed, round_steps, combine, target, eval_every, max_steps, threshold=0.02, max_interval=8,
        drop_below=0.0, patience=2, speeds=None, bad_copy=False):
    """Train k copies (k = 1: the job alone) until the average of their models
    reaches held-out loss target. combine is "every:N", "adaptive" or
    "adaptive:THRESHOLD". Returns a
    dict: steps (all copies), per_copy (steps of the fastest copy), rounds,
    combines, dropped, reached (False when max_steps ran out), seconds."""
    speeds = speeds or [1.0] * k
    copies = [Copy(task, seed, i, bad=bad_copy and k > 1 and i == k - 1) for i in range(k)]
    rule = None
    every = 1
    if combine == "adaptive" or combine.startswith("adaptive:"):
        if ":" in combine:
            threshold = float(combine.split(":", 1)[1])
        rule = hadar_copies.AdaptiveCombining(threshold=threshold, max_interval=max_interval,
                                              evaluate=task.validate, drop_below=drop_below, patience=patience,
                                              seed=seed)
    elif combine.startswith("every:"):
        every = int(combine.split(":", 1)[1])
    else:
        raise ValueError("combine: every:N, adaptive or adaptive:T, not %r" % combine)
    t0 = time.time()
    live = list(range(k))
    rounds = combines = since = 0
    dropped = []
    base_loss, strikes = None, {}
    divs = []
    step_total = lambda: sum(c.steps for c in copies)  # noqa: E731

    def reached():
        idx = [i for i in live]
        if len(idx) == 1:
            ms = copies[idx[0]].model.state_dict()
        else:
            ms = hadar_copies.average([copies[i].model.state_dict() for i in idx],
                                      [max(1, copies[i].steps) for i in idx])
        loss, acc = task.test(ms)
        return loss <= target, loss, acc

    result = None
    while result is None:
        rounds += 1
        share = {i: max(1, int(round(round_steps * speeds[i] / max(speeds)))) for i in live}
        done = {i: 0 for i in live}
        # Train the round in slices that end where the fastest copy's steps are
        # a multiple of eval_every (or at the round's end), the slower copies
        # in proportion, and check the copies' average at those multiples.
        start, t = (rounds - 1) * round_steps, 0
        while t < round_steps:
            t = min(round_steps, (start + t) // eval_every * eval_every + eval_every - start)
            for i in live:
                want = int(round(share[i] * t / round_steps))
                copies[i].train(want - done[i])
                done[i] = want
            if (start + t) % eval_every:
                continue
            ok, loss, acc = reached()
            if ok or max(c.steps for c in copies) >= max_steps:
                result = {"reached": ok, "loss": loss, "accuracy": acc}
                break
        if result is not None or k == 1:
            continue
        since += 1
        weights = [done[i] for i in live]
        states = [copies[i].state() for i in live]
        if rule is not None:
            sk = [rule.sketch(s) for s in states]
            due, d = rule.due(since, sk, weights)
            divs.append(d)
        else:
            due = since >= every
        if not due:
            continue
        use = [True] * len(live)
        if rule is not None:
            use, drop, st, base_loss, _ = rule.select(states, weights, base_loss,
                                                      [strikes.get(i, 0) for i in live])
            strikes = {i: s for i, s in zip(live, st)}
        else:
            drop = []
        comb = hadar_copies.average(states, [w if u else 0 for w, u in zip(weights, use)])
        for i in live:
            copies[i].load(comb)
        combines += 1
        since = 0
        for j in drop:
            dropped.append(live[j])
        live = [i for n, i in enumerate(live) if n not in drop]
    result.update(steps=step_total(), per_copy=max(c.steps for c in copies), rounds=rounds, combines=combines,
                  dropped=dropped, seconds=time.time() - t0, k=k, seed=seed, combine=combine if k > 1 else "-",
                  round_steps=round_steps)
    if divs:
        result["divergence"] = [round(min(divs), 6), round(sorted(divs)[len(divs) // 2], 6), round(max(divs), 6)]
    return result


# --------------------------------------------------------------- statistics --

def mean_ci(xs, level=0.95, boot=10000, seed=0):
    """Mean, Student-t interval and percentile-bootstrap interval of xs."""
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, (m, m), (m, m)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    try:
        from scipy.stats import t as student
        q = student.ppf(0.5 + level / 2, n - 1)
    except ImportError:
        q = 1.96
    h = q * sd / math.sqrt(n)
    rnd = random.Random(seed)
    means = sorted(sum(rnd.choice(xs) for _ in range(n)) / n for _ in range(boot))
    lo, hi = means[int((1 - level) / 2 * boot)], means[int((1 + level) / 2 * boot) - 1]
    return m, (m - h, m + h), (lo, hi)


def fmt_ci(xs):
    m, t, b = mean_ci(xs)
    return "%.2f" % m, "%.2f-%.2f" % t, "%.2f-%.2f" % b


def print_table(runs, target, seconds=None):
    """The Markdown table of runs: one row per (round steps, K, combine)."""
    solo = [r for r in runs if r["k"] == 1]
    print("target held-out loss %.2f; job alone: %.0f steps (mean of %d seeds, %.0f-%.0f)%s"
          % (target, sum(r["steps"] for r in solo) / len(solo), len(solo), min(r["steps"] for r in solo),
             max(r["steps"] for r in solo), "; %.0f s in all" % seconds if seconds is not None else ""))
    print()
    print("| K | round steps | combine | steps per copy | combines | efficiency | 95% t-interval | "
          "95% bootstrap | dropped | not reached |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    keys = []
    for r in runs:
        key = (r["round_steps"], r["k"], r["combine"])
        if r["k"] > 1 and key not in keys:
            keys.append(key)
    for h, k, mode in sorted(keys, key=lambda x: (x[0], x[1])):
        rs = [r for r in runs if (r["round_steps"], r["k"], r["combine"]) == (h, k, mode)]
        ok = [r for r in rs if r.get("efficiency") is not None]
        if not ok:
            print("| %d | %d | %s | - | - | - | - | - | - | %d |" % (k, h, mode, len(rs)))
            continue
        m, t, b = fmt_ci([r["efficiency"] for r in ok])
        print("| %d | %d | %s | %.0f | %.1f | %s | %s | %s | %d | %d |" % (
            k, h, mode, sum(r["per_copy"] for r in ok) / len(ok), sum(r["combines"] for r in ok) / len(ok),
            m, t, b, sum(len(r["dropped"]) for r in ok), len(rs) - len(ok)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__[__doc__.index("Examples"):],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", default="2,4", help="comma-separated K values (default 2,4)")
    ap.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 (default 10)")
    ap.add_argument("--round-steps", default="100",
                    help="steps of a copy between combine points (hadar's round x the copy's rate); "
                         "comma-separated to sweep (default 100)")
    ap.add_argument("--target-loss", type=float, default=1.10, help="held-out cross-entropy to reach (default 1.10)")
    ap.add_argument("--eval-every", type=int, default=25, help="check the copies' average every N steps (default 25)")
    ap.add_argument("--max-steps", type=int, default=40000, help="give up after N steps of one copy (default 40000)")
    ap.add_argument("--combine", default="every:1",
                    help="comma-separated: every:N (combine every N rounds), adaptive (at --threshold), "
                         "adaptive:T (at threshold T) (default every:1)")
    ap.add_argument("--threshold", type=float, default=0.02,
                    help="adaptive: divergence that triggers a combine (default 0.02)")
    ap.add_argument("--max-interval", type=int, default=8, help="adaptive: combine at least every N rounds")
    ap.add_argument("--drop-below", type=float, default=0.0,
                    help="adaptive: a copy's cost, as a fraction of the round's improvement (default 0)")
    ap.add_argument("--patience", type=int, default=2, help="adaptive: combines left out before a copy is dropped")
    ap.add_argument("--speeds", help="comma-separated relative speeds of the K copies (default: all equal)")
    ap.add_argument("--bad-copy", action="store_true", help="the last copy trains on shuffled labels")
    ap.add_argument("--samples", type=int, default=100000, help="samples of the synthetic task (default 100000)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--json", action="store_true", help="print every run as JSON")
    ap.add_argument("--table", metavar="FILE", help="print the table of a --json output (run nothing)")
    args = ap.parse_args(argv)
    if args.table:
        with open(args.table) as f:
            saved = json.load(f)
        print_table(saved["runs"], saved["args"]["target_loss"])
        return 0

    import torch
    torch.set_num_threads(1)
    ks = [int(k) for k in args.copies.split(",") if k]
    hs = [int(h) for h in args.round_steps.split(",") if h]
    modes = [m for m in args.combine.split(",") if m]
    task = Task(samples=args.samples, lr=args.lr, batch=args.batch)
    kw = dict(target=args.target_loss, eval_every=args.eval_every, max_steps=args.max_steps,
              threshold=args.threshold, max_interval=args.max_interval, drop_below=args.drop_below,
              patience=args.patience, bad_copy=args.bad_copy)
    runs = []
    t0 = time.time()
    for seed in range(args.seeds):
        solo = run(task, 1, seed, max(hs), "every:1", **kw)
        runs.append(solo)
        for h in hs:
            for k in ks:
                speeds = [float(s) for s in args.speeds.split(",")] if args.speeds else None
                if speeds is not None and len(speeds) != k:
                    ap.error("--speeds needs one value per copy (%d)" % k)
                for mode in modes:
                    r = run(task, k, seed, h, mode, speeds=speeds, **kw)
                    r["efficiency"] = solo["steps"] / r["steps"] if r["reached"] and solo["reached"] else None
                    runs.append(r)
        print("seed %d done (%.0f s)" % (seed, time.time() - t0), file=sys.stderr, flush=True)
    if args.json:
        json.dump({"args": vars(args), "runs": runs}, sys.stdout, indent=1)
        print()
        return 0
    print_table(runs, args.target_loss, time.time() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
