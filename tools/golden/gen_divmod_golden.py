#!/usr/bin/env python3
# tools/golden/gen_divmod_golden.py — writes tests/golden/ops_divmod.txt from PyTorch: floor_divide,
# remainder and fmod (values, signs, division by zero, promotion, gradients) and add with alpha.
"""Generate the expected values for the floor_divide / remainder / fmod and add_scaled cases of
tests/test_ops_binary.c. The test suite reads only the committed output; it never needs torch.

Rerun (from the repository root; needs torch, takes a second):

    python3 tools/golden/gen_divmod_golden.py            # writes tests/golden/ops_divmod.txt
    python3 tools/golden/gen_divmod_golden.py --out DIR  # somewhere else (to diff)

The file format is gen_ops_golden.py's (its docstring), whose writer this script reuses; the
output is deterministic for a given PyTorch version (fixed seeds), which its first line names.
Generated with torch 2.15.0 (CPU, AVX512 kernels).

Op names beyond torc's functions: remainder_grad / fmod_grad hold d(sum(op(a, b)))/da and /db of
two contiguous inputs (params which=a|b). add_scaled_fma cases run contiguous inputs whose length
is a multiple of 64, so PyTorch's f16/bf16 kernels take their vectorised path throughout (one
fused multiply-add in float, rounded once); its scalar path (strided operands, the tail of a
run) rounds alpha * b to the dtype first, which torc does not copy (include/torc/torc.h).
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_ops_golden as g  # noqa: E402  (the writer, the specs, the dtype names)

g.DT.update({'i16': torch.int16, 'i8': torch.int8})
g.SHORT.update({torch.int16: 'i16', torch.int8: 'i8'})

OPS = [('floor_divide', torch.floor_divide), ('remainder', torch.remainder), ('fmod', torch.fmod)]
FLOATS = ['f32', 'f64', 'bf16', 'f16']
INTS = ['i64', 'i32', 'i16', 'i8', 'u8']

# Divisors without zero (exact in every float dtype) and dividends of both signs.
NUM = [-2.5, -1.25, -0.5, 0.0, 0.25, 0.75, 1.0, 1.5, 2.0, 3.25, -3.0, 0.125, 4.5, -0.75, 2.75, 1.25,
       7.0, -7.0, 5.5, -6.0]
DEN = [1.5, -1.25, 0.75, 2.0, -3.0, 0.5, 4.0, -0.25, 2.5, -2.0, 1.0, -1.0]
INUM = [-7, -5, -3, -1, 0, 1, 2, 3, 5, 7, 9, -9, 4, -4, 100, -100]
IDEN = [3, -3, 2, -2, 7, -7, 1, -1, 5, -5]
UNUM = [0, 1, 2, 3, 5, 7, 250, 255, 4, 9, 128, 6, 10, 200, 17, 8]
UDEN = [3, 2, 7, 1, 5, 250, 9, 16]
# Signs, zeros, infinities and NaN (PyTorch's branches: b == 0, mod == 0, div == 0, inf // 2).
SPECIAL_A = [5, -5, 5, -5, 0, -0.0, 4, -4, 1, 1, -1, float('inf'), 1, -1, -1, float('nan'), 1, -0.0, 0.5, -0.5]
SPECIAL_B = [3, 3, -3, -3, 3, 3, 2, 2, 0, -0.0, 0, 2, float('inf'), float('inf'), float('-inf'), 1, float('nan'),
             -3, -3, 3]


def cyc(pool, n, seed=0):
    return [pool[(seed + 5 * i) % len(pool)] for i in range(n)]


def numer(dt, n, seed=0):
    return cyc(UNUM if dt == 'u8' else INUM if dt in INTS else NUM, n, seed)


def denom(dt, n, seed=0):
    return cyc(UDEN if dt == 'u8' else IDEN if dt in INTS else DEN, n, seed)


def sp(dt, shape, vals, layout='c'):
    """A Spec of logical shape `shape` in `layout` (g.spec's layouts) holding vals cyclically."""
    base = g.spec(dt, shape, layout)
    base.vals = [vals[i % len(vals)] for i in range(len(base.vals))]
    return base


def exact(dt, vals):
    """vals rounded to dt (so the file's inputs are exactly representable)."""
    return torch.tensor(vals, dtype=torch.float64).to(g.DT[dt]).to(torch.float64).tolist()


def randoms(dt, n, seed, scale_range=(-6, 6), nonzero=False):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n) * np.exp(rng.uniform(scale_range[0], scale_range[1], n))
    if nonzero:
        v[v == 0] = 1.0
    return exact(dt, v.tolist())


def gen_divmod(w):
    w.comment('every dtype and layout: contiguous, transposed, stepped, broadcast, zero-dim, zero-size')
    for name, fn in OPS:
        for dt in FLOATS + INTS:
            pairs = [('c', 'c'), ('t', 's')] if dt != 'f32' else [('c', 'c'), ('t', 's'), ('s', 't'), ('e', 'r')]
            for la, lb in pairs:
                w.case(name, [], [sp(dt, (2, 3), numer(dt, 16), la), sp(dt, (2, 3), denom(dt, 16, 3), lb)], fn)
            w.case(name, [], [sp(dt, (4, 5), numer(dt, 20, 1)), sp(dt, (5,), denom(dt, 5, 2))], fn)
            w.case(name, [], [sp(dt, (3, 1), numer(dt, 3, 2)), sp(dt, (1, 4), denom(dt, 4, 1))], fn)
            w.case(name, [], [sp(dt, (), numer(dt, 1, 3)), sp(dt, (), denom(dt, 1, 4))], fn)
            w.case(name, [], [sp(dt, (2, 3, 4), numer(dt, 24, 4), 'p'), sp(dt, (3, 1), denom(dt, 3, 5), 's')], fn)
            if dt in ('f32', 'i64'):
                w.case(name, [], [sp(dt, (0, 3), [1]), sp(dt, (1, 3), denom(dt, 3))], fn)
    w.comment('signs, zeros, infinities and NaN')
    for name, fn in OPS:
        for dt in FLOATS:
            w.case(name, [], [g.Spec(dt, (len(SPECIAL_A),), SPECIAL_A), g.Spec(dt, (len(SPECIAL_B),), SPECIAL_B)], fn)
    w.comment('random magnitudes (quotients up to 2^24 and beyond: the rounding steps of div_floor_floating)')
    for name, fn in OPS:
        for k, dt in enumerate(FLOATS):
            n = 203  # not a multiple of any vector width: PyTorch's vector and scalar loops both run
            w.case(name, [], [g.Spec(dt, (n,), randoms(dt, n, 10 + k)),
                              g.Spec(dt, (n,), randoms(dt, n, 20 + k, nonzero=True))], fn)
    w.comment('integers: wrapping at the minimum, division by zero (ZeroDivisionError), empty tensors')
    for name, fn in OPS:
        for dt, lo in (('i8', -128), ('i16', -32768), ('i32', -2 ** 31), ('i64', -2 ** 63)):
            w.case(name, [], [g.Spec(dt, (3,), [lo, lo, -7]), g.Spec(dt, (3,), [-1, 1, -1])], fn)
        for dt in INTS:
            w.case(name, [], [g.Spec(dt, (3,), [5, 3, 1]), g.Spec(dt, (3,), [2, 0, 1])], fn)
        w.case(name, [], [g.Spec('i64', (0,), []), g.Spec('i64', (), [0])], fn)
        w.case(name + '_scalar', [], [g.Spec('i32', (2,), [5, -3])], lambda x, s, fn=fn: fn(x, s), scalars=(0,))
        w.case(name + '_scalar', [], [g.Spec('i64', (0, 2), [])], lambda x, s, fn=fn: fn(x, s), scalars=(0,))
    w.comment('promotion: mixed dtypes, zero-dim operands, bool operands; bool results are refused')
    for name, fn in OPS:
        for da, db in (('i64', 'f32'), ('f16', 'f32'), ('bf16', 'f16'), ('u8', 'i8'), ('i32', 'f64'), ('bool', 'i64'),
                       ('f32', 'bool'), ('u8', 'bool')):
            w.case(name, [], [sp(da, (4,), numer(da, 4, 1) if da != 'bool' else [1, 0, 1, 1]),
                              sp(db, (4,), denom(db, 4, 2) if db != 'bool' else [1, 1, 1, 1])], fn)
        w.case(name, [], [sp('f16', (2, 3), numer('f16', 6)), sp('f64', (), [0.75])], fn)
        w.case(name, [], [sp('i64', (2, 3), numer('i64', 6)), sp('f32', (), [2.5])], fn)
        w.case(name, [], [sp('bool', (3,), [1, 0, 1]), sp('bool', (3,), [1, 1, 1])], fn)
    w.comment('tensor (op) Python scalar: int, float and bool scalars; f16/bf16 floor_divide reads a float')
    for name, fn in OPS:
        for dt in FLOATS + ['i64', 'i32', 'u8', 'bool']:
            for s in (2, -3, 2.5, -0.75, 0.1, 0.3, True):
                w.case(name + '_scalar', [], [sp(dt, (2, 3), numer(dt, 6) if dt != 'bool' else [1, 0, 1, 0, 0, 1],
                                                 't' if dt in ('f32', 'i64') else 'c')],
                       lambda x, s, fn=fn: fn(x, s), scalars=(s,))
        for dt in ('f16', 'bf16'):  # many values by a scalar the dtype cannot hold (opmath)
            vals = exact(dt, [0.37 * i for i in range(1, 97)])
            for s in (0.1, 0.3, 7.3):
                w.case(name + '_scalar', [], [g.Spec(dt, (96,), vals)], lambda x, s, fn=fn: fn(x, s), scalars=(s,))
            w.case(name, [], [g.Spec(dt, (96,), vals), g.Spec(dt, (), exact(dt, [0.1]))], fn)


def grad_cases(w):
    w.comment('gradients of the tensor forms: d sum(op(a, b)) / da (which=a) and / db (which=b)')
    for name, fn in (('remainder', torch.remainder), ('fmod', torch.fmod)):
        for dt in ('f32', 'f64'):
            a_vals = [5, -5, 5, -5, 7.5, -0.5, 0.5, 3, -3, 1e30, 0.25, -2.5]
            b_vals = [3, 3, -3, -3, -2, 3, -3, 0.75, 0.75, 3, float('inf'), 2]
            for which in ('a', 'b'):
                def f(a, b, which=which, fn=fn):
                    a = a.clone().requires_grad_()
                    b = b.clone().requires_grad_()
                    r = fn(a, b)
                    ga, gb = torch.autograd.grad(r.sum(), [a, b])
                    return ga if which == 'a' else gb
                w.case(name + '_grad', [('which', which)],
                       [g.Spec(dt, (len(a_vals),), a_vals), g.Spec(dt, (len(b_vals),), b_vals)], f)
                # broadcast: b of shape (3,) against a (2, 3): db sums over rows
                w.case(name + '_grad', [('which', which)],
                       [g.Spec(dt, (2, 3), [5, -5, 7.5, 1, -2, 0.5]), g.Spec(dt, (3,), [3, -2, 0.75])], f)


def gen_add_scaled(w):
    w.comment('add with alpha: alpha cast to the dtype, one fused multiply-add in float (double for f64)')
    for k, dt in enumerate(FLOATS):
        n = 128
        a = randoms(dt, n, 40 + k, (-4, 4))
        b = randoms(dt, n, 50 + k, (-1, 1))
        for alpha in (0.1, -0.3, 3.7, 1e-3):
            w.case('add_scaled_fma', [], [g.Spec(dt, (n,), a), g.Spec(dt, (n,), b)],
                   lambda x, y, s: torch.add(x, y, alpha=s), scalars=(alpha,))
        if dt in ('f32', 'f64'):  # PyTorch's scalar loop fuses too for these
            for alpha in (0.1, -0.3):
                w.case('add_scaled_fma', [], [g.Spec(dt, (2, n // 2), a, [('transpose', 0, 1)]),
                                              g.Spec(dt, (n // 2, 5), randoms(dt, 5 * n // 2, 60 + k, (-1, 1)),
                                                     [('slice', 1, 1, g.MAXI, 2)])],
                       lambda x, y, s: torch.add(x, y, alpha=s), scalars=(alpha,))
                w.case('add_scaled_fma_', [], [g.Spec(dt, (n,), a), g.Spec(dt, (n,), b)],
                       lambda x, y, s: x.add_(y, alpha=s), scalars=(alpha,), inplace=True)
    w.comment("alpha's checks: floating alpha with integers, bool alpha, an alpha the dtype cannot hold")
    add = lambda x, y, s: torch.add(x, y, alpha=s)  # noqa: E731
    for dt, alpha in (('i64', 2.0), ('bool', 1.0), ('f32', True), ('i64', True), ('u8', 300), ('u8', -1),
                      ('u8', -255), ('u8', -256), ('i8', 128), ('i8', -128), ('i16', 40000), ('i32', 2 ** 31),
                      ('f16', 1e6), ('f16', 65504.0), ('f16', 65520.0), ('bf16', 1e39), ('f32', 1e39),
                      ('f16', float('inf')), ('bool', True), ('bool', 2)):
        vals = [1, 0, 1] if dt == 'bool' else [1, 2, 3]
        w.case('add_scaled', [], [g.Spec(dt, (3,), vals), g.Spec(dt, (3,), vals)], add, scalars=(alpha,))
    for dt, alpha in (('f16', 0.1), ('bf16', 0.1), ('f16', 1e6)):
        w.case('add_scaled_', [], [g.Spec(dt, (64,), exact(dt, [0.37 * i for i in range(64)])),
                                   g.Spec('f32', (64,), exact('f32', [1.1 ** i for i in range(64)]))],
               lambda x, y, s: x.add_(y, alpha=s), scalars=(alpha,), inplace=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument('--out', default=os.path.join(here, '..', '..', 'tests', 'golden'))
    args = ap.parse_args()
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)
    w = g.Writer('floor_divide, remainder, fmod, their gradients, add with alpha')
    w.lines[0] = w.lines[0].replace('gen_ops_golden.py', 'gen_divmod_golden.py')
    gen_divmod(w)
    grad_cases(w)
    gen_add_scaled(w)
    w.write(os.path.join(args.out, 'ops_divmod.txt'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
