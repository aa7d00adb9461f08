#!/usr/bin/env python3
# tools/golden/gen_pointwise_golden.py — writes tests/golden/ops_pointwise.txt from PyTorch: the
# fused pointwise ops addcmul, addcdiv and lerp (scalar weight), out of place and in place.
"""Generate the expected values for tests/test_pointwise.c. The test suite reads only the
committed output; it never needs torch.

Rerun (from the repository root; needs torch, takes a second):

    python3 tools/golden/gen_pointwise_golden.py            # writes tests/golden/ops_pointwise.txt
    python3 tools/golden/gen_pointwise_golden.py --out DIR  # somewhere else (to diff)

The format is gen_ops_golden.py's (see its docstring); this script reuses its writer. Besides the
layout, broadcast, promotion and error cases on short exact values, "rounding" cases run random
values of every floating dtype with a value / weight that is not exact in binary, where PyTorch's
fused multiply-add (addcmul, lerp) and its step-by-step rounding (addcdiv) decide the last bit:
torc must match those bit for bit. Generated with torch 2.15.0 (CPU).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_ops_golden import FLOATS, Spec, Writer, spec  # noqa: E402

ADDC = [('addcmul', lambda s, a, b, v: torch.addcmul(s, a, b, value=v)),
        ('addcdiv', lambda s, a, b, v: torch.addcdiv(s, a, b, value=v))]
ADDC_ = [('addcmul_', lambda s, a, b, v: s.addcmul_(a, b, value=v)),
         ('addcdiv_', lambda s, a, b, v: s.addcdiv_(a, b, value=v))]


def random_spec(dtype, n, seed, lo=-2.0, hi=2.0):
    """n random values exactly representable in dtype (drawn in f64, rounded to dtype)."""
    g = torch.Generator().manual_seed(seed)
    t = (torch.rand(n, generator=g, dtype=torch.float64) * (hi - lo) + lo)
    t = t.to({'f64': torch.float64, 'f32': torch.float32, 'bf16': torch.bfloat16, 'f16': torch.float16}[dtype])
    return Spec(dtype, (n,), t.to(torch.float64).tolist())


def gen_layouts(w):
    w.comment('addcmul / addcdiv: every floating dtype, strided and broadcast operands, several values')
    for name, fn in ADDC:
        for dt in FLOATS:
            for lay in ('c', 't', 's'):
                for v in (1, 0.5, -2):
                    w.case(name, [], [spec(dt, (2, 3), lay), spec(dt, (2, 3), 's', 'any', 3),
                                      spec(dt, (3,), 'c', 'pos', 1)], fn, scalars=(v,))
        w.case(name, [], [spec('f32', (2, 3), 'e'), spec('f32', (2, 1), 'c', 'any', 3),
                          spec('f32', (1, 3), 'c', 'pos', 1)], fn, scalars=(0.5,))
        w.case(name, [], [spec('f32', (2, 3, 4), 'p'), spec('f32', (2, 3, 4), 'c', 'any', 3),
                          spec('f32', (2, 3, 4), 'p', 'pos', 1)], fn, scalars=(1.5,))
        w.case(name, [], [spec('f32', ()), spec('f32', (), 'c', 'any', 3), spec('f32', (), 'c', 'pos', 1)],
               fn, scalars=(2,))
        w.case(name, [], [spec('f32', (0, 3)), spec('f32', (3,), 'c', 'any', 3), spec('f32', (0, 1), 'c', 'pos', 1)],
               fn, scalars=(2,))
        # promotion: the result dtype is result_type(self, t1, t2); value takes no part
        w.case(name, [], [spec('f32', (2, 3)), spec('f16', (2, 3), 'c', 'any', 3), spec('f16', (3,), 'c', 'pos', 1)],
               fn, scalars=(0.5,))
        w.case(name, [], [spec('i64', (2, 3)), spec('f32', (2, 3), 'c', 'any', 3), spec('f32', (3,), 'c', 'pos', 1)],
               fn, scalars=(0.5,))
        w.case(name, [], [spec('bf16', (2, 3)), spec('f64', (), 'c', 'any', 3), spec('bf16', (3,), 'c', 'pos', 1)],
               fn, scalars=(3,))
        w.case(name, [], [spec('bool', (2, 3)), spec('f32', (2, 3), 'c', 'any', 3), spec('f32', (3,), 'c', 'pos', 1)],
               fn, scalars=(1,))
        # errors: shapes that do not broadcast, bool results
        w.case(name, [], [spec('f32', (2, 3)), spec('f32', (2,), 'c', 'any', 3), spec('f32', (3,), 'c', 'pos', 1)],
               fn, scalars=(1,))
        w.case(name, [], [spec('bool', (2, 3)), spec('bool', (2, 3)), spec('bool', (3,), 'c', 'any', 1)],
               fn, scalars=(1,))
    w.comment('integer addcmul (value truncated toward zero) and addcdiv\'s integer-division refusal')
    for dt in ('i64', 'i32', 'u8'):
        for v in (2, 2.7, -2.7):
            w.case('addcmul', [], [spec(dt, (2, 3), 't'), spec(dt, (2, 3), 'c', 'small', 3),
                                   spec(dt, (3,), 'c', 'small', 1)], ADDC[0][1], scalars=(v,))
    w.case('addcmul', [], [spec('i64', (2, 3)), spec('i32', (2, 3), 'c', 'small', 3), spec('u8', (3,), 'c', 'small', 1)],
           ADDC[0][1], scalars=(2,))
    w.case('addcdiv', [], [spec('f32', (2, 3)), spec('i64', (2, 3), 'c', 'small', 3), spec('i64', (3,), 'c', 'small', 1)],
           ADDC[1][1], scalars=(1,))
    w.case('addcdiv', [], [spec('i64', (2, 3)), spec('i64', (2, 3), 'c', 'small', 3), spec('i64', (3,), 'c', 'small', 1)],
           ADDC[1][1], scalars=(1,))

    w.comment('in place: self keeps its dtype and shape')
    for name, fn in ADDC_:
        for dt in FLOATS:
            for v in (1, 0.5, -2):
                w.case(name, [], [spec(dt, (2, 3), 't'), spec(dt, (2, 3), 's', 'any', 3),
                                  spec(dt, (3,), 'c', 'pos', 1)], fn, scalars=(v,), inplace=True)
        w.case(name, [], [spec('f64', (2, 3)), spec('f32', (2, 3), 'c', 'any', 3), spec('f32', (3,), 'c', 'pos', 1)],
               fn, scalars=(0.5,), inplace=True)
        w.case(name, [], [spec('i64', (2, 3)), spec('f32', (2, 3), 'c', 'any', 3), spec('f32', (3,), 'c', 'pos', 1)],
               fn, scalars=(1,), inplace=True)
        w.case(name, [], [spec('f32', (3,)), spec('f32', (2, 3), 'c', 'any', 3), spec('f32', (3,), 'c', 'pos', 1)],
               fn, scalars=(1,), inplace=True)
        w.case(name, [], [spec('f32', (2, 3), 'e'), spec('f32', (2, 3), 'c', 'any', 3), spec('f32', (3,), 'c', 'pos', 1)],
               fn, scalars=(1,), inplace=True)
    for dt in ('i64', 'u8'):
        w.case('addcmul_', [], [spec(dt, (2, 3), 's'), spec(dt, (2, 3), 'c', 'small', 3),
                                spec(dt, (3,), 'c', 'small', 1)], ADDC_[0][1], scalars=(3,), inplace=True)


LERP = lambda s, e, w: torch.lerp(s, e, w)  # noqa: E731
LERP_ = lambda s, e, w: s.lerp_(e, w)  # noqa: E731


def gen_lerp(w):
    w.comment('lerp with a scalar weight: both branches (|w| < 0.5 and not), layouts, broadcast')
    for dt in FLOATS:
        for lay in ('c', 't', 's'):
            for wt in (0.25, 0.75, -0.5, 1.5):
                w.case('lerp', [], [spec(dt, (2, 3), lay), spec(dt, (2, 3), 's', 'any', 3)], LERP, scalars=(wt,))
        w.case('lerp', [], [spec(dt, (2, 3), 'c'), spec(dt, (3,), 'c', 'any', 3)], LERP, scalars=(0.5,))
    w.case('lerp', [], [spec('f32', (1, 3)), spec('f32', (2, 1), 'c', 'any', 3)], LERP, scalars=(0.25,))
    w.case('lerp', [], [spec('f32', (2, 3), 'e'), spec('f32', (2, 3), 'r', 'any', 3)], LERP, scalars=(2,))
    w.case('lerp', [], [spec('f32', (2, 3, 4), 'p'), spec('f32', (2, 3, 4), 'c', 'any', 3)], LERP, scalars=(0.3,))
    w.case('lerp', [], [spec('f32', ()), spec('f32', (), 'c', 'any', 3)], LERP, scalars=(0.75,))
    w.case('lerp', [], [spec('f32', (0, 3)), spec('f32', (3,), 'c', 'any', 3)], LERP, scalars=(0.75,))
    w.case('lerp', [], [spec('f32', (2, 3)), spec('f32', (2,), 'c', 'any', 3)], LERP, scalars=(0.5,))
    for da, db in (('f32', 'f16'), ('f16', 'f32'), ('f64', 'bf16'), ('f32', 'i64')):
        w.case('lerp', [], [spec(da, (2, 3)), spec(db, (2, 3), 'c', 'any', 3)], LERP, scalars=(0.5,))
    for dt in ('i64', 'i32', 'bool'):
        w.case('lerp', [], [spec(dt, (2, 3)), spec(dt, (2, 3), 'c', 'any', 3)], LERP, scalars=(0.5,))
    for dt in FLOATS:
        for wt in (0.25, 0.75):
            w.case('lerp_', [], [spec(dt, (2, 3), 't'), spec(dt, (3,), 'c', 'any', 3)], LERP_, scalars=(wt,),
                   inplace=True)
    w.case('lerp_', [], [spec('f32', (3,)), spec('f32', (2, 3), 'c', 'any', 3)], LERP_, scalars=(0.5,), inplace=True)
    w.case('lerp_', [], [spec('f32', (2, 3)), spec('f16', (2, 3), 'c', 'any', 3)], LERP_, scalars=(0.5,),
           inplace=True)
    w.case('lerp_', [], [spec('i32', (2, 3)), spec('i32', (2, 3), 'c', 'any', 3)], LERP_, scalars=(0.5,),
           inplace=True)


def gen_rounding(w):
    w.comment('rounding: random values, inexact value / weight; PyTorch\'s fma and step order decide the last bit')
    for dt in FLOATS:
        n = 32
        for name, fn in ADDC:
            for v in (0.3, -1.7, 1e-3):
                b = random_spec(dt, n, 3, 0.5, 2.0) if name == 'addcdiv' else random_spec(dt, n, 3)
                w.case(name, [], [random_spec(dt, n, 1), random_spec(dt, n, 2), b], fn, scalars=(v,))
        for name, fn in ADDC_:
            b = random_spec(dt, n, 6, 0.5, 2.0) if name == 'addcdiv_' else random_spec(dt, n, 6)
            w.case(name, [], [random_spec(dt, n, 4), random_spec(dt, n, 5), b], fn, scalars=(0.999,), inplace=True)
        for wt in (0.1, 0.49, 0.5, 0.9, -0.3, 1.7):
            w.case('lerp', [], [random_spec(dt, n, 7), random_spec(dt, n, 8)], LERP, scalars=(wt,))
        w.case('lerp_', [], [random_spec(dt, n, 9), random_spec(dt, n, 10)], LERP_, scalars=(0.1,), inplace=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument('--out', default=os.path.join(here, '..', '..', 'tests', 'golden'))
    args = ap.parse_args()
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)
    w = Writer('addcmul, addcdiv, lerp (scalar weight) and their in-place forms')
    w.lines[0] = w.lines[0].replace('gen_ops_golden.py; format in its docstring',
                                    'gen_pointwise_golden.py; format in gen_ops_golden.py')
    gen_layouts(w)
    gen_lerp(w)
    gen_rounding(w)
    w.write(os.path.join(args.out, 'ops_pointwise.txt'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
