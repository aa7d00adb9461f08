// backends/cpu_onednn/matmul.c — TORC_OP_MATMUL: f32 on oneDNN's dnnl_sgemm (row-major BLAS,
// looped over the batch; OpenBLAS's for the AVX2 family, blas.c); bf16 on torc's AMX tile GEMM
// (matmul_amx.c) where the CPU has AMX, on oneDNN's matmul primitive where bf16 dot products pay
// (device.c), else on f32 FMAs like f16 (oneDNN 2.6 has no f16 matmul on CPU): torc's FMA GEMM
// (matmul_fma.c), which converts while it packs, from AVX2 up, GEMMs under 1M multiply-adds on its
// small-GEMM path; below AVX2 (and small GEMMs of layouts that path does not take) the host
// converts both operands to f32 temporaries (convert.c) and sgemm runs.
// MATMUL_ROUNDED (autocast's matmul with its casts fused) takes the same two paths.
// Operands keep their strides: transposed and row-sliced views become sgemm's trans flags and
// leading dims, stride-0 batch dims a zero batch stride (oneDNN's size-1 broadcast dims for the
// primitive). An f32 layout sgemm cannot express goes to the primitive; one only oneDNN's
// reference code accepts (both last strides non-unit) is declined, so the core falls back to
// the reference backend.
// Results do not depend on the thread count: a library GEMM (sgemm, OpenBLAS, the primitive) of 1M
// multiply-adds and more runs in fixed pieces, each on one thread (pieces.c); torc's own GEMMs never
// split K, and run the f32 GEMMs of that size of AMD's AVX2 family and some shapes' on Intel's
// AVX-512 cores (intel_f32_on_fma).
#include <omp.h>
#include <string.h>

#include "onednn-impl.h"

// A size-1 matrix dim's stride is free: pick the one that makes the matrix plainly row- or
// column-major, which is what oneDNN's gemm kernels test.
static void normalize_matrix(onednn_view *v) {
    const int r = v->ndim - 2, c = v->ndim - 1;
    if (v->dims[c] == 1) {
        v->strides[c] = 1;                     // (R, 1): row-major with ld = stride[r]
        if (v->dims[r] == 1) v->strides[r] = 1;
    } else if (v->dims[r] == 1) {
        v->strides[r] = v->strides[c] == 1 ? v->dims[c] : 1;  // a row: keep its major order
    }
    // Batch dims of size 1 (broadcast ones included) get a dense stride.
    for (int d = 0; d < r; d++) {
        if (v->dims[d] != 1) continue;
        dnnl_dim_t span = 1;
        for (int e = d + 1; e < v->ndim; e++)
            if (v->dims[e] > 1 && v->strides[e] * v->dims[e] > span) span = v->strides[e] * v->dims[e];
        v->strides[d] = span;
    }
}

static size_t view_bytes(const onednn_view *v) {
    size_t n = 4;  // f32 temporaries
    for (int d = 0; d < v->ndim; d++) n *= (size_t)v->dims[d];
    return n;
}

// A dense f32 temporary for v (the through-f32 paths): each matrix column-major where v's is
// (a transposed operand then converts with unit strides and reaches sgemm as 'T'), else
// row-major; the batch dims outside, row-major. sgemm can read every such layout.
static void dense_f32(onednn_view *t, const onednn_view *v) {
    *t = *v;
    t->dt = dnnl_f32;
    const int r = v->ndim - 2, c = v->ndim - 1;
    const bool col = v->dims[r] > 1 && v->dims[c] > 1 && v->strides[r] < v->strides[c];
    t->strides[col ? r : c] = 1;
    t->strides[col ? c : r] = col ? v->dims[r] : v->dims[c];
    dnnl_dim_t s = v->dims[r] * v->dims[c];
    for (int d = r - 1; d >= 0; d--) {
        t->strides[d] = s;
        s *= v->dims[d];
    }
}

// C = A B on oneDNN's matmul primitive: in fixed pieces from ONEDNN_SMALL_WORK multiply-adds (whose
// plans run on every thread; pieces.c), else one primitive (made for, and run on, one thread).
static int add_matmul(onednn_plan *p, const onednn_view *a, int a_buf, const onednn_view *b,
                      int b_buf, const onednn_view *c, int c_buf) {
    int64_t work = a->dims[a->ndim - 1];
    for (int d = 0; d < c->ndim; d++) work *= c->dims[d];
    if (work >= ONEDNN_SMALL_WORK) return onednn__plan_matmul_pieces(p, a, a_buf, b, b_buf, c, c_buf);
    dnnl_memory_desc_t ma, mb, mc;
    int st;
    if ((st = onednn__view_md(a, &ma)) || (st = onednn__view_md(b, &mb)) ||
        (st = onednn__view_md(c, &mc)))
        return st;
    dnnl_matmul_desc_t desc;
    ONEDNN_CHECK(dnnl_matmul_desc_init(&desc, &ma, &mb, NULL, &mc));
    dnnl_primitive_attr_t attr;
    if ((st = onednn__attr(&attr))) return st;
    onednn_bind binds[3] = {{DNNL_ARG_SRC, a_buf, NULL}, {DNNL_ARG_WEIGHTS, b_buf, NULL},
                            {DNNL_ARG_DST, c_buf, NULL}};
    st = onednn__plan_add(p, &desc, attr, true, 3, binds);
    dnnl_primitive_attr_destroy(attr);
    return st;
}

// ---- f32 on dnnl_sgemm ----
// Why sgemm and not the primitive: on two Sapphire Rapids cores oneDNN 2.6's f32 matmul
// primitive reaches 150-170 GFLOP/s at 2048^3, dnnl_sgemm 180-240; on one core, side by side,
// sgemm is 5-40% faster on 2048^3 and the Cruncher shapes (512x1024x1024 and its transposed
// backward GEMMs), and about even on 64x256x256.

// GEMMs of 1M multiply-adds and more (ONEDNN_SMALL_WORK) use every core, smaller ones the
// calling thread (plans below it run single-threaded). An 8M floor here, set when two threads
// measured slower on such sizes (before the nested OpenMP team in onednn__gemm_run was found),
// measured 1.5-2x slower on 2M-4M GEMMs since (two cores, side by side: 64x256x256 27 against
// 51-59 us, 128^3 14 against 23 us; the Cruncher D=256 SGD step 0.22-0.23 against 0.27-0.30 ms).

// bf16 GEMMs below this many multiply-adds stay on oneDNN's primitive on CPUs whose bf16 dot
// products run at half the FMA rate (device.c): converting the operands to f32 costs more than
// the dot products lose there (two cores, 64x256x256: 48-51 us against 63-64 through f32; 128^3 26
// against 42 us; 256^3 even; 512x1024x1024 5.5-5.9 ms against 3.7 ms).
#define ONEDNN_BF16_VIA_F32_WORK (INT64_C(1) << 23)

// How sgemm reads one matrix view (R x C): row-major ('N', ld = row stride) or column-major
// ('T', ld = column stride). False when neither fits (both strides non-unit, or an ld below
// what BLAS accepts, as a stride-0 row dim).
static bool gemm_layout(const onednn_view *v, char *trans, int64_t *ld) {
    const int r = v->ndim - 2, c = v->ndim - 1;
    const int64_t R = v->dims[r], C = v->dims[c], sr = v->strides[r], sc = v->strides[c];
    if (sc == 1 && sr >= (C > 1 ? C : 1)) {
        *trans = 'N';
        *ld = sr;
        return true;
    }
    if (sr == 1 && sc >= (R > 1 ? R : 1)) {
        *trans = 'T';
        *ld = sc;
        return true;
    }
    return false;
}

// The batch members of g (nbatch, bdims, sa, sb, sc, batch_parallel) and M, N, K for C = A B.
static void gemm_batch(const onednn_view *a, const onednn_view *b, const onednn_view *c, onednn_gemm *g) {
    const int nd = c->ndim;
    g->M = c->dims[nd - 2];
    g->N = c->dims[nd - 1];
    g->K = a->dims[nd - 1];
    g->nbatch = nd - 2;
    int64_t batch = 1;
    for (int d = 0; d < nd - 2; d++) {
        g->bdims[d] = c->dims[d];
        g->sa[d] = a->dims[d] == 1 ? 0 : a->strides[d];
        g->sb[d] = b->dims[d] == 1 ? 0 : b->strides[d];
        g->sc[d] = c->strides[d];
        batch *= c->dims[d];
    }
    // Small matrices in a batch: each thread multiplies whole matrices (sgemm or the FMA GEMM on
    // one thread inside a parallel region) instead of the team splitting every small one.
    g->batch_parallel = batch > 1 && g->M * g->N * g->K < (INT64_C(1) << 20);
}

// The FMA GEMM's description of C = A B on views a, b, c (one matrix; bt: the batch).
static onednn_fma_gemm fma_of(const onednn_view *a, const onednn_view *b, const onednn_view *c,
                              dnnl_data_type_t round_dt, onednn_gemm *bt) {
    const int nd = c->ndim, r = nd - 2, k = nd - 1;
    memset(bt, 0, sizeof *bt);
    gemm_batch(a, b, c, bt);
    return (onednn_fma_gemm){.M = bt->M, .N = bt->N, .K = bt->K,
                             .a_rs = a->strides[r], .a_cs = a->strides[k],
                             .b_rs = b->strides[r], .b_cs = b->strides[k],
                             .c_rs = c->strides[r], .c_cs = c->strides[k],
                             .a_dt = a->dt, .b_dt = b->dt, .c_dt = c->dt, .round_dt = round_dt};
}

// Whether an f32 matmul on an Intel AVX-512 core runs on the FMA GEMM rather than dnnl_sgemm: one
// matrix (no batch) of ONEDNN_SMALL_WORK multiply-adds and more, of the one shape where the FMA GEMM
// won on the GPT step's GEMMs (torc-bench --gpt-matmuls; one loaded Sapphire Rapids class core, best
// of 5-9 interleaved runs in CPU time, GFLOP/s sgemm / FMA GEMM, the FMA loop 154-167; fma-gemm.md):
// a column-major A (a weight gradient X^T dY) with M >= 4 N and K >= 512: (1536, 1024) x (1024, 384)
// 70-109 / 85-123, (1024, 1024) x (1024, 256) 71-93 / 86-113; on two threads 51-79 / 33-86 and
// 32-146 / 37-190 (noisy). Not routed: forwards x W with K <= 384 and N >= 768 won on one thread
// ((1024, 384) x (384, 1152) 92-137 / 102-143, x (384, 1536) 80-140 / 97-142) but mostly lost on two
// ((1024, 256) x (256, 768) 47-198 / 24-65, x (256, 1024) 67-200 / 37-212); the LM head's input-
// gradient chunk (79, 50257) x (50257, 256) won on one (62-80 / 72-88, matmul_fma.c's k_outer) and
// lost on two (54-72 / 17-30). sgemm kept the rest: (1024, 1536) x (1536, 384) 109-157 / 97-125, dW
// of M < 4 N (384, 1024) x (1024, 384) 101-147 / 110-140, (256, 1024) x (1024, 768) 101-143 /
// 84-139, the input gradients dY W^T (B transposed) even to 10% behind, the head's chunks (79, 256)
// x (256, 50257) (B transposed) 86-99 / 78-94, their dW (50257, 79) x (79, 256) (A column-major, K
// 79) 84-122 / 69-84. At config A's chunks of 256 rows (2026-11-29, one Emerald Rapids core, CPU
// time, processes alternating) the dW (50257, 256) x (256, 256) ran faster alone on the FMA GEMM
// (quiet: 124-127 / 135-142), but the f32 step with K >= 256 routed there was no faster (991-1318
// against 996-1157 ms, five runs each alternating, mostly loaded), so K stays 512.
static bool intel_f32_on_fma(const torc_op *op, const onednn_view *a, const onednn_view *c) {
    const int nd = c->ndim, r = nd - 2, k = nd - 1;
    if (!onednn__cpu_is_intel() || onednn__isa() < ONEDNN_ISA_AVX512_CORE || onednn__work(op) < ONEDNN_SMALL_WORK)
        return false;
    for (int d = 0; d < r; d++)
        if (c->dims[d] != 1) return false;
    const int64_t M = c->dims[r], N = c->dims[k], K = a->dims[k];
    return a->strides[r] == 1 && a->strides[k] != 1 && M >= 4 * N && K >= 512;
}

// C = A B on torc's FMA GEMM (matmul_fma.c): any strides, f32 / f16 / bf16 in, out f32 or the
// inputs' dtype, converted while packing.
static int plan_fma(onednn_plan *p, const onednn_view *a, int a_buf, const onednn_view *b, int b_buf,
                    const onednn_view *c, dnnl_data_type_t round_dt) {
    onednn_gemm bt;
    const onednn_fma_gemm g = fma_of(a, b, c, round_dt, &bt);
    return onednn__plan_fma_matmul(p, &g, &bt, a_buf, b_buf, ONEDNN_BUF_OUT);
}

// Whether the FMA GEMM runs this matmul: from onednn__fma_min_work() multiply-adds, and smaller
// ones where its small-GEMM path takes the layout (matmul_fma.c).
static bool on_fma_gemm(const torc_op *op, const onednn_view *a, const onednn_view *b, const onednn_view *c) {
    if (!onednn__fma_usable()) return false;
    if (onednn__work(op) >= onednn__fma_min_work()) return true;
    onednn_gemm bt;
    const onednn_fma_gemm g = fma_of(a, b, c, dnnl_data_type_undef, &bt);
    return onednn__fma_small_takes(&g);
}

// Fills g for C = A B on views a (.., M, K), b (.., K, N), c (.., M, N) whose batch dims are
// c's or size-1 (broadcast). False when sgemm cannot express a layout or C is not row-major.
static bool gemm_plan(const onednn_view *a, const onednn_view *b, const onednn_view *c,
                      onednn_gemm *g) {
    const int nd = c->ndim;
    memset(g, 0, sizeof *g);
    g->K = a->dims[nd - 1];
    char tc;
    if (!gemm_layout(c, &tc, &g->ldc) || tc != 'N') return false;
    if (g->K > 0 && (!gemm_layout(a, &g->transa, &g->lda) || !gemm_layout(b, &g->transb, &g->ldb)))
        return false;
    gemm_batch(a, b, c, g);
    return true;
}

// C[b] = 0 for K = 0 (BLAS leaves C alone there).
static void gemm_zero(const onednn_gemm *g, float *c) {
    for (int64_t i = 0; i < g->M; i++) memset(c + i * g->ldc, 0, (size_t)g->N * sizeof(float));
}

static dnnl_status_t gemm_one(const onednn_gemm *g, const float *a, const float *b, float *c) {
    if (g->K == 0) {
        gemm_zero(g, c);
        return dnnl_success;
    }
    if (onednn__blas_sgemm(g->transa, g->transb, g->M, g->N, g->K, a, g->lda, b, g->ldb, c, g->ldc))
        return dnnl_success;  // the AVX2 family: OpenBLAS (blas.c)
    return dnnl_sgemm(g->transa, g->transb, g->M, g->N, g->K, 1.0f, a, g->lda, b, g->ldb, 0.0f,
                      c, g->ldc);
}

// ---- results that do not depend on the thread count (pieces.c says why) ----
// A GEMM of ONEDNN_SMALL_WORK multiply-adds and more runs in fixed pieces of C and K, each one
// library call on one thread, the team taking pieces in turn; the pieces of K are added in order. A
// smaller one is one call on one thread. Inside the team each thread's call sees one thread
// (omp_set_num_threads(1) there, and dnnl_sgemm and OpenBLAS run one thread inside a parallel region),
// so no call opens a nested team: one did when sgemm ran inside a parallel region with the team's
// count, its threads spinning beside the top-level team's, three on two cores (a 512x1024x1024 sgemm
// after any other parallel region took 10-16 ms instead of 6-7). An earlier split, one sgemm block
// per thread, measured 1.5-2x slower at 2048 on a quiet two-core machine (105-140 against 200-230
// GFLOP/s) before that nested team was found; the pieces have not been timed on a quiet two-core
// machine since (the one they were written on is shared: figures in pieces.c are one core's).

// C = A B for the piece (i, j, kk) of matrix (a, b, c): rows [i bm, ..), columns [j bn, ..), k [kk bk, ..);
// the first piece of K writes C, the others their own (M, N) slab of partial sums (ldc N).
static dnnl_status_t gemm_piece(const onednn_gemm *g, const onednn_pieces *q, const float *a, const float *b, float *c,
                                float *partial, int64_t i, int64_t j, int64_t kk) {
    const int64_t m0 = i * q->bm, n0 = j * q->bn, k0 = kk * q->bk;
    onednn_gemm p = *g;
    p.M = g->M - m0 < q->bm ? g->M - m0 : q->bm;
    p.N = g->N - n0 < q->bn ? g->N - n0 : q->bn;
    p.K = g->K - k0 < q->bk ? g->K - k0 : q->bk;
    // Element (r, k) of A is a[r lda + k] ('N') or a[k lda + r] ('T'); B's (k, col) likewise.
    const float *pa = a + (g->transa == 'N' ? m0 * g->lda + k0 : k0 * g->lda + m0);
    const float *pb = b + (g->transb == 'N' ? k0 * g->ldb + n0 : n0 * g->ldb + k0);
    float *pc = c + m0 * g->ldc + n0;
    if (kk > 0) {
        pc = partial + (kk - 1) * g->M * g->N + m0 * g->N + n0;
        p.ldc = g->N;
    }
    return gemm_one(&p, pa, pb, pc);
}

// C += the partial sums of K's later pieces, in order, rows [r0, r1).
static void add_partials(const onednn_gemm *g, int64_t nk, const float *partial, float *c, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++)
        for (int64_t t = 1; t < nk; t++) {
            const float *s = partial + (t - 1) * g->M * g->N + r * g->N;
            float *d = c + r * g->ldc;
            for (int64_t x = 0; x < g->N; x++) d[x] += s[x];
        }
}

// The pieces of one matrix on the team (or on this thread where TORC_NUM_THREADS is 1).
static dnnl_status_t gemm_matrix_pieces(const onednn_gemm *g, const float *a, const float *b, float *c) {
    const onednn_pieces q = onednn__pieces(g->M, g->N, g->K, true);
    const int64_t n = q.nm * q.nn * q.nk;
    float *partial = NULL;
    if (q.nk > 1 && !(partial = onednn__mem_alloc((size_t)((q.nk - 1) * g->M * g->N) * sizeof(float))))
        return dnnl_out_of_memory;
    dnnl_status_t bad = dnnl_success;
    const int nthr = omp_get_max_threads();
    if (nthr <= 1 || n == 1) {
        if (nthr > 1) omp_set_num_threads(1);
        for (int64_t t = 0; t < n && bad == dnnl_success; t++)
            bad = gemm_piece(g, &q, a, b, c, partial, t / q.nk / q.nn, t / q.nk % q.nn, t % q.nk);
        if (nthr > 1) omp_set_num_threads(nthr);
    } else {
#pragma omp parallel num_threads(nthr < n ? nthr : (int)n)
        {
            omp_set_num_threads(1);  // this thread's library call: one thread, no team of its own
#pragma omp for schedule(dynamic, 1)
            for (int64_t t = 0; t < n; t++) {
                const dnnl_status_t s = gemm_piece(g, &q, a, b, c, partial, t / q.nk / q.nn, t / q.nk % q.nn, t % q.nk);
                if (s != dnnl_success) {
#pragma omp atomic write
                    bad = s;
                }
            }
        }
    }
    if (partial && bad == dnnl_success) {
        ONEDNN_FOR(nthr > 1 && g->M * g->N * q.nk >= ONEDNN_SMALL_STREAM, r, g->M,
                   { add_partials(g, q.nk, partial, c, r, r + 1); });
    }
    onednn__mem_free(partial);
    return bad;
}

int onednn__gemm_run(const onednn_gemm *g, const float *a, const float *b, float *c) {
    int64_t batch = 1;
    for (int d = 0; d < g->nbatch; d++) batch *= g->bdims[d];
    // The error is set on this thread, after the loop (the message is thread-local).
    dnnl_status_t bad = dnnl_success;
    int64_t o[3];
    if (!g->batch_parallel) {
        // Each matrix in fixed pieces (above); a small one is one call, on one thread.
        const bool pieces = g->M * g->N * g->K >= ONEDNN_SMALL_WORK;
        const int nthr = omp_get_max_threads();
        if (!pieces && nthr > 1) omp_set_num_threads(1);
        for (int64_t i = 0; i < batch && bad == dnnl_success; i++) {
            onednn__batch_offsets(g->nbatch, g->bdims, g->sa, g->sb, g->sc, i, o);
            bad = pieces ? gemm_matrix_pieces(g, a + o[0], b + o[1], c + o[2]) : gemm_one(g, a + o[0], b + o[1], c + o[2]);
        }
        if (!pieces && nthr > 1) omp_set_num_threads(nthr);
        return bad == dnnl_success ? 0 : onednn__dnnl_error(bad, "dnnl_sgemm(");
    }
    // Small matrices of a large batch: whole matrices per thread, sgemm single-threaded in each.
#pragma omp parallel for schedule(static) private(o)
    for (int64_t i = 0; i < batch; i++) {
        onednn__batch_offsets(g->nbatch, g->bdims, g->sa, g->sb, g->sc, i, o);
        const dnnl_status_t s = gemm_one(g, a + o[0], b + o[1], c + o[2]);
        if (s != dnnl_success) {
#pragma omp atomic write
            bad = s;
        }
    }
    return bad == dnnl_success ? 0 : onednn__dnnl_error(bad, "dnnl_sgemm(");
}

// The views of a matmul's operands, broadcast batch dims size 1, size-1 strides normalized, and
// a column-major out turned into C^T = B^T A^T (oneDNN's kernels write row-major C only): a_buf
// and b_buf say which input each of a and b is then.
static void matmul_views(const torc_op *op, onednn_view *a, int *a_buf, onednn_view *b, int *b_buf, onednn_view *c) {
    const torc_operand *x = &op->in[0], *w = &op->in[1], *y = &op->out[0];
    const int nd = y->ndim;
    onednn__view(a, x, onednn__dt(x->dtype));
    onednn__view(b, w, onednn__dt(w->dtype));
    onednn__view(c, y, onednn__dt(y->dtype));
    onednn__view_bcast_to_one(a, nd - 2);
    onednn__view_bcast_to_one(b, nd - 2);
    normalize_matrix(a);
    normalize_matrix(b);
    normalize_matrix(c);
    *a_buf = ONEDNN_BUF_IN0, *b_buf = ONEDNN_BUF_IN0 + 1;
    if (c->strides[nd - 1] != 1 && c->strides[nd - 2] == 1) {
        onednn_view t = *a;
        *a = *b;
        *b = t;
        onednn__view_transpose_last2(a);
        onednn__view_transpose_last2(b);
        onednn__view_transpose_last2(c);
        *a_buf = ONEDNN_BUF_IN0 + 1;
        *b_buf = ONEDNN_BUF_IN0;
    }
}

// Through f32: both operands converted to dense f32 temporaries (f32 ones of MATMUL_ROUNDED rounded
// to round on the way), multiplied in f32 by sgemm (the products of two f16 or bf16 values are
// exact in f32), the sums rounded once into out (an f32 out of MATMUL_ROUNDED: rounded in place).
static int plan_via_f32(onednn_plan *p, const onednn_view *a, int a_buf, const onednn_view *b, int b_buf,
                        const onednn_view *c, dnnl_data_type_t round) {
    onednn_view ta, tb, tc;
    onednn_gemm g;
    int ta_buf, tb_buf, tc_buf = ONEDNN_BUF_OUT, st;
    dense_f32(&ta, a);
    dense_f32(&tb, b);
    if ((st = onednn__plan_tmp(p, view_bytes(&ta), &ta_buf)) ||
        (st = onednn__plan_tmp(p, view_bytes(&tb), &tb_buf)) ||
        (st = onednn__plan_convert(p, a, a_buf, &ta, ta_buf, round)) ||
        (st = onednn__plan_convert(p, b, b_buf, &tb, tb_buf, round)))
        return st;
    if (c->dt == dnnl_f32) {
        st = gemm_plan(&ta, &tb, c, &g) ? onednn__plan_gemm(p, &g, ta_buf, tb_buf, ONEDNN_BUF_OUT)
                                        : add_matmul(p, &ta, ta_buf, &tb, tb_buf, c, ONEDNN_BUF_OUT);
        if (st || round == dnnl_data_type_undef) return st;
        return onednn__plan_convert(p, c, ONEDNN_BUF_OUT, c, ONEDNN_BUF_OUT, round);
    }
    dense_f32(&tc, c);
    if ((st = onednn__plan_tmp(p, view_bytes(&tc), &tc_buf))) return st;
    if (!gemm_plan(&ta, &tb, &tc, &g))  // dense temporaries always fit
        return onednn__error(TORC_ERR_BACKEND, "onednn: internal: matmul temporaries do not fit sgemm");
    if ((st = onednn__plan_gemm(p, &g, ta_buf, tb_buf, tc_buf))) return st;
    return onednn__plan_convert(p, &tc, tc_buf, c, ONEDNN_BUF_OUT, dnnl_data_type_undef);
}

// MATMUL_ROUNDED: where build_matmul would run the matmul of c on f32 FMAs, the same path with the
// casts fused: on the FMA GEMM, which rounds f32 operands to c while it packs and the sums to c as
// it writes them out (small GEMMs on its small path, which rounds as it reads); through f32 (below
// AVX2, small GEMMs of other layouts), whose conversions round. Without it
// autocast cast a small layer's f32 weight to c every forward and the c gradient back (two ops, two
// temporaries). bf16 on AMX or the CPU's bf16 dot products is declined: there the cast feeds the
// bf16 kernels, and autocast casts (backend.h).
static int build_rounded(const torc_op *op, onednn_plan *p) {
    const torc_dtype c = (torc_dtype)op->params.matmul.dtype, dts[3] = {op->in[0].dtype, op->in[1].dtype, op->out[0].dtype};
    if (c != TORC_DTYPE_F16 && c != TORC_DTYPE_BF16)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: matmul_rounded runs in float16 or bfloat16, got dtype %d",
                             (int)c);
    for (int i = 0; i < 3; i++)
        if (dts[i] != c && dts[i] != TORC_DTYPE_F32)
            return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: matmul_rounded in %s takes %s or float32 operands, got %s",
                                 torc_abi_dtype_name(c), torc_abi_dtype_name(c), torc_abi_dtype_name(dts[i]));
    const int nd = op->out[0].ndim;
    const int64_t K = op->in[0].shape[nd - 1];
    // bf16 on f32 FMAs exactly where build_matmul would put a bf16 GEMM of this size there.
    const bool on_fmas = c == TORC_DTYPE_F16 || (!onednn__bf16_matmul_native() && (!onednn__bf16_dot() ||
                                                                                onednn__work(op) >= ONEDNN_BF16_VIA_F32_WORK));
    if (!on_fmas || K == 0)
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: matmul_rounded runs where %s GEMMs run on f32 FMAs (and K > 0); "
                             "bf16 on AMX or bf16 dot products takes autocast's casts", torc_abi_dtype_name(c));
    if (onednn__numel(&op->out[0]) == 0) return 0;
    onednn_view a, b, cv;
    int a_buf, b_buf;
    matmul_views(op, &a, &a_buf, &b, &b_buf, &cv);
    if (on_fma_gemm(op, &a, &b, &cv)) return plan_fma(p, &a, a_buf, &b, b_buf, &cv, onednn__dt(c));
    return plan_via_f32(p, &a, a_buf, &b, b_buf, &cv, onednn__dt(c));
}

// ---- the primitive (bf16, and f32 layouts sgemm cannot express) ----
int onednn__build_matmul(const torc_op *op, onednn_plan *p) {
    const torc_operand *x = &op->in[0], *w = &op->in[1], *y = &op->out[0];
    if (op->n_in != 2)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: matmul takes 2 inputs, got %d", op->n_in);
    const int nd = y->ndim;
    if (nd < 2 || x->ndim != nd || w->ndim != nd)
        return onednn__error(TORC_ERR_SHAPE, "onednn: matmul needs operands of one ndim >= 2 "
                             "(got %d, %d -> %d)", x->ndim, w->ndim, nd);
    const int64_t M = y->shape[nd - 2], N = y->shape[nd - 1], K = x->shape[nd - 1];
    bool ok = x->shape[nd - 2] == M && w->shape[nd - 2] == K && w->shape[nd - 1] == N;
    for (int d = 0; d < nd - 2; d++) ok = ok && x->shape[d] == y->shape[d] && w->shape[d] == y->shape[d];
    if (!ok)
        return onednn__error(TORC_ERR_SHAPE, "onednn: matmul shapes do not fit: in0 (..., %lld, %lld), "
                             "in1 (..., %lld, %lld), out (..., %lld, %lld)",
                             (long long)x->shape[nd - 2], (long long)K, (long long)w->shape[nd - 2],
                             (long long)w->shape[nd - 1], (long long)M, (long long)N);
    if (op->code == TORC_OP_MATMUL_ROUNDED) return build_rounded(op, p);
    const torc_dtype dt = x->dtype;
    if (w->dtype != dt || !onednn__is_float(dt) ||
        !(y->dtype == dt || (dt != TORC_DTYPE_F32 && y->dtype == TORC_DTYPE_F32)))
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: matmul runs float32, bfloat16 and "
                             "float16 inputs (out the same or float32), got %s x %s -> %s",
                             torc_abi_dtype_name(x->dtype), torc_abi_dtype_name(w->dtype),
                             torc_abi_dtype_name(y->dtype));
    if (onednn__numel(y) == 0) return 0;
    static const char k0[] = "onednn: matmul with K = 0 is left to the reference backend";
    // out is all zeros: f32's GEMM step and the FMA GEMM write them.
    if (K == 0 && dt != TORC_DTYPE_F32 && !onednn__fma_usable())
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "%s", k0);

    // bf16 on AMX: torc's own tile GEMM (matmul_amx.c); oneDNN 2.6's brgemm reaches ~12% of peak.
    // Skinny shapes stay on the primitive: the tile GEMM pads M, N and K to 32, so a final layer's
    // 512 x 1 x 1024 (or its backward's K = 1 outer product) would do 32x the work; the primitive
    // ran those 1.5-2x faster (25-60 us against 30-110 us).
    if (dt == TORC_DTYPE_BF16 && onednn__amx_usable() && M >= 16 && N >= 16 && K >= 16)
        return onednn__plan_amx_matmul(p, op);

    onednn_view a, b, c;
    int a_buf, b_buf;
    matmul_views(op, &a, &a_buf, &b, &b_buf, &c);
    // bf16 (in, out bf16 or f32) where AMX or the CPU's bf16 dot products pay, and small bf16
    // GEMMs wherever it has them at all: the primitive. Elsewhere through f32 (below).
    if (dt == TORC_DTYPE_BF16 && K > 0 &&
        (onednn__bf16_matmul_native() || (onednn__bf16_dot() && onednn__work(op) < ONEDNN_BF16_VIA_F32_WORK)))
        return add_matmul(p, &a, a_buf, &b, b_buf, &c, ONEDNN_BUF_OUT);

    // f16 (no CPU here has f16 FMAs that oneDNN 2.6 uses), and bf16 where it runs on f32 FMAs:
    // torc's FMA GEMM, converting while it packs, from AVX2 + FMA up. (f32 with
    // TORC_ONEDNN_FMA_GEMM=all, for measuring it against sgemm.)
    // GEMMs under ONEDNN_SMALL_WORK multiply-adds take its small-GEMM path (no packing, no tiles:
    // on the tiles and packing they ran slower than through f32 and sgemm, a Cruncher D=256 f16
    // step 0.57-0.59 against 0.55 ms on one Zen 4 core), or, where it does not take the layout,
    // the conversions and sgemm.
    // f32 of the AVX2 family from ONEDNN_SMALL_WORK multiply-adds runs there too on AMD's CPUs: its
    // threads share a GEMM without splitting K, where OpenBLAS's sums change with its thread count and
    // OpenBLAS in fixed pieces (pieces.c) costs some of its speed. One Zen 4 core, AVX2-capped: the FMA
    // GEMM even with OpenBLAS at 1024^3 and 2048^3 (105-108 against 104-109 GFLOP/s), 75-82 against
    // 78-87 at 512^3. On Intel's it stays on OpenBLAS's pieces: an Emerald Rapids core capped to AVX2
    // (best of 4-5 interleaved runs, CPU time, GFLOP/s; OpenBLAS as one call / in pieces / the FMA
    // GEMM): 512^3 75-79 / 69-71 / 74-78, 1024^3 75-80 / 74-77 / 58-63, 2048^3 77-82 / 75-77 / 52-64,
    // 512x1024x1024 72-79 / 73 / 56-64; only the Cruncher D=256 GEMMs (64x256x256) ran faster on
    // the FMA GEMM, 77-83 against 66-70. Smaller f32 GEMMs stay on OpenBLAS (or sgemm), one thread.
    // On Intel's AVX-512 cores the shapes where the FMA GEMM beat dnnl_sgemm (intel_f32_on_fma).
    const bool f32_fma = onednn__fma_f32() || (onednn__dnnl_isa() == ONEDNN_ISA_AVX2 && !onednn__cpu_is_intel() &&
                                               onednn__work(op) >= ONEDNN_SMALL_WORK) ||
                         (dt == TORC_DTYPE_F32 && intel_f32_on_fma(op, &a, &c));
    if ((dt != TORC_DTYPE_F32 || f32_fma) && (on_fma_gemm(op, &a, &b, &c) || (K == 0 && onednn__fma_usable())))
        return plan_fma(p, &a, a_buf, &b, b_buf, &c, dnnl_data_type_undef);

    onednn_gemm g;
    if (dt == TORC_DTYPE_F32) {
        if (gemm_plan(&a, &b, &c, &g)) return onednn__plan_gemm(p, &g, a_buf, b_buf, ONEDNN_BUF_OUT);
        if (K == 0) return onednn__error(TORC_ERR_NOT_SUPPORTED, "%s", k0);
        return add_matmul(p, &a, a_buf, &b, b_buf, &c, ONEDNN_BUF_OUT);
    }

    // f16 and bf16 below AVX2 (or TORC_ONEDNN_FMA_GEMM=0) and small GEMMs the FMA GEMM's small path
    // does not take: through f32.
    return plan_via_f32(p, &a, a_buf, &b, b_buf, &c, dnnl_data_type_undef);
}
