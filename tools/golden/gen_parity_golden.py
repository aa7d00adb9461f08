#!/usr/bin/env python3
# tools/golden/gen_parity_golden.py — PyTorch's answers where torc once differed: f16/bf16 by a
# scalar in float32 opmath, integer tensors with out-of-range int scalars, zero-dim operands of a
# wider dtype in comparisons and maximum/minimum, retain_grad under autograd.grad, uint8 where.
"""Generate tests/golden/ops_parity.txt, opmath_all_values.txt and autograd_retain_grad.txt
(read by tests/test_ops_binary.c and tests/test_autograd.c; the suite never needs torch).

Rerun from the repository root (needs torch, a few seconds):

    python3 tools/golden/gen_parity_golden.py            # writes into tests/golden/
    python3 tools/golden/gen_parity_golden.py --out DIR  # somewhere else (to diff)

ops_parity.txt has the format of ops_binary.txt (tools/golden/gen_ops_golden.py's docstring).

opmath_all_values.txt: for each op, every one of the 65536 bit patterns of the dtype as input x,
in pattern order. A NaN result is counted as the canonical quiet NaN (0x7e00 for float16, 0x7fc0
for bfloat16); the results' bit patterns are hashed with 64-bit FNV-1a (each result as two bytes,
little-endian) in 256 blocks of 256 patterns, so a failure names the block:

    all OP DTYPE KIND VALUE     OP one of mul_scalar, div_scalar, rdiv_scalar, add_scalar,
                                sub_scalar (x op s; rdiv is s / x); KIND f (float) or i (int);
                                or mul_0dim / div_0dim: x op a zero-dim tensor of dtype KIND
    block INDEX HEX             the hash of results 256*INDEX .. 256*INDEX+255
    end

autograd_retain_grad.txt: "NAME N V..." lines, float32 values (see gen_retain_grad).
"""
import argparse
import os
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_ops_golden as og  # noqa: E402  (the ops golden format: Spec, Writer)

og.DT.update({'i8': torch.int8, 'i16': torch.int16})
og.SHORT.update({torch.int8: 'i8', torch.int16: 'i16'})
SC = {'f64': torch.float64, 'f32': torch.float32, 'i64': torch.int64}


def exact(dtype, vals):
    """vals rounded to dtype (so the golden input is exactly representable)."""
    return [float(v) for v in torch.tensor(vals, dtype=torch.float64).to(og.DT[dtype]).to(torch.float64)]


def inp(dtype, vals, shape=None):
    vals = exact(dtype, vals) if dtype in ('f16', 'bf16', 'f32', 'f64') else vals
    return og.Spec(dtype, (len(vals),) if shape is None else shape, vals)


SPECIAL = [0.0003765, -0.0, 0.0, 1.0, -2.5, 65504.0, 6e-8, 0.1, 3.0, 1e-4, float('inf'), float('-inf'),
           float('nan'), -7.25, 1000.0]

SCALAR_OPS = {
    'mul_scalar': lambda x, s: x * s, 'div_scalar': lambda x, s: x / s, 'rdiv_scalar': lambda x, s: s / x,
    'add_scalar': lambda x, s: x + s, 'sub_scalar': lambda x, s: x - s,
}


def gen_cases(w):
    w.comment('1. f16/bf16 by a Python scalar: mul and div compute in float32 (opmath), rdiv is reciprocal * s')
    for dt in ('f16', 'bf16'):
        for name, fn in SCALAR_OPS.items():
            for s in (0.1, 1e5, 1e-5, 3, 100000, -0.0, 1e39):
                w.case(name, (), [inp(dt, SPECIAL)], fn, scalars=(s,))
        for name in ('mul_scalar_', 'div_scalar_'):
            fn = (lambda x, s: x.mul_(s)) if name == 'mul_scalar_' else (lambda x, s: x.div_(s))
            for s in (0.1, 1e5, 100000):
                w.case(name, (), [inp(dt, SPECIAL)], fn, scalars=(s,), inplace=True)
    w.comment('1. f16/bf16 by a zero-dim f32/f64/i64 tensor: opmath as the right operand only')
    for dt in ('f16', 'bf16'):
        for sdt, sv in (('f32', 0.1), ('f64', 1e5), ('f64', 1e-5), ('i64', 100000), ('f32', 3.0)):
            z = og.Spec(sdt, (), exact(sdt, [sv]) if sdt != 'i64' else [sv])
            for name, fn in (('mul', torch.mul), ('div', torch.div), ('add', torch.add), ('sub', torch.sub),
                             ('pow', torch.pow)):
                w.case(name, (), [inp(dt, SPECIAL), z], fn)
                w.case(name, (), [z, inp(dt, SPECIAL)], fn)
            w.case('mul_', (), [inp(dt, SPECIAL), z], lambda x, y: x.mul_(y), inplace=True)
            w.case('div_', (), [inp(dt, SPECIAL), z], lambda x, y: x.div_(y), inplace=True)
    w.comment('1. an in-place f16 op with a dimensioned f32 operand computes in float32')
    w.case('mul_', (), [inp('f16', SPECIAL), inp('f32', [0.1] * len(SPECIAL))], lambda x, y: x.mul_(y), inplace=True)
    w.case('div_', (), [inp('bf16', SPECIAL), inp('f32', [0.3] * len(SPECIAL))], lambda x, y: x.div_(y), inplace=True)

    w.comment('2. integer tensors with an int scalar outside the dtype range')
    u8 = [1, 2, 200, 0, 255]
    i8 = [1, -3, 100, -128, 127]
    for s in (300, -2, 1000, 7):
        w.case('div_scalar', (), [inp('u8', u8)], lambda x, s: x / s, scalars=(s,))
        w.case('rdiv_scalar', (), [inp('u8', u8)], lambda x, s: s / x, scalars=(s,))
        w.case('div_scalar', (), [inp('i8', i8)], lambda x, s: x / s, scalars=(s,))
        w.case('rdiv_scalar', (), [inp('i8', i8)], lambda x, s: s / x, scalars=(s,))
    w.case('div', (), [inp('u8', u8), og.Spec('i64', (), [300])], torch.div)
    # torc's maximum_scalar/minimum_scalar are torch.clamp_min/clamp_max (maximum takes tensors only)
    for dt, vals in (('i8', i8), ('u8', u8), ('i16', [1, -3, 30000]), ('i64', [1, -3, 5]), ('bool', [0, 1])):
        for s in (1000, -1000, 40000, -5, 127, 128, 255, 256, 2, True, 2.5):
            if dt == 'bool' and s is True:
                continue  # torch.clamp has no bool kernel; torc's maximum_scalar keeps maximum's
            w.case('maximum_scalar', (), [inp(dt, vals)], lambda x, s: torch.clamp_min(x, s), scalars=(s,))
            w.case('minimum_scalar', (), [inp(dt, vals)], lambda x, s: torch.clamp_max(x, s), scalars=(s,))
    for dt in ('f16', 'bf16', 'f32', 'f64'):
        for s in (1e6, -1e6, 65504.0, 65519.0, 1e39, -1e39, float('inf'), float('-inf'), float('nan'), 100000):
            w.case('maximum_scalar', (), [inp(dt, [1.0, -2.0, float('nan')])], lambda x, s: torch.clamp_min(x, s),
                   scalars=(s,))
            w.case('minimum_scalar', (), [inp(dt, [1.0, -2.0, float('nan')])], lambda x, s: torch.clamp_max(x, s),
                   scalars=(s,))

    w.comment('3. a zero-dim operand of a wider dtype is cast to the result dtype first')
    cmp_ops = [('eq', torch.eq), ('ne', torch.ne), ('lt', torch.lt), ('le', torch.le), ('gt', torch.gt),
               ('ge', torch.ge), ('maximum', torch.maximum), ('minimum', torch.minimum)]
    for name, fn in cmp_ops:
        for a, z in ((inp('f16', [0.1, 0.2, -1.0]), og.Spec('f32', (), exact('f32', [0.1]))),
                     (inp('bf16', [0.1, 0.3, 5.0]), og.Spec('f64', (), [0.1])),
                     (inp('f32', [0.1, 0.2, 3.0]), og.Spec('f64', (), [0.1])),
                     (inp('u8', [0, 1, 200]), og.Spec('i64', (), [-5])),
                     (inp('i8', [1, -3, 100]), og.Spec('i64', (), [1000])),
                     (inp('u8', [0, 44, 200]), og.Spec('f32', (), [-5.0])),
                     (og.Spec('f16', (), exact('f16', [0.1])), og.Spec('f32', (), exact('f32', [0.1])))):
            w.case(name, (), [a, z], fn)
            w.case(name, (), [z, a], fn)

    w.comment('5. where takes a uint8 condition (PyTorch warns that it is deprecated)')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        w.case('where', (), [inp('u8', [1, 0, 2, 255]), inp('f32', [1, 2, 3, 4]), inp('f32', [5, 6, 7, 8])],
               torch.where)
        w.case('where', (), [inp('u8', [0, 3], (2, 1)), inp('i64', [1, 2, 3]), og.Spec('f16', (), [0.5])],
               torch.where)
        w.case('where', (), [inp('i8', [1, 0]), inp('f32', [1, 2]), inp('f32', [5, 6])], torch.where)


# ---- every f16/bf16 value ----
ALL_OPS = [  # (op, dtype, kind, value)
    ('mul_scalar', 'f16', 'f', 0.1), ('div_scalar', 'f16', 'f', 0.1), ('rdiv_scalar', 'f16', 'f', 0.1),
    ('mul_scalar', 'f16', 'f', 1e5), ('div_scalar', 'f16', 'f', 1e-5), ('mul_scalar', 'f16', 'i', 100000),
    ('add_scalar', 'f16', 'f', 0.1), ('sub_scalar', 'f16', 'f', 0.1),
    ('mul_scalar', 'bf16', 'f', 0.1), ('div_scalar', 'bf16', 'f', 0.1), ('rdiv_scalar', 'bf16', 'f', 3.0),
    ('add_scalar', 'bf16', 'f', 0.1),
    ('mul_0dim', 'f16', 'f32', 0.1), ('div_0dim', 'f16', 'f64', 0.1), ('mul_0dim', 'bf16', 'f64', 0.1),
]
CANON_NAN = {'f16': 0x7e00, 'bf16': 0x7fc0}


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


def gen_all(path):
    lines = ['# torch %s: every f16/bf16 input by a scalar (tools/golden/gen_parity_golden.py; format in its '
             'docstring)' % torch.__version__]
    for op, dt, kind, v in ALL_OPS:
        x = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(og.DT[dt])
        s = int(v) if kind == 'i' else v
        if op.endswith('_0dim'):
            z = torch.tensor(v, dtype=SC[kind])
            r = x * z if op == 'mul_0dim' else x / z
        else:
            r = SCALAR_OPS[op](x, s)
        bits = r.view(torch.int16).numpy().astype(np.uint16)
        bits = np.where(torch.isnan(r).numpy(), CANON_NAN[dt], bits).astype('<u2')
        lines.append('all %s %s %s %r' % (op, dt, kind, v))
        raw = bits.tobytes()
        for b in range(256):
            lines.append('block %d %016x' % (b, fnv1a64(raw[512 * b:512 * (b + 1)])))
        lines.append('end')
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('%s: %d ops' % (path, len(ALL_OPS)))


# ---- retain_grad with autograd.grad ----
def gen_retain_grad(path):
    """x = [1, 2] (leaf), y = x * 3 with retain_grad, z = (y * y).sum(). PyTorch 2.x fills y.grad
    whenever y's node runs, in autograd.grad too, and when y itself is the input."""
    out = ['# torch %s: retain_grad under autograd.grad (tools/golden/gen_parity_golden.py)' % torch.__version__]

    def put(name, t):
        vals = [] if t is None else t.reshape(-1).tolist()
        out.append(('%s %d %s' % (name, len(vals), ' '.join(og.fmt_val(og.F32(v)) for v in vals))).rstrip())

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.retain_grad()
    z = (y * y).sum()
    (gx,) = torch.autograd.grad(z, x, retain_graph=True)
    put('grad_x.dx', gx)
    put('grad_x.y_grad', y.grad)
    put('grad_x.x_grad', x.grad)
    (gy,) = torch.autograd.grad(z, y, retain_graph=True)
    put('grad_y.dy', gy)
    put('grad_y.y_grad', y.grad)
    # a = [4] (leaf), w = a * 5 retained, u = w.sum() + (x * x).sum(): w's node does not run
    a = torch.tensor([4.0], requires_grad=True)
    w = a * 5
    w.retain_grad()
    u = w.sum() + (x * x).sum()
    (g,) = torch.autograd.grad(u, x)
    put('off_path.dx', g)
    put('off_path.w_grad', w.grad)
    with open(path, 'w') as f:
        f.write('\n'.join(out) + '\n')
    print('%s: %d lines' % (path, len(out) - 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument('--out', default=os.path.join(here, '..', '..', 'tests', 'golden'))
    args = ap.parse_args()
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)
    w = og.Writer('f16/bf16 opmath, out-of-range int scalars, zero-dim casts, uint8 where')
    w.lines[0] = w.lines[0].replace('gen_ops_golden.py', 'gen_parity_golden.py')
    gen_cases(w)
    w.write(os.path.join(args.out, 'ops_parity.txt'))
    gen_all(os.path.join(args.out, 'opmath_all_values.txt'))
    gen_retain_grad(os.path.join(args.out, 'autograd_retain_grad.txt'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
