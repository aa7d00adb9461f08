// backends/cpu_onednn/pieces.c — results that do not depend on the thread count, for the GEMMs torc
// hands to a library: fixed pieces of C, each computed on one thread.
//
// torc's own GEMMs (the FMA and AMX ones) never split K and tile C the same way at every thread
// count, so their sums do not change with it. A library's may: dnnl_sgemm splits K across threads
// for skinny shapes and GEMVs, oneDNN's matmul primitive does for weight-gradient shapes (K >= 2048
// with few column blocks; on AMX whenever the batch is 1) and sizes its K blocks by its threads'
// share, OpenBLAS blocks K by its thread count (AVX2-capped, D = 128: a fifth of a model's weights one
// ulp apart between TORC_NUM_THREADS=1 and 2). None of them promises otherwise. So a library GEMM
// of ONEDNN_SMALL_WORK multiply-adds and more runs as fixed pieces of C (and of K, for dnnl_sgemm and
// OpenBLAS where C has too few pieces): their sizes follow M, N and K alone, each piece is one call
// on one thread (a primitive made for one thread), the team takes pieces in turn, and the pieces of K
// are added in order. A smaller GEMM is one call on one thread (its plan is made and run on one).
#include <stdlib.h>
#include <string.h>

#include "onednn-impl.h"

// ---- the pieces' sizes ----
// Until there are ONEDNN_PIECES_MAX of them or one has under 2 x ONEDNN_SMALL_WORK multiply-adds:
// halve the longer of C's sides (rows and columns rounded up to 16, neither below PIECE_SIDE_MIN),
// then, where split_nk allows, K (rounded up to 256, not below PIECE_K_MIN). What the pieces cost one
// core (an Emerald Rapids Xeon, f32, best of 5 interleaved runs in CPU time, GFLOP/s, one call
// against the pieces): dnnl_sgemm 512^3 165-170 / 167, 1024^3 150-159 / 141-142, 2048^3 151-156 /
// 144-145, 512x1024x1024 150-155 / 137, with B transposed 150-155 / 126-130, 64x256x256 168 / 154;
// OpenBLAS AVX2-capped 512^3 78-79 / 69-71, 1024^3 80 / 75-77, 2048^3 80-82 / 76-77. With at most
// 4 pieces OpenBLAS came within 2% of one call and dnnl_sgemm 0-12% behind it (as noisy as with
// 16), but a GEMM then has at most 4 threads.
#define PIECE_SIDE_MIN 64
#define PIECE_K_MIN 1024
// ... except that K is halved first while it is PIECE_K_FIRST times C's longer side or more (and C
// has at most PIECE_K_FIRST_C elements): a piece's multiply-adds per element it reads, 1 / (1/bm +
// 1/bn + 1/bk), fall least when its longest side is halved, and C's sides halved under a long K
// leave each piece a thin GEMM that streams its K-long slices of A and B for few sums. The LM head's
// input gradient, G (R, V) @ wte (V, C) at V 50304, C 256 (one loaded Emerald Rapids core,
// dnnl_sgemm, best CPU time of 3, interleaved, GFLOP/s): R 256 (the GPT step's chunks) in 16 pieces
// of 64 x 64 x 50304 60-74, in 16 of 256 x 256 x 3200 93-129 (one call 91-120); R 1024 in 128 x 128
// x 50304 105-130, in 1024 x 256 x 3200 100-142 (one call 110-148).
#define PIECE_K_FIRST 4
#define PIECE_K_FIRST_C (INT64_C(1) << 20)

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

onednn_pieces onednn__pieces(int64_t M, int64_t N, int64_t K, bool split_nk) {
    onednn_pieces q = {.bm = M, .bn = N, .bk = K, .nm = 1, .nn = 1, .nk = 1};
    if (M * N * K < ONEDNN_SMALL_WORK) return q;
    // K first where it is the long side (and C small: its partial sums stay under 64 MiB).
    const bool k_first = split_nk && M * N <= PIECE_K_FIRST_C;
    while (q.nm * q.nn * q.nk < ONEDNN_PIECES_MAX && q.bm * q.bn * q.bk >= 2 * ONEDNN_SMALL_WORK) {
        const bool m_ok = q.bm >= 2 * PIECE_SIDE_MIN, n_ok = split_nk && q.bn >= 2 * PIECE_SIDE_MIN;
        const bool k_ok = split_nk && q.bk >= 2 * PIECE_K_MIN;
        if (k_first && k_ok && q.bk >= PIECE_K_FIRST * (q.bm > q.bn ? q.bm : q.bn)) q.bk = (ceil_div(q.bk, 2) + 255) / 256 * 256;
        else if (m_ok && (q.bm >= q.bn || !n_ok)) q.bm = (ceil_div(q.bm, 2) + 15) / 16 * 16;
        else if (n_ok) q.bn = (ceil_div(q.bn, 2) + 15) / 16 * 16;
        else if (k_ok) q.bk = (ceil_div(q.bk, 2) + 255) / 256 * 256;
        else break;
        q.nm = ceil_div(M, q.bm), q.nn = ceil_div(N, q.bn), q.nk = ceil_div(K, q.bk);
    }
    return q;
}

// ---- oneDNN's matmul primitive in pieces ----
// A piece's shape is one of four: (bm or the last rows) x (bn or the last columns); each distinct one
// has a primitive made for one thread. Each thread of the team has its own stream, memory objects and
// scratchpad (a primitive runs concurrently only so).
#define SHAPES 4
enum { ARG_SRC, ARG_WEI, ARG_DST, ARG_SCRATCH, NARGS };

struct onednn_pieces_step {
    onednn_pieces q;
    int64_t M, N;
    int64_t a_rs, a_cs, b_rs, b_cs, c_rs, c_cs;  // element strides of A, B, C's matrices
    size_t ea, eb, ec;                            // element sizes
    int nbatch;
    int64_t bdims[TORC_MAX_DIMS], sa[TORC_MAX_DIMS], sb[TORC_MAX_DIMS], sc[TORC_MAX_DIMS];
    int shape_prim[SHAPES];                       // which primitive runs each shape (-1: none has it)
    int nprims;
    dnnl_primitive_t prims[SHAPES];
    size_t scratch_per_thread;                    // bytes, 64-aligned
    int nthreads;                                 // the threads its resources serve
    dnnl_stream_t *streams;                       // [nthreads]
    dnnl_memory_t *mems;                          // [nthreads][SHAPES][NARGS] (NULL: no such argument)
};

void onednn__pieces_destroy(onednn_pieces_step *s) {
    if (!s) return;
    if (s->mems)
        for (int i = 0; i < s->nthreads * SHAPES * NARGS; i++)
            if (s->mems[i]) dnnl_memory_destroy(s->mems[i]);
    if (s->streams)
        for (int t = 0; t < s->nthreads; t++)
            if (s->streams[t]) dnnl_stream_destroy(s->streams[t]);
    for (int i = 0; i < s->nprims; i++)
        if (s->prims[i]) dnnl_primitive_destroy(s->prims[i]);
    free(s->mems);
    free(s->streams);
    free(s);
}

// A 2-D memory descriptor; a size-1 dim gets the stride that keeps the matrix plainly row- or
// column-major (matmul.c's normalize_matrix), which is what oneDNN's kernels test.
static int md2(dnnl_memory_desc_t *md, int64_t r, int64_t c, int64_t rs, int64_t cs, dnnl_data_type_t dt) {
    if (c == 1) {
        cs = 1;
        if (r == 1) rs = 1;
    } else if (r == 1) {
        rs = cs == 1 ? c : 1;
    }
    const dnnl_dims_t dims = {r, c}, strides = {rs, cs};
    ONEDNN_CHECK(dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides));
    return 0;
}

// Primitive i, for a rows x cols piece (made while OpenMP offers this thread one thread), and every
// thread's memory objects for it; TORC_ERR_NOT_SUPPORTED where oneDNN has only its reference code.
static int piece_prim(onednn_pieces_step *s, int i, const onednn_view *a, const onednn_view *b, const onednn_view *c,
                      int64_t rows, int64_t cols, size_t *scratch) {
    const int64_t K = a->dims[a->ndim - 1];
    dnnl_memory_desc_t ma, mb, mc;
    int st;
    if ((st = md2(&ma, rows, K, s->a_rs, s->a_cs, a->dt)) || (st = md2(&mb, K, cols, s->b_rs, s->b_cs, b->dt)) ||
        (st = md2(&mc, rows, cols, s->c_rs, s->c_cs, c->dt)))
        return st;
    dnnl_matmul_desc_t desc;
    ONEDNN_CHECK(dnnl_matmul_desc_init(&desc, &ma, &mb, NULL, &mc));
    dnnl_primitive_attr_t attr;
    if ((st = onednn__attr(&attr))) return st;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t ds = dnnl_primitive_desc_create(&pd, &desc, attr, onednn__engine(), NULL);
    dnnl_primitive_attr_destroy(attr);
    if (ds != dnnl_success) return onednn__dnnl_error(ds, "dnnl_primitive_desc_create(");
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
        strncmp(impl, "ref", 3) == 0) {
        st = onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: oneDNN has only its reference implementation (%s) for "
                           "these strides; the reference backend runs it instead", impl);
        goto out;
    }
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    *scratch = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if ((ds = dnnl_primitive_create(&s->prims[i], pd)) != dnnl_success) {
        st = onednn__dnnl_error(ds, "dnnl_primitive_create(");
        goto out;
    }
    static const int args[NARGS] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_SCRATCHPAD};
    for (int t = 0; t < s->nthreads && !st; t++)
        for (int k = 0; k < NARGS && !st; k++) {
            const dnnl_memory_desc_t *md = k == ARG_SCRATCH ? (*scratch ? smd : NULL)
                                                            : dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, args[k]);
            if (!md) {
                if (k != ARG_SCRATCH) st = onednn__error(TORC_ERR_BACKEND, "onednn: internal: a matmul piece has no argument %d", args[k]);
                continue;
            }
            ds = dnnl_memory_create(&s->mems[(t * SHAPES + i) * NARGS + k], md, onednn__engine(), DNNL_MEMORY_NONE);
            if (ds != dnnl_success) st = onednn__dnnl_error(ds, "dnnl_memory_create(");
        }
out:
    dnnl_primitive_desc_destroy(pd);
    return st;
}

static size_t dt_bytes(dnnl_data_type_t dt) { return dt == dnnl_f32 ? 4 : 2; }  // f32, bf16, f16

int onednn__plan_matmul_pieces(onednn_plan *p, const onednn_view *a, int a_buf, const onednn_view *b, int b_buf,
                               const onednn_view *c, int c_buf) {
    const int nd = c->ndim, r = nd - 2, k = nd - 1;
    if (p->n_steps >= ONEDNN_MAX_STEPS) return onednn__error(TORC_ERR_BACKEND, "onednn: internal: plan step limit exceeded");
    onednn_pieces_step *s = calloc(1, sizeof *s);
    if (!s) return onednn__error(TORC_ERR_OOM, "onednn: out of memory for a matmul plan");
    s->M = c->dims[r], s->N = c->dims[k];
    s->q = onednn__pieces(s->M, s->N, a->dims[k], false);  // rows only: each piece's A, B and C stay plain
    s->a_rs = a->strides[r], s->a_cs = a->strides[k], s->b_rs = b->strides[r], s->b_cs = b->strides[k];
    s->c_rs = c->strides[r], s->c_cs = c->strides[k];
    s->ea = dt_bytes(a->dt), s->eb = dt_bytes(b->dt), s->ec = dt_bytes(c->dt);
    s->nbatch = nd - 2;
    for (int d = 0; d < nd - 2; d++) {
        s->bdims[d] = c->dims[d];
        s->sa[d] = a->dims[d] == 1 ? 0 : a->strides[d];
        s->sb[d] = b->dims[d] == 1 ? 0 : b->strides[d];
        s->sc[d] = c->strides[d];
    }
    const int64_t rows[2] = {s->q.bm, s->M - (s->q.nm - 1) * s->q.bm}, cols[2] = {s->q.bn, s->N - (s->q.nn - 1) * s->q.bn};
    const int nthr = omp_get_max_threads();
    s->nthreads = nthr;
    int st = 0;
    if (!(s->streams = calloc((size_t)nthr, sizeof *s->streams)) ||
        !(s->mems = calloc((size_t)nthr * SHAPES * NARGS, sizeof *s->mems)))
        st = onednn__error(TORC_ERR_OOM, "onednn: out of memory for a matmul plan");
    for (int t = 0; t < nthr && !st; t++) {
        const dnnl_status_t ds = dnnl_stream_create(&s->streams[t], onednn__engine(), dnnl_stream_default_flags);
        if (ds != dnnl_success) st = onednn__dnnl_error(ds, "dnnl_stream_create(");
    }
    omp_set_num_threads(1);  // each primitive is made for the one thread it runs on
    size_t scratch = 0;
    for (int sh = 0; sh < SHAPES && !st; sh++) {
        s->shape_prim[sh] = -1;
        if (((sh & 1) && s->q.nm == 1) || ((sh >> 1) && s->q.nn == 1)) continue;  // no such piece
        const int64_t rr = rows[sh & 1], cc = cols[sh >> 1];
        for (int j = 0; j < sh; j++)  // the same shape as one made already
            if (s->shape_prim[j] >= 0 && rows[j & 1] == rr && cols[j >> 1] == cc) s->shape_prim[sh] = s->shape_prim[j];
        if (s->shape_prim[sh] >= 0) continue;
        size_t sb = 0;
        s->nprims++;  // (destroyed with the rest if its making fails)
        if ((st = piece_prim(s, s->nprims - 1, a, b, c, rr, cc, &sb))) break;
        if (sb > scratch) scratch = sb;
        s->shape_prim[sh] = s->nprims - 1;
    }
    omp_set_num_threads(nthr);
    s->scratch_per_thread = (scratch + 63) / 64 * 64;
    if (st) {
        onednn__pieces_destroy(s);
        return st;
    }
    const size_t need = s->scratch_per_thread * (size_t)nthr;
    if (need > p->scratch_bytes) p->scratch_bytes = need;
    onednn_step *step = &p->steps[p->n_steps++];
    memset(step, 0, sizeof *step);
    step->kind = ONEDNN_STEP_PIECES;
    step->n_args = 3;
    step->args[0].buf = a_buf;
    step->args[1].buf = b_buf;
    step->args[2].buf = c_buf;
    step->pieces = s;
    return 0;
}

// Piece t (batch-major, then rows, then columns) on thread tid.
static dnnl_status_t run_piece(const onednn_pieces_step *s, int tid, int64_t t, const char *a, const char *b, char *c,
                               char *scratch) {
    const int64_t per = s->q.nm * s->q.nn, bi = t / per, i = t % per / s->q.nn, j = t % s->q.nn;
    int64_t o[3];
    onednn__batch_offsets(s->nbatch, s->bdims, s->sa, s->sb, s->sc, bi, o);
    const int64_t m0 = i * s->q.bm, n0 = j * s->q.bn;
    const int sh = (i == s->q.nm - 1 && s->q.nm > 1) | (j == s->q.nn - 1 && s->q.nn > 1) << 1;
    const int pi = s->shape_prim[sh];
    dnnl_memory_t *m = &s->mems[(tid * SHAPES + pi) * NARGS];
    void *ptr[NARGS] = {(void *)(a + (o[0] + m0 * s->a_rs) * (int64_t)s->ea), (void *)(b + (o[1] + n0 * s->b_cs) * (int64_t)s->eb),
                        c + (o[2] + m0 * s->c_rs + n0 * s->c_cs) * (int64_t)s->ec, scratch + (size_t)tid * s->scratch_per_thread};
    static const int args[NARGS] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_SCRATCHPAD};
    dnnl_exec_arg_t ex[NARGS];
    int n = 0;
    for (int k = 0; k < NARGS; k++) {
        if (!m[k]) continue;
        const dnnl_status_t ds = dnnl_memory_set_data_handle(m[k], ptr[k]);
        if (ds != dnnl_success) return ds;
        ex[n++] = (dnnl_exec_arg_t){args[k], m[k]};
    }
    const dnnl_status_t ds = dnnl_primitive_execute(s->prims[pi], s->streams[tid], n, ex);
    return ds != dnnl_success ? ds : dnnl_stream_wait(s->streams[tid]);
}

int onednn__pieces_run(const onednn_pieces_step *s, const void *a, const void *b, void *c, void *scratch) {
    int64_t batch = 1;
    for (int d = 0; d < s->nbatch; d++) batch *= s->bdims[d];
    const int64_t n = batch * s->q.nm * s->q.nn;
    int nthr = omp_get_max_threads();
    if (nthr > s->nthreads) nthr = s->nthreads;
    if (nthr > n) nthr = (int)n;
    dnnl_status_t bad = dnnl_success;
    if (nthr <= 1) {
        const int saved = omp_get_max_threads();
        omp_set_num_threads(1);
        for (int64_t t = 0; t < n && bad == dnnl_success; t++) bad = run_piece(s, 0, t, a, b, c, scratch);
        omp_set_num_threads(saved);
    } else {
#pragma omp parallel num_threads(nthr)
        {
            omp_set_num_threads(1);  // the primitives were made for one thread: nothing nested
            const int tid = omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
            for (int64_t t = 0; t < n; t++) {
                const dnnl_status_t ds = run_piece(s, tid, t, a, b, c, scratch);
                if (ds != dnnl_success) {
#pragma omp atomic write
                    bad = ds;
                }
            }
        }
    }
    return bad == dnnl_success ? 0 : onednn__dnnl_error(bad, "dnnl_primitive_execute(");
}
