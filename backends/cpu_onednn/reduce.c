// backends/cpu_onednn/reduce.c — SUM, MEAN, PROD, MAX, MIN over params.reduce.mask on oneDNN's
// reduction primitive (out keeps the reduced dims as size 1, exactly oneDNN's convention), and
// SUM / MEAN over rows into contiguous columns (bias gradients) and the 2-norm of a contiguous
// tensor (gradient clipping) on host loops of torc's own.
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "onednn-impl.h"

static dnnl_data_type_t src_dt(torc_dtype d) {
    return d == TORC_DTYPE_F16 ? dnnl_data_type_undef : onednn__dt(d);  // no f16 reduction in 2.6
}

int onednn__build_reduce(const torc_op *op, onednn_plan *p) {
    const char *name = onednn__op_name(op->code);
    if (op->n_in != 1)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s takes 1 input, got %d", name, op->n_in);
    const torc_operand *x = &op->in[0], *y = &op->out[0];
    const uint32_t mask = op->params.reduce.mask;
    const int nd = x->ndim;
    if (y->ndim != nd || (nd > 0 ? (mask >> nd) != 0 : mask > 1))
        return onednn__error(TORC_ERR_SHAPE, "onednn: %s: reduce mask 0x%x does not fit in (ndim %d) "
                             "-> out (ndim %d)", name, mask, nd, y->ndim);
    for (int d = 0; d < nd; d++) {
        const int64_t want = (mask >> d) & 1 ? 1 : x->shape[d];
        if (y->shape[d] != want)
            return onednn__error(TORC_ERR_SHAPE, "onednn: %s: out dim %d is %lld, expected %lld", name,
                                 d, (long long)y->shape[d], (long long)want);
    }
    const bool extreme = op->code == TORC_OP_MAX || op->code == TORC_OP_MIN;
    const bool float_out = y->dtype == TORC_DTYPE_F32 || y->dtype == TORC_DTYPE_BF16;
    // Integers only where f32 arithmetic is exact: max/min of 8-bit values into the same dtype.
    const bool int_extreme = extreme && y->dtype == x->dtype &&
                             (y->dtype == TORC_DTYPE_I8 || y->dtype == TORC_DTYPE_U8);
    if (src_dt(x->dtype) == dnnl_data_type_undef || !(float_out || int_extreme))
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s runs float32/bfloat16 outputs "
                             "(int8/uint8 for max/min) here, got %s -> %s", name,
                             torc_abi_dtype_name(x->dtype), torc_abi_dtype_name(y->dtype));
    if (onednn__numel(y) == 0) return 0;
    if (onednn__numel(x) == 0)  // an empty reduction: 0, NaN or an error, the reference's call
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s over an empty input is left to the "
                             "reference backend", name);
    dnnl_alg_kind_t alg;
    switch (op->code) {
    case TORC_OP_SUM: alg = dnnl_reduction_sum; break;
    case TORC_OP_MEAN: alg = dnnl_reduction_mean; break;
    case TORC_OP_PROD: alg = dnnl_reduction_mul; break;
    case TORC_OP_MAX: alg = dnnl_reduction_max; break;
    case TORC_OP_MIN: alg = dnnl_reduction_min; break;
    default: return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s is not a reduction here", name);
    }
    onednn_view vs, vd;
    onednn__view(&vs, x, src_dt(x->dtype));
    onednn__view(&vd, y, onednn__dt(y->dtype));
    onednn__view_normalize(&vs);
    onednn__view_normalize(&vd);
    // Every group holds one element (a 0-d input, only size-1 dims reduced): the result is the
    // input converted, and oneDNN's reduction wants at least one dim that shrinks.
    // oneDNN's max/min skip NaN (torch.max returns NaN for a group holding one).
    if (extreme && onednn__is_float(x->dtype)) p->fixup = ONEDNN_FIXUP_REDUCE;
    bool shrinks = false;
    for (int d = 0; d < nd; d++) shrinks = shrinks || ((mask >> d) & 1 && x->shape[d] > 1);
    onednn_view vt;
    int st, dst_buf;
    if ((st = onednn__plan_dst(p, &vd, &vt, &dst_buf))) return st;
    if (!shrinks) {
        if ((st = onednn__plan_reorder(p, &vs, ONEDNN_BUF_IN0, &vt, dst_buf))) return st;
        return onednn__plan_dst_done(p, &vd, &vt, dst_buf);
    }
    dnnl_memory_desc_t ms, md;
    if ((st = onednn__view_md(&vs, &ms)) || (st = onednn__view_md(&vt, &md))) return st;
    dnnl_reduction_desc_t desc;
    ONEDNN_CHECK(dnnl_reduction_desc_init(&desc, alg, &ms, &md, 0.0f, 0.0f));
    dnnl_primitive_attr_t attr;
    if ((st = onednn__attr(&attr))) return st;
    onednn_bind b[2] = {{DNNL_ARG_SRC, ONEDNN_BUF_IN0, NULL}, {DNNL_ARG_DST, dst_buf, NULL}};
    st = onednn__plan_add(p, &desc, attr, false, 2, b);
    dnnl_primitive_attr_destroy(attr);
    return st ? st : onednn__plan_dst_done(p, &vd, &vt, dst_buf);
}

// ---- the host path: SUM / MEAN over rows (onednn__reduce_takes) ----
// oneDNN 2.6's reduction primitive takes its reference code for a sum over leading dims into
// contiguous columns, the bias gradients' sum_to of a (B, T, out) gradient to (out): (1024, 1536)
// -> (1536) in 44 ms on one core of a loaded Sapphire Rapids, 33% of the GPT step (docs/performance.md);
// this loop takes 0.27 ms (bf16 in 0.19, f16 0.22 where the reference backend took 13: oneDNN 2.6
// has no f16 reduction), `TORC_NUM_THREADS=1`, best of 10 by process CPU time.
// Here the input is (O, R, C) (dims merged; O and C kept, R reduced), C contiguous, any strides for
// O and R, and out is dense (O, C). Each column is summed in float in one fixed order that depends
// on R alone: blocks of RB rows added in row order, the block sums combined as a binary counter
// (pairs, pairs of pairs, ...; what is left folded from the smallest up), rows read RB at a time
// across PW columns. So the bits do not depend on the thread count (threads split columns, or
// fixed super-blocks of SUPER blocks, the counter's complete subtrees) nor on the ISA (every path
// adds the same floats in the same order, vector lanes being columns). The error is that of
// (RB - 1 + log2(R / RB)) additions instead of R - 1 for a running sum (oneDNN's sum of 2^17
// copies of 0.1f was 0.1% short). bf16 / f16 rows are
// converted to float RB rows at a time; the result is rounded once into out's dtype.
enum {
    RB = 8,                // rows summed in order into one block sum
    SUPER_LOG2 = 7,        // a super-block: 2^7 blocks (1024 rows), one task's rows
    SUPER = 1 << SUPER_LOG2,
    PW = 512,              // columns a task walks down at a time (levels and conversions stay in L1)
};

typedef struct sum_shape {
    int64_t O, R, C;   // in viewed as (O, R, C), out as (O, C)
    int64_t so, sr;    // in's strides of O and R in elements (C's is 1)
} sum_shape;

// Merges in's dims (size-1 dims dropped) into (O, R, C); false unless the pattern is [O] R C with
// C contiguous.
static bool sum_shape_of(const torc_operand *x, uint32_t mask, sum_shape *s) {
    int64_t size[TORC_MAX_DIMS], stride[TORC_MAX_DIMS];
    bool red[TORC_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (x->shape[d] == 1) continue;
        const bool r = (mask >> d) & 1;
        if (n > 0 && red[n - 1] == r && stride[n - 1] == x->shape[d] * x->stride[d]) {
            size[n - 1] *= x->shape[d];
            stride[n - 1] = x->stride[d];
            continue;
        }
        size[n] = x->shape[d], stride[n] = x->stride[d], red[n] = r;
        n++;
    }
    if (n < 2 || n > 3 || red[n - 1] || !red[n - 2] || stride[n - 1] != 1 || (n == 3 && red[0])) return false;
    s->C = size[n - 1];
    s->R = size[n - 2], s->sr = stride[n - 2];
    s->O = n == 3 ? size[0] : 1, s->so = n == 3 ? stride[0] : 0;
    return true;
}

static bool half_or_float(torc_dtype d) {
    return d == TORC_DTYPE_F32 || d == TORC_DTYPE_BF16 || d == TORC_DTYPE_F16;
}

bool onednn__reduce_takes(const torc_op *op) {
    if (op->code != TORC_OP_SUM && op->code != TORC_OP_MEAN) return false;
    if (op->n_in != 1 || op->n_out > 1) return false;
    const torc_operand *x = &op->in[0], *y = &op->out[0];
    if (x->ndim < 1 || x->ndim > TORC_MAX_DIMS || y->ndim != x->ndim || !half_or_float(x->dtype) ||
        !half_or_float(y->dtype) || (op->params.reduce.mask >> x->ndim) != 0)
        return false;
    for (int d = 0; d < x->ndim; d++) {
        const bool r = (op->params.reduce.mask >> d) & 1;
        if (x->shape[d] <= 0 || x->stride[d] < 0 || y->stride[d] < 0 || y->shape[d] != (r ? 1 : x->shape[d]))
            return false;
    }
    sum_shape s;
    return onednn__dense(y) && sum_shape_of(x, op->params.reduce.mask, &s);
}

typedef float vf16 __attribute__((vector_size(64)));
#define VLOAD(p) ({ vf16 v_; memcpy(&v_, (p), sizeof v_); v_; })
#define VSTORE(p, v) do { vf16 v_ = (v); memcpy((p), &v_, sizeof v_); } while (0)

// block_sum: dst[j] = x[0][j] + x[1][j] + ... + x[nr - 1][j] in that order, j < w (rows sr floats
// apart); add_to: a[j] = a[j] + b[j]. Compiled for AVX-512, AVX2 and any x86-64: GCC's 16-float
// vectors become one zmm, two ymm or four xmm, the same adds.
#define SUM_LOOPS(suffix, attr)                                                                         \
    attr static void block_sum_##suffix(const float *x, int64_t sr, int nr, int64_t w, float *dst) {  \
        int64_t j = 0;                                                                                 \
        for (; j + 64 <= w; j += 64) {                                                                 \
            vf16 a0 = VLOAD(x + j), a1 = VLOAD(x + j + 16), a2 = VLOAD(x + j + 32), a3 = VLOAD(x + j + 48); \
            for (int r = 1; r < nr; r++) {                                                             \
                const float *p = x + r * sr + j;                                                       \
                a0 += VLOAD(p), a1 += VLOAD(p + 16), a2 += VLOAD(p + 32), a3 += VLOAD(p + 48);         \
            }                                                                                          \
            VSTORE(dst + j, a0); VSTORE(dst + j + 16, a1); VSTORE(dst + j + 32, a2); VSTORE(dst + j + 48, a3); \
        }                                                                                              \
        for (; j + 16 <= w; j += 16) {                                                                 \
            vf16 a = VLOAD(x + j);                                                                     \
            for (int r = 1; r < nr; r++) a += VLOAD(x + r * sr + j);                                   \
            VSTORE(dst + j, a);                                                                        \
        }                                                                                              \
        for (; j < w; j++) {                                                                           \
            float a = x[j];                                                                            \
            for (int r = 1; r < nr; r++) a += x[r * sr + j];                                           \
            dst[j] = a;                                                                                \
        }                                                                                              \
    }                                                                                                  \
    attr static void add_to_##suffix(float *a, const float *b, int64_t w) {                            \
        int64_t j = 0;                                                                                 \
        for (; j + 16 <= w; j += 16) VSTORE(a + j, VLOAD(a + j) + VLOAD(b + j));                       \
        for (; j < w; j++) a[j] = a[j] + b[j];                                                         \
    }
SUM_LOOPS(avx512, __attribute__((target("avx512f,avx512dq,avx2,fma"))))
SUM_LOOPS(avx2, __attribute__((target("avx2,fma"))))
SUM_LOOPS(any, )

typedef struct sum_loops {
    void (*block_sum)(const float *x, int64_t sr, int nr, int64_t w, float *dst);
    void (*add_to)(float *a, const float *b, int64_t w);
} sum_loops;

static sum_loops sum_loops_pick(void) {
    const int isa = onednn__isa();  // TORC_MAX_CPU_ISA caps it
    if (isa >= ONEDNN_ISA_AVX512_CORE) return (sum_loops){block_sum_avx512, add_to_avx512};
    if (isa >= ONEDNN_ISA_AVX2) return (sum_loops){block_sum_avx2, add_to_avx2};
    return (sum_loops){block_sum_any, add_to_any};
}

typedef struct sum_ctx {
    sum_shape s;
    const char *x;
    torc_dtype dt;
    size_t es;
    int64_t ns;       // super-blocks: ceil(R / (RB * SUPER))
    int64_t chunk;    // columns a task takes
    int64_t nchunk;
    float *part;      // (O, ns, C): each super-block's sums, then (O, 0, C) the columns'
    sum_loops f;
} sum_ctx;

// Columns [c0, c0 + w) of problem o over super-block sb into dst: the blocks' counter, its
// complete subtrees at levels 0..SUPER_LOG2, folded from the lowest level up.
static void super_sum(const sum_ctx *c, int64_t o, int64_t sb, int64_t c0, int64_t w, float *dst) {
    _Alignas(64) float lev[SUPER_LOG2 + 1][PW];
    _Alignas(64) float cvt[RB][PW];
    const int64_t r0 = sb * (int64_t)(RB * SUPER), r1 = r0 + RB * SUPER < c->s.R ? r0 + RB * SUPER : c->s.R;
    for (int64_t p0 = 0; p0 < w; p0 += PW) {
        const int64_t pw = w - p0 < PW ? w - p0 : PW;
        unsigned occ = 0;  // which levels hold a node
        for (int64_t b = r0; b < r1; b += RB) {
            const int nr = r1 - b < RB ? (int)(r1 - b) : RB;
            const char *row = c->x + (size_t)(o * c->s.so + b * c->s.sr + c0 + p0) * c->es;
            const float *src = (const float *)row;
            int64_t srs = c->s.sr;
            if (c->dt != TORC_DTYPE_F32) {
                for (int r = 0; r < nr; r++) {
                    const uint16_t *h = (const uint16_t *)(row + (size_t)(r * c->s.sr) * c->es);
                    (c->dt == TORC_DTYPE_BF16 ? onednn__bf16_to_f32 : onednn__f16_to_f32)(cvt[r], h, pw);
                }
                src = cvt[0], srs = PW;
            }
            int t = 0;  // the level this block's node lands on: lev[t] = lev[t-1] + (... + (lev[0] + block))
            while (occ >> t & 1) t++;
            c->f.block_sum(src, srs, nr, pw, lev[t]);
            for (int l = 0; l < t; l++) c->f.add_to(lev[t], lev[l], pw);
            occ = (occ & ~((1u << t) - 1)) | 1u << t;
        }
        bool first = true;
        for (int l = 0; l <= SUPER_LOG2; l++) {
            if (!(occ >> l & 1)) continue;
            if (first) memcpy(dst + p0, lev[l], (size_t)pw * sizeof(float));
            else c->f.add_to(dst + p0, lev[l], pw);
            first = false;
        }
    }
}

// Combines problem o's ns super-block sums (columns [c0, c0 + w)) into its first, continuing the
// counter: complete subtrees from the left, pairwise in place, then folded from the last (the
// smallest, or an incomplete last super-block's sum) to the first.
static void combine(const sum_ctx *c, int64_t o, int64_t c0, int64_t w) {
    const int64_t C = c->s.C, ns = c->ns;
    float *p = c->part + (size_t)(o * ns * C + c0);
    const bool tail = c->s.R % (RB * SUPER) != 0;  // the last super-block is incomplete: its folded sum
    const int64_t nc = ns - tail;                  // complete super-blocks
    int64_t roots[64];
    int nroots = 0;
    int64_t start = 0;
    for (int bit = 62; bit >= 0; bit--) {
        const int64_t size = (int64_t)1 << bit;
        if (!(nc & size)) continue;
        for (int64_t step = 1; step < size; step *= 2)
            for (int64_t i = start; i + step < start + size; i += 2 * step)
                c->f.add_to(p + i * C, p + (i + step) * C, w);
        roots[nroots++] = start;
        start += size;
    }
    int64_t acc = tail ? ns - 1 : roots[--nroots];
    while (nroots > 0) {
        const int64_t r = roots[--nroots];
        c->f.add_to(p + r * C, p + acc * C, w);  // commutative: r's node + acc, bit for bit
        acc = r;
    }
    if (acc != 0) memcpy(p, p + acc * C, (size_t)w * sizeof(float));
}

static void sum_task(const sum_ctx *c, int64_t t) {
    const int64_t j = t % c->nchunk, osb = t / c->nchunk, o = osb / c->ns, sb = osb % c->ns;
    const int64_t c0 = j * c->chunk, w = c->s.C - c0 < c->chunk ? c->s.C - c0 : c->chunk;
    super_sum(c, o, sb, c0, w, c->part + (size_t)((o * c->ns + sb) * c->s.C + c0));
}

static void combine_task(const sum_ctx *c, int64_t t) {
    const int64_t j = t % c->nchunk, o = t / c->nchunk, c0 = j * c->chunk;
    combine(c, o, c0, c->s.C - c0 < c->chunk ? c->s.C - c0 : c->chunk);
}

// out[o, j], rounded once; + 0.0f gives +0.0 for a sum of -0.0s, as the reference's sum from +0.0.
static void store_task(const sum_ctx *c, const torc_op *op, int64_t o) {
    const int64_t C = c->s.C;
    const float *v = c->part + (size_t)(o * c->ns * C);
    const bool mean = op->code == TORC_OP_MEAN;
    const double n = (double)c->s.R;
    const torc_dtype od = op->out[0].dtype;
    float buf[PW];
    for (int64_t j0 = 0; j0 < C; j0 += PW) {
        const int64_t w = C - j0 < PW ? C - j0 : PW;
        for (int64_t j = 0; j < w; j++) {
            const float s = v[j0 + j] + 0.0f;
            buf[j] = mean ? (float)((double)s / n) : s;
        }
        if (od == TORC_DTYPE_F32) memcpy((float *)op->out[0].data + o * C + j0, buf, (size_t)w * sizeof(float));
        else if (od == TORC_DTYPE_BF16) onednn__f32_to_bf16((uint16_t *)op->out[0].data + o * C + j0, buf, w);
        else onednn__f32_to_f16((uint16_t *)op->out[0].data + o * C + j0, buf, w);
    }
}

int onednn__reduce_run(const torc_op *op) {
    sum_ctx c;
    memset(&c, 0, sizeof c);
    sum_shape_of(&op->in[0], op->params.reduce.mask, &c.s);  // takes() accepted it
    c.x = op->in[0].data;
    c.dt = op->in[0].dtype;
    c.es = torc_abi_dtype_size(c.dt);
    c.ns = (c.s.R + RB * SUPER - 1) / (RB * SUPER);
    c.f = sum_loops_pick();
    const int64_t n = c.s.O * c.s.R * c.s.C;
    int nthr = onednn__single_thread(op->code, n) ? 1 : omp_get_max_threads();
    // Columns per task: all of them on one thread; else about 4 tasks a thread, 64 columns and up.
    c.chunk = c.s.C;
    const int64_t rows_tasks = c.s.O * c.ns;
    if (nthr > 1 && rows_tasks < 4 * nthr) {
        const int64_t want = (4 * nthr + rows_tasks - 1) / rows_tasks;
        int64_t ch = (c.s.C + want - 1) / want;
        ch = ch < 64 ? 64 : (ch + 15) / 16 * 16;
        c.chunk = ch < c.s.C ? ch : c.s.C;
    }
    c.nchunk = (c.s.C + c.chunk - 1) / c.chunk;
    const size_t bytes = (size_t)(c.s.O * c.ns * c.s.C) * sizeof(float);
    c.part = malloc(bytes);
    if (!c.part) return onednn__error(TORC_ERR_OOM, "onednn: %s: cannot allocate %zu bytes", onednn__op_name(op->code), bytes);
    const int64_t ntask = rows_tasks * c.nchunk, ncomb = c.ns > 1 ? c.s.O * c.nchunk : 0;
    if (nthr > ntask) nthr = (int)ntask;
    if (nthr <= 1) {
        for (int64_t t = 0; t < ntask; t++) sum_task(&c, t);
        for (int64_t t = 0; t < ncomb; t++) combine_task(&c, t);
        for (int64_t o = 0; o < c.s.O; o++) store_task(&c, op, o);
    } else {
#pragma omp parallel num_threads(nthr)
        {
#pragma omp for schedule(static)
            for (int64_t t = 0; t < ntask; t++) sum_task(&c, t);
#pragma omp for schedule(static)
            for (int64_t t = 0; t < ncomb; t++) combine_task(&c, t);
#pragma omp for schedule(static)
            for (int64_t o = 0; o < c.s.O; o++) store_task(&c, op, o);
        }
    }
    free(c.part);
    return 0;
}

// ---- NORM p = 2 over every element of a contiguous tensor (clip_grad_norm_'s per-parameter norm) ----
// oneDNN's reduction here has no norm of the reference's accuracy, so NORM ran on the reference
// backend: a (1536, 384) gradient in 3.4 ms on one Sapphire Rapids core, 60 ms of the GPT's step.
// Here squares are summed in double, as the reference does (no float overflow of x^2): blocks of
// NB elements in 8 lanes (lane j the elements j mod 8, in order; the block's last few elements
// added to lanes 0.. in order), the lanes ((0+1)+(2+3))+((4+5)+(6+7)), the block sums pairwise in
// place (stride 1, 2, 4, ...). The order depends on the element count alone: threads take whole
// blocks, every ISA path adds the same doubles.
enum { NB = 2048 };

typedef double vd8 __attribute__((vector_size(64)));
typedef float vf8 __attribute__((vector_size(32)));

#define SQ_LOOPS(suffix, attr)                                                                     \
    attr static double block_sq_##suffix(const float *x, int64_t n) {                              \
        vd8 acc = {0, 0, 0, 0, 0, 0, 0, 0};                                                        \
        int64_t i = 0;                                                                             \
        for (; i + 8 <= n; i += 8) {                                                               \
            vf8 f;                                                                                 \
            memcpy(&f, x + i, sizeof f);                                                           \
            const vd8 d = __builtin_convertvector(f, vd8);                                         \
            acc += d * d;                                                                          \
        }                                                                                          \
        double l[8];                                                                               \
        memcpy(l, &acc, sizeof l);                                                                 \
        for (int j = 0; i < n; i++, j++) l[j] = l[j] + (double)x[i] * (double)x[i];                \
        return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));                  \
    }
SQ_LOOPS(avx512, __attribute__((target("avx512f,avx512dq,avx2"))))  // no FMA: x * x rounded before adding
SQ_LOOPS(avx2, __attribute__((target("avx2"))))
SQ_LOOPS(any, )

bool onednn__norm_takes(const torc_op *op) {
    if (op->code != TORC_OP_NORM || op->params.reduce.p != 2.0 || op->n_in != 1 || op->n_out > 1) return false;
    const torc_operand *x = &op->in[0], *y = &op->out[0];
    if (x->ndim < 0 || x->ndim > TORC_MAX_DIMS || y->ndim != x->ndim || !half_or_float(x->dtype) ||
        !half_or_float(y->dtype))
        return false;
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] <= 0 || x->stride[d] < 0 || y->shape[d] != 1 ||
            !((op->params.reduce.mask >> d) & 1 || x->shape[d] == 1))
            return false;
    return onednn__dense(x);
}

int onednn__norm_run(const torc_op *op) {
    const int64_t n = onednn__numel(&op->in[0]), nblk = (n + NB - 1) / NB;
    const torc_dtype dt = op->in[0].dtype;
    const int isa = onednn__isa();
    double (*sq)(const float *, int64_t) = isa >= ONEDNN_ISA_AVX512_CORE ? block_sq_avx512
                                          : isa >= ONEDNN_ISA_AVX2 ? block_sq_avx2 : block_sq_any;
    double one, *part = nblk == 1 ? &one : malloc((size_t)nblk * sizeof(double));
    if (!part) return onednn__error(TORC_ERR_OOM, "onednn: norm: cannot allocate %lld doubles", (long long)nblk);
    const int nthr = onednn__single_thread(op->code, n) ? 1 : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(nthr) if (nthr > 1 && nblk > 1)
    for (int64_t b = 0; b < nblk; b++) {
        const int64_t i0 = b * NB, m = n - i0 < NB ? n - i0 : NB;
        if (dt == TORC_DTYPE_F32) {
            part[b] = sq((const float *)op->in[0].data + i0, m);
        } else {
            _Alignas(64) float buf[NB];
            const uint16_t *h = (const uint16_t *)op->in[0].data + i0;
            (dt == TORC_DTYPE_BF16 ? onednn__bf16_to_f32 : onednn__f16_to_f32)(buf, h, m);
            part[b] = sq(buf, m);
        }
    }
    for (int64_t step = 1; step < nblk; step *= 2)
        for (int64_t i = 0; i + step < nblk; i += 2 * step) part[i] = part[i] + part[i + step];
    const float r = (float)sqrt(part[0]);
    if (part != &one) free(part);
    // Rounded once from double into f32, as the reference stores; bf16 / f16 through float.
    const torc_dtype od = op->out[0].dtype;
    if (od == TORC_DTYPE_F32) *(float *)op->out[0].data = r;
    else if (od == TORC_DTYPE_BF16) onednn__f32_to_bf16(op->out[0].data, &r, 1);
    else onednn__f32_to_f16(op->out[0].data, &r, 1);
    return 0;
}
