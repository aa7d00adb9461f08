#!/usr/bin/env python3
# tools/golden/gen_max_dim_golden.py — writes tests/golden/ops_max_dim.txt from PyTorch: torch.max /
# torch.min along a dim with (values, indices), their gradient, and their refusals.
"""Generate the expected values for tests/test_max_dim.c. The test suite reads only the committed
output; it never needs torch.

Rerun (from the repository root; needs torch, takes a second):

    python3 tools/golden/gen_max_dim_golden.py            # writes tests/golden/ops_max_dim.txt
    python3 tools/golden/gen_max_dim_golden.py --out DIR  # somewhere else (to diff)

Deterministic for a given PyTorch version (no randomness); generated with torch 2.15.0 (CPU).

The format is gen_ops_golden.py's (see its docstring; tests/opsgolden.h reads it). Each call of
torch.max(x, dim, keepdim) gives two cases, one per result:

    case max_dim dim=D keepdim=K part=values     out: the values (x's dtype)
    case max_dim dim=D keepdim=K part=indices    out: the indices (int64)

and min_dim likewise. A refused call is one case (part=values) with PyTorch's message. The
gradient cases

    case max_dim_grad dim=D keepdim=K            in: x (floating), then w (the values' shape)
                                                 out: x.grad of (torch.max(x, D, K).values * w).sum()

Inputs are drawn from small pools so that ties are common; floating ones hold NaN, -0.0 and
+0.0 as well. Layouts: contiguous, transposed, stepped slices, expanded (stride 0: every element
of a row ties), permuted 3-D; zero-dim and zero-size tensors.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_ops_golden as G  # noqa: E402  (Spec, spec, fmt_tensor: the one golden format)

# The dtypes torch.max(dim) takes beyond gen_ops_golden's set, and the fp8 ones it refuses.
G.DT.update({'i16': torch.int16, 'i8': torch.int8,
             'f8_e4m3fn': torch.float8_e4m3fn, 'f8_e5m2': torch.float8_e5m2})
G.SHORT.update({v: k for k, v in G.DT.items()})
NAN = float('nan')
POOLS = {  # exact in every dtype that takes them
    'float': [1.0, -2.5, NAN, 0.0, -0.0, 3.0, 1.0, -2.5, 3.0, 0.5, -0.0, 0.0, 2.0, NAN, -4.0, 3.0],
    'float_nonan': [1.0, -2.5, 0.0, -0.0, 3.0, 1.0, -2.5, 3.0, 0.5, -0.0, 0.0, 2.0, -4.0, 3.0],
    'int': [3, -1, 7, 7, 0, -8, 3, 5, -8, 2, 7, 1, 0, -1],
    'i8': [3, -1, 7, 7, 0, -128, 127, 5, -128, 2, 127, 1, 0, -1],
    'u8': [3, 1, 7, 7, 0, 255, 3, 5, 255, 2, 0, 1, 0, 200],
    'bool': [0, 1, 1, 0, 0, 0, 1, 0, 1, 1, 0, 1, 0],
}
FLOATS = ['f32', 'f64', 'f16', 'bf16']
ALL = FLOATS + ['i64', 'i32', 'i16', 'i8', 'u8', 'bool']


def pool(dtype, nan=True):
    if dtype in FLOATS:
        return POOLS['float' if nan else 'float_nonan']
    if dtype in ('i8', 'u8', 'bool'):
        return POOLS[dtype]
    return POOLS['int']


def vals(dtype, n, seed, nan=True):
    p = pool(dtype, nan)
    return [p[(seed + 3 * i) % len(p)] for i in range(n)]


def spec(dtype, shape, layout='c', seed=0, nan=True):
    """gen_ops_golden's layouts (c t s r e p) with this file's value pools."""
    s = G.spec('f64', shape, layout)
    return G.Spec(dtype, s.shape, vals(dtype, G.numel(s.shape), seed, nan), s.views)


def header(op, params, ins):
    lines = ['case %s %s' % (op, ' '.join('%s=%s' % kv for kv in params))]
    for s in ins:
        lines += s.lines()
    return lines


def minmax_cases(op, s, dim, keepdim):
    fn = torch.max if op == 'max_dim' else torch.min
    x = s.torch()
    params = [('dim', dim), ('keepdim', int(keepdim))]
    try:
        r = fn(x, dim, keepdim)
    except Exception as e:  # noqa: BLE001 (PyTorch's message is the expectation)
        return [header(op, params + [('part', 'values')], [s]) + ['error ' + str(e).split('\n')[0], 'end']]
    return [header(op, params + [('part', 'values')], [s]) + [G.fmt_tensor('out', r.values), 'end'],
            header(op, params + [('part', 'indices')], [s]) + [G.fmt_tensor('out', r.indices), 'end']]


def grad_case(op, s, dim, keepdim, seed):
    fn = torch.max if op == 'max_dim' else torch.min
    x = s.torch().detach().requires_grad_(True)
    v = fn(x, dim, keepdim).values
    w = G.Spec(s.dtype, tuple(v.shape), [float(1 + (seed + i) % 5) for i in range(v.numel())])
    (v * w.torch()).sum().backward()
    return header(op + '_grad', [('dim', dim), ('keepdim', int(keepdim))], [s, w]) + \
        [G.fmt_tensor('out', x.grad), 'end']


def cases():
    out = []
    seed = 0
    for op in ('max_dim', 'min_dim'):
        # every dtype, every dim (and a negative one), keepdim both ways
        for dt in ALL:
            for shape in [(7,), (3, 5), (2, 3, 4)]:
                for dim in list(range(len(shape))) + [-1]:
                    seed += 1
                    out += minmax_cases(op, spec(dt, shape, 'c', seed), dim, seed % 2 == 0)
        # strided layouts
        for dt in ['f32', 'bf16', 'f16', 'f64', 'i32', 'u8', 'bool']:
            for layout, shape in [('t', (4, 5)), ('s', (3, 6)), ('r', (3, 4)), ('e', (3, 4)), ('p', (2, 3, 4)),
                                  ('t', (2, 3, 5))]:
                for dim in range(len(shape)):
                    seed += 1
                    out += minmax_cases(op, spec(dt, shape, layout, seed), dim, dim % 2 == 0)
        # one long row: NaN late, ties throughout
        for dt in ['f32', 'bf16']:
            n = 301
            v = [float((7 * i) % 13 - 6) for i in range(n)]
            v[250] = NAN
            v[280] = NAN
            out += minmax_cases(op, G.Spec(dt, (n,), v), 0, False)
            v[250] = v[280] = 0.0
            v[100] = -0.0
            out += minmax_cases(op, G.Spec(dt, (n,), v), 0, False)
        # signed zeros: the first of the tied zeros is returned, sign and all
        for z in ([-0.0, 0.0, -0.0], [0.0, -0.0, 0.0]):
            out += minmax_cases(op, G.Spec('f32', (3,), z), 0, False)
        # zero-dim (fp8 too: PyTorch copies it), zero-size, and refusals
        for dt in ['f32', 'i64', 'bool', 'f8_e4m3fn', 'f8_e5m2']:
            for dim in (0, -1):
                for keepdim in (False, True):
                    out += minmax_cases(op, G.Spec(dt, (), [3.0 if dt != 'bool' else 1]), dim, keepdim)
        out += minmax_cases(op, G.Spec('f32', (), [NAN]), 0, False)
        out += minmax_cases(op, G.Spec('f32', (0, 3), []), 1, False)
        out += minmax_cases(op, G.Spec('f32', (0, 3), []), 1, True)
        out += minmax_cases(op, G.Spec('f8_e4m3fn', (2, 0), []), 0, False)
        out += minmax_cases(op, G.Spec('f32', (2, 0, 3), []), 1, False)
        out += minmax_cases(op, G.Spec('f32', (2, 0, 3), []), -2, True)
        out += minmax_cases(op, G.Spec('i32', (0,), []), 0, False)
        out += minmax_cases(op, G.Spec('f32', (2, 3), [1, 2, 3, 4, 5, 6]), 2, False)
        out += minmax_cases(op, G.Spec('f32', (2, 3), [1, 2, 3, 4, 5, 6]), -3, False)
        out += minmax_cases(op, G.Spec('f32', (), [1.0]), 1, False)
        for dt in ['f8_e4m3fn', 'f8_e5m2']:
            out += minmax_cases(op, G.Spec(dt, (2, 3), [1, 2, 3, 4, 5, 6]), 1, False)
            out += minmax_cases(op, G.Spec(dt, (1,), [1]), 0, True)
        # the gradient: to the first extreme of each row (ties and NaN too), zero elsewhere
        for dt in ['f32', 'f64', 'bf16']:
            for shape, layout in [((7,), 'c'), ((3, 5), 'c'), ((2, 3, 4), 'c'), ((4, 5), 't'), ((3, 4), 'e')]:
                for dim in range(len(shape)):
                    seed += 1
                    out.append(grad_case(op, spec(dt, shape, layout, seed), dim, seed % 2 == 0, seed))
        for keepdim in (False, True):
            out.append(grad_case(op, G.Spec('f32', (), [2.5]), 0, keepdim, 0))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument('--out', default=os.path.join(here, '..', '..', 'tests', 'golden'))
    args = ap.parse_args()
    path = os.path.join(args.out, 'ops_max_dim.txt')
    with open(path, 'w') as f:
        f.write('# torch %s: torch.max / torch.min along a dim (tools/golden/gen_max_dim_golden.py)\n'
                % torch.__version__)
        for c in cases():
            f.write('\n'.join(c) + '\n')
    print('wrote', path)


if __name__ == '__main__':
    main()
