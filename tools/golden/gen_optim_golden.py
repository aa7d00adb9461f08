#!/usr/bin/env python3
# tools/golden/gen_optim_golden.py — writes tests/golden/optim_trajectories.txt: 50-step
# torch.optim trajectories of a small linear model for every optimizer plugin and setting.
"""Generate the optimizer golden trajectories used by tests/test_optim.c. The test suite reads
only the committed output; it never needs torch.

Rerun (from the repository root; needs torch, takes a second):

    python3 tools/golden/gen_optim_golden.py              # writes tests/golden/optim_trajectories.txt
    python3 tools/golden/gen_optim_golden.py --out FILE   # somewhere else (to diff)

The output is deterministic for a given PyTorch version (fixed seed, no timestamps); the
version is recorded in the header line. Generated with torch 2.15.0.

The model: y = x @ W.T + b with W (3, 4), b (3,), data X (8, 4) and targets T (8, 3), loss
mean((y - T)^2). The gradients are computed in closed form (the same formula test_optim.c
evaluates with torc ops), not by autograd, so the test needs no autograd engine:

    R = X @ W.T + b - T;  G = 2 R / numel(R);  dW = G.T @ X;  db = ones(1, 8) @ G

Each matmul is computed in float64 and rounded to float32 once, as torc's reference backend
does; everything else is float32 as in torch.optim. One more substitution: PyTorch's CPU sqrt
is not correctly rounded (on an AMD EPYC Zen 4 with torch 2.15's AVX512 kernels, 17% of uniform
float32 inputs in [0, 100) come out one ulp off; README.md says what that does to the
trajectories), so Tensor.sqrt / Tensor.sqrt_ are replaced by the correctly rounded square root
(IEEE 754's, and torc's). The optimizers' own code runs unchanged, so the trajectories pin
their update rules and defaults exactly.

Format (text; every float is an exact float.hex() of a float32 value):

    torch VERSION
    data NAME D0 [D1] : v v v ...           X, T, W0, b0
    case NAME OPTIMIZER | SETTINGS | GROUPS | SCHEDULE
    at STEP W : v ... b : v ...            after STEP steps (10, 20, ..., 50)
    end

SETTINGS is the torc setting string ("lr=0.1 momentum=0.9"); GROUPS is "-" (one group) or
"W:SETTINGS/b:SETTINGS" (two groups, W's then b's, each with its own settings over the
optimizer's defaults); SCHEDULE is "-" or "STEP:LR" (set lr of every group before step STEP).
"""
import argparse
import os

import torch

STEPS = 50
RECORD_EVERY = 10

OPTIMIZERS = {
    "sgd": torch.optim.SGD,
    "adagrad": torch.optim.Adagrad,
    "rmsprop": torch.optim.RMSprop,
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
}

# (case name, optimizer, settings, groups, schedule)
CASES = [
    ("sgd_default", "sgd", "", "-", "-"),
    ("sgd_lr", "sgd", "lr=0.05", "-", "-"),
    ("sgd_momentum", "sgd", "lr=0.05 momentum=0.9", "-", "-"),
    ("sgd_dampening_wd", "sgd", "lr=0.05 momentum=0.9 dampening=0.1 weight_decay=0.01", "-", "-"),
    ("sgd_nesterov", "sgd", "lr=0.05 momentum=0.9 nesterov=true weight_decay=0.01", "-", "-"),
    ("sgd_maximize", "sgd", "lr=0.01 maximize=true", "-", "-"),
    ("sgd_schedule", "sgd", "lr=0.05 momentum=0.5", "-", "25:0.005"),
    ("adagrad_default", "adagrad", "", "-", "-"),
    ("adagrad_all", "adagrad", "lr=0.1 lr_decay=0.01 weight_decay=0.01 initial_accumulator_value=0.1 eps=1e-6", "-", "-"),
    ("rmsprop_default", "rmsprop", "", "-", "-"),
    ("rmsprop_momentum_centered", "rmsprop", "lr=0.01 momentum=0.9 centered=true weight_decay=0.01", "-", "-"),
    ("rmsprop_alpha_centered", "rmsprop", "lr=0.01 alpha=0.9 centered=true eps=1e-6", "-", "-"),
    ("adam_default", "adam", "", "-", "-"),
    ("adam_lr", "adam", "lr=0.01", "-", "-"),
    ("adam_amsgrad_wd", "adam", "lr=0.01 betas=0.8,0.99 weight_decay=0.01 amsgrad=true", "-", "-"),
    ("adam_maximize_eps", "adam", "lr=0.01 eps=1e-6 maximize=true", "-", "-"),
    ("adam_groups", "adam", "lr=0.01", "W:lr=0.02/b:lr=0.05 betas=0.5,0.9", "-"),
    ("adamw_default", "adamw", "", "-", "-"),
    ("adamw_amsgrad_wd", "adamw", "lr=0.01 amsgrad=true weight_decay=0.1", "-", "-"),
    ("adamw_schedule", "adamw", "lr=0.02", "-", "20:0.002"),
]


def parse_settings(s):
    """The torc setting string as torch keyword arguments."""
    kw = {}
    for item in s.split():
        name, value = item.split("=")
        if value in ("true", "false"):
            kw[name] = value == "true"
        elif "," in value:
            kw[name] = tuple(float(v) for v in value.split(","))
        else:
            kw[name] = float(value)
    return kw


def mm(a, b):
    """float32 matmul rounded once from float64, as torc's reference backend computes it (a
    float32 sgemm accumulates differently, and those ulps would hide the optimizer's own)."""
    return (a.double() @ b.double()).float()


def ieee_sqrt(self):
    return _sqrt(self.double()).to(self.dtype)


def ieee_sqrt_(self):
    return self.copy_(ieee_sqrt(self))


_sqrt = torch.Tensor.sqrt
torch.Tensor.sqrt = ieee_sqrt
torch.Tensor.sqrt_ = ieee_sqrt_


def hexes(t):
    return " ".join(float(v).hex() for v in t.detach().reshape(-1).tolist())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden",
                                                  "optim_trajectories.txt"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1234)
    X = torch.randn(8, 4, generator=g)
    T = torch.randn(8, 3, generator=g)
    W0 = torch.randn(3, 4, generator=g) * 0.5
    b0 = torch.randn(3, generator=g) * 0.5
    lines = [f"torch {torch.__version__}"]
    for name, t in (("X", X), ("T", T), ("W0", W0), ("b0", b0)):
        lines.append(f"data {name} {' '.join(str(d) for d in t.shape)} : {hexes(t)}")
    ones = torch.ones(1, 8)
    for case, opt_name, settings, groups, schedule in CASES:
        W = W0.clone().requires_grad_(True)
        b = b0.clone().requires_grad_(True)
        kw = parse_settings(settings)
        if groups == "-":
            opt = OPTIMIZERS[opt_name]([W, b], **kw)
        else:
            gw, gb = groups.split("/")
            opt = OPTIMIZERS[opt_name]([
                dict(params=[W], **parse_settings(gw[2:])),
                dict(params=[b], **parse_settings(gb[2:])),
            ], **kw)
        sched_step, sched_lr = (None, None)
        if schedule != "-":
            s, lr = schedule.split(":")
            sched_step, sched_lr = int(s), float(lr)
        lines.append(f"case {case} {opt_name} | {settings} | {groups} | {schedule}")
        for step in range(1, STEPS + 1):
            if step == sched_step:
                for grp in opt.param_groups:
                    grp["lr"] = sched_lr
            with torch.no_grad():
                R = mm(X, W.T) + b - T
                G = R * (2.0 / R.numel())
                W.grad = mm(G.T, X)
                b.grad = mm(ones, G).reshape(3)
            opt.step()
            opt.zero_grad(set_to_none=True)
            if step % RECORD_EVERY == 0:
                lines.append(f"at {step} W : {hexes(W)} b : {hexes(b)}")
        lines.append("end")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(CASES)} cases to {os.path.normpath(args.out)}")


if __name__ == "__main__":
    main()
