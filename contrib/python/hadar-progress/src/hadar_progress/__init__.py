"""Report a training job's progress to hadar-slurmd, from Python.

hadar plans with each job's remaining work and learns each model's speed on
each GPU type from these reports. This module writes what ``hadar report
--steps N [--total M]`` writes: the file ``<spool>/progress/<jobid>.json``
holding ``{"job_id": ..., "steps": N, "total": M, "at": ...}``, atomically
(a temporary file in the same directory, then ``os.replace``), so the daemon
never reads half a report. It needs only the standard library.

    import hadar_progress
    for step in range(start, num_steps):
        train_step()
        hadar_progress.report(step + 1, total=num_steps)

``report`` is cheap to call every step: it writes at most once every
``MIN_INTERVAL`` seconds (and always when ``force=True``, or at the last step).
Outside a Slurm job it does nothing (with one warning). In a job array task
the report is filed under ``<SLURM_ARRAY_JOB_ID>_<SLURM_ARRAY_TASK_ID>``, the
id hadar knows the task by. Only the job's first process (rank 0, from
``RANK`` or ``SLURM_PROCID``) writes.

For PyTorch Lightning and the Hugging Face Trainer, ``HadarProgress`` is a
callback (duck-typed: this module imports neither).
"""

import json
import math
import os
import re
import tempfile
import time
import warnings
from datetime import datetime, timezone

__all__ = ["report", "Reporter", "HadarProgress", "lightning_callback", "job_id", "last_step",
           "DEFAULT_SPOOL", "MIN_INTERVAL"]
__version__ = "0.1.0"

#: hadar-slurmd's default spool_dir (bridge.DefaultSpoolDir); $HADAR_SPOOL overrides it.
DEFAULT_SPOOL = "/var/spool/hadar"
#: The least number of seconds between two writes of report() (unless forced).
MIN_INTERVAL = 5.0
#: The directory under the spool dir where jobs report (bridge.ProgressSubdir).
PROGRESS_SUBDIR = "progress"

_ID = re.compile(r"^[0-9]{1,10}(_[0-9]{1,10})?$")
_NUM = re.compile(r"^[0-9]{1,10}$")


def job_id(environ=None):
    """The id hadar knows this job by, or None outside Slurm: in a job array
    task, ``<SLURM_ARRAY_JOB_ID>_<SLURM_ARRAY_TASK_ID>`` (the task's own
    SLURM_JOB_ID is not what hadar looks up); else ``SLURM_JOB_ID``."""
    env = os.environ if environ is None else environ
    array, task = env.get("SLURM_ARRAY_JOB_ID", ""), env.get("SLURM_ARRAY_TASK_ID", "")
    if _NUM.match(array) and _NUM.match(task):
        return "%s_%s" % (array, task)
    jid = env.get("SLURM_JOB_ID", "")
    return jid if _ID.match(jid) else None


def _is_rank_zero(environ):
    for key in ("RANK", "SLURM_PROCID"):
        v = environ.get(key)
        if v not in (None, ""):
            return v.strip() == "0"
    return True


def _spool(environ, spool):
    return spool or environ.get("HADAR_SPOOL") or DEFAULT_SPOOL


def _number(name, v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError("%s must be a number, got %r" % (name, v)) from None
    if math.isnan(f) or math.isinf(f) or f < 0:
        raise ValueError("%s must be a finite number >= 0, got %r" % (name, v))
    return f


def _write(spool, jid, steps, total, at):
    d = os.path.join(spool, PROGRESS_SUBDIR)
    os.makedirs(d, exist_ok=True)
    doc = {"job_id": jid, "steps": steps}
    if total:
        doc["total"] = total
    doc["at"] = at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    fd, tmp = tempfile.mkstemp(prefix=".%s.json.tmp-" % jid, dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(doc, separators=(",", ":")) + "\n")
            f.flush()
            os.fchmod(f.fileno(), 0o644)
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(d, jid + ".json"))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class Reporter:
    """Writes one job's progress reports, at most every ``min_interval``
    seconds. ``spool`` and ``job`` default to $HADAR_SPOOL (else
    DEFAULT_SPOOL) and ``job_id()``; ``clock`` (monotonic seconds) and
    ``environ`` are for tests."""

    def __init__(self, spool=None, job=None, min_interval=MIN_INTERVAL, clock=time.monotonic, environ=None):
        env = os.environ if environ is None else environ
        self.spool = _spool(env, spool)
        self.job = job if job is not None else job_id(env)
        if self.job is not None and not _ID.match(str(self.job)):
            raise ValueError("bad job id %r" % (self.job,))
        self.min_interval = float(min_interval)
        self.enabled = self.job is not None and _is_rank_zero(env)
        self._clock = clock
        self._last = None       # clock() of the last write
        self._pending = None    # (steps, total) not written yet
        self._warned = False
        self._total = 0.0       # the last total given (0: none)

    def report(self, step, total=None, force=False):
        """Record that the job has done ``step`` steps in total (not an
        increment) of ``total`` (optional; once given, it is kept for the
        calls that do not give it). Returns True if it wrote the
        file now; False if it was too soon after the last write (the value
        is kept and written by a later call or flush()), or outside Slurm.
        An error writing the file is warned about, not raised: progress is
        advisory and must not stop training."""
        steps = _number("step", step)
        if total is not None:
            self._total = _number("total", total)
        tot = self._total  # the last total given, if this call gives none
        if self.job is None:
            if not self._warned:
                warnings.warn("hadar_progress: not in a Slurm job (no SLURM_JOB_ID): progress is not reported",
                              RuntimeWarning, stacklevel=3)
                self._warned = True
            return False
        if not self.enabled:
            return False
        self._pending = (steps, tot)
        now = self._clock()
        done = tot > 0 and steps >= tot
        if not force and not done and self._last is not None and now - self._last < self.min_interval:
            return False
        return self.flush()

    def flush(self):
        """Write the last value report() kept, if any. Returns True if it wrote."""
        if self._pending is None or not self.enabled:
            return False
        steps, tot = self._pending
        try:
            _write(self.spool, self.job, steps, tot, datetime.now(timezone.utc))
        except OSError as e:
            if not self._warned:
                warnings.warn("hadar_progress: cannot write the progress report: %s" % e, RuntimeWarning, stacklevel=3)
                self._warned = True
            return False
        self._pending, self._last = None, self._clock()
        return True


_default = None


def _default_reporter():
    global _default
    env = os.environ
    key = (_spool(env, None), job_id(env))
    if _default is None or (_default.spool, _default.job) != key:
        _default = Reporter()
    return _default


def report(step, total=None, force=False):
    """Report progress for this job: see Reporter.report. Cheap to call
    every step."""
    return _default_reporter().report(step, total, force)


def last_step(spool=None, job=None, environ=None):
    """The steps of this job's last report (to resume from after a requeue:
    hadar restarts a moved job with the same id), or None if there is none."""
    env = os.environ if environ is None else environ
    job = job if job is not None else job_id(env)
    if job is None or not _ID.match(str(job)):
        return None
    path = os.path.join(_spool(env, spool), PROGRESS_SUBDIR, "%s.json" % job)
    try:
        with open(path) as f:
            doc = json.loads(f.read(4096))
        return _number("steps", doc["steps"]) if doc.get("job_id") == job else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


# ------------------------------------------------------------------ callbacks --

def _finite_positive(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f > 0 and not math.isinf(f) and not math.isnan(f) else None


class HadarProgress:
    """A training callback that reports the trainer's global step.

    Hugging Face Trainer: ``Trainer(..., callbacks=[HadarProgress()])``; it
    reads ``state.global_step`` and ``state.max_steps`` in ``on_step_end``.

    PyTorch Lightning: ``on_train_batch_end(trainer, pl_module, outputs,
    batch, batch_idx)`` reads ``trainer.global_step`` and
    ``trainer.max_steps`` (else ``trainer.estimated_stepping_batches``).
    Lightning 2's Trainer checks that its callbacks are instances of its
    Callback class, so pass ``lightning_callback()`` there, which is this
    class mixed into Lightning's own.

    Any other hook a trainer calls (``on_*``, ``setup``, ``teardown``) does
    nothing; the last step is written at the end of training."""

    def __init__(self, reporter=None, total=None, min_interval=MIN_INTERVAL):
        self.reporter = reporter if reporter is not None else Reporter(min_interval=min_interval)
        self.total = total

    # Both frameworks: the object with the step is the trainer (Lightning)
    # or the TrainerState (Hugging Face), the first argument with a
    # global_step.
    @staticmethod
    def _source(args):
        for a in args:
            if hasattr(a, "global_step"):
                return a
        return None

    def _total(self, src):
        if self.total is not None:
            return self.total
        t = _finite_positive(getattr(src, "max_steps", None))
        if t is None:
            t = _finite_positive(getattr(src, "estimated_stepping_batches", None))
        return t

    def _report(self, args, force):
        src = self._source(args)
        if src is None:
            return
        if getattr(src, "is_global_zero", True) is False or getattr(src, "is_world_process_zero", True) is False:
            return
        step = getattr(src, "global_step", None)
        if step is None:
            return
        self.reporter.report(step, self._total(src), force=force)

    # Lightning: on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx)
    def on_train_batch_end(self, trainer, *args, **kwargs):
        self._report((trainer,), False)

    # Hugging Face: on_step_end(self, args, state, control, **kwargs)
    def on_step_end(self, *args, **kwargs):
        self._report(args + (kwargs.get("state"),), False)
        return None  # control unchanged

    # Lightning: on_train_end(trainer, pl_module); HF: on_train_end(args, state, control, **kw)
    def on_train_end(self, *args, **kwargs):
        self._report(args + (kwargs.get("state"),), True)
        self.reporter.flush()

    def on_exception(self, *args, **kwargs):
        self.reporter.flush()

    # Lightning's checkpointing asks every callback for these.
    @property
    def state_key(self):
        return type(self).__qualname__

    @property
    def _legacy_state_key(self):
        return type(self)

    def state_dict(self):
        return {}

    def load_state_dict(self, state_dict):
        pass

    def setup(self, *args, **kwargs):
        pass

    def teardown(self, *args, **kwargs):
        self.reporter.flush()

    def __getattr__(self, name):
        # Every other event hook of either framework (they call hooks by name,
        # Hugging Face with no default): a no-op.
        if name.startswith("on_"):
            return _noop
        raise AttributeError(name)


def _noop(*args, **kwargs):
    return None


def lightning_callback(**kwargs):
    """A HadarProgress that is also an instance of Lightning's Callback
    class (``lightning.pytorch`` or ``pytorch_lightning``, whichever the job
    has imported, else whichever imports), for Lightning's Trainer, which
    accepts only those. kwargs are HadarProgress's."""
    import importlib
    import sys
    base = None
    names = ("lightning.pytorch", "pytorch_lightning")
    for name in names:
        if name in sys.modules and hasattr(sys.modules[name], "Callback"):
            base = sys.modules[name].Callback
            break
    if base is None:
        for name in names:
            try:
                base = importlib.import_module(name).Callback
                break
            except ImportError:
                continue
    if base is None:
        raise ImportError("lightning_callback: neither lightning.pytorch nor pytorch_lightning is installed")
    # Lightning's own (stateless) checkpoint methods, so the Trainer does not
    # count this callback as stateful.
    own = {k: getattr(base, k) for k in ("state_dict", "load_state_dict") if hasattr(base, k)}
    cls = type("HadarProgressLightning", (HadarProgress, base), own)
    return cls(**kwargs)
