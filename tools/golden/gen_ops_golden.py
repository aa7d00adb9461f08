#!/usr/bin/env python3
# tools/golden/gen_ops_golden.py — writes the op golden cases in tests/golden/ops_*.txt from
# PyTorch: every unary, binary, in-place, reduction, matmul and copy op on many layouts/dtypes.
"""Generate the expected values for tests/test_ops_unary.c, test_ops_binary.c, test_ops_reduce.c,
test_matmul.c and test_index_ops.c. The test suite reads only the committed outputs; it never
needs torch.

Rerun (from the repository root; needs torch, takes a few seconds):

    python3 tools/golden/gen_ops_golden.py            # writes tests/golden/ops_*.txt
    python3 tools/golden/gen_ops_golden.py --out DIR  # somewhere else (to diff)

The output is deterministic for a given PyTorch version (no randomness, no timestamps); the
version used is written in each file's first line. Generated with torch 2.15.0 (CPU).

File format: text, one item per line, '#' starts a comment line. A case is

    case OP [KEY=VALUE ...]           the op (torc's name without torc_) and its parameters
    in DTYPE SHAPE VALUE...           an input: a contiguous base tensor, row-major values
    view NAME ARG...                  a view applied to the last input (transpose d0 d1,
                                      slice dim start end step, expand size..., permute dim...,
                                      select dim index, unsqueeze dim)
    scalar KIND VALUE                 a Python scalar argument: i (int), f (float), b (bool)
    out DTYPE SHAPE VALUE...          the expected result (for in-place ops: self afterwards)
    base DTYPE SHAPE VALUE...         in-place ops: the first input's base afterwards (it is
                                      unchanged when the case fails)
    error MESSAGE                     the op fails with PyTorch's message (first line)
    end

DTYPE is torc's short name (f32 f64 bf16 f16 i64 i32 u8 bool); SHAPE is "2,3", "0,3", or "-"
for a zero-dim tensor. Values are Python reprs of doubles (nan, inf, -inf) or integers; every
input value is exactly representable in its dtype, so building the input from doubles is exact.
Layouts: every op runs on contiguous inputs and on non-contiguous views of the same logical
shape — transposed, sliced with a step (and an offset), expanded (stride 0), permuted 3-D —
plus zero-size and zero-dim tensors.

Cases where PyTorch's CPU build lacks a half/bfloat16 kernel are left out; semantic refusals
(neg of bool, mean of int, casts in place, shape mismatches) are kept as error cases. Index
tensors are int64 (torc does not take PyTorch's int32 indices; tests/test_index_ops.c checks
the refusal). Three PyTorch texts are normalised: the missing spaces in linalg.vector_norm's
"dimension 0because" and masked_scatter's "but gotFloat", and index_select's second wording
of "index out of range in self".
"""
import argparse
import math
import re
import os
import sys

import numpy as np
import torch

DT = {  # torc short name -> torch dtype
    'f64': torch.float64, 'f32': torch.float32, 'bf16': torch.bfloat16, 'f16': torch.float16,
    'i64': torch.int64, 'i32': torch.int32, 'u8': torch.uint8, 'bool': torch.bool,
}
SHORT = {v: k for k, v in DT.items()}
ALL = ['f32', 'f64', 'bf16', 'f16', 'i64', 'i32', 'u8', 'bool']
FLOATS = ['f32', 'f64', 'bf16', 'f16']
MAXI = 9223372036854775807  # Python's open slice end, as torc_slice takes it

# Value pools (exact in every float dtype, including bfloat16's 8-bit significand).
POOLS = {
    'any': [-2.5, -1.25, -0.5, 0.0, 0.25, 0.75, 1.0, 1.5, 2.0, 3.25, -3.0, 0.125, 4.5, -0.75, 2.75, 1.25],
    'pos': [0.25, 0.5, 1.0, 2.0, 4.0, 9.0, 0.75, 1.5, 3.25, 6.25, 16.0, 0.125, 0.0, 2.5, 5.0, -1.0],
    'unit': [-0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 0.125, -0.125, 0.875, 1.0, -0.375, 0.625, -0.875,
             0.375, -1.0],
    'int': [-3, -2, -1, 0, 1, 2, 3, 5, -7, 4, 6, -5, 7, 9, -4, 8],
    'small': [1, 2, 3, 0, 2, 1, 3, 2, 1, 0, 3, 1, 2, 2, 1, 3],      # exponents, safe products
    'u8': [0, 1, 2, 3, 5, 7, 250, 255, 4, 9, 128, 6, 10, 200, 17, 8],
    'bool': [0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0],
}


def pool_for(dtype, kind):
    if dtype == 'bool':
        return POOLS['bool']
    if kind == 'small':
        return POOLS['small']
    if dtype == 'u8':
        return POOLS['u8']
    if dtype in ('i64', 'i32'):
        return POOLS['int']
    return POOLS[kind]


def values(dtype, n, kind='any', seed=0):
    p = pool_for(dtype, kind)
    return [p[(seed + 5 * i) % len(p)] for i in range(n)]


class Spec:
    """A test input: a contiguous base tensor (dtype, shape, values) plus views applied to it."""

    def __init__(self, dtype, shape, vals, views=()):
        self.dtype, self.shape, self.vals, self.views = dtype, tuple(shape), list(vals), list(views)

    def torch(self):
        t = torch.tensor(self.vals, dtype=torch.float64).reshape(self.shape).to(DT[self.dtype])
        self.base = t
        for v in self.views:
            name, args = v[0], v[1:]
            if name == 'transpose':
                t = t.transpose(args[0], args[1])
            elif name == 'slice':
                d, s, e, st = args
                idx = [slice(None)] * t.dim()
                idx[d] = slice(s, None if e == MAXI else e, st)
                t = t[tuple(idx)]
            elif name == 'expand':
                t = t.expand(*args)
            elif name == 'permute':
                t = t.permute(*args)
            elif name == 'select':
                t = t.select(args[0], args[1])
            elif name == 'unsqueeze':
                t = t.unsqueeze(args[0])
            else:
                raise ValueError(name)
        return t

    def lines(self):
        out = ['in %s %s %s' % (self.dtype, fmt_shape(self.shape), ' '.join(fmt_val(v) for v in self.vals))]
        for v in self.views:
            out.append('view ' + ' '.join(str(a) for a in v))
        return out


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def spec(dtype, shape, layout='c', kind='any', seed=0):
    """The input of logical shape `shape` in `layout`: c contiguous, t transposed (last two dims),
    s stepped slice of the last dim (offset 1, step 2), r stepped rows (dim 0, step 2),
    e expanded from size 1 in dim 0, p a 3-D permutation (2, 0, 1)."""
    shape = tuple(shape)
    nd = len(shape)
    if layout == 'c':
        base, views = shape, []
    elif layout == 't':
        base = shape[:-2] + (shape[-1], shape[-2])
        views = [('transpose', nd - 2, nd - 1)]
    elif layout == 's':
        base = shape[:-1] + (2 * shape[-1] + 1,)
        views = [('slice', nd - 1, 1, MAXI, 2)]
    elif layout == 'r':
        base = (2 * shape[0],) + shape[1:]
        views = [('slice', 0, 0, MAXI, 2)]
    elif layout == 'e':
        base = (1,) + shape[1:]
        views = [('expand',) + shape]
    elif layout == 'p':
        assert nd == 3
        base = (shape[1], shape[2], shape[0])
        views = [('permute', 2, 0, 1)]
    else:
        raise ValueError(layout)
    return Spec(dtype, base, values(dtype, numel(base), kind, seed), views)


def fmt_shape(shape):
    return ','.join(str(s) for s in shape) if len(shape) else '-'


class F32(float):
    """A float32 value: printed with the fewest digits that read back as the same float32."""


def fmt_val(v):
    if isinstance(v, F32) and math.isfinite(v) and v != int(v):
        return str(np.float32(v))
    if isinstance(v, bool):
        return '1' if v else '0'
    if isinstance(v, int):
        return str(v)
    v = float(v)
    if math.isnan(v):
        return 'nan'
    if math.isinf(v):
        return 'inf' if v > 0 else '-inf'
    if v == int(v) and abs(v) < 1e15:
        return str(int(v)) if not (v == 0 and math.copysign(1, v) < 0) else '-0.0'
    return repr(v)


def fmt_tensor(tag, t):
    t = t.detach().contiguous()
    if t.dtype == torch.float32:  # the shortest text that reads back as the same float32
        vals = [F32(float(np.float32(v))) for v in t.reshape(-1).tolist()]
    elif t.dtype.is_floating_point:
        vals = t.to(torch.float64).reshape(-1).tolist()
    else:
        vals = [int(x) for x in t.to(torch.int64).reshape(-1).tolist()]
    return '%s %s %s %s' % (tag, SHORT[t.dtype], fmt_shape(tuple(t.shape)), ' '.join(fmt_val(v) for v in vals))


def fmt_scalar(s):
    if isinstance(s, bool):
        return 'scalar b %d' % int(s)
    if isinstance(s, int):
        return 'scalar i %d' % s
    return 'scalar f %s' % fmt_val(s)


def half_missing(msg):
    return "not implemented for 'Half'" in msg or "not implemented for 'BFloat16'" in msg


class Writer:
    def __init__(self, title):
        self.lines = ['# torch %s: %s (tools/golden/gen_ops_golden.py; format in its docstring)'
                      % (torch.__version__, title)]
        self.n = 0
        self.errors = set()  # (op, input dtypes, message): each refusal is recorded once

    def case(self, op, params, inputs, fn, scalars=(), inplace=False):
        """Runs fn(*torch_inputs, *scalars) and records the case. For in-place ops fn mutates
        its first input; 'out' is that input afterwards and 'base' its base tensor."""
        ts = [s.torch() for s in inputs]
        before = inputs[0].base.clone() if inplace else None
        try:
            r = fn(*ts, *scalars)
            err = None
        except (RuntimeError, IndexError, ValueError, TypeError, NotImplementedError) as e:
            err = str(e).split('\n')[0]
            # linalg.vector_norm's message lacks a space ("dimension 0because"); torc's has it.
            err = re.sub(r'(dimension -?\d+)because', r'\1 because', err)
            err = err.replace('same dtypes but gotFloat', 'same dtypes but got Float')  # masked_scatter's
            # index_select words one error two ways, by code path (dim 0 or not); torc uses one.
            err = re.sub(r'^INDICES element is out of DATA bounds, id=-?\d+ axis_dim=\d+$', 'index out of range in self', err)
            if half_missing(err):
                return
            key = (op, tuple(s.dtype for s in inputs), err)
            if key in self.errors and op not in ('index_select', 'gather'):  # those differ by index values
                return
            self.errors.add(key)
        head = 'case ' + op + ''.join(' %s=%s' % (k, v) for k, v in params)
        body = [head]
        for s in inputs:
            body += s.lines()
        body += [fmt_scalar(s) for s in scalars]
        if err is not None:
            body.append('error ' + err)
            if inplace:
                body.append(fmt_tensor('base', before))
        else:
            body.append(fmt_tensor('out', ts[0] if inplace else r))
            if inplace:
                body.append(fmt_tensor('base', inputs[0].base))
        body.append('end')
        self.lines += body
        self.n += 1

    def comment(self, text):
        self.lines.append('# ' + text)

    def write(self, path):
        with open(path, 'w') as f:
            f.write('\n'.join(self.lines) + '\n')
        print('%s: %d cases' % (path, self.n))


def layouts_for(dtype):
    """f32 runs every layout; the other dtypes contiguous, transposed and stepped (the kernels
    share one strided iterator, the frontend shares one path per op)."""
    if dtype == 'f32':
        return ['c', 't', 's', 'r', 'e']
    return ['c', 't', 's']


def shaped_cases(dtype, kind='any', seed=0):
    """(shape, layout) pairs every elementwise op runs on, as Specs."""
    out = [spec(dtype, (2, 3), lay, kind, seed) for lay in layouts_for(dtype)]
    out.append(spec(dtype, (), 'c', kind, seed + 3))            # zero-dim
    if dtype in ('f32', 'i64'):
        out.append(spec(dtype, (0, 3), 'c', kind, seed))        # zero-size
        out.append(spec(dtype, (2, 3, 4), 'p', kind, seed))     # permuted 3-D
    return out


# ---- unary ----
UNARY = [  # name, torch function, value pool
    ('neg', torch.neg, 'any'), ('abs', torch.abs, 'any'), ('sign', torch.sign, 'any'),
    ('sqrt', torch.sqrt, 'pos'), ('rsqrt', torch.rsqrt, 'pos'), ('square', torch.square, 'any'),
    ('reciprocal', torch.reciprocal, 'pos'), ('exp', torch.exp, 'any'), ('log', torch.log, 'pos'),
    ('sin', torch.sin, 'any'), ('cos', torch.cos, 'any'), ('tanh', torch.tanh, 'any'),
    ('sigmoid', torch.sigmoid, 'any'), ('relu', torch.relu, 'any'), ('erf', torch.erf, 'any'),
    ('erfinv', torch.erfinv, 'unit'), ('logical_not', torch.logical_not, 'any'),
]


def gen_unary(w):
    w.comment('unary ops on every dtype and layout')
    for name, fn, kind in UNARY:
        for dt in ALL:
            for s in shaped_cases(dt, kind):
                w.case(name, [], [s], fn)
    for approx in (0, 1):
        for dt in ALL:
            for s in shaped_cases(dt, 'any'):
                w.case('gelu', [('approx', approx)], [s],
                       lambda x: torch.nn.functional.gelu(x, approximate='tanh' if approx else 'none'))
    w.comment('pow by a scalar: int/float/bool exponents (int ** 2 stays int, int ** 0.5 is float)')
    for e in (2, 3, 0, -1, 0.5, 2.0, -1.0, 1.5, True):
        for dt in ALL:
            kind = 'pos' if isinstance(e, float) and e != int(e) else 'any'
            for s in shaped_cases(dt, kind):
                w.case('pow_scalar', [], [s], torch.pow, scalars=(e,))
    w.comment('in place: self keeps its dtype; a result that cannot be cast into it is an error')
    INPLACE = [('neg_', lambda x: x.neg_(), 'any'), ('sqrt_', lambda x: x.sqrt_(), 'pos'),
               ('exp_', lambda x: x.exp_(), 'any'), ('relu_', lambda x: x.relu_(), 'any'),
               ('sigmoid_', lambda x: x.sigmoid_(), 'any')]
    for name, fn, kind in INPLACE:
        for dt in ALL:
            for lay in ['c', 't', 's']:
                w.case(name, [], [spec(dt, (2, 3), lay, kind)], fn, inplace=True)
    for e in (2, 0.5, -1, True, False):
        for dt in ALL:
            for lay in ['c', 't']:
                w.case('pow_scalar_', [], [spec(dt, (2, 3), lay, 'pos')], lambda x, s: x.pow_(s),
                       scalars=(e,), inplace=True)
    for dt in ['f32', 'i64']:  # writing into an expanded tensor is refused (internal overlap)
        w.case('neg_', [], [spec(dt, (2, 3), 'e')], lambda x: x.neg_(), inplace=True)


# ---- binary ----
BINARY = [
    ('add', torch.add), ('sub', torch.sub), ('mul', torch.mul), ('div', torch.div), ('pow', torch.pow),
    ('maximum', torch.maximum), ('minimum', torch.minimum), ('eq', torch.eq), ('ne', torch.ne),
    ('lt', torch.lt), ('le', torch.le), ('gt', torch.gt), ('ge', torch.ge),
    ('logical_and', torch.logical_and), ('logical_or', torch.logical_or),
]
SCALAR_OPS = [
    ('add_scalar', lambda x, s: torch.add(x, s)), ('sub_scalar', lambda x, s: torch.sub(x, s)),
    ('mul_scalar', lambda x, s: torch.mul(x, s)), ('div_scalar', lambda x, s: torch.div(x, s)),
    ('rsub_scalar', lambda x, s: s - x),
    # s / x: Python's Tensor.__rdiv__, reciprocal(x) * s (two roundings; integers give floats).
    ('rdiv_scalar', lambda x, s: s / x),
    ('eq_scalar', lambda x, s: x == s), ('ne_scalar', lambda x, s: x != s), ('lt_scalar', lambda x, s: x < s),
    ('le_scalar', lambda x, s: x <= s), ('gt_scalar', lambda x, s: x > s), ('ge_scalar', lambda x, s: x >= s),
    # torc's maximum/minimum with a scalar: torch.clamp_min / clamp_max (torch.maximum takes
    # tensors only); clamp has no bool kernel, so bool with a bool scalar is torch.maximum's.
    ('maximum_scalar', lambda x, s: torch.maximum(x, torch.tensor(s)) if x.dtype == torch.bool and
     isinstance(s, bool) else torch.clamp_min(x, s)),
    ('minimum_scalar', lambda x, s: torch.minimum(x, torch.tensor(s)) if x.dtype == torch.bool and
     isinstance(s, bool) else torch.clamp_max(x, s)),
]


def bin_kind(name, dt):
    return 'small' if name == 'pow' and dt not in FLOATS else 'any'


def gen_binary(w):
    w.comment('same dtype, layouts of both operands, broadcasting, zero-size and zero-dim')
    for name, fn in BINARY:
        for dt in ALL:
            k = bin_kind(name, dt)
            pairs = [('c', 'c'), ('t', 's')] if dt != 'f32' else [('c', 'c'), ('t', 's'), ('s', 't'), ('e', 'r'), ('r', 'c')]
            for la, lb in pairs:
                w.case(name, [], [spec(dt, (2, 3), la, 'any'), spec(dt, (2, 3), lb, k, 7)], fn)
            w.case(name, [], [spec(dt, (), 'c', 'any', 2), spec(dt, (), 'c', k, 9)], fn)
            w.case(name, [], [spec(dt, (2, 3), 'c', 'any'), spec(dt, (3,), 'c', k, 7)], fn)
            w.case(name, [], [spec(dt, (2, 1), 'c', 'any'), spec(dt, (1, 3), 'c', k, 7)], fn)
            w.case(name, [], [spec(dt, (), 'c', 'any', 3), spec(dt, (2, 3), 't', k, 7)], fn)
            if dt in ('f32', 'i64'):
                w.case(name, [], [spec(dt, (0, 3), 'c'), spec(dt, (1, 3), 'c', k, 7)], fn)
                w.case(name, [], [spec(dt, (3, 1, 2), 'c'), spec(dt, (4, 1), 'c', k, 7)], fn)
                w.case(name, [], [spec(dt, (2, 3, 4), 'p'), spec(dt, (3, 1), 's', k, 7)], fn)
    w.comment('promotion: every dtype pair (f16 + f32 -> f32, int / int -> f32, comparisons -> bool)')
    for name in ('add', 'sub', 'mul', 'div', 'maximum', 'eq', 'lt', 'logical_and', 'pow'):
        fn = dict(BINARY)[name]
        for da in ALL:
            for db in ALL:
                if da == db:
                    continue
                k = 'small' if name == 'pow' else 'any'
                w.case(name, [], [spec(da, (4,), 'c', 'any', 1), spec(db, (4,), 'c', k, 6)], fn)
    w.comment('zero-dim tensors rank below dimensioned ones')
    for da, db in [('f32', 'f64'), ('i64', 'f32'), ('u8', 'i64'), ('f16', 'f64'), ('bool', 'f32'), ('i32', 'bool'),
                   ('bf16', 'f32')]:
        for name in ('add', 'mul', 'div'):
            fn = dict(BINARY)[name]
            w.case(name, [], [spec(da, (2, 3), 'c'), spec(db, (), 'c', 'any', 5)], fn)
            w.case(name, [], [spec(db, (), 'c', 'any', 5), spec(da, (2, 3), 't')], fn)
    w.comment('add/sub with alpha')
    for dt in ALL:
        for alpha in (2, 0.5, -1):
            w.case('add_scaled', [], [spec(dt, (2, 3), 't'), spec(dt, (3,), 'c', 'any', 7)],
                   lambda a, b, s: torch.add(a, b, alpha=s), scalars=(alpha,))
    w.comment('tensor (op) Python scalar and scalar (op) tensor: int, float and bool scalars')
    for name, fn in SCALAR_OPS:
        for dt in ALL:
            for s in (2, 2.5, 0.1, True):
                for lay in (['c', 't'] if s in (2, 2.5) else ['c']):
                    w.case(name, [], [spec(dt, (2, 3), lay)], fn, scalars=(s,))
            w.case(name, [], [spec(dt, (), 'c', 'any', 4)], fn, scalars=(3,))
    w.comment('shape mismatches name both shapes; bool subtraction and bool pow are refused')
    for name, fn in BINARY:
        w.case(name, [], [spec('f32', (2, 3)), spec('f32', (2, 4))], fn)
    w.case('add', [], [spec('f32', (3,)), spec('f32', (4,))], torch.add)
    w.case('mul', [], [spec('f32', (2, 3, 4)), spec('f32', (3, 2, 1))], torch.mul)
    w.case('sub', [], [spec('bool', (3,)), spec('i64', (3,))], torch.sub)
    w.case('sub', [], [spec('i64', (3,)), spec('bool', (3,))], torch.sub)
    w.case('sub_scalar', [], [spec('bool', (3,))], lambda x, s: x - s, scalars=(1,))
    w.case('rsub_scalar', [], [spec('bool', (3,))], lambda x, s: s - x, scalars=(1,))
    w.case('add_scaled', [], [spec('i64', (3,)), spec('i64', (3,))], lambda a, b, s: torch.add(a, b, alpha=s),
           scalars=(2.5,))
    w.case('add_scaled', [], [spec('bool', (3,)), spec('bool', (3,))], lambda a, b, s: torch.add(a, b, alpha=s),
           scalars=(2,))

    w.comment('in place: self (op)= other; the result must cast into self and fit its shape')
    INPLACE = [('add_', lambda a, b: a.add_(b)), ('sub_', lambda a, b: a.sub_(b)), ('mul_', lambda a, b: a.mul_(b)),
               ('div_', lambda a, b: a.div_(b)), ('maximum_', lambda a, b: torch.maximum(a, b, out=a)),
               ('copy_', lambda a, b: a.copy_(b))]
    PAIRS = [('f32', 'f32'), ('f64', 'f32'), ('f32', 'f64'), ('f32', 'i64'), ('f16', 'f32'), ('bf16', 'f16'),
             ('i64', 'i32'), ('i32', 'i64'), ('u8', 'bool'), ('i64', 'f32'), ('bool', 'i64'), ('bool', 'bool'),
             ('i32', 'i32'), ('u8', 'u8')]
    for name, fn in INPLACE:
        for da, db in PAIRS:
            for la, lb in (('c', 'c'), ('t', 's')):
                w.case(name, [], [spec(da, (2, 3), la), spec(db, (2, 3), lb, 'any', 7)], fn, inplace=True)
            w.case(name, [], [spec(da, (2, 3), 's'), spec(db, (3,), 'c', 'any', 7)], fn, inplace=True)
        w.case(name, [], [spec('f32', (3,)), spec('f32', (2, 3), 'c', 'any', 7)], fn, inplace=True)
        w.case(name, [], [spec('f32', (2, 3), 'e'), spec('f32', (2, 3), 'c', 'any', 7)], fn, inplace=True)
    for dt in ALL:
        for alpha in (2, 0.5):
            w.case('add_scaled_', [], [spec(dt, (2, 3), 't'), spec(dt, (3,), 'c', 'any', 7)],
                   lambda a, b, s: a.add_(b, alpha=s), scalars=(alpha,), inplace=True)
    SC_INPLACE = [('add_scalar_', lambda a, s: a.add_(s)), ('sub_scalar_', lambda a, s: a.sub_(s)),
                  ('mul_scalar_', lambda a, s: a.mul_(s)), ('div_scalar_', lambda a, s: a.div_(s)),
                  ('fill_', lambda a, s: a.fill_(s))]
    for name, fn in SC_INPLACE:
        for dt in ALL:
            for s in (2, 2.5, 0.1, True):
                for lay in (('c', 't', 's') if s != 0.1 else ('c',)):
                    w.case(name, [], [spec(dt, (2, 3), lay)], fn, scalars=(s,), inplace=True)
    for dt in ALL:
        w.case('zero_', [], [spec(dt, (2, 3), 's')], lambda a: a.zero_(), inplace=True)
    w.case('fill_', [], [spec('f32', (2, 3), 'e')], lambda a, s: a.fill_(s), scalars=(7,), inplace=True)
    for name, fn in (('addcmul_', lambda a, b, c, s: a.addcmul_(b, c, value=s)),
                     ('addcdiv_', lambda a, b, c, s: a.addcdiv_(b, c, value=s))):
        for dt in ('f32', 'f64', 'bf16', 'f16'):
            for s in (1, 0.5, -2):
                w.case(name, [], [spec(dt, (2, 3), 't'), spec(dt, (2, 3), 's', 'any', 3),
                                  spec(dt, (3,), 'c', 'pos', 1)], fn, scalars=(s,), inplace=True)
        w.case(name, [], [spec('i64', (2, 3)), spec('i64', (2, 3), 'c', 'any', 3), spec('i64', (3,), 'c', 'small', 1)],
               fn, scalars=(2,), inplace=True)


# ---- reductions ----
def gen_reduce(w):
    RED = [  # name, torch fn(x, dims, keepdim), params, pool
        ('sum', lambda x, d, k: torch.sum(x, d, keepdim=k) if d is not None else torch.sum(x), [], 'any'),
        ('mean', lambda x, d, k: torch.mean(x, d, keepdim=k) if d is not None else torch.mean(x), [], 'any'),
        ('prod', None, [], 'any'),
        ('amax', lambda x, d, k: torch.amax(x, d if d is not None else (), keepdim=k), [], 'any'),
        ('amin', lambda x, d, k: torch.amin(x, d if d is not None else (), keepdim=k), [], 'any'),
        ('logsumexp', lambda x, d, k: torch.logsumexp(x, d if d is not None else tuple(range(x.dim())), keepdim=k), [],
         'any'),
    ]
    w.comment('sum mean prod amax amin logsumexp: dims (all, one, negative, several), keepdim, layouts')

    def dims_sets(nd):
        if nd == 0:
            return [None, (0,), (-1,)]
        if nd == 2:
            return [None, (0,), (-1,), (0, 1)]
        return [None, (1,), (-1,), (0, 2), (-1, 0), (0, 1, 2)]

    def shapes(dt):
        out = [(2, 3, lay) for lay in (['c', 't', 's', 'r', 'e'] if dt == 'f32' else ['c', 't'])]
        out += [((), None), ((2, 3, 4), 'p'), ((0, 3), 'c'), ((2, 0), 'c')] if dt in ('f32', 'i64') \
            else [((), None), ((2, 3, 4), 'p')]
        return out

    def sp(dt, shp, kind):
        if len(shp) == 3 and shp[2] in ('c', 't', 's', 'r', 'e'):
            return spec(dt, (2, 3), shp[2], kind)
        shape, lay = shp
        return spec(dt, shape, lay or 'c', kind, 2)

    def run_prod(x, d, k):  # torch.prod takes one dim: several are reduced one after another
        if d is None:
            return torch.prod(x)
        r = x
        for dim in sorted([dd % max(x.dim(), 1) for dd in d], reverse=True):
            r = torch.prod(r, dim, keepdim=k)
        return r

    def dims_param(d):
        return [('dims', ','.join(str(x) for x in d) if d is not None else 'all')]

    for name, fn, _, kind in RED:
        fn = fn or run_prod
        for dt in ALL:
            for shp in shapes(dt):
                s = sp(dt, shp, kind)
                nd = len(s.torch().shape)
                for d in dims_sets(nd):
                    for k in (False, True):
                        if (d is None or (dt != 'f32' and d != (-1,))) and k:
                            continue
                        w.case(name, dims_param(d) + [('keepdim', int(k))], [s],
                               lambda x, d=d, k=k, fn=fn: fn(x, d, k))
    w.comment('var / std with corrections 0, 1, 2; norm with p = 2, 1, 3, inf, 0')
    for name in ('var', 'std'):
        for dt in ALL:
            for shp in shapes(dt):
                s = sp(dt, shp, 'any')
                nd = len(s.torch().shape)
                for d in dims_sets(nd):
                    for corr in ((0, 1, 2) if d is None else (1, 0)) if dt == 'f32' else (1,):
                        for k in ((False,) if d is None else (False, True)):
                            def f(x, d=d, k=k, c=corr, name=name):
                                g = torch.var if name == 'var' else torch.std
                                return g(x, d, correction=c, keepdim=k)
                            w.case(name, dims_param(d) + [('correction', corr), ('keepdim', int(k))], [s], f)
    for dt in ALL:
        for shp in shapes(dt):
            s = sp(dt, shp, 'any')
            nd = len(s.torch().shape)
            for d in dims_sets(nd)[:3]:
                for p in (2, 1, 3, 'inf', 0) if dt == 'f32' else (2, 'inf'):
                    for k in ((False,) if d is None else (False, True)):
                        pv = float('inf') if p == 'inf' else float(p)
                        w.case('norm', dims_param(d) + [('p', p), ('keepdim', int(k))], [s],
                               lambda x, d=d, k=k, pv=pv: torch.linalg.vector_norm(x, pv, d, keepdim=k))
    w.comment('argmax / argmin over one dim or the flattened tensor (ties pick the first)')
    for name, fn in (('argmax', torch.argmax), ('argmin', torch.argmin)):
        for dt in ALL:
            for shp in shapes(dt):
                s = sp(dt, shp, 'any')
                nd = len(s.torch().shape)
                for d in ([None, 0, -1] if nd else [None, 0]):
                    for k in (False, True):
                        w.case(name, [('dim', 'none' if d is None else d), ('keepdim', int(k))], [s],
                               lambda x, d=d, k=k, fn=fn: fn(x, d, keepdim=k))
    w.comment('softmax / log_softmax along a dim')
    for name, fn in (('softmax', torch.softmax), ('log_softmax', torch.log_softmax)):
        for dt in ALL:
            for shp in shapes(dt):
                s = sp(dt, shp, 'any')
                nd = len(s.torch().shape)
                if dt not in FLOATS and s.torch().numel() == 0:
                    continue  # PyTorch returns an empty integer tensor without checking the dtype
                for d in ([0, -1, 1] if nd >= 2 else [0, -1]):
                    w.case(name, [('dim', d)], [s], lambda x, d=d, fn=fn: fn(x, d))
    w.comment('errors: dims out of range, repeated dims, empty max, NaN propagation')
    w.case('sum', [('dims', '2'), ('keepdim', 0)], [spec('f32', (2, 3))], lambda x: torch.sum(x, 2))
    w.case('sum', [('dims', '-3'), ('keepdim', 0)], [spec('f32', (2, 3))], lambda x: torch.sum(x, -3))
    w.case('sum', [('dims', '0,-2'), ('keepdim', 0)], [spec('f32', (2, 3))], lambda x: torch.sum(x, (0, -2)))
    w.case('mean', [('dims', '1'), ('keepdim', 0)], [spec('f32', ())], lambda x: torch.mean(x, 1))
    w.case('amax', [('dims', '0'), ('keepdim', 0)], [spec('f32', (0, 3))], lambda x: torch.amax(x, 0))
    w.case('argmax', [('dim', 'none'), ('keepdim', 0)], [spec('f32', (0, 3))], lambda x: torch.argmax(x))
    w.case('argmin', [('dim', 0), ('keepdim', 0)], [spec('f32', (0, 3))], lambda x: torch.argmin(x, 0))
    w.case('softmax', [('dim', 2)], [spec('f32', (2, 3))], lambda x: torch.softmax(x, 2))
    nan = Spec('f32', (2, 3), [1.0, float('nan'), 3.0, -1.0, 2.0, 0.5])
    for name, fn in (('sum', torch.sum), ('amax', torch.amax), ('amin', torch.amin), ('mean', torch.mean)):
        w.case(name, [('dims', '1'), ('keepdim', 0)], [nan], lambda x, fn=fn: fn(x, 1))
    for name, fn in (('argmax', torch.argmax), ('argmin', torch.argmin)):
        w.case(name, [('dim', 1), ('keepdim', 0)], [nan], lambda x, fn=fn: fn(x, 1))
    inf = Spec('f32', (2, 3), [1.0, float('inf'), 3.0, -float('inf'), 2.0, 0.5])
    w.case('logsumexp', [('dims', '1'), ('keepdim', 0)], [inf], lambda x: torch.logsumexp(x, 1))
    w.case('softmax', [('dim', 1)], [Spec('f32', (2, 3), [1000.0, 1001.0, 1002.0, -1000.0, -1001.0, -1002.0])],
           lambda x: torch.softmax(x, 1))
    w.case('log_softmax', [('dim', 1)], [Spec('f32', (2, 3), [1000.0, 1001.0, 1002.0, -1000.0, -1001.0, -1002.0])],
           lambda x: torch.log_softmax(x, 1))


# ---- matmul ----
def gen_matmul(w):
    w.comment('torch.matmul: 1-D, 2-D, batched, broadcast batch dims, strided operands')
    SH = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((2, 2, 3), (3, 4)), ((3,), (2, 3, 4)),
          ((2, 2, 3), (3,)), ((2, 3), (2, 3, 4)), ((2, 2, 3), (2, 3, 4)), ((2, 1, 2, 3), (3, 3, 2)),
          ((1, 2, 3), (2, 3, 4)), ((4, 1, 3, 2), (1, 5, 2, 3)), ((1, 1), (1, 1)), ((2, 0), (0, 3)),
          ((0, 3), (3, 2)), ((2, 3), (3, 0)), ((0,), (0,)), ((2, 5), (5, 1)), ((5, 7), (7, 6))]
    for dt in ['f32', 'f64', 'bf16', 'f16', 'i64', 'i32', 'u8']:
        k = 'small' if dt in ('u8', 'i32', 'i64') else 'any'
        for sa, sb in SH:
            w.case('matmul', [], [spec(dt, sa, 'c', k), spec(dt, sb, 'c', k, 3)], torch.matmul)
        for sa, sb, la, lb in [((2, 3), (3, 4), 't', 'c'), ((2, 3), (3, 4), 'c', 't'), ((2, 3), (3, 4), 't', 't'),
                               ((2, 3), (3, 4), 's', 'r'), ((3, 3), (3, 2), 'e', 's'), ((2, 2, 3), (2, 3, 4), 'p', 't'),
                               ((2, 2, 3), (3, 4), 't', 's'), ((3,), (3, 4), 's', 't'), ((2, 3), (3,), 'r', 's')]:
            if dt != 'f32' and (la, lb) not in (('t', 'c'), ('c', 't'), ('s', 'r')):
                continue
            w.case('matmul', [], [spec(dt, sa, la, k), spec(dt, sb, lb, k, 3)], torch.matmul)
    w.comment('batch dims expanded with stride 0 (a shared weight)')
    a = spec('f32', (3, 2, 3), 'e')
    w.case('matmul', [], [a, spec('f32', (3, 2), 'c', 'any', 5)], torch.matmul)
    w.comment('errors: dtype mismatch, shapes that cannot be multiplied, 0-D operands, bool')
    w.case('matmul', [], [spec('f32', (2, 3)), spec('f64', (3, 2))], torch.matmul)
    w.case('matmul', [], [spec('f32', (3,)), spec('f64', (3,))], torch.matmul)
    w.case('matmul', [], [spec('f32', (2, 3)), spec('f32', (4, 2))], torch.matmul)
    w.case('matmul', [], [spec('f32', (3,)), spec('f32', (4,))], torch.matmul)
    w.case('matmul', [], [spec('f32', (3,)), spec('f32', (4, 2))], torch.matmul)
    w.case('matmul', [], [spec('f32', (2, 3)), spec('f32', (4,))], torch.matmul)
    w.case('matmul', [], [spec('f32', (5, 2, 3)), spec('f32', (4, 2))], torch.matmul)
    w.case('matmul', [], [spec('f32', (5, 2, 3)), spec('f32', (5, 4, 2))], torch.matmul)
    w.case('matmul', [], [spec('f32', (3, 2, 3)), spec('f32', (2, 3, 2))], torch.matmul)
    w.case('matmul', [], [spec('f32', ()), spec('f32', (3, 2))], torch.matmul)
    w.case('matmul', [], [spec('bool', (2, 3)), spec('bool', (3, 2))], torch.matmul)


# ---- copies ----
def idx(vals, shape=None):
    return Spec('i64', shape if shape is not None else (len(vals),), vals)


def gen_index(w):
    w.comment('index_select: dims, negative dims, strided inputs, every dtype; index errors')
    for dt in ALL:
        for lay in (['c', 't', 's', 'e'] if dt == 'f32' else ['c', 't']):
            for d, ix in ((0, [1, 0, 1]), (1, [2, 0]), (-1, [1, 1, 2, 0]), (1, [])):
                w.case('index_select', [('dim', d)], [spec(dt, (2, 3), lay), idx(ix)],
                       lambda x, i, d=d: torch.index_select(x, d, i))
    w.case('index_select', [('dim', 1)], [spec('f32', (2, 3, 4), 'p'), Spec('i64', (7,), [0, 3, 1, 2, 0, 2, 1],
                                                                            [('slice', 0, 1, MAXI, 2)])],
           lambda x, i: torch.index_select(x, 1, i))
    w.case('index_select', [('dim', 0)], [spec('f32', (3,)), Spec('i64', (), [2])],
           lambda x, i: torch.index_select(x, 0, i))
    w.case('index_select', [('dim', 0)], [spec('f32', ()), Spec('i64', (1,), [0])],
           lambda x, i: torch.index_select(x, 0, i))
    w.case('index_select', [('dim', 1)], [spec('f32', (2, 3)), idx([0, 3])], lambda x, i: torch.index_select(x, 1, i))
    w.case('index_select', [('dim', 1)], [spec('f32', (2, 3)), idx([-1])], lambda x, i: torch.index_select(x, 1, i))
    w.case('index_select', [('dim', 2)], [spec('f32', (2, 3)), idx([0])], lambda x, i: torch.index_select(x, 2, i))
    w.case('index_select', [('dim', 1)], [spec('f32', (2, 3)), idx([0, 1], (1, 2))],
           lambda x, i: torch.index_select(x, 1, i))

    w.comment('gather')
    for dt in ALL:
        for lay in (['c', 't', 's'] if dt == 'f32' else ['c', 't']):
            w.case('gather', [('dim', 1)], [spec(dt, (2, 3), lay), idx([2, 0, 0, 1, 1, 2, 0, 0], (2, 4))],
                   lambda x, i: torch.gather(x, 1, i))
            w.case('gather', [('dim', 0)], [spec(dt, (2, 3), lay), idx([1, 0, 1], (1, 3))],
                   lambda x, i: torch.gather(x, 0, i))
            w.case('gather', [('dim', -1)], [spec(dt, (2, 3), lay), idx([1, 2], (2, 1))],
                   lambda x, i: torch.gather(x, -1, i))
    w.case('gather', [('dim', 2)], [spec('f32', (2, 3, 4), 'p'), Spec('i64', (2, 3, 2), [3, 0, 1, 1, 2, 3, 0, 0, 3, 2, 1, 0])],
           lambda x, i: torch.gather(x, 2, i))
    w.case('gather', [('dim', 1)], [spec('f32', (2, 3)), Spec('i64', (2, 4), [0, 1, 2, 1, 2, 0, 1, 1])],
           lambda x, i: torch.gather(x, 1, i))
    w.case('gather', [('dim', 1)], [spec('f32', (2, 3)), Spec('i64', (4, 2), [0, 1, 2, 1, 2, 0, 1, 1],
                                                                  [('transpose', 0, 1)])],
           lambda x, i: torch.gather(x, 1, i))
    w.case('gather', [('dim', 1)], [spec('f32', (2, 3)), idx([0, 3], (1, 2))], lambda x, i: torch.gather(x, 1, i))
    w.case('gather', [('dim', 1)], [spec('f32', (2, 3)), idx([0, 1])], lambda x, i: torch.gather(x, 1, i))
    w.case('gather', [('dim', 0)], [spec('f32', (2, 3)), idx([0, 1, 1, 1], (1, 4))], lambda x, i: torch.gather(x, 0, i))

    w.comment('masked_select (mask broadcast against the input)')
    for dt in ALL:
        for lay in (['c', 't', 's', 'e'] if dt == 'f32' else ['c', 't']):
            w.case('masked_select', [], [spec(dt, (2, 3), lay), Spec('bool', (2, 3), [1, 0, 1, 1, 1, 0])],
                   torch.masked_select)
        w.case('masked_select', [], [spec(dt, (2, 3)), Spec('bool', (3,), [0, 1, 1])], torch.masked_select)
    w.case('masked_select', [], [spec('f32', (3,)), Spec('bool', (2, 3), [1, 0, 1, 0, 0, 1])], torch.masked_select)
    w.case('masked_select', [], [spec('f32', (2, 3)), Spec('bool', (2, 3), [0] * 6)], torch.masked_select)
    w.case('masked_select', [], [spec('f32', (2, 3), 't'), Spec('bool', (3, 2), [1, 1, 0, 1, 1, 0], [('transpose', 0, 1)])],
           torch.masked_select)
    w.case('masked_select', [], [spec('f32', (2, 3)), Spec('i64', (2, 3), [1, 0, 1, 1, 1, 0])], torch.masked_select)
    w.case('masked_select', [], [spec('f32', (2, 3)), Spec('bool', (2,), [1, 0])], torch.masked_select)

    w.comment('where (broadcast, promotion of the two branches)')
    cond = Spec('bool', (2, 3), [1, 0, 1, 0, 0, 1])
    for dt in ALL:
        w.case('where', [], [cond, spec(dt, (2, 3), 't'), spec(dt, (2, 3), 's', 'any', 5)], torch.where)
    for da, db in (('f32', 'i64'), ('i32', 'u8'), ('f16', 'bf16'), ('bool', 'i32'), ('f64', 'f32')):
        w.case('where', [], [cond, spec(da, (2, 3)), spec(db, (2, 3), 'c', 'any', 5)], torch.where)
    w.case('where', [], [Spec('bool', (3,), [1, 0, 1]), spec('f32', (2, 1)), spec('f32', (), 'c', 'any', 5)], torch.where)
    w.case('where', [], [Spec('bool', (2, 1), [1, 0]), spec('f32', (3,)), spec('f32', (2, 3), 'e', 'any', 5)],
           torch.where)
    w.case('where', [], [Spec('bool', (3,), [1, 0, 1], [('expand', 2, 3)]), spec('f32', (2, 3), 'r'),
                         spec('f32', (2, 3), 't', 'any', 5)], torch.where)
    w.case('where', [], [Spec('i64', (3,), [1, 0, 1]), spec('f32', (3,)), spec('f32', (3,), 'c', 'any', 5)], torch.where)
    w.case('where', [], [Spec('bool', (3,), [1, 0, 1]), spec('f32', (2,)), spec('f32', (3,), 'c', 'any', 5)], torch.where)

    w.comment('cat / stack: dims, negative dims, promotion, strided inputs, errors')
    for dt in ALL:
        for d in (0, 1, -1):
            w.case('cat', [('dim', d)], [spec(dt, (2, 3), 't'), spec(dt, (2, 3), 's', 'any', 5)],
                   lambda a, b, d=d: torch.cat([a, b], d))
            w.case('stack', [('dim', d)], [spec(dt, (2, 3), 't'), spec(dt, (2, 3), 's', 'any', 5)],
                   lambda a, b, d=d: torch.stack([a, b], d))
    w.case('cat', [('dim', 0)], [spec('f32', (1, 3)), spec('f32', (2, 3), 'e', 'any', 3), spec('f32', (0, 3)),
                                 spec('f32', (2, 3), 'r', 'any', 6)], lambda *t: torch.cat(list(t), 0))
    w.case('cat', [('dim', 1)], [spec('f32', (2, 1)), spec('f32', (2, 4), 't', 'any', 3), spec('f32', (2, 0))],
           lambda *t: torch.cat(list(t), 1))
    w.case('cat', [('dim', 2)], [spec('f32', (2, 3, 4), 'p'), spec('f32', (2, 3, 1), 'c', 'any', 5)],
           lambda *t: torch.cat(list(t), 2))
    for da, db in (('f32', 'i64'), ('i32', 'u8'), ('f16', 'bf16'), ('bool', 'i32'), ('f16', 'f32')):
        w.case('cat', [('dim', 0)], [spec(da, (2, 3)), spec(db, (1, 3), 'c', 'any', 5)], lambda *t: torch.cat(list(t), 0))
        w.case('stack', [('dim', 0)], [spec(da, (2, 3)), spec(db, (2, 3), 'c', 'any', 5)],
               lambda *t: torch.stack(list(t), 0))
    w.case('stack', [('dim', 0)], [spec('f32', ()), spec('f32', (), 'c', 'any', 5)], lambda *t: torch.stack(list(t), 0))
    w.case('stack', [('dim', 2)], [spec('f32', (2, 3)), spec('f32', (2, 3), 'c', 'any', 5),
                                   spec('f32', (2, 3), 't', 'any', 7)], lambda *t: torch.stack(list(t), 2))
    w.comment('1-D empty tensors are skipped (legacy), but take part in promotion')
    w.case('cat', [('dim', 1)], [Spec('f64', (0,), []), spec('i64', (2, 3), 't'), Spec('f32', (0,), [])],
           lambda *t: torch.cat(list(t), 1))
    w.case('cat', [('dim', 0)], [spec('f32', (2, 3)), Spec('f32', (0,), []), spec('f32', (1, 3), 'c', 'any', 4)],
           lambda *t: torch.cat(list(t), 0))
    w.case('cat', [('dim', 0)], [Spec('f32', (0,), []), Spec('f32', (0,), [])], lambda *t: torch.cat(list(t), 0))
    w.case('cat', [('dim', 2)], [Spec('f32', (0,), []), spec('f32', (2, 3))], lambda *t: torch.cat(list(t), 2))
    w.case('cat', [('dim', 0)], [spec('f32', (2, 3)), spec('f32', ())], lambda *t: torch.cat(list(t), 0))
    w.case('cat', [('dim', 0)], [spec('f32', (2, 3)), spec('f32', (2, 4))], lambda *t: torch.cat(list(t), 0))
    w.case('cat', [('dim', 0)], [spec('f32', (2, 3)), spec('f32', (3,))], lambda *t: torch.cat(list(t), 0))
    w.case('cat', [('dim', 2)], [spec('f32', (2, 3)), spec('f32', (2, 3))], lambda *t: torch.cat(list(t), 2))
    w.case('cat', [('dim', 0)], [spec('f32', ())], lambda *t: torch.cat(list(t), 0))
    w.case('stack', [('dim', 0)], [spec('f32', (2, 3)), spec('f32', (2, 4))], lambda *t: torch.stack(list(t), 0))
    w.case('stack', [('dim', 3)], [spec('f32', (2, 3)), spec('f32', (2, 3))], lambda *t: torch.stack(list(t), 3))

    w.comment('out-of-place scatters: index_add, scatter_add, masked_scatter (duplicate indices accumulate)')
    for dt in ALL:
        for lay in (['c', 't', 's'] if dt == 'f32' else ['c', 't']):
            w.case('index_add', [('dim', 1)], [spec(dt, (2, 3), lay), idx([2, 0, 2, 1]), spec(dt, (2, 4), 'c', 'any', 5)],
                   lambda x, i, src: torch.index_add(x, 1, i, src))
            w.case('index_add', [('dim', 0)], [spec(dt, (2, 3), lay), idx([1, 1, 0]), spec(dt, (3, 3), 't', 'any', 3)],
                   lambda x, i, src: torch.index_add(x, 0, i, src))
            w.case('scatter_add', [('dim', 1)], [spec(dt, (2, 3), lay), idx([2, 0, 2, 1, 1, 1], (2, 3)),
                                                 spec(dt, (2, 4), 'c', 'any', 5)],
                   lambda x, i, src: torch.scatter_add(x, 1, i, src))
            w.case('scatter_add', [('dim', 0)], [spec(dt, (2, 3), lay), idx([1, 0, 1], (1, 3)), spec(dt, (2, 3), 's', 'any', 3)],
                   lambda x, i, src: torch.scatter_add(x, 0, i, src))
            w.case('masked_scatter', [], [spec(dt, (2, 3), lay), Spec('bool', (2, 3), [1, 0, 1, 1, 0, 0]),
                                          spec(dt, (7,), 'c', 'any', 5)], torch.masked_scatter)
        w.case('masked_scatter', [], [spec(dt, (2, 3)), Spec('bool', (3,), [0, 1, 1]), spec(dt, (2, 2), 't', 'any', 5)],
               torch.masked_scatter)
    w.case('index_add', [('dim', -1)], [spec('f32', (2, 3, 4), 'p'), idx([3, 3, 0]), spec('f32', (2, 3, 3), 'c', 'any', 2)],
           lambda x, i, src: torch.index_add(x, -1, i, src))
    w.case('index_add', [('dim', 1)], [spec('f32', (2, 3)), idx([0, 3]), spec('f32', (2, 2), 'c', 'any', 5)],
           lambda x, i, src: torch.index_add(x, 1, i, src))
    w.case('index_add', [('dim', 1)], [spec('f32', (2, 3)), idx([0, 1]), spec('f32', (2, 3), 'c', 'any', 5)],
           lambda x, i, src: torch.index_add(x, 1, i, src))
    w.case('index_add', [('dim', 1)], [spec('f32', (2, 3)), idx([0, 1]), spec('f64', (2, 2), 'c', 'any', 5)],
           lambda x, i, src: torch.index_add(x, 1, i, src))
    w.case('scatter_add', [('dim', 1)], [spec('f32', (2, 3)), idx([0, 3], (1, 2)), spec('f32', (2, 3), 'c', 'any', 5)],
           lambda x, i, src: torch.scatter_add(x, 1, i, src))
    w.case('scatter_add', [('dim', 1)], [spec('f32', (2, 3)), idx([0, 1]), spec('f32', (2, 3), 'c', 'any', 5)],
           lambda x, i, src: torch.scatter_add(x, 1, i, src))
    w.case('masked_scatter', [], [spec('f32', (2, 3)), Spec('bool', (2, 3), [1, 1, 1, 1, 0, 0]), spec('f32', (3,))],
           torch.masked_scatter)
    w.case('masked_scatter', [], [spec('f32', (2, 3)), Spec('i64', (2, 3), [1, 1, 1, 1, 0, 0]), spec('f32', (6,))],
           torch.masked_scatter)
    w.case('masked_scatter', [], [spec('f32', (2, 3)), Spec('bool', (2, 3), [1, 1, 1, 1, 0, 0]), spec('f64', (6,))],
           torch.masked_scatter)
    w.case('scatter_add', [('dim', 1)], [spec('f32', (2, 3)), idx([0, 1], (1, 2)), spec('f64', (2, 3), 'c', 'any', 5)],
           lambda x, i, src: torch.scatter_add(x, 1, i, src))
    w.case('index_add', [('dim', 1)], [spec('f32', (2, 3)), idx([0, 1]), spec('f32', (3, 2), 'c', 'any', 5)],
           lambda x, i, src: torch.index_add(x, 1, i, src))
    w.case('index_add', [('dim', 1)], [spec('f32', (2, 3)), idx([0, 1], (1, 2)), spec('f32', (2, 2), 'c', 'any', 5)],
           lambda x, i, src: torch.index_add(x, 1, i, src))

    w.comment('triu / tril: diagonals, non-square, batched, strided')
    for dt in ALL:
        for name, fn in (('triu', torch.triu), ('tril', torch.tril)):
            for k in (0, 1, -1, 5, -5):
                w.case(name, [('k', k)], [spec(dt, (3, 4), 't' if dt == 'f32' else 'c')], lambda x, k=k, fn=fn: fn(x, k))
    for name, fn in (('triu', torch.triu), ('tril', torch.tril)):
        w.case(name, [('k', 0)], [spec('f32', (2, 3, 4), 'p')], lambda x, fn=fn: fn(x, 0))
        w.case(name, [('k', 1)], [spec('f32', (4, 3), 's')], lambda x, fn=fn: fn(x, 1))
        w.case(name, [('k', 0)], [spec('f32', (3, 3), 'e')], lambda x, fn=fn: fn(x, 0))
        w.case(name, [('k', 0)], [spec('f32', (0, 3))], lambda x, fn=fn: fn(x, 0))
        w.case(name, [('k', 0)], [spec('f32', (3,))], lambda x, fn=fn: fn(x, 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument('--out', default=os.path.join(here, '..', '..', 'tests', 'golden'))
    args = ap.parse_args()
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)
    for name, gen, title in (('unary', gen_unary, 'unary ops, pow by a scalar, unary in-place ops'),
                             ('binary', gen_binary, 'binary ops, promotion, scalar forms, in-place binary ops'),
                             ('reduce', gen_reduce, 'reductions, argmax/argmin, softmax'),
                             ('matmul', gen_matmul, 'torch.matmul'),
                             ('index', gen_index, 'index_select, gather, masked_select, where, cat, stack, triu, tril')):
        w = Writer(title)
        gen(w)
        w.write(os.path.join(args.out, 'ops_%s.txt' % name))
    return 0


if __name__ == '__main__':
    sys.exit(main())
