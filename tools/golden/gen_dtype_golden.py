#!/usr/bin/env python3
# tools/golden/gen_dtype_golden.py — writes the dtype golden vectors in tests/golden/ (narrow
# float conversions, dtype limits, promote_types and result_type tables) from PyTorch.
"""Generate the dtype / promotion golden vectors used by tests/test_dtype.c and
tests/test_promotion.c. The test suite reads only the committed outputs; it never needs torch.

Rerun (from the repository root; needs torch, numpy and ml_dtypes, takes a few seconds):

    python3 tools/golden/gen_dtype_golden.py            # writes tests/golden/dtype_* promotion_*
    python3 tools/golden/gen_dtype_golden.py --out DIR  # somewhere else (to diff)

The output is deterministic for a given PyTorch version (fixed seeds, no timestamps); the
PyTorch version used is recorded in the first line of dtype_info.txt. Generated with torch
2.15.0 and ml_dtypes 0.6.0.

Files (binary files are little-endian, headerless; the record count follows from the size):

  dtype_f16_to_f32.bin        65536 x u32: f32 bits of f16 pattern i (index = pattern)
  dtype_bf16_to_f32.bin       65536 x u32: f32 bits of bf16 pattern i
  dtype_f8_e4m3fn_to_f32.bin    256 x u32: f32 bits of e4m3fn pattern i
  dtype_f8_e5m2_to_f32.bin      256 x u32: f32 bits of e5m2 pattern i
  dtype_f32_to_f16.bin        records {u32 f32 bits in, u16 f16 bits out}      (6 bytes)
  dtype_f32_to_bf16.bin       records {u32 f32 bits in, u16 bf16 bits out}     (6 bytes)
  dtype_f32_to_f8_e4m3fn.bin  records {u32 f32 bits in, u8 e4m3fn bits out}    (5 bytes)
  dtype_f32_to_f8_e5m2.bin    records {u32 f32 bits in, u8 e5m2 bits out}      (5 bytes)
  dtype_info.txt              one line per dtype: name itemsize is_floating is_signed and
                              torch.finfo (min max eps tiny) or torch.iinfo (min max) values
  promotion_promote_types.txt "A B -> R" for all 144 pairs, or "A B -> error MESSAGE"
  promotion_result_type.txt   "DEFAULT OPERAND... -> R" or "... -> error MESSAGE", where an
                              operand is t:DTYPE (a 1-D tensor), z:DTYPE (a zero-dim tensor)
                              or s:int / s:float / s:bool (a Python scalar) and DEFAULT is
                              the default dtype (torch.set_default_dtype) for that case

f32 -> narrow inputs: for every format, the exact midpoint between adjacent representable
values (all pairs for fp8; for f16/bf16 all pairs in the subnormal range, the first normal
binade, [1, 2), the top binade and the overflow edge, plus a regular sample of the rest),
one f32 ulp either side of each midpoint, negated midpoints, specials (signed zeros,
infinities, NaNs, 1e-8, the format's max and overflow threshold) and 4000 seeded random
values (2000 uniform bit patterns, 2000 log-uniform over the format's range).

Two PyTorch details are pinned here on purpose:
  * NaN inputs are converted one element at a time (zero-dim tensors), which runs c10's
    scalar conversion. PyTorch's vectorised AVX-512 f32 -> bf16 cast turns every NaN into
    0xFFFF (sign set) while c10::BFloat16 gives 0x7FC0; torc follows c10's scalar rule, and
    tests compare NaN-ness and sign only.
  * PyTorch 2.15 saturates f32 -> float8_e4m3fn: finite overflow and +-inf become +-448
    (0x7E/0xFE), NaN stays NaN. ml_dtypes still returns NaN there; the ml_dtypes
    cross-check below allows exactly that difference (and NaN payloads) and nothing else.
"""
import argparse
import os
import sys

import numpy as np
import torch
import ml_dtypes

SEED = 20240531

DTYPES = [  # torc's enum order
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
    torch.float8_e5m2, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
    torch.bool,
]


def name(dt):
    return str(dt).replace("torch.", "")


# ---- narrow float formats ----
class Fmt:
    def __init__(self, key, tdt, mdt, bits, max_pat, overflow_next, full_pair):
        self.key = key            # file name part
        self.tdt = tdt            # torch dtype
        self.mdt = mdt            # ml_dtypes / numpy dtype for the cross-check
        self.bits = bits          # 8 or 16
        self.max_pat = max_pat    # bit pattern of the largest finite value
        self.overflow_next = overflow_next  # the value one ulp above max (not representable)
        self.full_pair = full_pair  # predicate on the lower pattern of a pair: keep it


FORMATS = [
    Fmt("f16", torch.float16, np.float16, 16, 0x7BFF, 65536.0,
        lambda i: i < 0x0800 or 0x3C00 <= i < 0x4000 or i >= 0x7800 or i % 11 == 0),
    Fmt("bf16", torch.bfloat16, ml_dtypes.bfloat16, 16, 0x7F7F, 2.0 ** 128,
        lambda i: i < 0x0100 or 0x3280 <= i < 0x3300 or 0x3F80 <= i < 0x4000 or i >= 0x7F00
        or i % 7 == 0),
    Fmt("f8_e4m3fn", torch.float8_e4m3fn, ml_dtypes.float8_e4m3fn, 8, 0x7E, 480.0,
        lambda i: True),
    Fmt("f8_e5m2", torch.float8_e5m2, ml_dtypes.float8_e5m2, 8, 0x7B, 65536.0,
        lambda i: True),
]


def pattern_view(fmt):
    return torch.int16 if fmt.bits == 16 else torch.uint8


def widen_all(fmt):
    """f32 bits of every bit pattern of fmt, through PyTorch's .float()."""
    n = 1 << fmt.bits
    pats = np.arange(n, dtype=np.uint32).astype(np.uint16 if fmt.bits == 16 else np.uint8)
    t = torch.from_numpy(pats.view(np.int16) if fmt.bits == 16 else pats).view(fmt.tdt)
    return t.float().numpy().view("<u4").copy()


def f32_bits(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def narrow_inputs(fmt, widened, rng):
    """The f32 inputs (as u32 bits, deduplicated, in a fixed order) for f32 -> fmt."""
    vals = widened.view(np.float32).astype(np.float64)
    out = []
    pairs = [(vals[i], vals[i + 1]) for i in range(fmt.max_pat) if fmt.full_pair(i)]
    pairs.append((vals[fmt.max_pat], fmt.overflow_next))
    for a, b in pairs:
        m = (a + b) / 2.0
        m32 = np.float32(m)
        assert float(m32) == m, (fmt.key, a, b)  # every midpoint is exact in f32
        out.append(m32)
        out.append(np.nextafter(m32, np.float32(-np.inf)))
        out.append(np.nextafter(m32, np.float32(np.inf)))
        out.append(-m32)
    specials = [0.0, -0.0, np.inf, -np.inf, 1e-8, -1e-8, 1.0, -1.0, 0.1, 1.0 / 3.0, 65504.0,
                65519.99, 65520.0, 65536.0, 448.0, 464.0, 470.0, 480.0, 500.0, 57344.0,
                61440.0, 1e6, -1e6, 3.4028234663852886e38, -3.4028234663852886e38,
                1.1754943508222875e-38, 1e-45, fmt.overflow_next, -fmt.overflow_next,
                float(vals[fmt.max_pat]), -float(vals[fmt.max_pat])]
    out.extend(np.float32(s) for s in specials)
    bits = [int(b) for b in f32_bits(out)]
    bits += [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FBFFFFF, 0xFFFFFFFF,
             0x00000001, 0x80000001, 0x007FFFFF]
    # seeded random values: uniform bit patterns, then log-uniform over the format's range
    bits += [int(b) for b in rng.integers(0, 1 << 32, size=2000, dtype=np.uint64)]
    tiny_exp = int(np.floor(np.log2(vals[1])))          # smallest subnormal's exponent
    top_exp = int(np.floor(np.log2(fmt.overflow_next)))
    exps = rng.integers(tiny_exp - 2, top_exp + 2, size=2000)
    mants = rng.integers(0, 1 << 23, size=2000)
    signs = rng.integers(0, 2, size=2000)
    for e, m, s in zip(exps, mants, signs):
        v = np.float32(np.ldexp(1.0 + float(m) / (1 << 23), int(e)))
        bits.append(int(f32_bits(v)) ^ (int(s) << 31))
    return np.array(list(dict.fromkeys(b & 0xFFFFFFFF for b in bits)), dtype=np.uint32)


def narrow(fmt, bits):
    """PyTorch's f32 -> fmt for every input (NaN inputs through c10's scalar path)."""
    x = torch.from_numpy(bits.view(np.float32).copy())
    y = x.to(fmt.tdt).view(pattern_view(fmt)).numpy()
    y = y.view(np.uint16 if fmt.bits == 16 else np.uint8).astype(np.uint32)
    for i in np.nonzero(np.isnan(bits.view(np.float32)))[0]:
        y[i] = int(x[i].reshape(()).clone().to(fmt.tdt).view(pattern_view(fmt)).item()) & (
            (1 << fmt.bits) - 1)
    return y


def is_nan_pattern(fmt, pats):
    return np.isnan(pats.astype(np.uint16 if fmt.bits == 16 else np.uint8).view(fmt.mdt)
                    .astype(np.float32))


def cross_check(fmt, bits, got):
    """ml_dtypes must agree with PyTorch, except for the documented differences."""
    x = bits.view(np.float32)
    with np.errstate(all="ignore"):
        ref = x.astype(fmt.mdt).view(np.uint16 if fmt.bits == 16 else np.uint8).astype(np.uint32)
    nan_ref, nan_got = is_nan_pattern(fmt, ref), is_nan_pattern(fmt, got)
    bad = (ref != got) & ~(nan_ref & nan_got)
    if fmt.key == "f8_e4m3fn":  # PyTorch saturates, ml_dtypes gives NaN
        bad &= ~((np.abs(x) > 464.0) & ~np.isnan(x) & ((got & 0x7F) == 0x7E))
    if bad.any():
        i = int(np.nonzero(bad)[0][0])
        sys.exit(f"{fmt.key}: torch and ml_dtypes disagree on {bad.sum()} inputs, first "
                 f"0x{int(bits[i]):08x}: torch 0x{int(got[i]):x} ml_dtypes 0x{int(ref[i]):x}")


def write_records(path, bits, outs, out_bytes):
    rec = np.zeros(len(bits), dtype=[("x", "<u4"), ("y", "<u2" if out_bytes == 2 else "u1")])
    rec["x"] = bits
    rec["y"] = outs
    rec.tofile(path)


# ---- dtype info ----
def g17(v):
    return repr(float(v))


def write_info(path):
    with open(path, "w") as f:
        f.write(f"# torch {torch.__version__}: name itemsize is_floating is_signed "
                "then finfo min max eps tiny, or iinfo min max (bool: none)\n")
        for dt in DTYPES:
            line = f"{name(dt)} {dt.itemsize} {int(dt.is_floating_point)} {int(dt.is_signed)}"
            if dt.is_floating_point:
                fi = torch.finfo(dt)
                line += f" {g17(fi.min)} {g17(fi.max)} {g17(fi.eps)} {g17(fi.tiny)}"
            elif dt != torch.bool:
                ii = torch.iinfo(dt)
                line += f" {ii.min} {ii.max}"
            f.write(line + "\n")


# ---- promotion ----
def outcome(fn):
    try:
        return name(fn())
    except RuntimeError as e:
        return "error " + str(e).splitlines()[0]


SCALARS = {"int": 2, "float": 2.5, "bool": True}


def make_operand(tok):
    kind, what = tok.split(":")
    if kind == "s":
        return SCALARS[what]
    dt = getattr(torch, what)
    return torch.zeros((2,) if kind == "t" else (), dtype=dt)


def result_type_cases():
    """(default dtype, operand tokens) for every case of promotion_result_type.txt."""
    names = [name(d) for d in DTYPES]
    cases = []
    for d in names:
        for s in SCALARS:
            cases.append(("float32", [f"t:{d}", f"s:{s}"]))
            cases.append(("float32", [f"z:{d}", f"s:{s}"]))
            cases.append(("float32", [f"s:{s}", f"t:{d}"]))
        for e in names:
            cases.append(("float32", [f"t:{d}", f"z:{e}"]))
            cases.append(("float32", [f"z:{e}", f"t:{d}"]))
            cases.append(("float32", [f"z:{d}", f"z:{e}"]))
            cases.append(("float32", [f"t:{d}", f"t:{e}"]))
        for default in ("float64", "float16", "bfloat16"):
            for s in SCALARS:
                cases.append((default, [f"t:{d}", f"s:{s}"]))
                cases.append((default, [f"z:{d}", f"s:{s}"]))
    for a in SCALARS:
        for b in SCALARS:
            cases.append(("float32", [f"s:{a}", f"s:{b}"]))
            cases.append(("float64", [f"s:{a}", f"s:{b}"]))
    # three tensor operands (dimensioned, zero-dim, zero-dim): torch.result_type takes two,
    # so these come from torch.addcmul on CPU, whose TensorIterator promotes its inputs with
    # the same ResultTypeState (the meta device would not do: its Python meta functions use
    # torch._prims_common's promotion, which lets fp8 mix). Cases whose common dtype has no
    # addcmul kernel (bool, fp8) raise "not implemented" and are left out.
    for d in names:
        for e in names:
            for f in ("int8", "uint8", "bool", "bfloat16", "float64"):
                cases.append(("float32", [f"t:{d}", f"z:{e}", f"z:{f}"]))
    return cases


def result_type_of(default, toks):
    """torch's answer for one case, or None when it cannot tell (no addcmul kernel)."""
    torch.set_default_dtype(getattr(torch, default))
    try:
        if len(toks) == 2:
            return outcome(lambda: torch.result_type(*[make_operand(t) for t in toks]))
        r = outcome(lambda: torch.addcmul(*[make_operand(t) for t in toks]).dtype)
        return r if not r.startswith("error") or "Promotion for Float8" in r else None
    finally:
        torch.set_default_dtype(torch.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--out", default=os.path.join(root, "tests", "golden"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(SEED)
    np.seterr(over="ignore", invalid="ignore")  # NaN and inf inputs are made on purpose

    for fmt in FORMATS:
        widened = widen_all(fmt)
        widened.astype("<u4").tofile(os.path.join(args.out, f"dtype_{fmt.key}_to_f32.bin"))
        bits = narrow_inputs(fmt, widened, rng)
        outs = narrow(fmt, bits)
        cross_check(fmt, bits, outs)
        write_records(os.path.join(args.out, f"dtype_f32_to_{fmt.key}.bin"), bits, outs,
                      fmt.bits // 8)
        print(f"{fmt.key}: {len(widened)} widened, {len(bits)} narrowed")

    write_info(os.path.join(args.out, "dtype_info.txt"))

    with open(os.path.join(args.out, "promotion_promote_types.txt"), "w") as f:
        f.write(f"# torch {torch.__version__}: torch.promote_types(A, B) for every pair\n")
        for a in DTYPES:
            for b in DTYPES:
                f.write(f"{name(a)} {name(b)} -> {outcome(lambda: torch.promote_types(a, b))}\n")

    cases = result_type_cases()
    with open(os.path.join(args.out, "promotion_result_type.txt"), "w") as f:
        f.write(f"# torch {torch.__version__}: DEFAULT_DTYPE OPERANDS -> torch.result_type; "
                "t: 1-D tensor, z: zero-dim tensor, s: Python scalar (2, 2.5, True)\n")
        kept = 0
        for default, toks in cases:
            r = result_type_of(default, toks)
            if r is not None:
                f.write(f"{default} {' '.join(toks)} -> {r}\n")
                kept += 1
    print(f"result_type: {kept} cases ({len(cases) - kept} three-operand cases without a kernel)")


if __name__ == "__main__":
    main()
