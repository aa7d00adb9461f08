#!/usr/bin/env python3
# tools/golden/gen_nn_golden.py — writes tests/golden/nn_ops.txt from PyTorch: embedding,
# scaled_dot_product_attention, cross_entropy / nll_loss with ignore_index, reduction and
# label_smoothing, clip_grad_norm_, and nanoGPT's learning-rate schedule, with gradients.
"""Generate the expected values of tests/test_embedding.c, test_attention.c, test_loss.c and
test_clip.c. The test suite reads only the committed output; it never needs torch.

Rerun (from the repository root; needs torch, takes a second):

    python3 tools/golden/gen_nn_golden.py                 # writes tests/golden/nn_ops.txt
    python3 tools/golden/gen_nn_golden.py --out FILE      # somewhere else (to diff)

Format (read by tests/nngolden.h), one block per case:

    case NAME key=value key=value ...     the op's arguments (names as in torc's API)
    TAG DTYPE SHAPE v v v ...             a tensor: dtype short name (f32, i64, bool, ...),
                                          SHAPE comma-separated or "-" for zero-dim, values
                                          row-major (floats as hex floats or nan/inf/-inf,
                                          integers and bools in decimal)
    error TEXT                            PyTorch's message, when the call must fail
    end

Inputs are drawn in float64 and rounded to the case's dtype; the expected outputs are PyTorch's
in float64 on those exact inputs (so a torc result in f32 is compared with a tolerance, one in
f64 tightly). Attention goldens come from PyTorch's math backend (sdpa_kernel(MATH)), the
composition torc's torc_scaled_dot_product_attention follows. Gradients are those of
sum(out * dy) for the dy the case lists (tag dy). The output is deterministic for a given
PyTorch version (fixed seeds), which its first line names.
"""
import argparse
import math
import os

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHORT = {torch.float64: "f64", torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
         torch.int64: "i64", torch.int32: "i32", torch.uint8: "u8", torch.bool: "bool"}


def fhex(v):
    v = float(v)
    if v != v:
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v.hex()


class Writer:
    def __init__(self):
        self.lines = []

    def case(self, name, **params):
        kv = " ".join(f"{k}={fhex(v) if isinstance(v, float) else v}" for k, v in params.items())
        self.lines.append(f"case {name}" + (" " + kv if kv else ""))

    def tensor(self, tag, t):
        t = t.detach()
        shape = ",".join(str(s) for s in t.shape) or "-"
        if t.dtype.is_floating_point:
            vals = [fhex(v) for v in t.double().flatten().tolist()]
        else:
            vals = [str(int(v)) for v in t.flatten().tolist()]
        self.lines.append(" ".join([tag, SHORT[t.dtype], shape] + vals))

    def error(self, fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 (any PyTorch error is the expected text)
            self.lines.append("error " + str(e).splitlines()[0])
            return
        raise SystemExit("expected an error")

    def end(self):
        self.lines.append("end")


gen = torch.Generator().manual_seed(20240536)


def randn(shape, dtype=torch.float64, scale=1.0):
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).to(dtype)


# ---- embedding ----
def embedding(w, name, V, C, idx, dtype=torch.float32, padding_idx=-1):
    weight = randn((V, C), dtype)
    dy = randn(tuple(idx.shape) + (C,), dtype)
    w.case(name, padding_idx=padding_idx)
    w.tensor("weight", weight)
    w.tensor("indices", idx)
    w.tensor("dy", dy)
    wt = weight.double().clone().requires_grad_(True)
    out = F.embedding(idx.long(), wt, padding_idx=None if padding_idx < 0 else padding_idx)
    (out * dy.double()).sum().backward()
    w.tensor("out", out.to(dtype))
    w.tensor("dweight", wt.grad)  # exact sums in f64; torc's f32 adds round each step
    w.end()


def embeddings(w):
    idx = torch.tensor([[1, 3, 1], [6, 0, 3]])
    embedding(w, "embedding_f32", 7, 3, idx)
    embedding(w, "embedding_f64_padding", 7, 3, idx, torch.float64, padding_idx=3)
    embedding(w, "embedding_i32_indices", 5, 4, torch.tensor([4, 4, 0, 2], dtype=torch.int32), torch.float64)
    embedding(w, "embedding_scalar_index", 5, 2, torch.tensor(2), torch.float64)
    embedding(w, "embedding_3d_indices", 6, 2, torch.tensor([[[0, 5], [5, 5]], [[1, 2], [3, 0]]]), torch.float64,
              padding_idx=0)
    embedding(w, "embedding_empty", 4, 3, torch.zeros(0, 2, dtype=torch.int64), torch.float64)
    # errors
    wt = torch.zeros(4, 3)
    w.case("embedding_err_bounds", padding_idx=-1)
    w.tensor("weight", wt)
    w.tensor("indices", torch.tensor([0, 4]))
    w.error(lambda: F.embedding(torch.tensor([0, 4]), wt))
    w.end()
    w.case("embedding_err_dtype", padding_idx=-1)
    w.tensor("weight", wt)
    w.tensor("indices", torch.tensor([0.0, 1.0]))
    w.error(lambda: torch.embedding(wt, torch.tensor([0.0, 1.0])))
    w.end()
    w.case("embedding_err_padding", padding_idx=4)
    w.tensor("weight", wt)
    w.tensor("indices", torch.tensor([0, 1]))
    w.error(lambda: F.embedding(torch.tensor([0, 1]), wt, padding_idx=4))
    w.end()
    w.case("embedding_err_weight_dim", padding_idx=-1)
    w.tensor("weight", torch.zeros(4))
    w.tensor("indices", torch.tensor([0, 1]))
    w.error(lambda: torch.embedding(torch.zeros(4), torch.tensor([0, 1])))
    w.end()


# ---- scaled_dot_product_attention ----
def sdpa(w, name, qs, ks, vs, dtype=torch.float64, mask=None, is_causal=False, scale=None, gqa=False, tol=None):
    q, k, v = randn(qs, dtype), randn(ks, dtype), randn(vs, dtype)
    params = dict(is_causal=int(is_causal), enable_gqa=int(gqa))
    if scale is not None:
        params["scale"] = float(scale)
    w.case(name, **params)
    w.tensor("q", q)
    w.tensor("k", k)
    w.tensor("v", v)
    if mask is not None:
        w.tensor("mask", mask)
    qd, kd, vd = (t.double().clone().requires_grad_(True) for t in (q, k, v))
    md = mask.double() if mask is not None and mask.dtype.is_floating_point else mask
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=md, is_causal=is_causal, scale=scale,
                                             enable_gqa=gqa)
        # the dtype PyTorch gives (float math inside, the inputs' dtype out)
        typed = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale,
                                               enable_gqa=gqa)
    dy = randn(tuple(out.shape), torch.float64)
    (out * dy).sum().backward()
    w.tensor("dy", dy.to(dtype))
    w.tensor("out", out.to(typed.dtype))
    w.tensor("dq", qd.grad)
    w.tensor("dk", kd.grad)
    w.tensor("dv", vd.grad)
    w.end()


def attentions(w):
    sdpa(w, "sdpa_basic", (2, 3, 4), (2, 5, 4), (2, 5, 6))
    sdpa(w, "sdpa_f32", (2, 3, 4), (2, 5, 4), (2, 5, 6), torch.float32)
    sdpa(w, "sdpa_2d", (3, 4), (5, 4), (5, 2))
    sdpa(w, "sdpa_causal_square", (1, 2, 4, 3), (1, 2, 4, 3), (1, 2, 4, 3), is_causal=True)
    sdpa(w, "sdpa_causal_wide", (1, 2, 4), (1, 6, 4), (1, 6, 3), is_causal=True)
    sdpa(w, "sdpa_causal_tall", (1, 5, 4), (1, 3, 4), (1, 3, 2), is_causal=True)
    m = torch.ones(3, 5, dtype=torch.bool)
    m[1] = False  # a row with nothing to attend: zeros, as PyTorch's _safe_softmax
    m[0, 2] = False
    m[2, 0] = m[2, 4] = False
    sdpa(w, "sdpa_bool_mask", (2, 3, 4), (2, 5, 4), (2, 5, 6), mask=m)
    mf = randn((1, 3, 5), torch.float64)
    mf[0, 1] = -math.inf
    mf[0, 2, 3] = -math.inf
    sdpa(w, "sdpa_float_mask", (2, 3, 4), (2, 5, 4), (2, 5, 6), mask=mf)
    sdpa(w, "sdpa_float_mask_f32", (2, 3, 4), (2, 5, 4), (2, 5, 6), torch.float32, mask=mf.float())
    sdpa(w, "sdpa_scale", (2, 3, 4), (2, 5, 4), (2, 5, 6), scale=0.3)
    sdpa(w, "sdpa_negative_scale", (2, 3, 4), (2, 5, 4), (2, 5, 6), scale=-0.5)
    sdpa(w, "sdpa_broadcast", (2, 2, 3, 4), (1, 2, 5, 4), (2, 1, 5, 6), mask=torch.tensor([True, False, True, True,
                                                                                           True]))
    sdpa(w, "sdpa_gqa", (1, 4, 3, 4), (1, 2, 5, 4), (1, 2, 5, 2), gqa=True, is_causal=True)
    sdpa(w, "sdpa_f16", (2, 3, 8), (2, 5, 8), (2, 5, 4), torch.float16, mask=mf.half())
    sdpa(w, "sdpa_bf16", (2, 3, 8), (2, 5, 8), (2, 5, 4), torch.bfloat16, is_causal=True)
    # S = 0: nothing to attend, zeros (PyTorch's math path: an empty softmax, a matmul over nothing)
    q, k, v = torch.zeros(2, 3, 4, dtype=torch.float64), torch.zeros(2, 0, 4, dtype=torch.float64), \
        torch.zeros(2, 0, 6, dtype=torch.float64)
    w.case("sdpa_empty_keys", is_causal=0, enable_gqa=0)
    for tag, t in (("q", q), ("k", k), ("v", v)):
        w.tensor(tag, t)
    w.tensor("out", F.scaled_dot_product_attention(q, k, v))
    w.end()

    def err(name, q, k, v, mask=None, is_causal=False, gqa=False, dropout_p=0.0):
        w.case(name, is_causal=int(is_causal), enable_gqa=int(gqa), dropout_p=float(dropout_p))
        for tag, t in (("q", q), ("k", k), ("v", v)):
            w.tensor(tag, t)
        if mask is not None:
            w.tensor("mask", mask)
        w.error(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal,
                                                       enable_gqa=gqa, dropout_p=dropout_p))
        w.end()

    z = torch.zeros
    err("sdpa_err_causal_mask", z(1, 3, 4), z(1, 5, 4), z(1, 5, 2), mask=torch.ones(3, 5, dtype=torch.bool),
        is_causal=True)
    err("sdpa_err_dtypes", z(1, 3, 4), z(1, 5, 4, dtype=torch.float64), z(1, 5, 2))
    err("sdpa_err_dims", z(4), z(4), z(4))
    err("sdpa_err_mask_dtype", z(1, 3, 4), z(1, 5, 4), z(1, 5, 2), mask=torch.ones(3, 5, dtype=torch.int64))
    err("sdpa_err_mask_f64", z(1, 3, 4), z(1, 5, 4), z(1, 5, 2), mask=torch.ones(3, 5, dtype=torch.float64))
    err("sdpa_err_gqa_heads", z(1, 4, 3, 4), z(1, 3, 5, 4), z(1, 3, 5, 2), gqa=True)
    err("sdpa_err_dropout", z(1, 3, 4), z(1, 5, 4), z(1, 5, 2), dropout_p=1.5)


# ---- cross_entropy / nll_loss ----
def ce(w, name, logits, target, ignore_index=-100, reduction="mean", label_smoothing=0.0, nll=False):
    w.case(name, ignore_index=ignore_index, reduction=reduction, label_smoothing=float(label_smoothing),
           op="nll_loss" if nll else "cross_entropy")
    w.tensor("logits", logits)
    w.tensor("target", target)
    x = logits.detach().double().clone().requires_grad_(True)
    tgt = target.double() if target.dtype.is_floating_point else target
    if nll:
        out = F.nll_loss(x, tgt, ignore_index=ignore_index, reduction=reduction)
    else:
        out = F.cross_entropy(x, tgt, ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing)
    dy = randn(tuple(out.shape), torch.float64)
    (out * dy).sum().backward()
    w.tensor("dy", dy)
    w.tensor("out", out)
    w.tensor("dlogits", x.grad)
    w.end()


def ce_err(w, name, logits, target, **kw):
    w.case(name, ignore_index=kw.get("ignore_index", -100), reduction=kw.get("reduction", "mean"),
           label_smoothing=float(kw.get("label_smoothing", 0.0)), op="cross_entropy")
    w.tensor("logits", logits)
    w.tensor("target", target)
    w.error(lambda: F.cross_entropy(logits, target, **kw))
    w.end()


def losses(w):
    lg = randn((5, 4))
    t = torch.tensor([1, -100, 3, 0, -100])
    for red in ("mean", "sum", "none"):
        ce(w, f"ce_ignore_{red}", lg, t, reduction=red)
        ce(w, f"ce_smooth_{red}", lg, t, reduction=red, label_smoothing=0.1)
        ce(w, f"nll_ignore_{red}", lg.log_softmax(1), t, reduction=red, nll=True)
    ce(w, "ce_f32", lg.float(), torch.tensor([1, 2, 3, 0, 0]))
    ce(w, "ce_all_ignored_mean", lg, torch.full((5,), -100))
    ce(w, "ce_all_ignored_sum", lg, torch.full((5,), -100), reduction="sum")
    ce(w, "ce_all_ignored_smooth", lg, torch.full((5,), -100), label_smoothing=0.2)
    ce(w, "ce_ignore_in_range", lg, torch.tensor([1, 2, 3, 2, 0]), ignore_index=2)
    ce(w, "ce_ignore_minus_one", lg, torch.tensor([1, -1, 3, 0, -1]), ignore_index=-1)
    ce(w, "ce_u8_target", lg, torch.tensor([1, 2, 3, 0, 0], dtype=torch.uint8))
    ce(w, "ce_1d", randn((4,)), torch.tensor(2))
    ce(w, "ce_1d_none", randn((4,)), torch.tensor(3), reduction="none")
    ce(w, "ce_spatial_3d", randn((2, 4, 3)), torch.tensor([[1, 2, -100], [0, 3, 1]]))
    ce(w, "ce_spatial_3d_none", randn((2, 4, 3)), torch.tensor([[1, 2, -100], [0, 3, 1]]), reduction="none")
    ce(w, "ce_spatial_4d_smooth", randn((2, 3, 2, 2)), torch.tensor([[[1, 2], [-100, 0]], [[0, 0], [2, 1]]]),
       label_smoothing=0.3)
    ce(w, "ce_spatial_5d_sum", randn((1, 3, 2, 1, 2)), torch.tensor([[[[1, 2]], [[0, -100]]]]), reduction="sum")
    ce(w, "ce_empty_mean", randn((0, 4)), torch.zeros(0, dtype=torch.int64))
    ce(w, "ce_empty_sum", randn((0, 4)), torch.zeros(0, dtype=torch.int64), reduction="sum")
    ce(w, "ce_probs", lg, randn((5, 4)).softmax(1))
    ce(w, "ce_probs_smooth_none", lg, randn((5, 4)).softmax(1), reduction="none", label_smoothing=0.25)
    ce(w, "ce_probs_spatial_sum", randn((2, 3, 2)), randn((2, 3, 2)).softmax(1), reduction="sum")
    ce(w, "ce_negative_smoothing", lg, torch.tensor([1, 2, 3, 0, 0]), label_smoothing=-0.1)
    ce_err(w, "ce_err_bounds", lg, torch.tensor([1, 5, -100, 0, 9]))
    ce_err(w, "ce_err_negative", lg, torch.tensor([1, -100, -5, 0, 0]))
    ce_err(w, "ce_err_int32", lg, torch.tensor([1, 2, 3, 0, 0], dtype=torch.int32))
    ce_err(w, "ce_err_batch", lg, torch.tensor([1, 2]))
    ce_err(w, "ce_err_smoothing", lg, torch.tensor([1, 2, 3, 0, 0]), label_smoothing=1.5)
    ce_err(w, "ce_err_spatial", randn((2, 4, 3)), torch.tensor([[1, 2], [0, 1]]))
    ce_err(w, "ce_err_spatial_4d", randn((2, 4, 3, 2)), torch.tensor([[1, 2, 0], [0, 1, 1]]))
    ce_err(w, "ce_err_spatial_4d_size", randn((2, 4, 3, 2)), torch.zeros(2, 3, 3, dtype=torch.int64))
    ce_err(w, "ce_err_probs_dtype", lg, torch.zeros(5, 4, dtype=torch.int64))
    ce_err(w, "ce_err_logits_dtype", lg.long(), torch.tensor([1, 2, 3, 0, 0]))
    ce_err(w, "ce_err_multi_target", lg, torch.zeros(5, 1, dtype=torch.int64))


# ---- clip_grad_norm_ ----
def clip(w, name, grads, max_norm, norm_type=2.0, error_if_nonfinite=False):
    ps = [torch.nn.Parameter(torch.zeros(g.shape, dtype=g.dtype)) for g in grads]
    for p, g in zip(ps, grads):
        p.grad = g.clone()
    w.case(name, max_norm=float(max_norm), norm_type=float(norm_type), error_if_nonfinite=int(error_if_nonfinite),
           n=len(grads))
    for i, g in enumerate(grads):
        w.tensor(f"grad{i}", g)
    try:
        total = torch.nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type,
                                               error_if_nonfinite=error_if_nonfinite)
    except RuntimeError as e:
        w.lines.append("error " + str(e))
    else:
        w.tensor("total", total)
        for i, p in enumerate(ps):
            w.tensor(f"clipped{i}", p.grad)
    w.end()


def clips(w):
    a, b = randn((3, 4), torch.float32), randn((5,), torch.float32)
    clip(w, "clip_l2", [a, b], 1.0)
    clip(w, "clip_l2_no_clip", [a, b], 100.0)
    clip(w, "clip_inf", [a, b], 0.5, math.inf)
    clip(w, "clip_l1", [a, b], 2.0, 1.0)
    clip(w, "clip_l3_f64", [a.double(), b.double()], 1.5, 3.0)
    clip(w, "clip_negative_max", [torch.tensor([3.0, 4.0, 0.0])], -1.0)
    clip(w, "clip_mixed_f16", [a, b.half()], 1.0)
    clip(w, "clip_nonfinite_allowed", [torch.tensor([1.0, math.inf, 2.0]), b], 1.0)
    clip(w, "clip_nonfinite_error", [torch.tensor([1.0, math.inf, 2.0]), b], 1.0, error_if_nonfinite=True)
    clip(w, "clip_nan_error_inf_norm", [torch.tensor([1.0, math.nan]), b], 1.0, math.inf, error_if_nonfinite=True)


# ---- nanoGPT's learning-rate schedule (train.py's get_lr), in Python's double arithmetic ----
def get_lr(it, learning_rate, min_lr, warmup_iters, lr_decay_iters):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def schedules(w):
    for name, lr, mn, warm, total in (("lr_nanogpt", 6e-4, 6e-5, 2000, 600000), ("lr_small", 1e-3, 1e-4, 10, 50),
                                      ("lr_no_warmup", 3e-4, 0.0, 0, 20)):
        steps = sorted(set(list(range(0, min(total + 3, 60))) + [warm - 1, warm, warm + 1, total // 2, total - 1,
                                                                  total, total + 1, total + 1000]))
        steps = [s for s in steps if s >= 0]
        w.case(name, max_lr=lr, min_lr=mn, warmup_steps=warm, max_steps=total)
        w.tensor("steps", torch.tensor(steps))
        w.tensor("lr", torch.tensor([get_lr(s, lr, mn, warm, total) for s in steps], dtype=torch.float64))
        w.end()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden",
                                                  "nn_ops.txt"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    w = Writer()
    w.lines.append(f"# torch {torch.__version__}: embedding, scaled_dot_product_attention, cross_entropy, "
                   "clip_grad_norm_, nanoGPT's get_lr (tools/golden/gen_nn_golden.py; format in its docstring)")
    embeddings(w)
    attentions(w)
    losses(w)
    clips(w)
    schedules(w)
    with open(args.out, "w") as f:
        f.write("\n".join(w.lines) + "\n")


if __name__ == "__main__":
    main()
