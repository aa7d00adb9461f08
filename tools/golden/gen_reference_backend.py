#!/usr/bin/env python3
# tools/golden/gen_reference_backend.py — prints the PyTorch (float64) expected values that
# tests/test_reference_backend.c pastes in; run: python3 tools/golden/gen_reference_backend.py
import math

import mpmath
import torch

mpmath.mp.dps = 30

torch.set_printoptions(precision=17)
F = torch.nn.functional


def c_array(vals):
    out = []
    for v in vals:
        v = float(v)
        if math.isnan(v):
            out.append("NAN")
        elif math.isinf(v):
            out.append("INFINITY" if v > 0 else "-INFINITY")
        else:
            out.append(repr(v))
    return "{" + ", ".join(out) + "}"


def unary():
    # Inputs exactly representable in bf16 and f16, so every dtype sees the same values.
    x = torch.tensor([-3.5, -1.0, -0.25, -0.0, 0.375, 1.0, 2.0, 4.5], dtype=torch.float64)
    y = torch.tensor([-1.0, -127 / 128, -0.5, 0.0, 2.0**-30, 0.6875, 0.71875, 255 / 256], dtype=torch.float64)
    print("// unary: x =", c_array(x.tolist()), "; erfinv on", c_array(y.tolist()))
    ops = [
        ("TORC_OP_SQRT", 0, torch.sqrt(x)), ("TORC_OP_RSQRT", 0, torch.rsqrt(x)),
        ("TORC_OP_RECIPROCAL", 0, torch.reciprocal(x)), ("TORC_OP_EXP", 0, torch.exp(x)),
        ("TORC_OP_LOG", 0, torch.log(x)), ("TORC_OP_SIN", 0, torch.sin(x)), ("TORC_OP_COS", 0, torch.cos(x)),
        ("TORC_OP_TANH", 0, torch.tanh(x)), ("TORC_OP_SIGMOID", 0, torch.sigmoid(x)),
        ("TORC_OP_GELU", 0, F.gelu(x)), ("TORC_OP_GELU", 1, F.gelu(x, approximate="tanh")),
        ("TORC_OP_POW_SCALAR", 3, torch.pow(x, 3)), ("TORC_OP_POW_SCALAR", 0.5, torch.pow(x, 0.5)),
        ("TORC_OP_POW_SCALAR", -2, torch.pow(x, -2)),
        ("TORC_OP_POW_SCALAR", 2.5, torch.pow(x, 2.5)), ("TORC_OP_POW_SCALAR", -0.5, torch.pow(x, -0.5)), ("TORC_OP_ERF", 0, torch.erf(x)),
        # erfinv from mpmath at 30 digits: torch's own loses up to ~14 ulps near |y| = 1.
        ("TORC_OP_ERFINV", 0, [float(mpmath.erfinv(mpmath.mpf(v))) for v in y.tolist()]),
    ]
    for code, p, r in ops:
        r = r.tolist() if isinstance(r, torch.Tensor) else r
        print("    {%s, %s, %s}," % (code, repr(float(p)), c_array(r)))
    ext = [1 - 2.0**-53, -1e-300]
    print("// erfinv extremes (mpmath) on", c_array(ext), ":", c_array([float(mpmath.erfinv(mpmath.mpf(v))) for v in ext]))


def reductions():
    x = torch.tensor([[1.5, -2.0, 0.25, 3.0], [4.0, 0.5, -1.0, 2.0], [-3.0, 1.0, 2.5, -0.75]], dtype=torch.float64)
    print("// reductions of x (3, 4) =", c_array(x.flatten().tolist()), "; {code, mask, param, {out, keepdim}}")
    masks = [(1, (0,)), (2, (1,)), (3, (0, 1))]
    for mask, dims in masks:
        rows = [
            ("TORC_OP_SUM", 0, x.sum(dims, keepdim=True)), ("TORC_OP_MEAN", 0, x.mean(dims, keepdim=True)),
            ("TORC_OP_PROD", 0, x.prod(dims[0], keepdim=True) if len(dims) == 1 else x.prod().reshape(1, 1)),
            ("TORC_OP_MAX", 0, x.amax(dims, keepdim=True)), ("TORC_OP_MIN", 0, x.amin(dims, keepdim=True)),
            ("TORC_OP_LOGSUMEXP", 0, x.logsumexp(dims, keepdim=True)),
        ]
        if len(dims) == 1:
            rows += [("TORC_OP_ARGMAX", 0, x.argmax(dims[0], keepdim=True)),
                     ("TORC_OP_ARGMIN", 0, x.argmin(dims[0], keepdim=True))]
        else:
            rows += [("TORC_OP_ARGMAX", 0, x.argmax().reshape(1, 1)), ("TORC_OP_ARGMIN", 0, x.argmin().reshape(1, 1))]
        for c in (0.0, 1.0, 2.0):
            rows += [("TORC_OP_VAR", c, x.var(dims, correction=c, keepdim=True)),
                     ("TORC_OP_STD", c, x.std(dims, correction=c, keepdim=True))]
        for p in (0.0, 1.0, 2.0, 3.0, 0.5, -1.0, math.inf, -math.inf):
            rows.append(("TORC_OP_NORM", p, torch.linalg.vector_norm(x, p, dims, keepdim=True)))
        for code, param, r in rows:
            print("    {%s, %d, %s, %s}," % (code, mask, c_array([param]).strip("{}"), c_array(r.flatten().tolist())))


def softmax():
    x = torch.tensor([[1.5, -2.0, 0.25, 3.0], [4.0, 0.5, -1.0, 2.0], [-3.0, 1.0, 2.5, -0.75]], dtype=torch.float64)
    print("// softmax of the same x: {code, dim, out}")
    for dim in (0, 1):
        print("    {TORC_OP_SOFTMAX, %d, %s}," % (dim, c_array(x.softmax(dim).flatten().tolist())))
        print("    {TORC_OP_LOG_SOFTMAX, %d, %s}," % (dim, c_array(x.log_softmax(dim).flatten().tolist())))
    edge = torch.tensor([[float("-inf"), float("-inf")], [float("inf"), 1.0], [float("nan"), 1.0], [1000.0, 0.0]],
                        dtype=torch.float64)
    print("// softmax edge rows", c_array(edge.flatten().tolist()), ":", c_array(edge.softmax(1).flatten().tolist()),
          c_array(edge.log_softmax(1).flatten().tolist()))
    print("// logsumexp edge rows:", c_array(edge.logsumexp(1).tolist()))


if __name__ == "__main__":
    unary()
    reductions()
    softmax()
