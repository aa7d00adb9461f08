// backends/cpu_onednn/onednn-impl.h — internals shared by the oneDNN backend's files: errors,
// operand -> memory-descriptor views, the cached plan of primitives for one op, the builders.
#ifndef TORC_ONEDNN_IMPL_H
#define TORC_ONEDNN_IMPL_H

#include <oneapi/dnnl/dnnl.h>
#include "boundary.h"  // every dnnl call through boundary.cpp: nothing thrown reaches C

#include <omp.h>
#include <string.h>

#include "torc/backend.h"

// ---- errors (backend.c) ----
// Sets this thread's last error ("onednn: ...") and returns status, so builders write
// `return onednn__error(TORC_ERR_NOT_SUPPORTED, "...")`.
int onednn__error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// A failed dnnl call: the message names the call (the text of `what` up to its '(') and the
// dnnl status; unimplemented / invalid_arguments map to TORC_ERR_NOT_SUPPORTED (oneDNN cannot
// express the op), out_of_memory to TORC_ERR_OOM, anything else to TORC_ERR_BACKEND.
int onednn__dnnl_error(dnnl_status_t s, const char *what);
const char *onednn__status_name(dnnl_status_t s);
const char *onednn__last_error_text(void);  // this thread's message ("" if none)
const char *onednn__op_name(torc_opcode code);
#define ONEDNN_CHECK(call)                                              \
    do {                                                                \
        dnnl_status_t onednn_st_ = (call);                              \
        if (onednn_st_ != dnnl_success) return onednn__dnnl_error(onednn_st_, #call); \
    } while (0)

// The process-wide engine (created in init).
dnnl_engine_t onednn__engine(void);

// ---- views (view.c) ----
// A torc operand as oneDNN sees it: dims and strides in elements (a 0-d operand becomes 1-D
// of size 1) and the dnnl data type.
typedef struct onednn_view {
    int ndim;
    dnnl_dims_t dims, strides;
    dnnl_data_type_t dt;
} onednn_view;

// The dnnl type of a torc dtype; dnnl_data_type_undef for dtypes oneDNN does not compute in
// (f64, i64, i16, bool, fp8). Bool is 1 byte of 0/1 and may be read as u8 where noted.
dnnl_data_type_t onednn__dt(torc_dtype d);
bool onednn__is_float(torc_dtype d);             // f32, bf16, f16
int64_t onednn__numel(const torc_operand *x);
bool onednn__same_shape(const torc_operand *a, const torc_operand *b);
bool onednn__has_bcast(const torc_operand *x);  // a stride-0 dim of size > 1
bool onednn__dense(const torc_operand *x);      // row-major contiguous (size-1 dims: any stride)
// Checks what no builder may trust blindly: ndim in [0, TORC_MAX_DIMS], shapes and strides
// non-negative, a known dtype. Returns 0 or TORC_ERR_INVALID_ARG with the error set.
int onednn__check_operand(const torc_operand *x, const char *what);

void onednn__view(onednn_view *v, const torc_operand *x, dnnl_data_type_t dt);
// Stride-0 dims of size > 1 become dims of size 1: oneDNN's broadcast (binary src1, matmul
// batch dims). Only dims [0, upto) are touched.
void onednn__view_bcast_to_one(onednn_view *v, int upto);
// Gives every size-1 dim the stride a dense layout would have there (the span of the dims
// inside it), so oneDNN recognises plain layouts; a size-1 dim's stride has no meaning.
void onednn__view_normalize(onednn_view *v);
void onednn__view_transpose_last2(onednn_view *v);
bool onednn__view_dense(const onednn_view *v);  // row-major contiguous, as onednn__dense
int onednn__view_md(const onednn_view *v, dnnl_memory_desc_t *md);

// ---- plans (plan.c) ----
// A plan is what one op descriptor compiles to: a few primitives run in order, each argument
// bound to an op operand, a temporary in the backend's workspace, or a constant.
#define ONEDNN_MAX_TMPS 3
#define ONEDNN_MAX_STEPS 4
#define ONEDNN_MAX_ARGS 6
enum {
    ONEDNN_BUF_IN0 = 0,  // .. ONEDNN_BUF_IN0 + 3: op->in[i].data
    ONEDNN_BUF_OUT = TORC_OP_MAX_INPUTS,
    ONEDNN_BUF_TMP0,     // .. ONEDNN_BUF_TMP0 + ONEDNN_MAX_TMPS - 1: workspace temporaries
    ONEDNN_BUF_CONST = ONEDNN_BUF_TMP0 + ONEDNN_MAX_TMPS,
    ONEDNN_BUF_SCRATCH,  // the primitive's scratchpad (user mode), in the workspace
};

typedef struct onednn_arg {
    int arg;            // DNNL_ARG_*
    int buf;            // ONEDNN_BUF_*
    void *cptr;         // for ONEDNN_BUF_CONST: a static constant (read only by oneDNN)
    dnnl_memory_t mem;  // created without a handle; the handle is set on every run
} onednn_arg;

// An f32 GEMM on oneDNN's dnnl_sgemm (row-major BLAS), looped over the batch dims:
// C[b] = op(A[b]) op(B[b]), op(A) M x K, op(B) K x N, C row-major M x N with ldc.
typedef struct onednn_gemm {
    char transa, transb;        // 'N' or 'T' (A or B stored transposed: column-major)
    int64_t M, N, K, lda, ldb, ldc;
    int nbatch;                 // batch dims (C's leading dims)
    int64_t bdims[TORC_MAX_DIMS];
    int64_t sa[TORC_MAX_DIMS], sb[TORC_MAX_DIMS], sc[TORC_MAX_DIMS];  // batch strides (0: broadcast)
    bool batch_parallel;        // one thread per matrix: matrices too small to share
} onednn_gemm;

// The element offsets of matrix i of a batch in A, B and C (row-major batch index over
// dims[0..nbatch); a stride 0 broadcasts): off[0], off[1], off[2]. plan.c.
void onednn__batch_offsets(int nbatch, const int64_t *dims, const int64_t *sa, const int64_t *sb,
                           const int64_t *sc, int64_t i, int64_t off[3]);

typedef enum onednn_step_kind {
    ONEDNN_STEP_PRIM = 0,  // a oneDNN primitive
    ONEDNN_STEP_CONVERT,   // a host f16 / bf16 <-> f32 conversion (convert.c)
    ONEDNN_STEP_GEMM,      // an f32 GEMM on dnnl_sgemm (matmul.c)
    ONEDNN_STEP_AMX_MATMUL,  // a bf16 matmul on the AMX GEMM (matmul_amx.c)
    ONEDNN_STEP_FMA_MATMUL,  // an f16 / bf16 / f32 matmul on the FMA GEMM (matmul_fma.c)
    ONEDNN_STEP_PIECES,      // oneDNN's matmul primitive in fixed pieces of C, one thread each (pieces.c)
} onednn_step_kind;

// ---- fixed pieces of a library GEMM (pieces.c: why) ----
// C (M x N) in nm x nn pieces of bm x bn (the last row and column of pieces smaller), K in nk
// pieces of bk; sizes that follow M, N and K alone, never the thread count.
typedef struct onednn_pieces {
    int64_t bm, bn, bk;
    int64_t nm, nn, nk;
} onednn_pieces;
#define ONEDNN_PIECES_MAX 16
// The pieces of an M x N x K GEMM (one piece under ONEDNN_SMALL_WORK multiply-adds): rows, and where
// split_nk is true (a caller that adds the pieces of K in order) columns and K.
onednn_pieces onednn__pieces(int64_t M, int64_t N, int64_t K, bool split_nk);
typedef struct onednn_pieces_step onednn_pieces_step;  // a matmul primitive's pieces (pieces.c)

// A GEMM on torc's FMA kernels (matmul_fma.c), one matrix: C = A x B, A (M x K) and B (K x N)
// f32, f16 or bf16, C (M x N) f32, f16 or bf16; any (non-negative) strides. round_dt (f16 or bf16;
// dnnl_data_type_undef: none) is MATMUL_ROUNDED's c: f32 inputs and the sums rounded to it.
typedef struct onednn_fma_gemm {
    int64_t M, N, K;
    const void *a;
    int64_t a_rs, a_cs;
    const void *b;
    int64_t b_rs, b_cs;
    void *c;
    int64_t c_rs, c_cs;
    dnnl_data_type_t a_dt, b_dt, c_dt, round_dt;
} onednn_fma_gemm;

typedef struct onednn_step {
    onednn_step_kind kind;
    dnnl_primitive_t prim;  // ONEDNN_STEP_PRIM only
    int n_args;
    onednn_arg args[ONEDNN_MAX_ARGS + 1];  // + the scratchpad
    onednn_view from, to;   // a conversion step: strided views of args[0] (from), args[1] (to)
    dnnl_data_type_t round; // an f32 -> f32 one: the dtype (f16 / bf16) its values are rounded to
    onednn_gemm gemm;       // a GEMM step: args[0] is A, args[1] B, args[2] C
    // An AMX bf16 matmul step: args[2] = args[0] x args[1], args[3] its packing scratch
    // (matmul_amx.c). The views keep stride-0 batch dims (broadcast).
    struct {
        int nthreads;  // the most threads its scratch holds
        onednn_view a, b, c;
    } amx;
    // An FMA matmul step: args[2] = args[0] x args[1], args[3] its packing scratch. fma is one
    // matrix (pointers unset), gemm's batch members (nbatch, bdims, sa, sb, sc, batch_parallel)
    // its batch; fma_nthreads the most threads the scratch holds.
    onednn_fma_gemm fma;
    int fma_nthreads;
    onednn_pieces_step *pieces;  // a pieces step: args[2] = args[0] x args[1] (owned)
} onednn_step;

// Results where oneDNN deviates from PyTorch on special values (its max/relu/exp drop or
// saturate NaN, its bf16 conversion flushes subnormals); run() restores PyTorch's result with a
// check over the inputs (fixup.c).
typedef enum onednn_fixup {
    ONEDNN_FIXUP_NONE = 0,
    ONEDNN_FIXUP_ELEMENTWISE,  // recompute out[i] where an input is NaN (or subnormal) at i
    ONEDNN_FIXUP_REDUCE,       // max/min: recompute every group when a NaN (subnormal) exists
    ONEDNN_FIXUP_ROWS,         // softmax: a row holding NaN or +inf is all NaN
} onednn_fixup;

typedef struct onednn_plan {
    int n_steps;  // 0: nothing to run (a zero-size output)
    onednn_step steps[ONEDNN_MAX_STEPS];
    int n_tmps;
    size_t tmp_offset[ONEDNN_MAX_TMPS];
    size_t tmp_bytes;      // temporaries, then the scratchpad at this offset
    size_t scratch_bytes;  // the largest scratchpad of the steps
    onednn_fixup fixup;
    bool single_thread;    // too small to pay for waking OpenMP's team (see cache.c)
} onednn_plan;

typedef struct onednn_bind {
    int arg;
    int buf;
    void *cptr;
} onednn_bind;

// A fresh attribute with the user-managed scratchpad every step uses.
int onednn__attr(dnnl_primitive_attr_t *attr);
// Reserves a temporary of nbytes in the workspace and returns its ONEDNN_BUF_TMP* id.
int onednn__plan_tmp(onednn_plan *p, size_t nbytes, int *buf);
// Creates the primitive descriptor from an op descriptor (`desc`, NULL attr allowed) and adds
// it as a step. reject_ref: decline (TORC_ERR_NOT_SUPPORTED) when oneDNN only offers its
// reference implementation. The step binds n arguments.
int onednn__plan_add(onednn_plan *p, const void *desc, const_dnnl_primitive_attr_t attr,
                     bool reject_ref, int n, const onednn_bind *binds);
// Adds a step from a primitive descriptor the caller created (a reorder); takes ownership of pd.
int onednn__plan_add_pd(onednn_plan *p, dnnl_primitive_desc_t pd, int n, const onednn_bind *binds);
// Adds a reorder (strided copy with conversion) from one view to another.
int onednn__plan_reorder(onednn_plan *p, const onednn_view *from, int from_buf,
                         const onednn_view *to, int to_buf);
// Adds an f16 / bf16 <-> f32 conversion run on the host (convert.c); f32 -> f32 rounds the values to
// round (f16 or bf16; ignored otherwise), in place where the buffers are one.
int onednn__plan_convert(onednn_plan *p, const onednn_view *from, int from_buf,
                         const onednn_view *to, int to_buf, dnnl_data_type_t round);
// A bf16 out is written through an f32 temporary (oneDNN's conversion flushes subnormals): before
// the primitive, onednn__plan_dst gives the view and buffer it writes (vd itself unless bf16);
// after it, onednn__plan_dst_done adds the conversion into out.
int onednn__plan_dst(onednn_plan *p, const onednn_view *vd, onednn_view *vt, int *buf);
int onednn__plan_dst_done(onednn_plan *p, const onednn_view *vd, const onednn_view *vt, int buf);
// Adds an f32 GEMM step on dnnl_sgemm reading buffers a_buf, b_buf and writing c_buf.
int onednn__plan_gemm(onednn_plan *p, const onednn_gemm *g, int a_buf, int b_buf, int c_buf);
// Adds a step computing out = in[0] @ in[1] of a matmul op (bf16 inputs, bf16 or f32 out, batch
// dims broadcast by stride 0) with the AMX GEMM (matmul_amx.c), its packing scratch a plan
// temporary. Only after onednn__amx_usable() returned true.
int onednn__plan_amx_matmul(onednn_plan *p, const torc_op *op);
// Adds a step computing c_buf = a_buf x b_buf on the FMA GEMM (matmul_fma.c): g one matrix of the
// batch described by batch (its nbatch, bdims, sa, sb, sc, batch_parallel), its packing scratch a
// plan temporary. Only after onednn__fma_usable() returned true.
int onednn__plan_fma_matmul(onednn_plan *p, const onednn_fma_gemm *g, const onednn_gemm *batch, int a_buf,
                            int b_buf, int c_buf);
// Adds a step computing c_buf = a_buf x b_buf on oneDNN's matmul primitive in fixed pieces of C, each
// a primitive made for one thread (pieces.c), for a GEMM of ONEDNN_SMALL_WORK multiply-adds and
// more: views a (.., M, K), b (.., K, N), c (.., M, N), batch dims c's or size 1 (broadcast).
int onednn__plan_matmul_pieces(onednn_plan *p, const onednn_view *a, int a_buf, const onednn_view *b, int b_buf,
                               const onednn_view *c, int c_buf);
int onednn__pieces_run(const onednn_pieces_step *s, const void *a, const void *b, void *c, void *scratch);
void onednn__pieces_destroy(onednn_pieces_step *s);
// Runs the steps with the op's pointers; workspace holds tmp_bytes + scratch_bytes.
int onednn__plan_run(const onednn_plan *p, const torc_op *op, void *workspace,
                     dnnl_stream_t stream);
void onednn__plan_destroy(onednn_plan *p);

// ---- builders: one per op family ----
// Each validates the descriptor, then fills the plan. They return 0, TORC_ERR_NOT_SUPPORTED
// when the op (dtype, layout) is not one this backend runs (the core falls back), or another
// status on a real failure; the error says why in every case.
int onednn__build_matmul(const torc_op *op, onednn_plan *p);     // matmul.c
// Runs a GEMM step (matmul.c); 0 or the dnnl error.
int onednn__gemm_run(const onednn_gemm *g, const float *a, const float *b, float *c);
// blas.c: f32 GEMM (row-major, C = op(A) op(B)) on OpenBLAS where the CPU is of the AVX2 family and
// its OpenMP build loads; false (nothing done) elsewhere, and the caller runs dnnl_sgemm.
bool onednn__blas_sgemm(char transa, char transb, int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                        const float *b, int64_t ldb, float *c, int64_t ldc);
bool onednn__blas_active(void);  // whether f32 GEMMs run on OpenBLAS (device.c names it)
int onednn__build_unary(const torc_op *op, onednn_plan *p);      // elementwise.c
int onednn__build_binary(const torc_op *op, onednn_plan *p);     // elementwise.c
int onednn__build_reduce(const torc_op *op, onednn_plan *p);     // reduce.c
int onednn__build_softmax(const torc_op *op, onednn_plan *p);    // softmax.c
int onednn__build_copy(const torc_op *op, onednn_plan *p);       // copy.c

// ---- f16 / bf16 <-> f32 conversion for matmuls computed in f32 (convert.c) ----
// Converts every element of `from` into `to` (f16 or bf16 -> f32, f32 -> f16 or bf16, or f32 ->
// f32 rounded to round), same dims, any strides; parallel from ONEDNN_SMALL_STREAM elements.
void onednn__convert(const onednn_view *from, const void *src, const onednn_view *to, void *dst,
                     dnnl_data_type_t round);

// ---- bf16 GEMM on AMX tiles (matmul_amx.c) ----
// C = A x B for one matrix: bf16 A (M x K) and B (K x N) of any (non-negative) strides, C (M x N)
// f32 or bf16 (rounded to nearest even once, after f32 accumulation over all of K).
typedef struct onednn_amx_gemm {
    int64_t M, N, K;               // M, N, K >= 1
    const uint16_t *a;             // (M, K) bf16, strides a_rs, a_cs in elements
    int64_t a_rs, a_cs;
    const uint16_t *b;             // (K, N) bf16
    int64_t b_rs, b_cs;
    void *c;                       // (M, N), f32 if c_f32 else bf16
    int64_t c_rs, c_cs;
    bool c_f32;
} onednn_amx_gemm;
// Whether bf16 matmul runs on the AMX GEMM: torc's ISA (isa.c) reaches AMX, Linux granted
// this process the tile data state, and TORC_ONEDNN_AMX_GEMM is not "0" (which leaves bf16 to
// oneDNN's matmul primitive). Checked once (call under the backend's lock); runs no AMX code.
bool onednn__amx_usable(void);
// Workspace onednn__amx_gemm needs for these sizes and up to nthreads threads.
size_t onednn__amx_scratch_bytes(int64_t M, int64_t N, int64_t K, int nthreads);
// Runs g on up to nthreads OpenMP threads; scratch holds onednn__amx_scratch_bytes(), 64-byte
// aligned. Only after onednn__amx_usable() returned true.
void onednn__amx_gemm(const onednn_amx_gemm *g, void *scratch, int nthreads);

// ---- f16 / bf16 / f32 GEMM on FMA kernels (matmul_fma.c) ----
// Whether the FMA GEMM runs (torc's ISA reaches AVX2 + FMA and TORC_ONEDNN_FMA_GEMM is not "0",
// which leaves f16 and bf16 to the conversions and sgemm). cpuid only.
bool onednn__fma_usable(void);
// Whether f32 matmuls run on it too (TORC_ONEDNN_FMA_GEMM=all; by default sgemm runs them).
bool onednn__fma_f32(void);
// The fewest multiply-adds a matmul needs to run on it: ONEDNN_SMALL_WORK, or 0 with
// TORC_ONEDNN_FMA_GEMM=1 or all (every size: the tests' setting).
int64_t onednn__fma_min_work(void);
// Whether onednn__fma_gemm runs g on its small-GEMM path where g has under onednn__fma_min_work()
// multiply-adds (its layout: A's rows or B's columns contiguous, or K = 1 or M = 1); else tiles.
bool onednn__fma_small_takes(const onednn_fma_gemm *g);
// Workspace onednn__fma_gemm needs for these sizes and up to nthreads threads.
size_t onednn__fma_scratch_bytes(int64_t M, int64_t N, int64_t K, int nthreads);
// Runs g on up to nthreads OpenMP threads (1: no parallel region, so it may run inside one);
// scratch holds onednn__fma_scratch_bytes(), 64-byte aligned. Any M, N, K >= 0.
void onednn__fma_gemm(const onednn_fma_gemm *g, void *scratch, int nthreads);
// Runs an FMA matmul step's batch (plan.c).
void onednn__fma_matmul_run(const onednn_step *s, const void *a, const void *b, void *c, void *scratch);

// ---- special values (fixup.c) ----
// Whether op's inputs hold a value the fixup must handle (a parallel scan of the inputs).
bool onednn__fixup_needed(onednn_fixup kind, const torc_op *op);
// Checks the inputs and recomputes the outputs oneDNN got wrong; 0 or an error (out of memory).
int onednn__fixup(onednn_fixup kind, const torc_op *op);

// ---- the primitive cache (cache.c); callers hold the backend's lock ----
// Finds or builds the plan for op. Returns 0 and sets *plan, or TORC_ERR_NOT_SUPPORTED (the
// decline is cached too, with its message) or another error (not cached).
int onednn__cache_get(const torc_op *op, const onednn_plan **plan);
// The size of an op: the largest operand's element count, batch*M*N*K for matmul.
int64_t onednn__work(const torc_op *op);
void onednn__cache_clear(void);

// Ops touching fewer elements (matmul: M*N*K) run on the calling thread alone: oneDNN opens a
// parallel region for any size, and waking the team costs more than such an op (milliseconds
// on a loaded machine, where the other thread waits for a core).
#define ONEDNN_SMALL_WORK (INT64_C(1) << 20)
// Elementwise ops, reductions, softmax and torc's own loops (casts, fused pointwise ops) stream
// memory; they go parallel from 64K elements, where two cores already halve a pass. Side by
// side (two cores, quiet machine): x + y of 512K floats 190 -> 101 us, relu 221 -> 141 us, of
// 64K 8.6 -> 6.2 us; the Cruncher D=256 SGD step 263-280 -> 224-235 us (its SGD update no
// longer reads the other core's half of a gradient from one thread); Cruncher 1024 even. (From
// 4M to 1M, an earlier measurement gave Cruncher 1024 SGD f32 60.0 -> 57.6 ms.) The cost: on a
// machine whose other cores are busy, a parallel region waits for a descheduled thread (mul_
// of 1M floats took 8 ms instead of 0.2); TORC_NUM_THREADS=1 is the remedy there, as
// OMP_NUM_THREADS is for PyTorch.
#define ONEDNN_SMALL_STREAM (INT64_C(1) << 16)
static inline bool onednn__is_matmul(torc_opcode code) {
    return code == TORC_OP_MATMUL || code == TORC_OP_MATMUL_ROUNDED;
}
// Whether op runs on the calling thread alone.
static inline bool onednn__single_thread(torc_opcode code, int64_t work) {
    return work < (onednn__is_matmul(code) ? ONEDNN_SMALL_WORK : ONEDNN_SMALL_STREAM);
}
// for (int64_t i = 0; i < n; i++) { body... } on OpenMP's team where par, else on the calling
// thread outside any parallel region: an `omp parallel for if (0)` still costs libgomp a team of
// one, ~0.4 us a call on a Zen 4 core (twice a whole 4x4 add), which small ops must not pay.
#define ONEDNN_FOR(par, i, n, ...)                                                   \
    do {                                                                             \
        const int64_t onednn_for_n_ = (n);                                           \
        if (par) {                                                                   \
            _Pragma("omp parallel for schedule(static)")                             \
            for (int64_t i = 0; i < onednn_for_n_; i++) { __VA_ARGS__ }             \
        } else {                                                                     \
            for (int64_t i = 0; i < onednn_for_n_; i++) { __VA_ARGS__ }             \
        }                                                                            \
    } while (0)
// This OpenMP thread's share [*i0, *i1) of n elements in a parallel loop of torc's own: one
// contiguous chunk per thread, boundaries on 32 elements (64 bytes or more, so no two threads
// write one cache line).
static inline void onednn__thread_range(int64_t n, int64_t *i0, int64_t *i1) {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t per = ((n + nt - 1) / nt + 31) / 32 * 32;
    *i0 = (int64_t)t * per < n ? (int64_t)t * per : n;
    *i1 = *i0 + per < n ? *i0 + per : n;
}

// Runs fn(op, i0, i1) over [0, n) of op's elements: one chunk per thread (onednn__thread_range)
// on OpenMP's team, or the whole on the calling thread for small ops (onednn__single_thread).
static inline void onednn__run_chunks(const torc_op *op, int64_t n, void (*fn)(const torc_op *, int64_t, int64_t)) {
    const int nthr = onednn__single_thread(op->code, n) ? 1 : omp_get_max_threads();
    if (nthr <= 1) {
        fn(op, 0, n);
        return;
    }
#pragma omp parallel num_threads(nthr)
    {
        int64_t i0, i1;
        onednn__thread_range(n, &i0, &i1);
        fn(op, i0, i1);
    }
}

// ---- fused pointwise ops (pointwise.c): OpenMP loops, not primitives, outside the lock ----
bool onednn__pointwise_takes(const torc_op *op);  // ADDCMUL, ADDCDIV, LERP
// 0 when the op is one the loops run (dense float32 operands); else the error says why.
int onednn__pointwise_check(const torc_op *op);
int onednn__pointwise_run(const torc_op *op);

// ---- ADAM_STEP (adam.c): one OpenMP pass over dense float32 / bfloat16 operands, outside the lock ----
bool onednn__adam_takes(const torc_op *op);
int onednn__adam_check(const torc_op *op);
int onednn__adam_run(const torc_op *op);
// ADAM_STEP_LIST (ABI 2.6): every element one ADAM_STEP adam_check takes (at any size: the loop's
// bits are the reference's), all of them in one parallel region over fixed pieces.
bool onednn__adam_list_takes(const torc_op *op);
int onednn__adam_list_check(const torc_op *op);
int onednn__adam_list_run(const torc_op *op);

// ---- ops torc runs with host loops of its own, outside the lock (backend.c's host_families) ----
// Each family: takes(op), the ops it owns (they never reach a plan); check(op), 0 when it runs
// this one, else the error says why (the core falls back to the reference; NULL: always runs);
// run(op), for an op that passed check and whose data pointers are set (backend.c checks both).
// f32 log and log_softmax (elementwise.c, softmax.c): the reference's double formulas, because
// oneDNN's log is not accurate to float32.
bool onednn__log_takes(const torc_op *op);  // LOG into f32
int onednn__log_check(const torc_op *op);
int onednn__log_run(const torc_op *op);
bool onednn__log_softmax_takes(const torc_op *op);  // LOG_SOFTMAX into f32
int onednn__log_softmax_check(const torc_op *op);
int onednn__log_softmax_run(const torc_op *op);

// LAYER_NORM, LAYER_NORM_BACKWARD (layer_norm.c): contiguous f32 / bf16 / f16, the reference's bits.
bool onednn__layer_norm_takes(const torc_op *op);
int onednn__layer_norm_check(const torc_op *op);
int onednn__layer_norm_run(const torc_op *op);

// ATTENTION, ATTENTION_BACKWARD (attention.c): FlashAttention-2's tiles on f32 / bf16 / f16, any strides.
bool onednn__attention_takes(const torc_op *op);
int onednn__attention_check(const torc_op *op);
int onednn__attention_run(const torc_op *op);

// MATMUL of at most 4 rows of bf16 / f16 operands, batch dims 1, a weight of contiguous rows or
// columns, on AVX-512 (AVX2: columns) (gemv.c): a sampler's products, streamed at the weight's bytes.
bool onednn__gemv_takes(const torc_op *op);
int onednn__gemv_run(const torc_op *op);

// GELU (gelu.c): dense in and out of one dtype, f32 / bf16 / f16, in float as PyTorch; takes()
// decides (other layouts and dtype mixes stay on oneDNN's primitive, elementwise.c).
bool onednn__gelu_takes(const torc_op *op);
int onednn__gelu_check(const torc_op *op);
int onednn__gelu_run(const torc_op *op);

// GELU_BACKWARD (gelu_backward.c): one float pass over dense f32 / bf16 / f16, PyTorch's formula.
bool onednn__gelu_backward_takes(const torc_op *op);
int onednn__gelu_backward_check(const torc_op *op);
int onednn__gelu_backward_run(const torc_op *op);

// CROSS_ENTROPY (cross_entropy.c): a row's loss and gradient in one read of f32 / bf16 / f16 rows.
bool onednn__cross_entropy_takes(const torc_op *op);
int onednn__cross_entropy_check(const torc_op *op);
int onednn__cross_entropy_run(const torc_op *op);

// SUM / MEAN of f32 / bf16 / f16 over rows into contiguous columns, (O, R, C) -> (O, C) (reduce.c):
// takes() decides (the other reductions stay on oneDNN's primitive); a float sum in a fixed order.
bool onednn__reduce_takes(const torc_op *op);
int onednn__reduce_run(const torc_op *op);
// NORM p = 2 of every element of a contiguous f32 / bf16 / f16 tensor, squares summed in double (reduce.c).
bool onednn__norm_takes(const torc_op *op);
int onednn__norm_run(const torc_op *op);

// ---- fill (fill.c): a contiguous out; integer outs take integral values in range ----
bool onednn__fill_takes(const torc_op *op);  // FILL
int onednn__fill_check(const torc_op *op);
int onednn__fill_run(const torc_op *op);

// ---- comparisons and where (compare.c): host loops, outside the lock ----
bool onednn__compare_takes(const torc_op *op);  // EQ .. GE, WHERE
// 0 when op's operands are contiguous or single broadcast values of dtypes the loops take.
int onednn__compare_check(const torc_op *op);
int onednn__compare_run(const torc_op *op);

// ---- random fills (random.c): philox.h loops, the reference's numbers; outside the lock ----
bool onednn__random_takes(const torc_op *op);  // RAND_UNIFORM, RAND_NORMAL
// 0 when op fills a contiguous f64/f32/bf16/f16 out; else the error says why.
int onednn__random_check(const torc_op *op);
int onednn__random_run(const torc_op *op);

// ---- max / min along a dim with indices (max_dim.c): host loops, outside the lock ----
bool onednn__max_dim_takes(const torc_op *op);  // MAX_DIM, MIN_DIM
// 0 when in0 is contiguous, not fp8, and values and indices are contiguous; else the error says why.
int onednn__max_dim_check(const torc_op *op);
int onednn__max_dim_run(const torc_op *op);

// ---- fp8 matmul (scaled_mm.c): decode to f32, sgemm, one epilogue pass; outside the lock ----
bool onednn__scaled_mm_takes(const torc_op *op);  // SCALED_MM
// 0 when op is a TORC_OP_SCALED_MM the backend runs (every layout); else the error says why.
int onednn__scaled_mm_check(const torc_op *op);
int onednn__scaled_mm_run(const torc_op *op);

// ---- copies that move bytes (copy.c): same dtype, or bool into int8/uint8; any strides ----
bool onednn__move_takes(const torc_op *op);
int onednn__move_check(const torc_op *op);
int onednn__move_run(const torc_op *op);

// ---- dense casts between float32 and bf16 / f16 / fp8 (cast.c): host loops, outside the lock ----
bool onednn__cast_takes(const torc_op *op);  // a COPY the loops run: dense, f32 to or from bf16/f16/fp8
int onednn__cast_run(const torc_op *op);
// The loops themselves, n dense elements on the calling thread (also convert.c's).
void onednn__f32_to_bf16(uint16_t *out, const float *in, int64_t n);
void onednn__bf16_to_f32(float *out, const uint16_t *in, int64_t n);
void onednn__f32_to_f16(uint16_t *out, const float *in, int64_t n);
void onednn__f16_to_f32(float *out, const uint16_t *in, int64_t n);
// n f32 values (stride si) rounded to round (f16 or bf16; undef: as they are) and back into dst
// (stride di), in chunks through a 16-bit buffer where both are contiguous (convert.c).
void onednn__round_line(dnnl_data_type_t round, const float *src, int64_t si, float *dst, int64_t di, int64_t n);

// ---- tensor memory (memory.c): 64-byte aligned, freed large blocks kept for reuse ----
void *onednn__mem_alloc(size_t nbytes);  // NULL when the system has no memory
void onednn__mem_free(void *ptr);
void onednn__mem_release_cache(void);    // returns the kept blocks to the system
void onednn__mem_release_cache_nowait(void);  // the same, unless the cache is locked (shutdown)

// ---- instruction sets (isa.c) ----
// Ordered levels, each including the ones below (oneDNN's names, as ONEDNN_MAX_CPU_ISA takes them).
typedef enum onednn_isa {
    ONEDNN_ISA_NONE = 0,         // x86-64 baseline (or not x86)
    ONEDNN_ISA_SSE41,
    ONEDNN_ISA_AVX,
    ONEDNN_ISA_AVX2,             // AVX2 + FMA
    ONEDNN_ISA_AVX512_CORE,      // AVX512 F, DQ, BW, VL
    ONEDNN_ISA_AVX512_CORE_BF16, // + AVX512_BF16
    ONEDNN_ISA_AVX512_CORE_AMX,  // + AMX-TILE, AMX-BF16, granted by the OS
    ONEDNN_ISA_COUNT
} onednn_isa;
// Reads TORC_MAX_CPU_ISA and the CPU once (in init); an unknown name is an error.
int onednn__isa_init(const char *max_cpu_isa);  // NULL: TORC_MAX_CPU_ISA
// What torc's own loops may use: the CPU, capped by TORC_MAX_CPU_ISA (unset: by oneDNN's ISA).
onednn_isa onednn__isa(void);
// What oneDNN's kernels use (dnnl_get_effective_cpu_isa: the CPU capped by ONEDNN_MAX_CPU_ISA).
onednn_isa onednn__dnnl_isa(void);
// What the CPU itself has, no cap applied (blas.c: is a cap below the CPU in force?).
onednn_isa onednn__cpu_isa(void);
const char *onednn__isa_name(onednn_isa i);
bool onednn__cpu_is_intel(void);
int onednn__cpu_family(void);  // cpuid's display family (isa.c)
// Zen 4 (AMD family 19h; Zen 3 there has no AVX-512): runs each 512-bit FMA as two halves on its
// 256-bit units (device.c's peak, matmul_fma.c's kernels).
bool onednn__cpu_half512(void);
bool onednn__cpu_has_f16c(void);  // F16C (vcvtph2ps / vcvtps2ph), its own cpuid bit

// ---- device description (device.c) ----
int onednn__device_info(torc_device_info *info);
// Whether bf16 matmuls have a path faster than converting to f32 and running sgemm: AMX tiles,
// or AVX512-BF16 dot products on a CPU where they issue at the FMA rate (not Intel's). cpuid only,
// capped by the ISA oneDNN uses.
bool onednn__bf16_matmul_native(void);
// Whether oneDNN has bf16 dot-product kernels here (AVX512-BF16): without them its bf16 matmul
// is its reference code, which the backend declines.
bool onednn__bf16_dot(void);

// exp(x) for x <= 88.3 in float arithmetic that vectorises (no libm call, branch-free, ISO C: no
// contraction), for loops compiled per ISA with `omp simd` (gelu.h, cross_entropy.c; their
// files build with -fno-trapping-math so AVX2 and SSE2 if-convert the clamps): Cephes' expf,
// 2^n p(r), n = round(x log2 e), r = x - n ln 2 in two exact steps (ln 2's high part has 9 bits);
// within 2 ulps. Below -87.3 it gives 0 (no subnormal is made). A NaN x gives NaN through p; its
// exponent is taken as 0, never converted to int (undefined: UBSan).
static inline float onednn__exp_f(float x) {
    const float under = x < -87.3f ? 0.0f : 1.0f;
    x = x < -87.3f ? -87.3f : x;
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest: 1.5 * 2^23
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    const float z = r * r;
    const float p = (((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r + 4.1665795894e-2f) *
                       r + 1.6666665459e-1f) * r + 5.0000001201e-1f) * z + r + 1.0f;
    const float nn = n == n ? n : 0.0f;
    const uint32_t e = (uint32_t)((int32_t)nn + 127) << 23;
    float scale;
    memcpy(&scale, &e, sizeof scale);
    return p * scale * under;
}

#endif
