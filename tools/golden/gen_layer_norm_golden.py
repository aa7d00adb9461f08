#!/usr/bin/env python3
# tools/golden/gen_layer_norm_golden.py — writes tests/golden/layer_norm.txt: torch.native_layer_norm
# (y, mean, rstd) and its backward (dx, dweight, dbias for a given dy) on CPU, from PyTorch.
# Run: python3 tools/golden/gen_layer_norm_golden.py > tests/golden/layer_norm.txt
#
# Format, one case per block:
#   case NAME XDTYPE PDTYPE SHAPE NNORM AFFINE EPS
#     SHAPE comma-separated ("-" for 0-d); the last NNORM dims are normalized; AFFINE bit 1 weight,
#     bit 2 bias; PDTYPE the dtype of weight and bias (and of mean/rstd when it differs from XDTYPE:
#     PyTorch's CPU mixed dtype); EPS a hex float.
#   then lines "TAG v v v ...", each value a hex float (or nan/inf), row-major:
#     x, w (AFFINE & 1), b (AFFINE & 2), dy: the inputs, exactly representable in their dtypes;
#     y, mean, rstd: torch.native_layer_norm's outputs in their dtypes;
#     dx, dw (AFFINE & 1), db (AFFINE & 2): the gradients of (y * dy).sum().
#   end
# The expected values are torc's contract: torch computing in float64 on the exact inputs, each
# output rounded once to its dtype (c10's double -> float -> narrow), the backward from mean and
# rstd as rounded. Each case is also checked here against torch in its own dtype (float
# accumulation, so within a loose tolerance: it differs most for f32 rows of a large mean).
import torch

NAMES = {torch.float64: "f64", torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}


def fhex(v):
    v = float(v)
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return v.hex()


def line(tag, t):
    vals = t.detach().double().flatten().tolist()
    return tag + ("" if not vals else " " + " ".join(fhex(v) for v in vals))


def rounded(t, dt):
    """t (f64) rounded once to dt and back to f64, as c10 converts (double -> float -> narrow)."""
    return t.to(torch.float32).to(dt).double() if dt != torch.float64 else t


def case(out, gen, name, xdt, shape, nnorm, affine, eps=1e-5, pdt=None, offset=0.0, scale=1.0):
    pdt = pdt or xdt
    sdt = torch.float32 if pdt != xdt else xdt  # mean/rstd: f32 in PyTorch's mixed dtype case
    ns = list(shape[len(shape) - nnorm:])
    dims = list(range(len(shape) - nnorm, len(shape)))
    rows = list(range(len(shape) - nnorm))
    x = (torch.randn(shape, generator=gen, dtype=torch.float64) * scale + offset).to(xdt)
    w = (torch.randn(ns, generator=gen, dtype=torch.float64) * 0.5 + 1.0).to(pdt) if affine & 1 else None
    b = (torch.randn(ns, generator=gen, dtype=torch.float64) * 0.5).to(pdt) if affine & 2 else None
    dy = torch.randn(shape, generator=gen, dtype=torch.float64).to(xdt)
    # The golden: torch in float64 on the exact inputs, each output rounded once (torc's contract).
    x64, dy64 = x.double(), dy.double()
    w64 = w.double() if w is not None else None
    b64 = b.double() if b is not None else None
    y, mean, rstd = torch.native_layer_norm(x64, ns, w64, b64, eps)
    y, mean, rstd = rounded(y, xdt), rounded(mean, sdt), rounded(rstd, sdt)
    # The backward from mean and rstd as the forward stored them (LAYER_NORM_BACKWARD's contract).
    xhat = (x64 - mean) * rstd
    g = dy64 * w64 if w64 is not None else dy64
    N = 1
    for d in dims:
        N *= shape[d]
    if N:
        dx = rstd * (g - g.sum(dims, keepdim=True) / N - xhat * (g * xhat).sum(dims, keepdim=True) / N)
    else:
        dx = torch.zeros_like(x64)
    dw = (dy64 * xhat).sum(rows) if rows else dy64 * xhat
    db = dy64.sum(rows) if rows else dy64
    grads = [rounded(dx, xdt), rounded(dw.reshape(ns), pdt), rounded(db.reshape(ns), pdt)]
    # Cross-check against PyTorch in the case's own dtypes (float accumulation: loose).
    xt = x.clone().requires_grad_(True)
    wt = w.clone().requires_grad_(True) if w is not None else None
    bt = b.clone().requires_grad_(True) if b is not None else None
    yt, mt, rt = torch.native_layer_norm(xt, ns, wt, bt, eps)
    loose = {torch.float64: 1e-10, torch.float32: 1e-3, torch.float16: 2e-2, torch.bfloat16: 8e-2}[xdt]
    ins = [t for t in (xt, wt, bt) if t is not None]
    if yt.numel():
        gt = torch.autograd.grad((yt * dy).sum(), ins)
        want = [grads[0]] + ([grads[1]] if w is not None else []) + ([grads[2]] if b is not None else [])
        for a, e in [(yt, y), (mt, mean), (rt, rstd)] + list(zip(gt, want)):
            sc = max(1.0, e.abs().max().item()) if e.numel() else 1.0
            assert torch.allclose(a.double(), e, rtol=0, atol=loose * sc, equal_nan=True), (name, (a.double() - e).abs().max())
    sh = ",".join(str(s) for s in shape) if shape else "-"
    out.append("case %s %s %s %s %d %d %s" % (name, NAMES[xdt], NAMES[pdt], sh, nnorm, affine, fhex(eps)))
    out.append(line("x", x))
    if w is not None:
        out.append(line("w", w))
    if b is not None:
        out.append(line("b", b))
    out.append(line("dy", dy))
    out.append(line("y", y))
    out.append(line("mean", mean))
    out.append(line("rstd", rstd))
    out.append(line("dx", grads[0]))
    if w is not None:
        out.append(line("dw", grads[1]))
    if b is not None:
        out.append(line("db", grads[2]))
    out.append("end")


def main():
    gen = torch.Generator().manual_seed(20261126)
    out = ["# tests/golden/layer_norm.txt — generated by tools/golden/gen_layer_norm_golden.py (torch %s); "
           "do not edit." % torch.__version__.split("+")[0]]
    f32, f64, bf16, f16 = torch.float32, torch.float64, torch.bfloat16, torch.float16
    case(out, gen, "f32_rows", f32, (4, 5), 1, 3)
    case(out, gen, "f32_two_dims_weight", f32, (2, 3, 4), 2, 1)
    case(out, gen, "f32_all_dims_plain", f32, (2, 3, 4), 3, 0)
    case(out, gen, "f32_wide_rows", f32, (2, 130), 1, 3)
    case(out, gen, "f32_large_mean", f32, (3, 40), 1, 3, offset=1000.0)
    case(out, gen, "f32_eps", f32, (2, 6), 1, 3, eps=0.25, scale=0.1)
    case(out, gen, "f32_no_rows", f32, (0, 5), 1, 3)
    case(out, gen, "f32_empty_rows", f32, (2, 0), 1, 3)
    case(out, gen, "f64_rows", f64, (3, 7), 1, 3)
    case(out, gen, "f64_bias_only", f64, (2, 2, 3), 2, 2)
    case(out, gen, "f64_4d", f64, (2, 3, 2, 4), 2, 3, eps=1e-3)
    case(out, gen, "bf16_rows", bf16, (4, 16), 1, 3)
    case(out, gen, "bf16_plain", bf16, (3, 2, 8), 2, 0)
    case(out, gen, "bf16_mixed_f32_params", bf16, (3, 8), 1, 3, pdt=f32)
    case(out, gen, "f16_rows", f16, (3, 8), 1, 3)
    case(out, gen, "f16_weight_only", f16, (2, 2, 10), 1, 1)
    case(out, gen, "f16_mixed_f32_params", f16, (2, 12), 1, 3, pdt=f32)
    print("\n".join(out))


if __name__ == "__main__":
    main()
