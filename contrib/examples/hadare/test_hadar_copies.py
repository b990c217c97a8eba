"""Tests of hadar_copies' adaptive combining (no Slurm: copies run as threads
over a temporary sync directory, with a plan.json written as hadar-slurmd
would). Run: python3 -m unittest discover -s contrib/examples/hadare
(`go test ./contrib/examples/hadare/` does, with Debian's python3-torch)."""

import math
import os
import sys
import tempfile
import threading
import time
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hadar_copies as hc  # noqa: E402

try:
    import torch
except ImportError:  # the tests need torch, as the example does
    torch = None


def state(*w):
    return {"model": {"w": torch.tensor([float(x) for x in w])}}


@unittest.skipIf(torch is None, "needs torch (apt-get install python3-torch)")
class TestRule(unittest.TestCase):
    def test_divergence(self):
        cases = [
            ("identical", [[1.0, 2.0], [1.0, 2.0]], [1, 1], 0.0),
            # mean (0.5, 0.5): spread 0.5, norm 0.5
            ("opposite corners", [[1.0, 0.0], [0.0, 1.0]], [1, 1], 1.0),
            # weights 3:1: mean (0.75, 0.25), spread 3/4*0.125 + 1/4*1.125 = 0.375, norm 0.625
            ("weighted", [[1.0, 0.0], [0.0, 1.0]], [3, 1], 0.375 / 0.625),
            ("one copy", [[1.0, 0.0]], [1], 0.0),
            ("weight 0 does not count", [[1.0, 0.0], [0.0, 1.0]], [1, 0], 0.0),
            ("zero mean", [[1.0], [-1.0]], [1, 1], math.inf),
        ]
        for name, sk, w, want in cases:
            with self.subTest(name):
                self.assertAlmostEqual(hc.divergence(sk, w), want)

    def test_sketch_same_coordinates(self):
        a, b = state(*range(10000)), state(*range(10000))
        sa, sb = hc.sketch(a, size=64, seed=3), hc.sketch(b, size=64, seed=3)
        self.assertEqual(len(sa), 64)
        self.assertEqual(sa, sb)
        self.assertNotEqual(sa, hc.sketch(a, size=64, seed=4))
        self.assertEqual(hc.sketch(state(1, 2, 3), size=64), [1.0, 2.0, 3.0])  # small: all of it

    def test_due(self):
        r = hc.AdaptiveCombining(threshold=0.1, max_interval=3)
        near, far = [[1.0, 0.0], [1.0, 0.01]], [[1.0, 0.0], [0.0, 1.0]]
        cases = [
            ("close copies wait", 1, near, False, False),
            ("drifted apart", 1, far, False, True),
            ("max interval", 3, near, False, True),
            ("forced", 1, near, True, True),
        ]
        for name, since, sk, force, want in cases:
            with self.subTest(name):
                self.assertEqual(r.due(since, sk, [1, 1], force)[0], want)

    def test_select_drops_a_copy_that_hurts(self):
        target = torch.tensor([10.0, 0.0])
        ev = lambda s: float(((s["model"]["w"] - target) ** 2).sum())  # noqa: E731
        r = hc.AdaptiveCombining(evaluate=ev, patience=2)
        # Copies 0 and 1 moved toward the target, copy 2 away from it.
        states = [state(4, 0), state(4, 1), state(-4, 0)]
        use, drop, strikes, loss, gains = r.select(states, [1, 1, 1], base_loss=100.0, strikes=[0, 0, 1])
        self.assertEqual(use, [True, True, False])
        self.assertEqual(drop, [2])  # left out twice in a row
        self.assertEqual(strikes, [0, 0, 2])
        self.assertAlmostEqual(loss, ev(state(4, 0.5)))
        self.assertLess(gains[2], 0)
        self.assertGreater(gains[0], 0)
        # Once: left out, not yet dropped.
        use, drop, strikes, _, _ = r.select(states, [1, 1, 1], base_loss=100.0)
        self.assertEqual((use, drop, strikes), ([True, True, False], [], [0, 0, 1]))

    def test_select_cost(self):
        target = torch.tensor([10.0, 0.0])
        ev = lambda s: float(((s["model"]["w"] - target) ** 2).sum())  # noqa: E731
        # Both copies help (their average, 9.5, beats either alone): copy 0 (at
        # 12) has the gain loss(7) - loss(9.5) = 9 - 0.25 = 8.75, copy 1 (at 7)
        # loss(12) - 0.25 = 3.75; the round's improvement is 100 - 0.25. With
        # drop_below 0.05 copy 1's cost is 4.99 > 3.75: left out; with 0 both count.
        states = [state(12, 0), state(7, 0)]
        self.assertEqual(hc.AdaptiveCombining(evaluate=ev).select(states, [1, 1])[4], [8.75, 3.75])
        for below, want in [(0.0, [True, True]), (0.03, [True, True]), (0.05, [True, False])]:
            with self.subTest(drop_below=below):
                r = hc.AdaptiveCombining(evaluate=ev, drop_below=below)
                self.assertEqual(r.select(states, [1, 1], base_loss=100.0)[0], want)

    def test_select_never_leaves_all_out_and_keeps_min_copies(self):
        ev = lambda s: float(s["model"]["w"].abs().sum())  # noqa: E731
        r = hc.AdaptiveCombining(evaluate=ev, patience=1, min_copies=2)
        # The average is best: every copy's leave-one-out gain is > 0 ...
        states = [state(1, -1), state(-1, 1)]
        self.assertEqual(r.select(states, [1, 1])[:2], ([True, True], []))
        # ... and when every copy would be left out, all are used, none dropped.
        ev2 = lambda s: -float(s["model"]["w"].abs().sum())  # noqa: E731
        r2 = hc.AdaptiveCombining(evaluate=ev2, patience=1)
        use, drop, _, _, _ = r2.select(states, [1, 1])
        self.assertEqual((use, drop), ([True, True], []))


@unittest.skipIf(torch is None, "needs torch (apt-get install python3-torch)")
class TestProtocol(unittest.TestCase):
    """Two copies of job 77 train a 2-vector 'model' (each step adds the copy's
    own direction) through the real protocol."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.sync = os.path.join(self.dir.name, "copies", "77")
        os.makedirs(self.sync)
        self.env = dict(os.environ)
        os.environ.update(HADAR_TAG="hadar copies=2", SLURM_ARRAY_JOB_ID="77", HADAR_SPOOL=self.dir.name,
                          HADAR_NO_SCANCEL="1")
        for k in ("HADAR_SYNC_DIR", "HADAR_COPIES", "HADAR_TOTAL_STEPS", "HADAR_KEEP_CHECKPOINTS"):
            os.environ.pop(k, None)
        hc.write_json(os.path.join(self.sync, "plan.json"), {
            "written_unix": time.time() + 3600, "round_seconds": 1, "generation": 1,
            "copies": [{"index": 0, "steps": 10, "rate": 10}, {"index": 1, "steps": 10, "rate": 10}]})

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self.env)
        self.dir.cleanup()

    def copies(self, rule, total=100):
        out = []
        for i in range(2):
            os.environ["SLURM_ARRAY_TASK_ID"] = str(i)
            out.append(hc.Copies(total_steps=total, handle_sigterm=False, poll=0.01, adaptive=rule,
                                 log=lambda msg: None))
        return out

    def train(self, cps, directions):
        starts = {0: [], 1: []}
        errors = []

        def work(i):
            try:
                cp, w = cps[i], torch.zeros(2)
                while True:
                    rnd = cp.next_round()
                    if rnd is None:
                        break
                    base = rnd.load()
                    if base is not None:
                        w = base["model"]["w"].clone()
                    starts[i].append((rnd.round, w.tolist()))
                    w = w + torch.tensor(directions[i]) * rnd.steps
                    cp.finish_round(rnd, {"model": {"w": w}}, rnd.steps)
                cp.close()
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        self.assertFalse(any(t.is_alive() for t in ts), "copies did not finish")
        self.assertEqual(errors, [])
        return starts

    def record(self, n):
        return hc.read_json(os.path.join(self.sync, "round-%d" % n, "combined.json"))

    def test_combines_every_max_interval_rounds_when_copies_stay_close(self):
        rule = hc.AdaptiveCombining(threshold=10.0, max_interval=2)
        cps = self.copies(rule)
        starts = self.train(cps, {0: [1.0, 0.0], 1: [1.0, 0.1]})
        combined = [self.record(n)["combined"] for n in range(1, 6)]
        # 5 rounds of 20 steps: combined every 2nd round, and the last (done).
        self.assertEqual(combined, [False, True, False, True, True])
        # After round 1 (not combined) each copy went on from its own model;
        # after round 2 both from the average.
        self.assertEqual(starts[0][1], (2, [10.0, 0.0]))
        self.assertEqual(starts[1][1], (2, [10.0, 1.0]))
        self.assertEqual(starts[0][2][1], starts[1][2][1])
        self.assertAlmostEqual(starts[0][2][1][0], 20.0, places=5)
        self.assertAlmostEqual(starts[0][2][1][1], 1.0, places=5)
        self.assertEqual(self.record(5)["steps_done"], 100)
        self.assertTrue(self.record(5)["finished"])
        final = cps[0].final_state()["model"]["w"].tolist()
        self.assertAlmostEqual(final[0], 50.0, places=4)
        self.assertAlmostEqual(final[1], 2.5, places=4)

    def test_combines_every_round_when_copies_drift_apart(self):
        rule = hc.AdaptiveCombining(threshold=0.01, max_interval=8)
        self.train(self.copies(rule), {0: [1.0, 0.0], 1: [0.0, 1.0]})
        self.assertEqual([self.record(n)["combined"] for n in range(1, 6)], [True] * 5)

    def test_drops_a_copy_that_hurts(self):
        target = torch.tensor([100.0, 0.0])
        ev = lambda s: float(((s["model"]["w"] - target) ** 2).sum())  # noqa: E731
        rule = hc.AdaptiveCombining(threshold=0.0, evaluate=ev, patience=2)
        cps = self.copies(rule)
        starts = self.train(cps, {0: [1.0, 0.0], 1: [-1.0, 0.0]})
        r1, r2 = self.record(1), self.record(2)
        self.assertEqual((r1["used"], r1["dropped"]), (["0"], []))
        self.assertEqual((r2["used"], r2["dropped"], r2["dropped_all"]), (["0"], ["1"], ["1"]))
        self.assertTrue(cps[1].dropped)
        self.assertFalse(cps[0].dropped)
        self.assertEqual([n for n, _ in starts[1]], [1, 2])
        # Copy 1's work does not count: the job does its 100 steps with copy 0,
        # whose model is all that is in the final one.
        last = hc.read_json(os.path.join(self.sync, "round-%d" % starts[0][-1][0], "combined.json"))
        self.assertTrue(last["finished"])
        self.assertEqual(last["steps_done"], 100)
        self.assertEqual(cps[0].final_state()["model"]["w"].tolist(), [100.0, 0.0])


if __name__ == "__main__":
    unittest.main()
