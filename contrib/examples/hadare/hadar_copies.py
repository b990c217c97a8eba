"""hadar_copies: join hadar's HadarE copy protocol from any training script.

HadarE (docs/hadare.md, docs/hadare-slurm.md) runs one job as several *copies*: the
tasks of one Slurm job array (``sbatch --array=0-3 --comment="hadar copies=4 ..."``),
each placed by hadar-slurmd on a different node and GPU type. The copies train in
*rounds*: in each round every copy trains its share of the job's steps from the same
model, then the copies' checkpoints are combined (parameters averaged, weighted by the
steps each copy did) and every copy goes on from the combined model.

This module is the reference implementation of the copy side of that protocol. It
needs only the Python standard library, plus ``torch`` for the default checkpoint
functions (``save``/``load``/``average`` may be replaced). Typical use::

    import hadar_copies

    cp = hadar_copies.Copies(total_steps=3000)          # reads Slurm's env and the job's tag
    model, opt = build_model(seed=0)                     # same initial model in every copy
    while True:
        rnd = cp.next_round()                            # blocks until this copy has work
        if rnd is None:
            break                                        # the job has done all its steps
        base = rnd.load()                                # combined model of the last round
        if base is not None:
            model.load_state_dict(base["model"]); opt.load_state_dict(base["optim"])
        done = train(model, opt, rnd.steps, stop=cp.stop_requested)
        cp.finish_round(rnd, {"model": model.state_dict(), "optim": opt.state_dict()}, done)
        if cp.stop_requested():
            break                                        # preempted: the work done is kept
    final = cp.final_state()                             # the combined model

Environment (see Copies.env): HADAR_JOB, HADAR_COPY_INDEX, HADAR_COPY_COUNT,
HADAR_ROUND, HADAR_STEPS and HADAR_SYNC_DIR are set in os.environ each round, for
programs the script starts. ``python3 hadar_copies.py env`` prints the static ones as
shell exports.

A job that is not a copies job (no job array, or no copies=K >= 2 in its tag) runs in
*solo* mode through the same calls: its rounds are checkpoint intervals, so it resumes
from its last checkpoint when Slurm restarts it (hadar migrates a job by requeueing it).

File layout in HADAR_SYNC_DIR (<spool>/copies/<job>/; every file is written to a
temporary name and renamed, so a reader never sees half a file):

    plan.json               hadar-slurmd, every round: the copies it runs, their GPU
                            types, rates and step shares (the bridge's plan)
    alive/copy-<i>.json     copy i, every few seconds: heartbeat (round, phase, rate)
    round-<N>/plan.json     the copy that opens round N, once (link: first one wins):
                            the bridge's plan frozen for this round: members and shares,
                            base checkpoint, steps done before the round
    round-<N>/copy-<i>.pt   copy i: its model after its share
    round-<N>/done-<i>.json copy i, after copy-<i>.pt: steps it did this round
    round-<N>/members.json  the copy that closes the round, once (link): whose work
                            is combined, with which weights
    round-<N>/combined.pt   weighted average of the members' checkpoints
    round-<N>/combined.json written after combined.pt: the round's commit point
                            (steps done in total, finished or not)
    result.json             the training script's final result (optional)

Adaptive combining (Copies(adaptive=AdaptiveCombining(...)), docs/hadare.md): each
done-<i>.json also carries a sketch of the copy's model; a round whose copies have not
drifted apart is closed without a combine (combined.json has "combined": false and
"local": each copy's own copy-<i>.pt, which it goes on from, kept until the next round
closes); a combine may leave out copies whose work does not lower the validation loss
("used", "lost_steps") and drop a copy from the job ("dropped", "dropped_all": its
next_round returns None and Copies.dropped is True).

Failure: a copy that dies stops heartbeating; the others stop waiting for it after
``stale_after`` seconds (or as soon as hadar's plan no longer lists it) and combine
without it. A copy that is stopped with SIGTERM (scancel, hadar's requeue) leaves the
work it did in the round. Completed rounds are never lost: every copy, and a
replacement copy, starts from the last combined checkpoint.
"""

import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

DEFAULT_SPOOL = "/var/spool/hadar"
PROGRESS_SUBDIR = "progress"
COPIES_SUBDIR = "copies"
_ROUND_DIR = re.compile(r"^round-([0-9]{1,9})$")


# --------------------------------------------------------------------------- files --

def _tmp_name(path):
    d, b = os.path.split(path)
    return os.path.join(d, ".%s.tmp-%d-%08x" % (b, os.getpid(), random.getrandbits(32)))


def _write_tmp(path, data):
    tmp = _tmp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def write_json(path, obj):
    """Write obj as JSON to path atomically (temporary file + rename)."""
    tmp = _write_tmp(path, (json.dumps(obj, sort_keys=True) + "\n").encode())
    os.replace(tmp, path)


def create_json_once(path, obj):
    """Create path with obj as JSON unless it exists; True if this call created it.

    The file appears whole (temporary file + hard link); of several writers
    exactly one wins."""
    tmp = _write_tmp(path, (json.dumps(obj, sort_keys=True) + "\n").encode())
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        _unlink(tmp)


def read_json(path):
    """The JSON object in path, or None if it is missing or unreadable."""
    try:
        with open(path, "rb") as f:
            v = json.loads(f.read(1 << 20))
        return v if isinstance(v, dict) else None
    except (OSError, ValueError):
        return None


def _now_iso():
    return datetime.now(timezone.utc).isoformat()


def report_progress(spool, job, steps):
    """Report the job's total steps done to hadar-slurmd: what `hadar report --job
    JOB --steps N` writes (<spool>/progress/<job>.json, atomically). Errors are
    ignored (progress is advisory)."""
    try:
        d = os.path.join(spool, PROGRESS_SUBDIR)
        os.makedirs(d, exist_ok=True)
        write_json(os.path.join(d, "%s.json" % job),
                   {"job_id": str(job), "steps": float(steps), "at": _now_iso()})
    except OSError:
        pass


# ------------------------------------------------------------------ checkpoints --

def torch_save(state, path):
    import torch
    tmp = _tmp_name(path)
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def torch_load(path):
    import torch
    return torch.load(path, map_location="cpu")


def average(states, weights):
    """Weighted average of checkpoints of the same structure (nested dicts, lists
    and tuples of tensors): floating-point tensors are averaged with the weights;
    every other value (integer tensors, numbers, strings) is taken from the state
    with the largest weight."""
    total = float(sum(weights))
    if not states or total <= 0:
        raise ValueError("average: no state with a positive weight")
    lead = max(range(len(states)), key=lambda i: weights[i])

    def avg(vals):
        v0 = vals[lead]
        if isinstance(v0, dict):
            return type(v0)((k, avg([v[k] for v in vals])) for k in v0)
        if isinstance(v0, (list, tuple)):
            out = [avg([v[i] for v in vals]) for i in range(len(v0))]
            return type(v0)(out) if isinstance(v0, tuple) else out
        if hasattr(v0, "is_floating_point") and v0.is_floating_point():
            acc = None
            for v, w in zip(vals, weights):
                if w <= 0:
                    continue
                t = v.detach().to(dtype=v0.dtype) * (w / total)
                acc = t if acc is None else acc + t
            return acc
        return v0

    return avg(states)


# ----------------------------------------------------------- adaptive combining --

def _model_tensors(state):
    """The floating-point tensors of a checkpoint's model, flattened, in a fixed
    order (dict keys sorted): state["model"] when the checkpoint has one (the
    layout of train_digits.py), else the whole state."""
    root = state.get("model", state) if isinstance(state, dict) else state
    out = []

    def walk(v):
        if isinstance(v, dict):
            for k in sorted(v, key=str):
                walk(v[k])
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif hasattr(v, "is_floating_point") and v.is_floating_point():
            out.append(v.detach().reshape(-1))

    walk(root)
    return out


def sketch(state, size=4096, seed=0):
    """A fixed sample of ``size`` coordinates of a checkpoint's model parameters
    (all of them if the model has fewer), as a list of floats. The positions
    depend only on the seed and the model's shape, so every copy of one job
    samples the same coordinates, and divergence() of the copies' sketches
    estimates that of their full parameters: what a copy reports each round
    (in done-<i>.json) instead of its checkpoint being read."""
    import bisect
    import torch
    ts = _model_tensors(state)
    n = sum(t.numel() for t in ts)
    if n == 0:
        return []
    if n <= size:
        return torch.cat([t.double() for t in ts]).tolist()
    g = torch.Generator().manual_seed(int(seed))
    idx = sorted(torch.randint(0, n, (int(size),), generator=g).tolist())
    out, off = [], 0
    for t in ts:
        lo, hi = bisect.bisect_left(idx, off), bisect.bisect_left(idx, off + t.numel())
        if hi > lo:
            out.extend(t[torch.tensor(idx[lo:hi]) - off].double().tolist())
        off += t.numel()
    return out


def divergence(sketches, weights):
    """How far the copies have drifted apart: the weighted mean squared distance
    of the copies' parameters from their weighted average, over the squared norm
    of that average. 0 when the copies agree; scale-free. Copies with weight 0
    do not count; fewer than two copies give 0."""
    pairs = [(s, float(w)) for s, w in zip(sketches, weights) if w > 0 and s]
    if len(pairs) < 2:
        return 0.0
    total = sum(w for _, w in pairs)
    dim = min(len(s) for s, _ in pairs)
    mean = [sum(s[j] * w for s, w in pairs) / total for j in range(dim)]
    spread = sum(w * sum((s[j] - mean[j]) ** 2 for j in range(dim)) for s, w in pairs) / total
    norm = sum(m * m for m in mean)
    if norm <= 0:
        return math.inf if spread > 0 else 0.0
    return spread / norm


class AdaptiveCombining:
    """Eiffel's idea for HadarE copies: combine when the copies have drifted
    apart, not every round, and drop a copy whose work does not pay for it
    (docs/hadare.md, "Adaptive combining").

    Combining: after every round each copy reports a sketch() of its model; the
    round's closer combines (averages the checkpoints, and every copy goes on
    from the average) only when divergence() of the sketches is at least
    ``threshold``, or ``max_interval`` rounds have passed since the last combine,
    or the job is done, or the set of copies changed. Otherwise each copy goes on
    from its own model, and the round costs no checkpoint reads and no combined
    checkpoint. So the interval k between combines adapts to how fast the copies
    drift: k = 1 (every round) while they drift apart within a round.

    Dropping (only with ``evaluate``, a function of a checkpoint that returns a
    held-out loss, lower is better): at each combine a copy's contribution is
    the leave-one-out gain evaluate(average without it) - evaluate(average of
    all), and its cost ``drop_below`` x the round's improvement (evaluate of
    the previous combined model minus evaluate of this one; with no previous
    loss, 0). A copy whose contribution is below its cost has its work left out
    of the average; one left out at ``patience`` combines in a row is dropped
    from the job (it stops, its GPUs go back to hadar), while at least
    ``min_copies`` copies remain.
    """

    def __init__(self, threshold=0.02, max_interval=8, evaluate=None, drop_below=0.0, patience=2, min_copies=1,
                 sketch_size=4096, seed=0):
        if threshold < 0 or max_interval < 1 or patience < 1 or min_copies < 1:
            raise ValueError("AdaptiveCombining: threshold >= 0, max_interval >= 1, patience >= 1, min_copies >= 1")
        self.threshold = float(threshold)
        self.max_interval = int(max_interval)
        self.evaluate = evaluate
        self.drop_below = float(drop_below)
        self.patience = int(patience)
        self.min_copies = int(min_copies)
        self.sketch_size = int(sketch_size)
        self.seed = int(seed)

    def sketch(self, state):
        return sketch(state, self.sketch_size, self.seed)

    def due(self, since, sketches, weights, force=False):
        """(combine now?, divergence) after a round: ``since`` is the number of
        rounds trained since the last combine, this one included."""
        d = divergence(sketches, weights)
        return bool(force or since >= self.max_interval or d >= self.threshold), d

    def select(self, states, weights, base_loss=None, strikes=None, combine=average):
        """Which copies' work goes into this combine, and which copies leave.

        Returns (use, drop, strikes, loss, gains): use[i] is False for a copy
        left out of the average; drop lists the copies (indices) to drop from
        the job; strikes[i] counts the combines in a row copy i was left out
        of; loss is evaluate() of the average of the used copies; gains[i] is
        copy i's leave-one-out gain (None without evaluate)."""
        n = len(states)
        strikes = list(strikes) if strikes is not None else [0] * n
        use = [w > 0 for w in weights]
        if self.evaluate is None or sum(use) < 2:
            loss = self.evaluate(combine(states, weights)) if self.evaluate is not None else None
            return use, [], [0 if u else s for u, s in zip(use, strikes)], loss, [None] * n
        full = self.evaluate(combine(states, weights))
        gains = [None] * n
        for i in range(n):
            if not use[i]:
                continue
            w = [0.0 if j == i else weights[j] for j in range(n)]
            gains[i] = self.evaluate(combine(states, w)) - full
        improvement = (base_loss - full) if base_loss is not None else 0.0
        cost = self.drop_below * max(0.0, improvement)
        out = [u and gains[i] >= cost for i, u in enumerate(use)]
        if not any(out):
            out = use  # never leave every copy out: the round would be lost
        loss = full
        if out != use:
            loss = self.evaluate(combine(states, [w if u else 0.0 for w, u in zip(weights, out)]))
        strikes = [0 if o else s + 1 for o, s in zip(out, strikes)]
        drop = []
        alive = n
        for i in sorted(range(n), key=lambda i: (-strikes[i], gains[i] if gains[i] is not None else 0.0)):
            if strikes[i] >= self.patience and alive > self.min_copies:
                drop.append(i)
                alive -= 1
        return out, sorted(drop), strikes, loss, gains


# ------------------------------------------------------------------------ slurm --

def read_tag(job_id=None):
    """The hadar tag of this job (its comment) as a dict of key=value words, read
    with squeue; {} outside Slurm or for an untagged job. HADAR_TAG overrides."""
    text = os.environ.get("HADAR_TAG")
    if text is None:
        job_id = job_id or os.environ.get("SLURM_JOB_ID")
        if not job_id:
            return {}
        try:
            text = subprocess.run(["squeue", "-h", "-j", str(job_id), "-o", "%k"], capture_output=True,
                                  text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return {}
    if text != "hadar" and not text.startswith("hadar "):
        return {}
    out = {}
    for m in re.finditer(r'(\w+)=("([^"]*)"|\S+)', text[len("hadar"):]):
        out[m.group(1)] = m.group(3) if m.group(3) is not None else m.group(2)
    return out


def node_gpu_type(node=None):
    """The GPU type of this node's GRES (the first gpu:TYPE), as scontrol shows it."""
    node = node or os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    try:
        out = subprocess.run(["scontrol", "-o", "show", "node", node], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"\bGres=gpu:([^:,\s(]+)", out)
    return m.group(1) if m else None


def allocated_gpus():
    """GPUs Slurm gave this job on this node (CUDA_VISIBLE_DEVICES), at least 1."""
    v = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return max(1, len([x for x in v.split(",") if x.strip()]))


# ----------------------------------------------------------------------- rounds --

def identity(tag=None, spool=None, sync_dir=None):
    """(spool, job, copy index, copy mode, sync dir) of this process, from
    Slurm's environment and the job's tag: a task of a job array whose tag
    says copies=K (K >= 2) is copy <task id> of job <array id>; any other job
    is copy 0 of itself (solo mode)."""
    env = os.environ
    tag = read_tag() if tag is None else tag
    spool = spool or env.get("HADAR_SPOOL") or DEFAULT_SPOOL
    array, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    try:
        allowed = int(env.get("HADAR_COPIES") or tag.get("copies") or 1)
    except ValueError:
        allowed = 1
    copy_mode = bool(array and task and task.isdigit() and allowed >= 2)
    if copy_mode:
        job, index = array, int(task)
    else:
        job, index = env.get("SLURM_JOB_ID") or str(os.getpid()), 0
        if array and task and task.isdigit():
            job = "%s_%s" % (array, task)
    sync_dir = sync_dir or env.get("HADAR_SYNC_DIR") or os.path.join(spool, COPIES_SUBDIR, str(job))
    return spool, job, index, copy_mode, sync_dir


class Round:
    """One round of one copy: train ``steps`` steps from ``base``, then finish_round."""

    def __init__(self, copies, number, plan, steps):
        self._copies = copies
        self.round = number
        self.plan = plan
        self.index = copies.index
        self.count = len(plan.get("members", {}))
        self.steps = steps
        self.base = plan.get("base")
        self.steps_done = float(plan.get("steps_done", 0))
        self.total_steps = float(plan.get("total_steps", copies.total_steps))
        self.started = time.time()

    def load(self):
        """The checkpoint this round starts from (the last combined model), or None
        for the first round of a job."""
        own = (self.plan.get("local") or {}).get(str(self.index))
        if own:
            # The last round was not combined (adaptive combining): this copy
            # goes on from its own model.
            try:
                return self._copies.load(os.path.join(self._copies.sync_dir, own))
            except FileNotFoundError:
                pass
        if not self.base:
            return None
        try:
            return self._copies.load(os.path.join(self._copies.sync_dir, self.base))
        except FileNotFoundError:
            # The round closed (and its base was pruned) while this copy
            # joined: its work will not count; start from the newest model.
            return self._copies.final_state()

    def __repr__(self):
        return "Round(round=%d index=%s count=%d steps=%d base=%s)" % (
            self.round, self.index, self.count, self.steps, self.base)


class Copies:
    """One copy's side of the HadarE copy protocol (see the module doc).

    total_steps: the job's steps (default: steps= of the tag).
    rate: this copy's expected steps/s (shares when hadar's plan is missing).
    spool: hadar-slurmd's spool_dir (HADAR_SPOOL, default /var/spool/hadar).
    sync_dir: HADAR_SYNC_DIR (default <spool>/copies/<job>).
    save/load/combine: checkpoint functions (default torch.save, torch.load, average).
    barrier_timeout: seconds to wait, after the first copy finished a round, for the
      others (default: 2 rounds, at least 60).
    stale_after: a copy whose heartbeat is older is taken for dead (default 15).
    join_grace: a member of a round that never started is waited for this long
      after the round opened (default 60).
    solo_round_steps: checkpoint interval in solo mode (default: 30 s at rate, or 500).
    adaptive: an AdaptiveCombining to combine only when the copies have drifted
      apart and drop copies that do not help (default None: combine every round).
      Then ``dropped`` is True once next_round returned None because this copy
      was dropped (the job goes on without it).
    """

    def __init__(self, total_steps=None, rate=None, spool=None, sync_dir=None, save=torch_save, load=torch_load,
                 combine=average, barrier_timeout=None, stale_after=15.0, join_grace=60.0, heartbeat=2.0,
                 plan_wait=120.0, solo_round_steps=None, min_join_fraction=0.25, poll=0.2, log=None,
                 handle_sigterm=True, adaptive=None):
        self.tag = read_tag()
        env = os.environ
        self.spool, self.job, self.index, self.copy_mode, self.sync_dir = identity(self.tag, spool, sync_dir)
        if total_steps is None:
            total_steps = float(env.get("HADAR_TOTAL_STEPS") or self.tag.get("steps") or 0)
        if total_steps <= 0:
            raise ValueError("hadar_copies: no total steps (pass total_steps= or tag steps=)")
        self.total_steps = int(math.ceil(total_steps))
        self.rate = float(rate) if rate else None
        self.save, self.load, self.combine = save, load, combine
        self.adaptive = adaptive
        self.dropped = False
        self.barrier_timeout = barrier_timeout
        self.stale_after = stale_after
        self.join_grace = join_grace
        self.heartbeat_every = heartbeat
        self.plan_wait = plan_wait
        self.solo_round_steps = solo_round_steps
        self.min_join_fraction = min_join_fraction
        self.poll = poll
        self.node = env.get("SLURMD_NODENAME") or socket.gethostname()
        self._log = log or (lambda msg: print("hadar_copies[%s/%s]: %s" % (self.job, self.index, msg),
                                              file=sys.stderr, flush=True))
        self._stop = threading.Event()
        self._phase = {"round": 0, "phase": "start"}
        self._hb_lock = threading.Lock()
        self._last_round = 0
        self._current = None
        self._make_dirs()
        if handle_sigterm and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_sigterm)
        self._heartbeat()
        self._hb_thread = None
        if self.copy_mode:
            self._hb_thread = threading.Thread(target=self._heartbeat_loop, daemon=True)
            self._hb_thread.start()
        self._export(None)

    # ---- public API ----

    def env(self):
        """The HADAR_* values of this copy (the round's, once one started)."""
        r = self._current
        return {
            "HADAR_JOB": str(self.job),
            "HADAR_COPY_INDEX": str(self.index),
            "HADAR_COPY_COUNT": str(r.count if r else 1),
            "HADAR_ROUND": str(r.round if r else 0),
            "HADAR_STEPS": str(r.steps if r else 0),
            "HADAR_SYNC_DIR": self.sync_dir,
        }

    def stop_requested(self):
        """True once SIGTERM arrived (scancel, or hadar requeues this copy)."""
        return self._stop.is_set()

    def next_round(self):
        """Block until this copy has a round to train; None when the job is done
        (or the copy was asked to stop)."""
        waited_since = time.time()
        warned = False
        while not self._stop.is_set():
            n = self._latest_round()
            if n == 0:
                plan = self._open_round(1, None, 0.0, waited_since)
                if plan is None:
                    if not warned and time.time() - waited_since > 10:
                        self._log("waiting for hadar's plan (%s)" % os.path.join(self.sync_dir, "plan.json"))
                        warned = True
                    self._sleep()
                continue
            rdir = self._round_dir(n)
            comb = read_json(os.path.join(rdir, "combined.json"))
            if comb is not None:
                # Dropped first: a dropped copy that looks only after the job
                # went on (and maybe finished) without it was still dropped.
                if str(self.index) in comb.get("dropped_all", []):
                    self.dropped = True
                    self._set_phase(n, "left")
                    self._log("dropped from the job at round %d: its work did not pay for it" % n)
                    return None
                if comb.get("finished") or float(comb.get("steps_done", 0)) >= self.total_steps:
                    self._set_phase(n, "finished")
                    self._cancel_spares()
                    return None
                self._open_round(n + 1, comb.get("checkpoint"), float(comb.get("steps_done", 0)), waited_since,
                                 comb)
                self._set_phase(n + 1, "ready")
                self._sleep()
                continue
            plan = read_json(os.path.join(rdir, "plan.json"))
            if plan is None:
                self._sleep()
                continue
            me = plan.get("members", {}).get(str(self.index))
            joinable = (me is not None and n > self._last_round
                        and not os.path.exists(os.path.join(rdir, "members.json"))
                        and not os.path.exists(os.path.join(rdir, "done-%d.json" % self.index)))
            if joinable:
                steps = int(me.get("steps", 0))
                if self.copy_mode and len(plan["members"]) > 1:
                    # Joining late (startup): train what fits in the rest of the
                    # round, so that the copies still finish together.
                    secs = float(plan.get("round_seconds") or 0)
                    late = time.time() - float(plan.get("created_at", time.time()))
                    if secs > 0 and late > max(2.0, 0.1 * secs):
                        frac = 1.0 - late / secs
                        if frac < self.min_join_fraction:
                            joinable = False
                        else:
                            steps = max(1, int(steps * frac))
                if joinable and steps > 0:
                    self._last_round = n
                    self._set_phase(n, "train")
                    rnd = Round(self, n, plan, steps)
                    self._current = rnd
                    self._export(rnd)
                    return rnd
            # Not (or no longer) in this round: wait for it to close, helping
            # to close it if its members are gone.
            if n > self._last_round:
                self._set_phase(n, "skip")
            self._try_close(n, plan)
            self._sleep()
        return None

    def finish_round(self, rnd, state, steps):
        """Save this copy's checkpoint after ``steps`` steps of round ``rnd``, wait
        for the round to be combined (not when stopping) and return its
        combined.json record (None when stopping)."""
        rdir = self._round_dir(rnd.round)
        steps = int(max(0, steps))
        done = {"index": self.index, "steps": steps, "node": self.node, "at": time.time(),
                "stopped": self._stop.is_set()}
        if steps > 0:
            self.save(state, os.path.join(rdir, "copy-%d.pt" % self.index))
            if self.adaptive is not None:
                done["sketch"] = self.adaptive.sketch(state)
        write_json(os.path.join(rdir, "done-%d.json" % self.index), done)
        if self._stop.is_set():
            self._set_phase(rnd.round, "left")
            self._log("stopping: left %d steps of round %d to be combined" % (steps, rnd.round))
            self._try_close(rnd.round, rnd.plan)  # the last one out (or a solo job) commits it
            return None
        self._set_phase(rnd.round, "barrier")
        while True:
            if self._try_close(rnd.round, rnd.plan):
                comb = read_json(os.path.join(rdir, "combined.json"))
                if comb is not None:
                    if str(self.index) not in comb.get("members", {}):
                        self._log("round %d was combined without this copy's work" % rnd.round)
                    return comb
            if self._stop.is_set():
                self._set_phase(rnd.round, "left")
                return None
            self._sleep()

    def final_state(self):
        """The last combined checkpoint (None if no round was combined)."""
        comb, _ = self.latest()
        if comb is None or not comb.get("checkpoint"):
            return None
        return self.load(os.path.join(self.sync_dir, comb["checkpoint"]))

    def latest(self):
        """(combined.json record, round) of the last combined round, or (None, 0)."""
        for n in sorted(self._rounds(), reverse=True):
            comb = read_json(os.path.join(self._round_dir(n), "combined.json"))
            if comb is not None:
                return comb, n
        return None, 0

    def write_result(self, result):
        """Record the job's final result in <sync>/result.json."""
        write_json(os.path.join(self.sync_dir, "result.json"), dict(result, job=str(self.job)))

    def close(self):
        """Mark this copy as gone (heartbeat 'left') and stop heartbeating."""
        self._set_phase(self._phase["round"], "left")
        self._stop_hb = True

    # ---- rounds ----

    def _round_dir(self, n):
        return os.path.join(self.sync_dir, "round-%d" % n)

    def _rounds(self):
        try:
            names = os.listdir(self.sync_dir)
        except OSError:
            return []
        return [int(m.group(1)) for m in map(_ROUND_DIR.match, names) if m]

    def _latest_round(self):
        ns = [n for n in self._rounds() if os.path.exists(os.path.join(self._round_dir(n), "plan.json"))]
        return max(ns) if ns else 0

    def _bridge_plan(self):
        """hadar-slurmd's plan.json if it is fresh (written within 3 rounds, at
        least 2 minutes)."""
        bp = read_json(os.path.join(self.sync_dir, "plan.json"))
        if bp is None:
            return None
        try:
            age = time.time() - float(bp.get("written_unix", 0))
            secs = float(bp.get("round_seconds") or 0)
        except (TypeError, ValueError):
            return None
        if age > max(3 * secs, 120):
            return None
        return bp

    def _open_round(self, n, base, steps_done, waited_since, prev=None):
        """Write round-n/plan.json unless it exists (first writer wins); return
        the round's plan, or None when there is no plan to make yet. prev is
        the last round's combined.json (what adaptive combining carries on)."""
        rdir = self._round_dir(n)
        path = os.path.join(rdir, "plan.json")
        plan = read_json(path)
        if plan is not None:
            return plan
        remaining = self.total_steps - steps_done
        if remaining <= 0:
            return None
        now = time.time()
        members, secs, gen = {}, None, None
        prev = prev or {}
        dropped = set(str(i) for i in prev.get("dropped_all", []))
        if not self.copy_mode:
            steps = self.solo_round_steps or (int(self.rate * 30) if self.rate else 500)
            if remaining - steps < 0.25 * steps:
                steps = remaining  # no tiny last round
            members = {str(self.index): {"steps": min(remaining, steps), "node": self.node, "rate": self.rate}}
            source = "solo"
        else:
            bp = self._bridge_plan()
            if bp is not None:
                source, secs, gen = "hadar", float(bp.get("round_seconds") or 0), bp.get("generation")
                for c in bp.get("copies", []):
                    i = str(c.get("index"))
                    if self._dead(i) or i in dropped:
                        continue
                    members[i] = {"steps": float(c.get("steps", 0)), "rate": float(c.get("rate", 0)),
                                  "node": c.get("node"), "gpu_type": c.get("gpu_type")}
            elif now - waited_since > self.plan_wait:
                # No plan from hadar (it is not running: Slurm runs the tasks):
                # the copies that are alive, shares by their own rates.
                source, secs = "alive", 30.0
                for i, hb in self._heartbeats().items():
                    if i in dropped:
                        continue
                    if now - float(hb.get("at", 0)) <= self.stale_after and hb.get("phase") not in ("left", "finished"):
                        r = float(hb.get("rate") or 1.0)
                        members[i] = {"steps": r * secs, "rate": r, "node": hb.get("node")}
            else:
                return None
            if not members:
                return None
            total = sum(m["steps"] for m in members.values())
            want = sum(m.get("rate", 0) * secs for m in members.values()) if secs else 0
            target = min(remaining, max(total, want))
            if remaining - target < 0.25 * target:
                target = remaining  # no tiny last round
            weights = {i: (m["steps"] if total > 0 else 1.0) for i, m in members.items()}
            for i, s in _split(int(math.ceil(target)), weights).items():
                members[i]["steps"] = s
            members = {i: m for i, m in members.items() if m["steps"] > 0}
        plan = {"job": str(self.job), "round": n, "base": base, "steps_done": steps_done,
                "total_steps": self.total_steps, "round_seconds": secs, "members": members,
                "created_at": now, "created_by": self.index, "source": source, "bridge_generation": gen}
        if self.adaptive is not None:
            # Adaptive combining: the copies' own models when the last round was
            # not combined, rounds since the last combine, the last combined
            # model's loss, the drop rule's counts, and the dropped copies.
            plan.update(local=prev.get("local") or {}, since=int(prev.get("since", 0)), loss=prev.get("loss"),
                        pending=prev.get("pending") or {}, strikes=prev.get("strikes") or {},
                        dropped_all=sorted(dropped, key=int))
        os.makedirs(rdir, exist_ok=True)
        if create_json_once(path, plan):
            self._log("opened round %d: %s" % (n, ", ".join("copy %s: %d steps" % (i, m["steps"])
                                                          for i, m in sorted(members.items()))))
        return read_json(path)

    def _heartbeats(self):
        out = {}
        d = os.path.join(self.sync_dir, "alive")
        try:
            names = os.listdir(d)
        except OSError:
            return out
        for name in names:
            m = re.match(r"^copy-([0-9]+)\.json$", name)
            if m:
                hb = read_json(os.path.join(d, name))
                if hb is not None:
                    out[m.group(1)] = hb
        return out

    def _dead(self, i):
        """Copy i has a heartbeat that stopped or says it left."""
        hb = read_json(os.path.join(self.sync_dir, "alive", "copy-%s.json" % i))
        if hb is None:
            return False
        return time.time() - float(hb.get("at", 0)) > self.stale_after or hb.get("phase") in ("left", "finished")

    def _gone(self, i, n, plan):
        """Member i of round n will not finish it: dead (heartbeat stopped),
        stopped, skipped the round, dropped by hadar, or not started within
        join_grace of the round's opening."""
        now = time.time()
        late = now - float(plan.get("created_at", now)) > self.join_grace
        hb = read_json(os.path.join(self.sync_dir, "alive", "copy-%s.json" % i))
        if hb is None:
            return late or self._dropped(i, plan)
        if now - float(hb.get("at", 0)) > self.stale_after:
            return True
        r, phase = int(hb.get("round", 0)), hb.get("phase")
        if phase in ("left", "finished"):
            return True
        if r > n or (r == n and phase == "skip"):
            return True
        if r == n:
            return False  # training or done
        return late or self._dropped(i, plan)

    def _dropped(self, i, plan):
        """hadar's plan, newer than the round's, no longer lists copy i."""
        bp = read_json(os.path.join(self.sync_dir, "plan.json"))
        gen = plan.get("bridge_generation")
        if bp is None or gen is None or int(bp.get("generation", 0)) <= int(gen):
            return False
        return all(str(c.get("index")) != str(i) for c in bp.get("copies", []))

    def _try_close(self, n, plan):
        """Close round n if it can be: every member done or gone, or the barrier
        timed out. Returns True once round-n/combined.json exists."""
        rdir = self._round_dir(n)
        if os.path.exists(os.path.join(rdir, "combined.json")):
            return True
        mpath = os.path.join(rdir, "members.json")
        m = read_json(mpath)
        mine = False
        if m is None:
            members = plan.get("members", {})
            done, first = {}, None
            for i in members:
                d = read_json(os.path.join(rdir, "done-%s.json" % i))
                if d is not None:
                    done[i] = int(d.get("steps", 0))
                    at = float(d.get("at", 0))
                    first = at if first is None else min(first, at)
            missing = [i for i in members if i not in done]
            timeout = self.barrier_timeout
            if timeout is None:
                timeout = max(60.0, 2 * float(plan.get("round_seconds") or 0))
            close = all(self._gone(i, n, plan) for i in missing)
            if not close and first is not None and time.time() - first > timeout:
                self._log("round %d: gave up waiting for copies %s" % (n, ", ".join(missing)))
                close = True
            if not close:
                return False
            mine = create_json_once(mpath, {"round": n, "members": done, "closed_by": self.index, "at": time.time()})
            m = read_json(mpath)
            if m is None:
                return False
        if mine or time.time() - float(m.get("at", 0)) > 30:
            # The closer combines; anyone takes over if it died meanwhile (the
            # combine is deterministic, so two combiners write the same files).
            self._combine(n, plan, m)
        return os.path.exists(os.path.join(rdir, "combined.json"))

    def _combine(self, n, plan, m):
        rdir = self._round_dir(n)
        if os.path.exists(os.path.join(rdir, "combined.json")):
            return  # someone else did
        members = {i: int(s) for i, s in m.get("members", {}).items() if int(s) > 0}
        order = sorted(members, key=int)
        steps = sum(members.values())
        if self.adaptive is not None and self.copy_mode:
            self._combine_adaptive(n, plan, members, order)
            return
        ckpt = plan.get("base")
        if order:
            states = self._load_copies(n, order)
            if states is None:
                return
            weights = [members[i] for i in order]
            if len(states) == 1:
                combined = states[0]
            else:
                combined = self.combine(states, weights)
            ckpt = "round-%d/combined.pt" % n
            self.save(combined, os.path.join(self.sync_dir, ckpt))
        done = float(plan.get("steps_done", 0)) + steps
        rec = {"round": n, "checkpoint": ckpt, "steps_done": done, "members": members,
               "finished": done >= self.total_steps, "combined_by": self.index, "at": time.time()}
        write_json(os.path.join(rdir, "combined.json"), rec)
        report_progress(self.spool, self.job, done)
        self._prune(n, [ckpt])
        self._log("round %d combined: %s -> %d/%d steps" % (
            n, ", ".join("copy %s: %d" % (i, members[i]) for i in order) or "no work", done, self.total_steps))

    def _load_copies(self, n, order):
        """The copies' checkpoints of round n, or None if the round was combined
        (and pruned) meanwhile."""
        rdir = self._round_dir(n)
        try:
            return [self.load(os.path.join(rdir, "copy-%s.pt" % i)) for i in order]
        except FileNotFoundError:
            if os.path.exists(os.path.join(rdir, "combined.json")):
                return None
            raise

    def _combine_adaptive(self, n, plan, members, order):
        """Close round n under AdaptiveCombining: either a round without a
        combine (each copy goes on from its own model, combined.json lists them
        under "local"), or a combine of the copies whose work pays (the others'
        left out, and dropped after `patience` combines in a row)."""
        rule = self.adaptive
        rdir = self._round_dir(n)
        since = int(plan.get("since", 0)) + 1
        local_prev = plan.get("local") or {}
        pending = dict(plan.get("pending") or {})  # steps trained since the last combine, per copy
        for i in order:
            pending[i] = pending.get(i, 0) + members[i]
        steps_done = float(plan.get("steps_done", 0)) + sum(members.values())
        weights = [members[i] for i in order]
        sketches = []
        for i in order:
            d = read_json(os.path.join(rdir, "done-%s.json" % i)) or {}
            sketches.append(d.get("sketch") or [])
        changed = bool(local_prev) and set(local_prev) != set(order)
        force = steps_done >= self.total_steps or changed or len(order) < 2 or not all(sketches)
        due, div = rule.due(since, sketches, weights, force)
        base = {"round": n, "steps_done": steps_done, "members": members, "since": since, "divergence": div,
                "strikes": plan.get("strikes") or {}, "dropped_all": plan.get("dropped_all") or [],
                "loss": plan.get("loss"), "combined_by": self.index, "at": time.time()}
        if not due:
            local = {i: "round-%d/copy-%s.pt" % (n, i) for i in order}
            rec = dict(base, checkpoint=plan.get("base"), local=local, pending=pending, combined=False,
                       finished=False)
            write_json(os.path.join(rdir, "combined.json"), rec)
            report_progress(self.spool, self.job, steps_done)
            self._prune(n, [plan.get("base")] + list(local.values()))
            self._log("round %d not combined (divergence %.4g < %.4g, %d rounds since the last combine): %d/%d steps"
                      % (n, div, rule.threshold, since, steps_done, self.total_steps))
            return
        states = self._load_copies(n, order)
        if states is None:
            return
        strikes = base["strikes"]
        use, drop, st, loss, gains = rule.select(states, weights, plan.get("loss"),
                                                 [int(strikes.get(i, 0)) for i in order], self.combine)
        used = [i for i, u in zip(order, use) if u]
        if len(used) == 1:
            combined = states[use.index(True)]
        else:
            combined = self.combine(states, [w if u else 0 for w, u in zip(weights, use)])
        ckpt = "round-%d/combined.pt" % n
        self.save(combined, os.path.join(self.sync_dir, ckpt))
        # Work that is not in the combined model does not count: the copies
        # left out, and copies that trained since the last combine but are
        # not in this round (they died in a round without a combine).
        lost = sum(p for i, p in pending.items() if i not in used)
        steps_done -= lost
        dropped = [order[j] for j in drop]
        rec = dict(base, checkpoint=ckpt, combined=True, since=0, loss=loss, steps_done=steps_done,
                   used=used, lost_steps=lost, gains={i: g for i, g in zip(order, gains)},
                   strikes={i: s for i, s in zip(order, st)}, dropped=dropped,
                   dropped_all=sorted(set(base["dropped_all"]) | set(dropped), key=int),
                   finished=steps_done >= self.total_steps)
        write_json(os.path.join(rdir, "combined.json"), rec)
        report_progress(self.spool, self.job, steps_done)
        self._prune(n, [ckpt])
        self._log("round %d combined (divergence %.4g%s): %s%s -> %d/%d steps" % (
            n, div, ", forced" if force else "", ", ".join("copy %s: %d" % (i, members[i]) for i in used),
            "; left out %s, dropped %s" % (sorted(set(order) - set(used), key=int), dropped)
            if len(used) < len(order) or dropped else "", steps_done, self.total_steps))

    def _prune(self, n, keep):
        """After round n is committed: remove the checkpoints no one needs
        any more (the copies' of rounds <= n, combined ones older than the
        one in force, those in the list keep). HADAR_KEEP_CHECKPOINTS=1 keeps
        them all."""
        if os.environ.get("HADAR_KEEP_CHECKPOINTS") == "1":
            return
        keep = set(os.path.join(self.sync_dir, k) for k in keep if k)
        for m in self._rounds():
            if m > n:
                continue
            rdir = self._round_dir(m)
            for name in _listdir(rdir):
                path = os.path.join(rdir, name)
                if name.endswith(".pt") and (name.startswith("copy-") or m < n) and path not in keep:
                    _unlink(path)

    # ---- heartbeat, signals, env ----

    def _make_dirs(self):
        os.makedirs(os.path.join(self.sync_dir, "alive"), exist_ok=True)

    def _set_phase(self, n, phase):
        with self._hb_lock:
            self._phase = {"round": n, "phase": phase}
        self._heartbeat()

    def _heartbeat(self):
        if not self.copy_mode:
            return
        with self._hb_lock:
            hb = dict(self._phase, index=self.index, node=self.node, pid=os.getpid(), rate=self.rate, at=time.time())
        try:
            write_json(os.path.join(self.sync_dir, "alive", "copy-%d.json" % self.index), hb)
        except OSError:
            pass

    def _heartbeat_loop(self):
        while not getattr(self, "_stop_hb", False):
            time.sleep(self.heartbeat_every)
            if getattr(self, "_stop_hb", False):
                return
            self._heartbeat()

    def _on_sigterm(self, signum, frame):
        if self._stop.is_set():
            raise SystemExit(143)
        self._stop.set()

    def _cancel_spares(self):
        """The job is done: cancel the array's tasks that still wait (spare
        or stopped copies), so the array ends. Best effort."""
        if not self.copy_mode or os.environ.get("HADAR_NO_SCANCEL"):
            return
        try:
            subprocess.run(["scancel", "--state=PENDING", str(self.job)], capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            pass

    def _sleep(self):
        self._stop.wait(self.poll)

    def _export(self, rnd):
        os.environ.update(self.env())


def _split(total, weights):
    """Split integer total in proportion to weights (largest remainder)."""
    keys = sorted(weights, key=int)
    w = sum(weights[k] for k in keys)
    if w <= 0 or total <= 0:
        return {k: 0 for k in keys}
    raw = {k: total * weights[k] / w for k in keys}
    out = {k: int(math.floor(raw[k])) for k in keys}
    left = total - sum(out.values())
    for k in sorted(keys, key=lambda k: (-(raw[k] - out[k]), int(k)))[:left]:
        out[k] += 1
    return out


def _main(argv):
    if len(argv) >= 1 and argv[0] == "env":
        _, job, index, _, sync_dir = identity()
        out = {"HADAR_JOB": job, "HADAR_COPY_INDEX": index, "HADAR_SYNC_DIR": sync_dir}
        # The round this copy is in (or the last one), from the round plans.
        rounds = [int(m.group(1)) for m in map(_ROUND_DIR.match, _listdir(sync_dir)) if m]
        for n in sorted(rounds, reverse=True):
            plan = read_json(os.path.join(sync_dir, "round-%d" % n, "plan.json"))
            if plan is not None:
                me = plan.get("members", {}).get(str(index), {})
                out.update(HADAR_ROUND=n, HADAR_COPY_COUNT=len(plan.get("members", {})), HADAR_STEPS=int(me.get("steps", 0)))
                break
        for k, v in sorted(out.items()):
            print("export %s=%s" % (k, _shell_quote(v)))
        return 0
    print("usage: hadar_copies.py env   (print this copy's HADAR_* variables as shell exports)", file=sys.stderr)
    return 2


def _listdir(d):
    try:
        return os.listdir(d)
    except OSError:
        return []


def _shell_quote(s):
    return "'" + str(s).replace("'", "'\"'\"'") + "'"


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
