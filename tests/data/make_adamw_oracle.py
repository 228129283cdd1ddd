#!/usr/bin/env python3
"""Reference numbers for posenc's optimizer from PyTorch: adamw_oracle.json.

Regenerate (only when the problem below changes; the numbers are committed):

    /usr/bin/python3 tests/data/make_adamw_oracle.py > tests/data/adamw_oracle.json

Needs torch (Debian's python3-torch; written with 1.13). Read by
tests/cpp/adamw_test.cc (AdamWOracle), which runs the same problem through
posenc::ClipGradNorm, posenc::LearningRate and posenc::AdamW and compares every
number to float32 rounding.

The problem, per case: three float32 tensors of odd sizes (13 and 7 with weight
decay, 5 without: a parameter group with weight_decay=0, as a norm scale
gets), seven steps of given gradients. Each step, as a training loop does:

    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    lr = schedule(step)            # set on every parameter group
    optimizer.step()               # torch.optim.AdamW, foreach=False

The gradient scales make some steps clip and others not; at step 4 the second
tensor has no gradient (p.grad is None: torch skips it, its step count falls
behind the others', so bias correction differs per tensor). The schedule is
posenc's formula (nanoGPT's get_lr), written here again in Python: it is not
torch's, the oracle for it is the C++ test's hand-computed values.

Stored: the inputs (initial params, raw gradients), and per step the learning
rate, the norm before clipping, the clipped gradients and the parameters after
the step; at the end each tensor's step count, exp_avg and exp_avg_sq. Every
float32 is written as the shortest decimal that reads back as the same float.
"""

import json
import math
import sys

import torch

SIZES = [13, 5, 7]
DECAY = [True, False, True]
STEPS = 7
SCALES = [0.05, 0.3, 2.0, 0.5, 4.0, 0.1, 1.5]
NO_GRAD = {(4, 1)}  # (step, tensor) with p.grad = None
MAX_NORM = 1.0
SCHEDULE = {"peak": 0.02, "min_lr": 0.002, "warmup": 2, "total": 6}

CASES = [
    # posenc's defaults (nanoGPT / GPT-3).
    {"name": "posenc_defaults", "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1, "seed": 1},
    # An eps large enough to matter (it is added after the bias-corrected
    # square root: a different placement changes these numbers), strong decay.
    {"name": "large_eps_strong_decay", "beta1": 0.8, "beta2": 0.999, "eps": 1e-3, "weight_decay": 0.5, "seed": 2},
]


def schedule(step, peak, min_lr, warmup, total):
    if step < warmup:
        return peak * step / warmup
    if step >= total:
        return min_lr
    ratio = (step - warmup) / (total - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (peak - min_lr)


def floats(t):
    return [float(x) for x in t.detach().reshape(-1).tolist()]


def run(case):
    gen = torch.Generator().manual_seed(case["seed"])
    params = []
    for size, decay in zip(SIZES, DECAY):
        if decay:
            p = torch.rand(size, generator=gen, dtype=torch.float32) * 2 - 1
        else:  # a norm scale: near 1
            p = 1 + 0.1 * (torch.rand(size, generator=gen, dtype=torch.float32) * 2 - 1)
        params.append(torch.nn.Parameter(p))
    initial = [floats(p) for p in params]
    groups = [
        {"params": [p for p, d in zip(params, DECAY) if d], "weight_decay": case["weight_decay"]},
        {"params": [p for p, d in zip(params, DECAY) if not d], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=SCHEDULE["peak"], betas=(case["beta1"], case["beta2"]), eps=case["eps"],
                            foreach=False)
    steps = []
    clipped_any = unclipped_any = False
    for step in range(1, STEPS + 1):
        raw = []
        for i, (p, size) in enumerate(zip(params, SIZES)):
            if (step, i) in NO_GRAD:
                p.grad = None
                raw.append([])
            else:
                g = torch.randn(size, generator=gen, dtype=torch.float32) * SCALES[step - 1]
                p.grad = g.clone()
                raw.append(floats(g))
        norm = float(torch.nn.utils.clip_grad_norm_(params, MAX_NORM))
        if MAX_NORM / (norm + 1e-6) < 1:
            clipped_any = True
        else:
            unclipped_any = True
        lr = schedule(step, **SCHEDULE)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        steps.append({
            "grads": raw,
            "lr": lr,
            "norm": norm,
            "clipped_grads": [[] if p.grad is None else floats(p.grad) for p in params],
            "params": [floats(p) for p in params],
        })
    assert clipped_any and unclipped_any, "the problem must clip at some steps and not at others"
    state = [opt.state[p] for p in params]
    return {
        "name": case["name"],
        "options": {k: case[k] for k in ("beta1", "beta2", "eps", "weight_decay")},
        "initial_params": initial,
        "steps": steps,
        "final": {
            "steps": [int(s["step"].item()) for s in state],
            "m": [floats(s["exp_avg"]) for s in state],
            "v": [floats(s["exp_avg_sq"]) for s in state],
        },
    }


def main():
    torch.set_num_threads(1)
    out = {
        "generator": "tests/data/make_adamw_oracle.py",
        "torch": torch.__version__,
        "sizes": SIZES,
        "weight_decay": DECAY,
        "max_norm": MAX_NORM,
        "schedule": SCHEDULE,
        "cases": [run(case) for case in CASES],
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
