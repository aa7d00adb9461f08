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


if __name__ == "__main__":
    unary()
