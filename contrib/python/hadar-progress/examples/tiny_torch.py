"""A tiny real PyTorch training job that reports its progress to hadar in one
of three ways (the test in e2e/progress runs all three):

  python3 tiny_torch.py callback   # a Lightning-style loop calling HadarProgress
  python3 tiny_torch.py report     # hadar_progress.report(step, total) each step
  python3 tiny_torch.py print      # only prints "step N/M" (for hadar report --follow)

Options: --steps N (default 40), --sleep S seconds per step (default 0),
--result FILE (writes {"first_loss", "last_loss", "steps"} as JSON).
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
import hadar_progress  # noqa: E402  (the installed package, else this checkout's)


class MiniTrainer:
    """The part of a Lightning Trainer a callback sees: global_step,
    max_steps, is_global_zero, and on_train_batch_end / on_train_end calls
    with Lightning's arguments."""

    def __init__(self, max_steps, callbacks):
        self.global_step, self.max_steps, self.is_global_zero = 0, max_steps, True
        self.callbacks = callbacks

    def fit(self, model, step_fn, batches):
        for cb in self.callbacks:
            cb.on_train_start(self, model)
        for batch_idx, batch in enumerate(batches):
            loss = step_fn(batch)
            self.global_step += 1
            for cb in self.callbacks:
                cb.on_train_batch_end(self, model, {"loss": loss}, batch, batch_idx)
        for cb in self.callbacks:
            cb.on_train_end(self, model)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["callback", "report", "print"])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--result")
    a = ap.parse_args()

    torch.manual_seed(0)
    x = torch.randn(512, 8)
    y = x @ torch.randn(8, 1) + 0.01 * torch.randn(512, 1)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []

    def step_fn(batch):
        xb, yb = batch
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if a.sleep:
            time.sleep(a.sleep)
        return losses[-1]

    def batches():
        for i in range(a.steps):
            j = (i * 32) % 512
            yield x[j:j + 32], y[j:j + 32]

    if a.mode == "callback":
        MiniTrainer(a.steps, [hadar_progress.HadarProgress()]).fit(model, step_fn, batches())
    else:
        for i, batch in enumerate(batches()):
            step_fn(batch)
            if a.mode == "report":
                hadar_progress.report(i + 1, total=a.steps)
            else:
                print("step %d/%d loss %.4f" % (i + 1, a.steps, losses[-1]), flush=True)
    if a.result:
        with open(a.result, "w") as f:
            json.dump({"first_loss": losses[0], "last_loss": losses[-1], "steps": len(losses)}, f)


if __name__ == "__main__":
    main()
