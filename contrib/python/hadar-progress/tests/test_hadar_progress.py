"""Unit tests of hadar_progress (standard library unittest).

Run: python3 -m unittest discover -s contrib/python/hadar-progress/tests
(go test ./contrib/python/ runs them too, and checks the files with the Go reader).
"""
import json
import os
import stat
import sys
import tempfile
import types
import unittest
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import hadar_progress as hp  # noqa: E402


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.spool = self.tmp.name
        self.addCleanup(self.tmp.cleanup)

    def read(self, job):
        with open(os.path.join(self.spool, "progress", job + ".json")) as f:
            return json.load(f)

    def files(self):
        d = os.path.join(self.spool, "progress")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []


class JobIDTest(unittest.TestCase):
    def test_ids(self):
        cases = [
            ({"SLURM_JOB_ID": "30"}, "30"),
            ({"SLURM_JOB_ID": "30", "SLURM_ARRAY_JOB_ID": "28", "SLURM_ARRAY_TASK_ID": "0"}, "28_0"),
            ({"SLURM_JOB_ID": "30", "SLURM_ARRAY_JOB_ID": "28", "SLURM_ARRAY_TASK_ID": "x"}, "30"),
            ({"SLURM_JOB_ID": "../etc"}, None),
            ({}, None),
        ]
        for env, want in cases:
            with self.subTest(env=env):
                self.assertEqual(hp.job_id(env), want)


class ReporterTest(Base):
    def reporter(self, env=None, **kw):
        self.clock = Clock()
        e = {"SLURM_JOB_ID": "42", "HADAR_SPOOL": self.spool}
        e.update(env or {})
        return hp.Reporter(environ=e, clock=self.clock, **kw)

    def test_writes_the_go_format(self):
        r = self.reporter()
        self.assertTrue(r.report(120, total=1000))
        doc = self.read("42")
        self.assertEqual(set(doc), {"job_id", "steps", "total", "at"})
        self.assertEqual((doc["job_id"], doc["steps"], doc["total"]), ("42", 120.0, 1000.0))
        self.assertRegex(doc["at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
        self.assertEqual(self.files(), ["42.json"])  # no temporary file left
        mode = os.stat(os.path.join(self.spool, "progress", "42.json")).st_mode
        self.assertEqual(stat.S_IMODE(mode), 0o644)

    def test_no_total_no_field(self):
        r = self.reporter()
        r.report(7)
        self.assertNotIn("total", self.read("42"))

    def test_total_is_kept(self):
        r = self.reporter()
        r.report(1, total=90)
        self.clock.t += 10
        r.report(2)
        self.assertEqual((self.read("42")["steps"], self.read("42")["total"]), (2, 90))

    def test_array_task(self):
        r = self.reporter({"SLURM_JOB_ID": "30", "SLURM_ARRAY_JOB_ID": "28", "SLURM_ARRAY_TASK_ID": "3"})
        r.report(5)
        self.assertEqual(self.files(), ["28_3.json"])
        self.assertEqual(self.read("28_3")["job_id"], "28_3")

    def test_rate_limit(self):
        r = self.reporter(min_interval=5)
        self.assertTrue(r.report(1))
        self.clock.t += 2
        self.assertFalse(r.report(2))
        self.assertEqual(self.read("42")["steps"], 1)
        self.clock.t += 2
        self.assertFalse(r.report(3))
        self.clock.t += 1.5
        self.assertTrue(r.report(4))
        self.assertEqual(self.read("42")["steps"], 4)
        self.clock.t += 1
        self.assertTrue(r.report(5, force=True))
        self.clock.t += 1
        self.assertFalse(r.report(6))
        self.assertTrue(r.flush())
        self.assertEqual(self.read("42")["steps"], 6)
        self.assertFalse(r.flush())  # nothing pending
        self.clock.t += 1
        self.assertFalse(r.report(7, total=10))
        self.assertTrue(r.report(10, total=10))  # the last step is never held back
        self.assertEqual(self.read("42")["steps"], 10)

    def test_outside_slurm_warns_once(self):
        r = hp.Reporter(environ={"HADAR_SPOOL": self.spool})
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertFalse(r.report(1))
            self.assertFalse(r.report(2, force=True))
        self.assertEqual(len(w), 1)
        self.assertIn("not in a Slurm job", str(w[0].message))
        self.assertEqual(self.files(), [])

    def test_only_rank_zero_writes(self):
        for env, writes in [({"RANK": "1"}, False), ({"SLURM_PROCID": "2"}, False),
                            ({"RANK": "0", "SLURM_PROCID": "3"}, True), ({"SLURM_PROCID": "0"}, True)]:
            with self.subTest(env=env):
                r = self.reporter(env)
                self.assertEqual(r.report(3, force=True), writes)

    def test_bad_values(self):
        r = self.reporter()
        for bad in (-1, float("nan"), float("inf"), "x", None):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                r.report(bad)
        with self.assertRaises(ValueError):
            r.report(1, total=-5)
        with self.assertRaises(ValueError):
            hp.Reporter(job="1;rm", spool=self.spool)

    def test_unwritable_spool_does_not_raise(self):
        blocker = os.path.join(self.spool, "file")
        open(blocker, "w").close()
        r = hp.Reporter(spool=blocker, job="9")  # progress dir cannot be made under a file
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertFalse(r.report(1))
        self.assertEqual(len(w), 1)

    def test_last_step(self):
        env = {"SLURM_JOB_ID": "42", "HADAR_SPOOL": self.spool}
        self.assertIsNone(hp.last_step(environ=env))
        self.reporter().report(321)
        self.assertEqual(hp.last_step(environ=env), 321)
        with open(os.path.join(self.spool, "progress", "43.json"), "w") as f:
            f.write('{"job_id":"44","steps":5}')
        self.assertIsNone(hp.last_step(spool=self.spool, job="43"))

    def test_module_report_uses_environment(self):
        old = dict(os.environ)
        self.addCleanup(lambda: (os.environ.clear(), os.environ.update(old)))
        os.environ.update({"SLURM_JOB_ID": "77", "HADAR_SPOOL": self.spool})
        for k in ("SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "RANK", "SLURM_PROCID"):
            os.environ.pop(k, None)
        self.assertTrue(hp.report(5, total=50, force=True))
        self.assertEqual(self.read("77")["steps"], 5)
        os.environ["SLURM_JOB_ID"] = "78"  # a new job id: a new reporter
        self.assertTrue(hp.report(6))
        self.assertEqual(self.read("78")["steps"], 6)


# Stand-ins with the attributes the frameworks' objects have.
class LightningTrainer:
    def __init__(self, step, max_steps=-1, estimated=float("inf"), zero=True):
        self.global_step, self.max_steps = step, max_steps
        self.estimated_stepping_batches, self.is_global_zero = estimated, zero


class HFArgs:
    max_steps = -1  # TrainingArguments has max_steps too, but no global_step


class HFState:
    def __init__(self, step, max_steps, zero=True):
        self.global_step, self.max_steps, self.is_world_process_zero = step, max_steps, zero


HF_EVENTS = ["on_init_end", "on_train_begin", "on_epoch_begin", "on_step_begin", "on_substep_end",
             "on_pre_optimizer_step", "on_optimizer_step", "on_step_end", "on_log", "on_evaluate",
             "on_save", "on_epoch_end", "on_train_end", "on_predict", "on_prediction_step"]


def hf_call_event(callbacks, event, args, state, control, **kwargs):
    """What transformers' CallbackHandler.call_event does: getattr with no
    default, positional (args, state, control), the rest as keywords."""
    for cb in callbacks:
        result = getattr(cb, event)(args, state, control, model=None, optimizer=None, **kwargs)
        if result is not None:
            control = result
    return control


class CallbackTest(Base):
    def callback(self, **kw):
        self.clock = Clock()
        r = hp.Reporter(spool=self.spool, job="42", clock=self.clock, environ={})
        return hp.HadarProgress(reporter=r, **kw)

    def test_lightning_hooks(self):
        cb = self.callback()
        cb.setup(LightningTrainer(0), None, stage="fit")
        cb.on_fit_start(LightningTrainer(0), None)
        cb.on_train_batch_end(LightningTrainer(1, max_steps=500), None, {"loss": 1}, [1, 2], 0)
        self.assertEqual((self.read("42")["steps"], self.read("42")["total"]), (1, 500))
        self.clock.t += 1
        cb.on_train_batch_end(LightningTrainer(2, max_steps=500), None, None, None, 1)
        self.assertEqual(self.read("42")["steps"], 1)  # rate-limited
        cb.on_train_end(LightningTrainer(3, max_steps=500), None)
        self.assertEqual(self.read("42")["steps"], 3)
        self.assertEqual(cb.state_dict(), {})
        self.assertEqual(cb.state_key, "HadarProgress")

    def test_lightning_estimated_total(self):
        cb = self.callback()
        cb.on_train_batch_end(LightningTrainer(1, estimated=800), None, None, None, 0)
        self.assertEqual(self.read("42")["total"], 800)
        cb = self.callback()
        cb.on_train_batch_end(LightningTrainer(2), None, None, None, 1)  # max_steps -1, estimate inf
        self.assertNotIn("total", self.read("42"))

    def test_lightning_other_ranks(self):
        cb = self.callback()
        cb.on_train_batch_end(LightningTrainer(1, zero=False), None, None, None, 0)
        cb.on_train_end(LightningTrainer(1, zero=False), None)
        self.assertEqual(self.files(), [])

    def test_hugging_face_events(self):
        cb = self.callback()
        control = object()
        args = HFArgs()
        for event in HF_EVENTS:
            self.assertIs(hf_call_event([cb], event, args, HFState(0, 100), control), control, event)
        self.assertEqual(self.read("42")["steps"], 0)  # on_step_end, then on_train_end forced
        self.clock.t += 10
        hf_call_event([cb], "on_step_end", args, HFState(40, 100), control)
        self.assertEqual((self.read("42")["steps"], self.read("42")["total"]), (40, 100))
        hf_call_event([cb], "on_log", args, HFState(40, 100), control, logs={"loss": 1.0})
        hf_call_event([cb], "on_train_end", args, HFState(100, 100), control)
        self.assertEqual(self.read("42")["steps"], 100)

    def test_hugging_face_state_as_keyword(self):
        cb = self.callback()
        cb.on_step_end(HFArgs(), state=HFState(9, 10), control=None)
        self.assertEqual(self.read("42")["steps"], 9)

    def test_hugging_face_other_ranks(self):
        cb = self.callback()
        hf_call_event([cb], "on_step_end", HFArgs(), HFState(5, 10, zero=False), None)
        self.assertEqual(self.files(), [])

    def test_fixed_total(self):
        cb = self.callback(total=64)
        cb.on_train_batch_end(LightningTrainer(1, max_steps=500), None, None, None, 0)
        self.assertEqual(self.read("42")["total"], 64)

    def test_unknown_attributes(self):
        cb = self.callback()
        self.assertIsNone(cb.on_some_future_hook(1, 2, x=3))
        with self.assertRaises(AttributeError):
            cb.not_a_hook  # noqa: B018


class LightningCallbackTest(Base):
    """lightning_callback against a stand-in lightning.pytorch whose Trainer
    validates callbacks as Lightning 2 does (is_overridden needs a Callback)."""

    def setUp(self):
        super().setUp()

        class Callback:
            @property
            def state_key(self):
                return type(self).__qualname__

            def state_dict(self):
                return {}

            def load_state_dict(self, state_dict):
                pass

            def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
                pass

        def validate(callbacks):
            for cb in callbacks:
                if not isinstance(cb, Callback):
                    raise ValueError("Expected a parent")
                if type(cb).state_dict is not Callback.state_dict:
                    raise AssertionError("counted as a stateful callback")

        pl = types.ModuleType("lightning.pytorch")
        pl.Callback, pl.validate = Callback, validate
        top = types.ModuleType("lightning")
        top.pytorch = pl
        saved = {k: sys.modules.get(k) for k in ("lightning", "lightning.pytorch")}
        sys.modules["lightning"], sys.modules["lightning.pytorch"] = top, pl

        def restore():
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
        self.addCleanup(restore)
        self.pl = pl

    def test_is_a_lightning_callback(self):
        with self.assertRaises(ValueError):
            self.pl.validate([hp.HadarProgress(reporter=hp.Reporter(spool=self.spool, job="1"))])
        cb = hp.lightning_callback(reporter=hp.Reporter(spool=self.spool, job="1", environ={}))
        self.pl.validate([cb])
        self.assertIsInstance(cb, hp.HadarProgress)
        cb.on_train_batch_end(LightningTrainer(7, max_steps=70), None, None, None, 6)
        self.assertEqual(self.read("1")["steps"], 7)


if __name__ == "__main__":
    unittest.main()
