// backends/cpu_onednn/pointwise.c — torc's own pointwise loops: the fused ops (ADDCMUL, ADDCDIV,
// LERP) on dense float32 operands, and the binary arithmetic ops (ADD, SUB, MUL, DIV) on float32 /
// bfloat16 / float16 operands of any mix whose rows are contiguous or broadcast. Both round exactly
// as PyTorch's CPU kernels (and the reference). oneDNN has no ternary primitive, a chain of binary
// ones would round between its steps, its binary add with a source scale rounds alpha * y before
// adding (SGD's update drifted from the reference from the first step), and its binary primitive
// runs mixed dtypes (autocast's bf16 product + f32 bias) on its reference code.
// Each statement below is one IEEE float operation (ISO C, no -ffast-math, so nothing is
// contracted or reassociated); fmaf is the one fused step PyTorch's kernels take too.
#include <math.h>
#include <omp.h>
#include <string.h>

#include "onednn-impl.h"
#include "torc/convert.h"

static bool fused(const torc_op *op) {
    return op->code == TORC_OP_ADDCMUL || op->code == TORC_OP_ADDCDIV || op->code == TORC_OP_LERP;
}

// x + alpha * y with alpha = +-1 is exact in oneDNN's binary primitive (a negation, one rounding);
// any other alpha never reaches it: these loops, else the reference.
static bool scaled_add(const torc_op *op) {
    return (op->code == TORC_OP_ADD || op->code == TORC_OP_SUB) && fabs(op->params.scalar.value) != 1.0;
}

// ---- binary arithmetic: the layout ----
// out, in0 and in1 over out's shape, size-1 dims dropped and neighbours merged where all three
// allow it, become R rows of N elements: the last (inner) dim has stride 1 in out and 1 or 0 (a
// value repeated along the row: a column broadcast, a scalar) in each input; rows are addressed
// by the outer dims, any strides (0: a row broadcast, as a bias over (B, T, out)).
typedef struct bin_layout {
    int nd;                            // outer dims
    int64_t dims[TORC_MAX_DIMS];       // their sizes, outermost first
    int64_t st[3][TORC_MAX_DIMS];      // their strides in elements: out, in0, in1
    int64_t R, N;                      // rows (the outer dims' product, 1 without any), row length
    bool inner[3];                     // the inner dim's stride is 1 (else 0; out's is 1)
} bin_layout;

static bool is_float(torc_dtype d) { return d == TORC_DTYPE_F32 || d == TORC_DTYPE_BF16 || d == TORC_DTYPE_F16; }

static bool operand_ok(const torc_operand *x, const torc_operand *out) {
    if (!is_float(x->dtype) || x->ndim != out->ndim) return false;
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] != out->shape[d] || x->stride[d] < 0) return false;
    return true;
}

// Whether op is an ADD / SUB / MUL / DIV these loops run, and its layout.
static bool bin_layout_of(const torc_op *op, bin_layout *L) {
    if (op->code < TORC_OP_ADD || op->code > TORC_OP_DIV || op->n_in != 2) return false;
    const torc_operand *x[3] = {&op->out[0], &op->in[0], &op->in[1]};
    if (x[0]->ndim < 0 || x[0]->ndim > TORC_MAX_DIMS) return false;
    for (int k = 0; k < 3; k++)
        if (!operand_ok(x[k], x[0])) return false;
    // Merge from the innermost dim out: dim d joins the run inside it where, for every operand,
    // stride[d] = stride(run) * size(run).
    int n = 0;  // merged dims, innermost first in size[] / st[][]
    int64_t size[TORC_MAX_DIMS], st[3][TORC_MAX_DIMS];
    for (int d = 0; d < x[0]->ndim; d++)
        if (x[0]->shape[d] == 0) {  // nothing to compute
            *L = (bin_layout){.R = 0, .N = 1, .inner = {true, true, true}};
            return true;
        }
    for (int d = x[0]->ndim - 1; d >= 0; d--) {
        const int64_t s = x[0]->shape[d];
        if (s == 1) continue;
        if (x[0]->stride[d] == 0) return false;  // out's elements must be distinct
        bool merge = n > 0;
        for (int k = 0; k < 3 && merge; k++) merge = x[k]->stride[d] == st[k][n - 1] * size[n - 1];
        if (merge) {
            size[n - 1] *= s;
            continue;
        }
        size[n] = s;
        for (int k = 0; k < 3; k++) st[k][n] = x[k]->stride[d];
        n++;
    }
    L->N = n ? size[0] : 1;
    for (int k = 0; k < 3; k++) {
        const int64_t s = n ? st[k][0] : 1;
        if (s != 1 && !(k > 0 && s == 0)) return false;  // a strided row: oneDNN's reorder-capable path
        L->inner[k] = s == 1;
    }
    L->nd = n ? n - 1 : 0;
    L->R = 1;
    for (int i = 0; i < L->nd; i++) {  // outermost first
        const int m = n - 1 - i;
        L->dims[i] = size[m];
        L->R *= size[m];
        for (int k = 0; k < 3; k++) L->st[k][i] = st[k][m];
    }
    // In place is out identical to an input (add_); an input sharing out's memory in another
    // layout (a broadcast or transposed view of it) would be overwritten before it is read.
    for (int k = 1; k < 3; k++) {
        if (x[k]->data != x[0]->data || x[k]->data == NULL) continue;
        if (!L->inner[k]) return false;
        for (int i = 0; i < L->nd; i++)
            if (L->st[k][i] != L->st[0][i]) return false;
    }
    return true;
}

// float32 rows shorter than 64 over one outer dim, each input's rows dense or broadcast: oneDNN's
// jit:uni binary runs those 1.1-1.5x faster than these loops' steps a row (one Sapphire Rapids core,
// 1M elements as (524288, 2) .. (16384, 64), a row or a column broadcast added), so they stay there.
// Its reference code runs other short-row layouts (a (B, H, T, T) minus a (B, H, T, 1) took 127 ms
// against these loops' 0.68), which these loops keep.
static bool jit_rows(const torc_op *op, const bin_layout *L) {
    if (L->N >= 64 || L->nd != 1) return false;
    for (int k = 0; k < 3; k++) {
        const torc_dtype d = k ? op->in[k - 1].dtype : op->out[0].dtype;
        const int64_t s = L->st[k][0];
        if (d != TORC_DTYPE_F32 || !(s == 0 || s == (L->inner[k] ? L->N : 1))) return false;
    }
    return true;
}

bool onednn__pointwise_takes(const torc_op *op) {
    bin_layout L;
    return fused(op) || scaled_add(op) || (bin_layout_of(op, &L) && !jit_rows(op, &L));
}

int onednn__pointwise_check(const torc_op *op) {
    const char *name = onednn__op_name(op->code);
    if (!fused(op)) {  // ADD .. DIV: takes() already decided, but for an ADD / SUB with an alpha
        bin_layout L;
        if (bin_layout_of(op, &L)) return 0;
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s with alpha %g runs float32 / bfloat16 / float16 "
                             "operands whose rows are contiguous or broadcast (others go to the reference backend)",
                             name, op->params.scalar.value);
    }
    const int want = op->code == TORC_OP_ADDCMUL || op->code == TORC_OP_ADDCDIV ? 3 : 2;
    if (op->n_in != want)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s takes %d inputs, got %d", name, want, op->n_in);
    int st = onednn__check_operand(&op->out[0], "out");
    if (st) return st;
    bool ok = op->out[0].dtype == TORC_DTYPE_F32 && onednn__dense(&op->out[0]);
    for (int i = 0; i < op->n_in; i++) {
        if ((st = onednn__check_operand(&op->in[i], "in"))) return st;
        if (!onednn__same_shape(&op->in[i], &op->out[0]))
            return onednn__error(TORC_ERR_SHAPE, "onednn: %s: inputs must arrive broadcast to out's shape", name);
        ok = ok && op->in[i].dtype == TORC_DTYPE_F32 && onednn__dense(&op->in[i]);
    }
    if (!ok)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s runs contiguous float32 operands only (other "
                             "dtypes, broadcasts and strided views go to the reference backend)", name);
    return 0;
}

// The loops, written once and compiled per ISA: for AVX-512, for AVX2+FMA (fmaf becomes vfmadd,
// the loop vectorizes) and for any x86-64 (fmaf is libm's, exact but slow); picked by the CPU.
// The fused ops: elements [i0, i1) of out = op(s, a, b); out may be s (in place): element i is
// read first. The binary ones: o[i] = x[i] op y[i] for i < n, in float (PyTorch's opmath for
// f32, bf16 and f16 alike); o may be x or y.
#define POINTWISE_LOOPS(suffix, attr)                                                                   \
    attr static void addcmul_##suffix(float *out, const float *s, const float *a, const float *b,      \
                                      float v, int64_t i0, int64_t i1) {                               \
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) out[i] = fmaf(v * a[i], b[i], s[i]);      \
    }                                                                                                   \
    attr static void addcdiv_##suffix(float *out, const float *s, const float *a, const float *b,      \
                                      float v, int64_t i0, int64_t i1) {                               \
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {                                         \
            const float q = v * a[i] / b[i];                                                            \
            out[i] = s[i] + q;                                                                          \
        }                                                                                               \
    }                                                                                                   \
    attr static void lerp_##suffix(float *out, const float *s, const float *e, const float *unused,    \
                                   float w, int64_t i0, int64_t i1) {                                   \
        (void)unused;                                                                                   \
        if (fabsf(w) < 0.5f) {                                                                          \
            _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) out[i] = fmaf(w, e[i] - s[i], s[i]);  \
        } else {                                                                                        \
            const float c = w - 1.0f;                                                                   \
            _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) out[i] = fmaf(c, e[i] - s[i], e[i]);  \
        }                                                                                               \
    }                                                                                                   \
    attr static void add_##suffix(float *o, const float *x, const float *y, float a, int64_t n) {      \
        (void)a;                                                                                        \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] = x[i] + y[i];                         \
    }                                                                                                   \
    attr static void sub_##suffix(float *o, const float *x, const float *y, float a, int64_t n) {      \
        (void)a;                                                                                        \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] = x[i] - y[i];                         \
    }                                                                                                   \
    /* ADD's x + alpha * y (backend.h): PyTorch's vec::fmadd(y, alpha, x), alpha in the op's dtype */  \
    /* (SUB arrives with alpha negated). In double and then float it would round twice: x = 1 + */     \
    /* 2^-23, alpha = 1 + 2^-23, y = (1 - 2^-23) 2^-24 gives 1 + 2^-22 there, 1 + 2^-23 fused. */       \
    attr static void axpy_##suffix(float *o, const float *x, const float *y, float a, int64_t n) {     \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] = fmaf(a, y[i], x[i]);                 \
    }                                                                                                   \
    attr static void mul_##suffix(float *o, const float *x, const float *y, float a, int64_t n) {      \
        (void)a;                                                                                        \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] = x[i] * y[i];                         \
    }                                                                                                   \
    attr static void div_##suffix(float *o, const float *x, const float *y, float a, int64_t n) {      \
        (void)a;                                                                                        \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] = x[i] / y[i];                         \
    }
POINTWISE_LOOPS(avx512, __attribute__((target("avx512f,avx512dq,avx2,fma"))))
POINTWISE_LOOPS(avx2, __attribute__((target("avx2,fma"))))
POINTWISE_LOOPS(any, )

typedef void (*loop_fn)(float *, const float *, const float *, const float *, float, int64_t, int64_t);
typedef void (*bin_fn)(float *, const float *, const float *, float, int64_t);

static loop_fn pick(torc_opcode code) {
    const onednn_isa isa = onednn__isa();  // TORC_MAX_CPU_ISA caps it
    const int k = isa >= ONEDNN_ISA_AVX512_CORE ? 0 : isa >= ONEDNN_ISA_AVX2 ? 1 : 2;
    static const loop_fn addcmul[3] = {addcmul_avx512, addcmul_avx2, addcmul_any},
                         addcdiv[3] = {addcdiv_avx512, addcdiv_avx2, addcdiv_any},
                         lerp[3] = {lerp_avx512, lerp_avx2, lerp_any};
    switch (code) {
    case TORC_OP_ADDCMUL: return addcmul[k];
    case TORC_OP_ADDCDIV: return addcdiv[k];
    default: return lerp[k];
    }
}

// One chunk per thread (onednn__thread_range); small ops on the calling thread.
static int fused_run(const torc_op *op) {
    const int64_t n = onednn__numel(&op->out[0]);
    if (n == 0) return 0;
    float *out = op->out[0].data;
    const float *s = op->in[0].data, *a = op->in[1].data, *b = op->n_in > 2 ? op->in[2].data : NULL;
    const int nthr = onednn__single_thread(op->code, n) ? 1 : omp_get_max_threads();
    const float v = (float)op->params.scalar.value;  // PyTorch's opmath: the scalar as a float
    const loop_fn fn = pick(op->code);
    if (nthr <= 1) {  // no OpenMP region: a team of one still costs libgomp ~0.4 us
        fn(out, s, a, b, v, 0, n);
        return 0;
    }
#pragma omp parallel num_threads(nthr)
    {
        int64_t i0, i1;
        onednn__thread_range(n, &i0, &i1);
        fn(out, s, a, b, v, i0, i1);
    }
    return 0;
}

// ---- binary arithmetic: the run ----
// Each input is read as float a block of a row at a time (a float32 row in place, a bf16 / f16 one
// converted by the cast loops, a repeated value written out once), the block computed in float
// and stored to out (bf16 / f16 rounded once, by the cast loops: nearest even, NaN as c10).
// Computing in float and rounding once to out is the reference's double computation rounded to
// the op's dtype and then to out: double (53 bits) holds enough more than float (24) for +, -, *
// and / that rounding through it changes nothing (Figueroa's 2p + 2 bound), and float enough more
// than bf16 (8) and f16 (11).
enum { BIN_BLOCK = 1024 };         // floats a buffer: three of them stay in L1
enum { BIN_TASK = 16 * 1024 };     // elements a task: the parallel split follows the shape alone

typedef struct bin_ctx {
    bin_layout L;
    char *base[3];                 // out, in0, in1
    torc_dtype dt[3];
    bin_fn fn;
    float alpha;                   // axpy's, rounded to the op's dtype
    int64_t row_tasks;             // tasks per row (a long row split), or 0
    int64_t rows_per_task;         // rows per task (short rows), where row_tasks is 0
} bin_ctx;

static float load1(const char *p, torc_dtype dt) {
    uint16_t h;
    if (dt == TORC_DTYPE_F32) {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    memcpy(&h, p, sizeof h);
    return dt == TORC_DTYPE_BF16 ? torc_bf16_to_f32(h) : torc_f16_to_f32(h);
}

// Elements [c, c + nb) of an input row at p as floats: p itself for a contiguous float32 row,
// else buf. A repeated value is written into buf only when it changes (*filled: how many of buf
// hold *value, bit for bit).
static const float *bin_block(const char *p, torc_dtype dt, bool inner, int64_t c, int64_t nb, float *buf,
                              float *value, int64_t *filled) {
    if (inner) {
        if (dt == TORC_DTYPE_F32) return (const float *)p + c;
        if (dt == TORC_DTYPE_BF16) onednn__bf16_to_f32(buf, (const uint16_t *)p + c, nb);
        else onednn__f16_to_f32(buf, (const uint16_t *)p + c, nb);
        return buf;
    }
    const float v = load1(p, dt);
    if (*filled < nb || memcmp(&v, value, sizeof v)) {
        for (int64_t i = 0; i < nb; i++) buf[i] = v;
        *value = v;
        *filled = nb;
    }
    return buf;
}

// Rows [r0, r1), columns [c0, c1) of each.
static void bin_rows(const bin_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    float bx[BIN_BLOCK], by[BIN_BLOCK], bo[BIN_BLOCK], vx = 0, vy = 0;
    int64_t fx = 0, fy = 0;
    const bin_layout *L = &c->L;
    int64_t idx[TORC_MAX_DIMS], off[3] = {0, 0, 0};
    int64_t r = r0;
    for (int i = L->nd - 1; i >= 0; i--) {  // row r0's index and offsets
        idx[i] = r % L->dims[i];
        r /= L->dims[i];
        for (int k = 0; k < 3; k++) off[k] += idx[i] * L->st[k][i];
    }
    const size_t sz[3] = {torc_abi_dtype_size(c->dt[0]), torc_abi_dtype_size(c->dt[1]), torc_abi_dtype_size(c->dt[2])};
    for (r = r0; r < r1; r++) {
        char *po = c->base[0] + off[0] * (int64_t)sz[0];
        const char *px = c->base[1] + off[1] * (int64_t)sz[1], *py = c->base[2] + off[2] * (int64_t)sz[2];
        for (int64_t b = c0; b < c1; b += BIN_BLOCK) {
            const int64_t nb = c1 - b < BIN_BLOCK ? c1 - b : BIN_BLOCK;
            const float *x = bin_block(px, c->dt[1], L->inner[1], b, nb, bx, &vx, &fx);
            const float *y = bin_block(py, c->dt[2], L->inner[2], b, nb, by, &vy, &fy);
            if (c->dt[0] == TORC_DTYPE_F32) {
                c->fn((float *)po + b, x, y, c->alpha, nb);
                continue;
            }
            c->fn(bo, x, y, c->alpha, nb);
            if (c->dt[0] == TORC_DTYPE_BF16) onednn__f32_to_bf16((uint16_t *)po + b, bo, nb);
            else onednn__f32_to_f16((uint16_t *)po + b, bo, nb);
        }
        for (int i = L->nd - 1; i >= 0; i--) {  // the next row
            for (int k = 0; k < 3; k++) off[k] += L->st[k][i];
            if (++idx[i] < L->dims[i]) break;
            for (int k = 0; k < 3; k++) off[k] -= idx[i] * L->st[k][i];
            idx[i] = 0;
        }
    }
}

static void bin_task(const bin_ctx *c, int64_t t) {
    if (c->row_tasks) {
        const int64_t r = t / c->row_tasks, c0 = t % c->row_tasks * BIN_TASK;
        bin_rows(c, r, r + 1, c0, c0 + BIN_TASK < c->L.N ? c0 + BIN_TASK : c->L.N);
        return;
    }
    const int64_t r0 = t * c->rows_per_task;
    bin_rows(c, r0, r0 + c->rows_per_task < c->L.R ? r0 + c->rows_per_task : c->L.R, 0, c->L.N);
}

// alpha as the op's dtype c holds it (the promotion of in0, in1 and out: one of them where all
// three agree, else float32), then as a float.
static float alpha_in(double alpha, const torc_dtype dt[3]) {
    const torc_dtype c = dt[0] == dt[1] && dt[1] == dt[2] ? dt[0] : TORC_DTYPE_F32;
    const float f = (float)alpha;
    if (c == TORC_DTYPE_BF16) return torc_bf16_to_f32(torc_f32_to_bf16(f));
    if (c == TORC_DTYPE_F16) return torc_f16_to_f32(torc_f32_to_f16(f));
    return f;
}

static int bin_run(const torc_op *op) {
    bin_ctx c;
    if (!bin_layout_of(op, &c.L))  // (check() passed: unreachable)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s: not a layout the loops run", onednn__op_name(op->code));
    const int64_t n = c.L.R * c.L.N;
    if (n == 0) return 0;
    const torc_operand *x[3] = {&op->out[0], &op->in[0], &op->in[1]};
    for (int k = 0; k < 3; k++) {
        c.base[k] = x[k]->data;
        c.dt[k] = x[k]->dtype;
    }
    const onednn_isa isa = onednn__isa();  // TORC_MAX_CPU_ISA caps it
    const int v = isa >= ONEDNN_ISA_AVX512_CORE ? 0 : isa >= ONEDNN_ISA_AVX2 ? 1 : 2;
    static const bin_fn adds[3] = {add_avx512, add_avx2, add_any}, subs[3] = {sub_avx512, sub_avx2, sub_any},
                        axpys[3] = {axpy_avx512, axpy_avx2, axpy_any}, muls[3] = {mul_avx512, mul_avx2, mul_any},
                        divs[3] = {div_avx512, div_avx2, div_any};
    c.alpha = 1.0f;
    if (op->code == TORC_OP_ADD || op->code == TORC_OP_SUB) {
        // the reference's ref_axpy: alpha 1 a plain sum, else one fma with alpha in the op's dtype
        // (alpha -1 is the plain difference: fma(-1, y, x) rounds x - y once)
        const double a = op->code == TORC_OP_SUB ? -op->params.scalar.value : op->params.scalar.value;
        c.fn = a == 1.0 ? adds[v] : a == -1.0 ? subs[v] : axpys[v];
        c.alpha = alpha_in(a, c.dt);
    } else {
        c.fn = op->code == TORC_OP_MUL ? muls[v] : divs[v];
    }
    // Tasks of about BIN_TASK elements: a long row in pieces of BIN_TASK (a multiple of 32, so no
    // two threads write one cache line of a row), short rows in groups.
    int64_t tasks;
    if (c.L.N > BIN_TASK) {
        c.row_tasks = (c.L.N + BIN_TASK - 1) / BIN_TASK;
        c.rows_per_task = 1;
        tasks = c.L.R * c.row_tasks;
    } else {
        c.row_tasks = 0;
        c.rows_per_task = BIN_TASK / c.L.N;
        tasks = (c.L.R + c.rows_per_task - 1) / c.rows_per_task;
    }
    int nthr = onednn__single_thread(op->code, n) ? 1 : omp_get_max_threads();
    if (nthr > tasks) nthr = (int)tasks;
    if (nthr <= 1) {  // no OpenMP region: a team of one still costs libgomp ~0.4 us
        for (int64_t t = 0; t < tasks; t++) bin_task(&c, t);
        return 0;
    }
#pragma omp parallel for num_threads(nthr) schedule(static)
    for (int64_t t = 0; t < tasks; t++) bin_task(&c, t);
    return 0;
}

int onednn__pointwise_run(const torc_op *op) { return fused(op) ? fused_run(op) : bin_run(op); }
