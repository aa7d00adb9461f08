#!/usr/bin/env python3
# tools/golden/gen_einops_golden.py — writes tests/golden/einops_cases.txt: einsum, rearrange,
# reduce and repeat cases (inputs, results, views vs copies, errors) computed with einops + torch.
"""Generate the golden cases read by tests/test_einsum.c. The test suite reads only the
committed output; it never needs einops or torch.

Rerun (from the repository root; needs torch and einops, takes a second):

    python3 tools/golden/gen_einops_golden.py            # writes tests/golden/einops_cases.txt
    python3 tools/golden/gen_einops_golden.py --out DIR  # somewhere else (to diff)

Generated with torch 2.15.0 and einops 0.8.2. Inputs come from torch.manual_seed(0): normal
values rounded to two decimals (so the text is exact), small integers for integer dtypes.

File format: blocks of lines "KEY VALUE", one block per case, ended by "end"; '#' lines are
comments.

  case NAME              a unique name
  op OP                  einsum | rearrange | reduce | repeat
  pattern PATTERN        the pattern / equation, as passed
  reduction RED          reduce: sum | mean | max | min | prod (or an unknown name)
  axes AXES              the axes lengths ("h=2, w=3", torc's spelling of einops' keyword
                         arguments); absent when none
  in DTYPE SHAPE [perm P] : VALUES
                         one line per operand. SHAPE is "2,3,8" or "-" (zero-dim); the
                         tensor is VALUES (row-major) in SHAPE, then permuted by P when given
                         (so the operand is a non-contiguous view)
  out DTYPE SHAPE view|copy|any : VALUES
                         the result (row-major values), and whether torch's result shares
                         storage with the first input (view) or not (copy); "any" for
                         empty tensors, whose storage says nothing
  error STATUS KEY       the call must fail with TORC_ERR_STATUS and a message containing
                         KEY; the KEY is also part of the einops / torch message, which
                         follows on a "# einops:" line
"""
import argparse
import os
import sys

import einops
import torch

torch.manual_seed(0)


def randt(shape, dtype=torch.float64):
    if dtype.is_floating_point:
        return (torch.round(torch.randn(shape, dtype=torch.float64) * 100) / 100).to(dtype)
    return torch.randint(-4, 5, shape, dtype=dtype)


# Each case: (name, op, pattern, arg, inputs, expected_error). arg is the axes string, for
# reduce "REDUCTION" or "REDUCTION; AXES"; inputs is a list of (shape, dtype, perm or None);
# expected_error is None or (torc status, key phrase).
F = torch.float64
I = torch.int64
CASES = [
    # ---- rearrange ----
    ("rearrange_split_heads", "rearrange", "... (heads hidden) -> ... heads hidden", "heads=2", [((2, 3, 8), F, None)], None),
    ("rearrange_merge_heads", "rearrange", "b s heads hidden -> b s (heads hidden)", "", [((2, 3, 2, 4), F, None)], None),
    ("rearrange_permute", "rearrange", "b c h w -> b h w c", "", [((2, 3, 2, 2), F, None)], None),
    ("rearrange_flatten", "rearrange", "b c h w -> b (c h w)", "", [((2, 3, 2, 2), F, None)], None),
    ("rearrange_split_infer", "rearrange", "b (h w) c -> b h w c", "h=2", [((2, 6, 3), F, None)], None),
    ("rearrange_split_both_given", "rearrange", "b (h w) -> b h w", "h=2, w=3", [((2, 6), F, None)], None),
    ("rearrange_interleave", "rearrange", "(b1 b2) h w -> (b1 h) (b2 w)", "b1=2", [((4, 2, 3), F, None)], None),
    ("rearrange_space_to_depth", "rearrange", "(h h2) (w w2) c -> h w (c h2 w2)", "h2=2 w2=2", [((4, 4, 3), F, None)], None),
    ("rearrange_insert_units", "rearrange", "b h w -> b () h w 1", "", [((2, 3, 4), F, None)], None),
    ("rearrange_remove_unit", "rearrange", "b 1 h w -> b h w", "", [((2, 1, 3, 4), F, None)], None),
    ("rearrange_transposed_permute", "rearrange", "h w -> w h", "", [((3, 2), F, (1, 0))], None),
    ("rearrange_transposed_flatten", "rearrange", "h w -> (h w)", "", [((3, 2), F, (1, 0))], None),
    ("rearrange_ellipsis_middle", "rearrange", "b ... c -> c b ...", "", [((2, 3, 4, 5), F, None)], None),
    ("rearrange_ellipsis_flatten", "rearrange", "... -> (...)", "", [((2, 3, 4), F, None)], None),
    ("rearrange_ellipsis_group", "rearrange", "b ... -> b (...)", "", [((2, 3, 4), F, None)], None),
    ("rearrange_ellipsis_empty", "rearrange", "b ... h -> h ... b", "", [((2, 3), F, None)], None),
    ("rearrange_identity", "rearrange", "a b -> a b", "", [((2, 3), F, None)], None),
    ("rearrange_zero_dim", "rearrange", " -> ", "", [((), F, None)], None),
    ("rearrange_zero_dim_insert", "rearrange", " -> 1 ()", "", [((), F, None)], None),
    ("rearrange_zero_size", "rearrange", "b (h w) -> w b h", "h=2", [((0, 6), F, None)], None),
    ("rearrange_int64", "rearrange", "(a b) c -> c (b a)", "a=2", [((4, 3), I, None)], None),
    # ---- reduce ----
    ("reduce_course_sum", "reduce", "... hidden -> ...", "sum", [((2, 3, 4), F, None)], None),
    ("reduce_mean_global_pool", "reduce", "b c h w -> b c", "mean", [((2, 3, 2, 2), F, None)], None),
    ("reduce_max_pool", "reduce", "b c (h h2) (w w2) -> b c h w", "max; h2=2, w2=2", [((1, 2, 4, 4), F, None)], None),
    ("reduce_min_pool_anonymous", "reduce", "b c (h 2) (w 2) -> b c h w", "min", [((1, 2, 4, 4), F, None)], None),
    ("reduce_mean_keep_units", "reduce", "b c h w -> b c () ()", "mean", [((2, 3, 2, 2), F, None)], None),
    ("reduce_mean_batch_units", "reduce", "b c h w -> 1 c 1 1", "mean", [((2, 3, 2, 2), F, None)], None),
    ("reduce_prod", "reduce", "t b c -> b c", "prod", [((3, 2, 2), F, None)], None),
    ("reduce_sum_ellipsis", "reduce", "... h -> h", "sum", [((2, 3, 4), F, None)], None),
    ("reduce_nothing", "reduce", "b c -> c b", "sum", [((2, 3), F, None)], None),
    ("reduce_split_then_sum", "reduce", "b (h w) -> b w", "sum; h=2", [((2, 6), F, None)], None),
    ("reduce_int64_sum", "reduce", "a b -> a", "sum", [((3, 4), I, None)], None),
    ("reduce_transposed_max", "reduce", "(b1 b2) c -> b1 c", "max; b2=2", [((3, 4), F, (1, 0))], None),
    ("reduce_all", "reduce", "a b -> ", "sum", [((3, 4), F, None)], None),
    # ---- repeat ----
    ("repeat_course_new_axis", "repeat", "h w -> h w c", "c=3", [((2, 3), F, None)], None),
    ("repeat_rows", "repeat", "h w -> (h 2) w", "", [((2, 3), F, None)], None),
    ("repeat_tile", "repeat", "h w -> (2 h) w", "", [((2, 3), F, None)], None),
    ("repeat_merge_new_axis", "repeat", "h w -> h (w c)", "c=2", [((2, 3), F, None)], None),
    ("repeat_leading", "repeat", "h w -> b h w", "b=2", [((2, 3), F, None)], None),
    ("repeat_ellipsis_anonymous", "repeat", "... -> ... 3", "", [((2, 2), F, None)], None),
    ("repeat_split_and_repeat", "repeat", "(h w) -> h w c", "h=2, c=3", [((6,), F, None)], None),
    ("repeat_permute_unit", "repeat", "h w -> w h 1", "", [((2, 3), F, None)], None),
    ("repeat_length_one", "repeat", "h -> h c", "c=1", [((3,), F, None)], None),
    # ---- einsum ----
    ("einsum_course_attention", "einsum", "batch seq1 hidden, batch seq2 hidden -> batch seq1 seq2", None,
     [((2, 3, 4), F, None), ((2, 3, 4), F, None)], None),
    ("einsum_torch_style", "einsum", "bih,bjh->bij", None, [((2, 3, 4), F, None), ((2, 3, 4), F, None)], None),
    ("einsum_per_head", "einsum", "b s heads hidden, hidden hidden2 -> b s heads hidden2", None,
     [((2, 3, 2, 4), F, None), ((4, 4), F, None)], None),
    ("einsum_matmul", "einsum", "i j, j k -> i k", None, [((2, 3), F, None), ((3, 4), F, None)], None),
    ("einsum_matmul_transposed", "einsum", "b i j, b j k -> b i k", None,
     [((2, 4, 3), F, (0, 2, 1)), ((2, 4, 2), F, None)], None),
    ("einsum_outer", "einsum", "i, j -> i j", None, [((3,), F, None), ((4,), F, None)], None),
    ("einsum_dot", "einsum", "i, i ->", None, [((5,), F, None), ((5,), F, None)], None),
    ("einsum_trace", "einsum", "i i ->", None, [((4, 4), F, None)], None),
    ("einsum_diagonal", "einsum", "i i -> i", None, [((3, 3), F, None)], None),
    ("einsum_batch_diagonal", "einsum", "b i i -> i b", None, [((2, 3, 3), F, None)], None),
    ("einsum_transpose", "einsum", "i j -> j i", None, [((2, 3), F, None)], None),
    ("einsum_sum_all", "einsum", "i j ->", None, [((2, 3), F, None)], None),
    ("einsum_sum_some", "einsum", "i j k -> k i", None, [((2, 3, 4), F, None)], None),
    ("einsum_three_operands", "einsum", "a b, b c, c d -> a d", None,
     [((2, 3), F, None), ((3, 4), F, None), ((4, 2), F, None)], None),
    ("einsum_bilinear", "einsum", "b n, a n m, b m -> b a", None,
     [((2, 3), F, None), ((4, 3, 2), F, None), ((2, 2), F, None)], None),
    ("einsum_elementwise_sum", "einsum", "b i, b i -> b", None, [((2, 3), F, None), ((2, 3), F, None)], None),
    ("einsum_hadamard", "einsum", "i j, i j -> i j", None, [((2, 3), F, None), ((2, 3), F, None)], None),
    ("einsum_broadcast_unit", "einsum", "i j, i j -> i j", None, [((1, 3), F, None), ((2, 3), F, None)], None),
    ("einsum_ellipsis_matmul", "einsum", "... i j, ... j k -> ... i k", None,
     [((2, 3, 4), F, None), ((4, 5), F, None)], None),
    ("einsum_ellipsis_broadcast", "einsum", "... i j, ... j k -> ... i k", None,
     [((2, 1, 3, 4), F, None), ((5, 4, 2), F, None)], None),
    ("einsum_ellipsis_summed", "einsum", "... j, ... j -> j", None, [((2, 3), F, None), ((2, 3), F, None)], None),
    ("einsum_implicit_output", "einsum", "ij,jk", None, [((2, 3), F, None), ((3, 4), F, None)], None),
    ("einsum_implicit_ellipsis", "einsum", "...ij,...jk", None, [((2, 2, 3), F, None), ((3, 2), F, None)], None),
    ("einsum_filter_images", "einsum", "batch h w, h w channel -> batch channel", None,
     [((3, 2, 2), F, None), ((2, 2, 4), F, None)], None),
    ("einsum_linear_ellipsis", "einsum", "out_dim in_dim, ... in_dim -> ... out_dim", None,
     [((3, 4), F, None), ((2, 5, 4), F, None)], None),
    ("einsum_uppercase_letters", "einsum", "bN,Nc->bc", None, [((2, 3), F, None), ((3, 2), F, None)], None),
    ("einsum_int64", "einsum", "i j, j k -> i k", None, [((2, 3), I, None), ((3, 2), I, None)], None),
    ("einsum_empty_contraction", "einsum", "i j, j k -> i k", None, [((2, 0), F, None), ((0, 3), F, None)], None),
    ("einsum_batch_outer", "einsum", "b i, b j -> b i j", None, [((2, 3), F, None), ((2, 2), F, None)], None),
    # ---- errors ----
    ("error_rearrange_one_side", "rearrange", "a b -> a c", "", [((2, 3), F, None)],
     ("INVALID_ARG", "Identifiers only on one side of expression (should be on both)")),
    ("error_rearrange_duplicate", "rearrange", "a a -> a", "", [((2, 2), F, None)],
     ("INVALID_ARG", 'Indexing expression contains duplicate dimension "a"')),
    ("error_rearrange_cannot_divide", "rearrange", "(a b) c -> a b c", "a=4", [((6, 2), F, None)],
     ("SHAPE", "Shape mismatch, can't divide axis of length 6 in chunks of 4")),
    ("error_rearrange_size_mismatch", "rearrange", "a b -> b a", "a=3", [((2, 3), F, None)],
     ("SHAPE", "Shape mismatch, 2 != 3")),
    ("error_rearrange_cannot_infer", "rearrange", "(a b) c -> a b c", "", [((6, 2), F, None)],
     ("INVALID_ARG", "Could not infer sizes for")),
    ("error_rearrange_wrong_ndim", "rearrange", "a b c -> c b a", "", [((2, 3), F, None)],
     ("SHAPE", "Wrong shape: expected 3 dims. Received 2-dim tensor.")),
    ("error_rearrange_too_few_dims", "rearrange", "a b ... c -> c ... b a", "", [((2, 3), F, None)],
     ("SHAPE", "Wrong shape: expected >=3 dims. Received 2-dim tensor.")),
    ("error_rearrange_ellipsis_dropped", "rearrange", "... a -> a", "", [((2, 3), F, None)],
     ("INVALID_ARG", "Identifiers only on one side of expression (should be on both)")),
    ("error_rearrange_nested", "rearrange", "((a b)) -> a b", "", [((6,), F, None)],
     ("INVALID_ARG", "Axis composition is one-level (brackets inside brackets not allowed)")),
    ("error_rearrange_unclosed", "rearrange", "(a b -> a b", "", [((6,), F, None)],
     ("INVALID_ARG", "Imbalanced parentheses in expression")),
    ("error_rearrange_unbalanced", "rearrange", "a b) -> a b", "", [((2, 3), F, None)],
     ("INVALID_ARG", "Brackets are not balanced")),
    ("error_rearrange_unused_axis", "rearrange", "a b -> b a", "c=2", [((2, 3), F, None)],
     ("INVALID_ARG", "Axis c is not used in transform")),
    ("error_rearrange_anonymous", "rearrange", "a b -> a b 2", "", [((2, 3), F, None)],
     ("INVALID_ARG", "Non-unitary anonymous axes are not supported in rearrange")),
    ("error_rearrange_underscore", "rearrange", "_a b -> b _a", "", [((2, 3), F, None)],
     ("INVALID_ARG", "Invalid axis identifier: _a")),
    ("error_rearrange_dots", "rearrange", "a.b -> a", "", [((2, 3), F, None)],
     ("INVALID_ARG", "Expression may contain dots only inside ellipsis (...)")),
    ("error_rearrange_ellipsis_right_only", "rearrange", "a b -> ... a b", "", [((2, 3), F, None)],
     ("INVALID_ARG", "Ellipsis found in right side, but not left side of a pattern")),
    ("error_rearrange_ellipsis_in_parens", "rearrange", "(...) -> ...", "", [((2, 3), F, None)],
     ("INVALID_ARG", "Ellipsis inside parenthesis in the left side is not allowed")),
    ("error_rearrange_unknown_character", "rearrange", "a b -> a+b", "", [((2, 3), F, None)],
     ("INVALID_ARG", "Unknown character '+'")),
    ("error_repeat_missing_size", "repeat", "h w -> h w c", "", [((2, 3), F, None)],
     ("INVALID_ARG", "Specify sizes for new axes in repeat: {'c'}")),
    ("error_repeat_left_only", "repeat", "h w -> h", "", [((2, 3), F, None)],
     ("INVALID_ARG", "Unexpected identifiers on the left side of repeat: {'w'}")),
    ("error_reduce_unknown_reduction", "reduce", "a b -> a", "median", [((2, 3), F, None)],
     ("INVALID_ARG", "Unknown reduction median")),
    ("error_reduce_right_only", "reduce", "a b -> a c", "sum", [((2, 3), F, None)],
     ("INVALID_ARG", "Unexpected identifiers on the right side of reduce sum: {'c'}")),
    ("error_reduce_mean_of_integers", "reduce", "a b -> a", "mean", [((2, 3), I, None)],
     ("DTYPE", "mean")),
    ("error_einsum_unknown_axis", "einsum", "i j, j k -> i x", None, [((2, 3), F, None), ((3, 4), F, None)],
     ("INVALID_ARG", "Unknown axis x on right side of einsum")),
    ("error_einsum_duplicate_output", "einsum", "i j -> i i", None, [((2, 3), F, None)],
     ("INVALID_ARG", 'Indexing expression contains duplicate dimension "i"')),
    ("error_einsum_size_mismatch", "einsum", "i j, i j -> i j", None, [((2, 3), F, None), ((4, 3), F, None)],
     ("SHAPE", "which does not broadcast with previously seen size 2")),
    ("error_einsum_ellipsis_mismatch", "einsum", "... j, ... j -> j", None, [((2, 3), F, None), ((4, 3), F, None)],
     ("SHAPE", "which does not broadcast with previously seen ellipsis with size 2")),
    ("error_einsum_wrong_ndim", "einsum", "i j k -> i", None, [((2, 3), F, None)],
     ("SHAPE", "the number of subscripts in the equation (3) does not match the number of dimensions (2)")),
    ("error_einsum_diagonal_mismatch", "einsum", "i i -> i", None, [((2, 3), F, None)],
     ("SHAPE", "is repeated for operand 0 but the sizes don't match, 3 != 2")),
    ("error_einsum_parentheses", "einsum", "(i j) -> i", None, [((6,), F, None)],
     ("INVALID_ARG", "supported in einsum")),
    ("error_einsum_no_arrow", "einsum", "i j, j k", None, [((2, 3), F, None), ((3, 4), F, None)],
     ("INVALID_ARG", "must contain '->'")),
    ("error_einsum_too_few_operands", "einsum", "i j, j k -> i k", None, [((2, 3), F, None)],
     ("INVALID_ARG", "fewer operands were provided than specified in the equation")),
    ("error_einsum_dtype_mismatch", "einsum", "i j, j k -> i k", None, [((2, 3), F, None), ((3, 4), torch.float32, None)],
     ("DTYPE", "expected scalar type Double but found Float")),
]

DTYPE_NAMES = {torch.float64: "f64", torch.float32: "f32", torch.int64: "i64"}


def kwargs_of(arg):
    out = {}
    for entry in arg.replace(",", " ").split():
        name, value = entry.split("=")
        out[name] = int(value)
    return out


def run(op, pattern, arg, xs):
    reduction, _, axes = arg.partition(";") if op == "reduce" else ("", "", arg)
    if op == "einsum":
        if not any(c.isspace() for c in pattern):
            return torch.einsum(pattern, *xs)  # torch style, as torc reads it (implicit output allowed)
        return einops.einsum(*xs, pattern)
    if op == "rearrange":
        return einops.rearrange(xs[0], pattern, **kwargs_of(axes))
    if op == "repeat":
        return einops.repeat(xs[0], pattern, **kwargs_of(axes))
    return einops.reduce(xs[0], pattern, reduction.strip(), **kwargs_of(axes))


def fmt_values(t):
    t = t.contiguous().reshape(-1)
    if t.dtype.is_floating_point:
        return " ".join(repr(float(v)) for v in t.tolist())
    return " ".join(str(int(v)) for v in t.tolist())


def fmt_shape(shape):
    return ",".join(str(s) for s in shape) if len(shape) else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden"))
    args = ap.parse_args()
    names = set()
    lines = [
        "# tests/golden/einops_cases.txt — einsum / rearrange / reduce / repeat cases for tests/test_einsum.c,",
        f"# written by tools/golden/gen_einops_golden.py (torch {torch.__version__}, einops {einops.__version__}).",
        "# Format: see the generator's docstring.",
    ]
    for name, op, pattern, arg, inputs, error in CASES:
        assert name not in names, name
        names.add(name)
        xs, block = [], [f"case {name}", f"op {op}", f"pattern {pattern}"]
        reduction, _, axes = (arg or "").partition(";") if op == "reduce" else ("", "", arg or "")
        if reduction:
            block.append(f"reduction {reduction.strip()}")
        if axes.strip():
            block.append(f"axes {axes.strip()}")
        for shape, dtype, perm in inputs:
            base = randt(shape, dtype)
            x = base.permute(perm) if perm else base
            xs.append(x)
            p = f" perm {','.join(map(str, perm))}" if perm else ""
            block.append(f"in {DTYPE_NAMES[dtype]} {fmt_shape(shape)}{p} : {fmt_values(base)}")
        try:
            r = run(op, pattern, arg, xs)
            raised = None
        except Exception as e:  # einops raises EinopsError, ValueError, NotImplementedError; torch RuntimeError
            raised = " ".join(str(e).split())
        if error is None:
            if raised is not None:
                sys.exit(f"{name}: einops raised unexpectedly: {raised}")
            shares = r.untyped_storage().data_ptr() == xs[0].untyped_storage().data_ptr()
            kind = "any" if r.numel() == 0 or xs[0].numel() == 0 else "view" if shares else "copy"
            block.append(f"out {DTYPE_NAMES[r.dtype]} {fmt_shape(r.shape)} {kind} : {fmt_values(r)}")
        else:
            status, key = error
            if raised is None:
                sys.exit(f"{name}: einops did not raise")
            if key not in raised:
                sys.exit(f"{name}: key phrase {key!r} is not in einops' message {raised!r}")
            block.append(f"error {status} {key}")
            block.append(f"# einops: {raised}")
        block.append("end")
        lines.extend(block)
    path = os.path.join(args.out, "einops_cases.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(CASES)} cases to {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
