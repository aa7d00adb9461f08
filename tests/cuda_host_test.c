// tests/cuda_host_test.c — the CUDA backend checked without a GPU: its dispatch code (run.c) runs
// every op against the reference backend with each kernel launch replaced by a CPU emulation of
// the same shared per-element code; plus plans, conversions, allocator, staging pool, device
// table, cuBLASLt descriptors, and the plugin's no-device path. The CUDA runtime calls under the
// allocator and staging pool (runtime_ops.c) run over an emulated runtime that keeps the
// per-thread last error as the real one does, and the fp8 path (lt_matmul.c) over an emulated
// cuBLASLt that refuses the dtypes, alignments and epilogues the real one refuses.
// Built a second time as cuda_sim_test (-DTORC_CUDA_SIM): the block-cooperative kernels (attention,
// sorted index_add) then run their own code on a CPU model of the thread hierarchy
// (backends/cuda/sim_thread_model.h) instead of this file's emulations of them.
#include "ck.h"
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator.h"
#include "blas_api.h"
#include "cuda_cases.h"
#include "cuda_impl.h"
#include "device_table.h"
#include "kernels.h"
#include "lt_plan.h"
#include "pinned.h"

// ---- stand-ins for backend.c: run.c links against these ----
static char g_err[512];

int tcu_error(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return status;
}

int tcu_cuda_error(cudaError_t e, const char *what) {
    cudaGetLastError();  // as backend.c's: reported once
    return tcu_error(TORC_ERR_BACKEND, "%s: CUDA error %d", what, (int)e);
}

void *tcu_scratch(tcu_device *d, size_t n) {
    (void)d;
    return malloc(n ? n : 1);
}

void tcu_scratch_free(tcu_device *d, void *p) {
    (void)d;
    free(p);
}

// ---- an emulated CUDA runtime for runtime_ops.c and the emulated launchers ----
// As the real runtime: every failing call (cudaErrorNotReady from an event query included)
// sets this thread's last error, which cudaGetLastError returns and clears; a sticky error
// (a faulted context) is never cleared. The launchers below return cudaGetLastError() after
// their work, as the real ones do after a launch.
static _Thread_local cudaError_t t_last, t_sticky;
static _Thread_local int t_device;   // the runtime's current device of this thread
static struct {
    int set_device;           // cudaSetDevice calls
    cudaError_t malloc_fails; // cudaMalloc's answer while not cudaSuccess
    bool host_alloc_fails;
    int events;               // live events
} g_rt;

typedef struct emu_event {
    int pending;   // queries that answer "not ready" before the recorded work is done
} emu_event;

static cudaError_t rt_fail(cudaError_t e) {
    if (e != cudaSuccess) t_last = e;
    return e;
}

cudaError_t cudaGetLastError(void) {
    const cudaError_t e = t_sticky != cudaSuccess ? t_sticky : t_last;
    t_last = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return t_sticky != cudaSuccess ? t_sticky : t_last; }
const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    default: return "cudaError";
    }
}
const char *cudaGetErrorString(cudaError_t e) { return e == cudaErrorIllegalAddress ? "an illegal memory access was encountered" : cudaGetErrorName(e); }
cudaError_t cudaGetDevice(int *device) {
    *device = t_device;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
    g_rt.set_device++;
    if (device < 0 || device > 1) return rt_fail(cudaErrorInvalidDevice);
    t_device = device;
    return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t n) {
    if (g_rt.malloc_fails != cudaSuccess) return rt_fail(g_rt.malloc_fails);
    *p = malloc(n);
    return *p ? cudaSuccess : rt_fail(cudaErrorMemoryAllocation);
}
cudaError_t cudaFree(void *p) {
    free(p);
    return cudaSuccess;
}
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags) {
    (void)flags;
    if (g_rt.host_alloc_fails) return rt_fail(cudaErrorMemoryAllocation);
    *p = malloc(n);
    return *p ? cudaSuccess : rt_fail(cudaErrorMemoryAllocation);
}
cudaError_t cudaFreeHost(void *p) {
    free(p);
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
    (void)flags;
    emu_event *ev = calloc(1, sizeof *ev);
    if (!ev) return rt_fail(cudaErrorMemoryAllocation);
    g_rt.events++;
    *e = (cudaEvent_t)ev;
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    g_rt.events--;
    free(e);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    (void)s;
    ((emu_event *)e)->pending = 1;   // the copy just enqueued is still running
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    emu_event *ev = (emu_event *)e;
    if (ev->pending > 0) {
        ev->pending--;
        return rt_fail(cudaErrorNotReady);
    }
    return cudaSuccess;
}

static int emu_launched(void) { return (int)cudaGetLastError(); }

// ---- CPU emulations of the launchers (same plans, same per-element functions) ----
static bool g_force64;  // take the 64-bit index paths even where 32-bit math fits
static struct { int fast, ew32, ew64, blas, mm, split, smm, lt; } g_paths;

int tcu_launch_copy_bytes(void *dst, const void *src, size_t n, cudaStream_t s) {
    (void)s;
    memcpy(dst, src, n);
    return 0;
}

int tcu_launch_zero_bytes(void *dst, size_t n, cudaStream_t s) {
    (void)s;
    memset(dst, 0, n);
    return 0;
}

static void offs32(const tcu_iter *it, int64_t i, int64_t off[TCU_MAX_OPS]) {
    tcu_iter32 it32;
    tcu_iter_to32(it, &it32);
    uint32_t o[TCU_MAX_OPS];
    tcu_offsets32(&it32, (uint32_t)i, o);
    for (int k = 0; k < TCU_MAX_OPS; k++) off[k] = o[k];
}

static void offs(const tcu_iter *it, bool use32, int64_t i, int64_t off[TCU_MAX_OPS]) {
    if (use32) offs32(it, i, off);
    else tcu_offsets64(it, i, off);
}

int tcu_launch_adam(const tcu_adam_args *a, int64_t n, int sm_count, cudaStream_t s) {
    (void)sm_count;
    (void)s;
    for (int64_t i = 0; i < n; i++) {
        if (a->dtype == TORC_DTYPE_F64) tcu_adam_f64(a, i);
        else tcu_adam_f32(a, i);
    }
    return emu_launched();
}

int tcu_launch_adam_list(const tcu_adam_list_args *l, int sm_count, cudaStream_t s) {
    (void)sm_count;
    (void)s;
    for (int t = 0; t < l->n; t++)
        for (int64_t i = 0; i < l->numel[t]; i++) {
            if (l->a[t].dtype == TORC_DTYPE_F64) tcu_adam_f64(&l->a[t], i);
            else tcu_adam_f32(&l->a[t], i);
        }
    return emu_launched();
}

int tcu_launch_ew(const tcu_ew_args *a, const tcu_iter *it, int sm_count, cudaStream_t s) {
    (void)sm_count;
    (void)s;
    if (it->numel == 0) return 0;
    if (tcu_ew_fast_ok(a, it)) {  // ew_fast: float math on f32/f16/bf16 elements, scalars broadcast
        g_paths.fast++;
        for (int64_t i = 0; i < it->numel; i++) {
            const int64_t ix = it->stride[1][TCU_D - 1] ? i : 0;
            const float x = tcu_load_f32(a->data[1], ix, a->dt[1]);
            float y = 0;
            if (a->n_in == 2) y = tcu_load_f32(a->data[2], it->stride[2][TCU_D - 1] ? i : 0, a->dt[2]);
            const float r = a->n_in == 1 ? tcu_unary_f32(a->op, x, a) : tcu_binary_f32(a->op, x, y, a);
            tcu_store_f32(a->data[0], i, a->dt[0], r);
        }
        return emu_launched();
    }
    const bool use32 = !g_force64 && tcu_iter_fits32(it);
    if (use32) g_paths.ew32++;
    else g_paths.ew64++;
    for (int64_t i = 0; i < it->numel; i++) {
        int64_t off[TCU_MAX_OPS];
        offs(it, use32, i, off);
        if (tcu_op_is_fused(a->op)) {  // their own kernels (elementwise.cu)
            tcu_ew_fused(a, off, a->ct);
            continue;
        }
        switch (a->ct) {
        case TCU_CT_F32: tcu_ew_f32(a, off, i); break;
        case TCU_CT_F64: tcu_ew_f64(a, off, i); break;
        case TCU_CT_GEN: tcu_ew_gen(a, off, i); break;
        default: tcu_ew_i64(a, off, i); break;
        }
    }
    return emu_launched();
}

// Accumulator states of the three compute types behind one interface.
typedef union acc_u {
    tcu_acc_f32 f;
    tcu_acc_f64 d;
    tcu_acc_i64 i;
} acc_u;

static acc_u acc_init(const tcu_reduce_args *a) {
    acc_u s;
    memset(&s, 0, sizeof s);
    if (a->ct == TCU_CT_F32) s.f = tcu_acc_init_f32(a->op, a->p);
    else if (a->ct == TCU_CT_F64) s.d = tcu_acc_init_f64(a->op, a->p);
    else s.i = tcu_acc_init_i64(a->op, a->p);
    return s;
}

static void acc_push(const tcu_reduce_args *a, acc_u *s, int64_t off, int64_t r) {
    if (a->ct == TCU_CT_F32) tcu_acc_push_f32(a->op, a->p, &s->f, tcu_load_f32(a->in, off, a->in_dt), r);
    else if (a->ct == TCU_CT_F64) tcu_acc_push_f64(a->op, a->p, &s->d, tcu_load_f64(a->in, off, a->in_dt), r);
    else tcu_acc_push_i64(a->op, a->p, &s->i, tcu_load_i64(a->in, off, a->in_dt), r);
}

static void acc_combine(const tcu_reduce_args *a, acc_u *s, const acc_u *o) {
    if (a->ct == TCU_CT_F32) tcu_acc_combine_f32(a->op, a->p, &s->f, &o->f);
    else if (a->ct == TCU_CT_F64) tcu_acc_combine_f64(a->op, a->p, &s->d, &o->d);
    else tcu_acc_combine_i64(a->op, a->p, &s->i, &o->i);
}

static int64_t acc_index(const tcu_reduce_args *a, const acc_u *s) {
    return a->ct == TCU_CT_F32 ? s->f.n : a->ct == TCU_CT_F64 ? s->d.n : s->i.n;
}

static void acc_store(const tcu_reduce_args *a, const acc_u *s, int64_t off) {
    if (tcu_op_is_arg(a->op)) {
        tcu_store_i64(a->out, off, a->out_dt, acc_index(a, s));
    } else if (a->ct == TCU_CT_F32) {
        tcu_store_f32(a->out, off, a->out_dt, tcu_acc_final_f32(a->op, a->p, a->correction, &s->f, a->n_red));
    } else if (a->ct == TCU_CT_F64) {
        tcu_store_f64(a->out, off, a->out_dt, tcu_acc_final_f64(a->op, a->p, a->correction, &s->d, a->n_red));
    } else {
        tcu_store_i64(a->out, off, a->out_dt, tcu_acc_final_i64(a->op, a->p, a->correction, &s->i, a->n_red));
    }
}

// group_combine of reduce.cu: xor butterflies within each warp, then warp 0 takes warps 1..7.
static void emu_group_combine(const tcu_reduce_args *a, acc_u *lane, int group) {
    if (group == 1) return;
    acc_u next[TCU_THREADS];
    for (int m = 16; m >= 1; m >>= 1) {
        for (int t = 0; t < group; t++) {
            next[t] = lane[t];
            acc_combine(a, &next[t], &lane[t ^ m]);
        }
        memcpy(lane, next, (size_t)group * sizeof *lane);
    }
    if (group == 32) return;
    for (int w = 1; w < TCU_THREADS / 32; w++) acc_combine(a, &lane[0], &lane[32 * w]);
}

int tcu_launch_reduce(const tcu_reduce_args *a, const tcu_reduce_plan *pl, cudaStream_t s) {
    (void)s;
    if (pl->n_out == 0) return 0;
    const bool use32 = pl->fits32 && !g_force64;
    if (pl->split > 1) g_paths.split++;
    acc_u *parts = malloc((size_t)pl->split * sizeof *parts);
    acc_u lane[TCU_THREADS];
    for (int64_t o = 0; o < pl->n_out; o++) {
        int64_t ob[TCU_MAX_OPS];
        offs(&pl->outer, use32, o, ob);
        for (int y = 0; y < pl->split; y++) {
            const int64_t r0 = (int64_t)y * pl->chunk;
            const int64_t r1 = r0 + pl->chunk < pl->n_red ? r0 + pl->chunk : pl->n_red;
            for (int t = 0; t < pl->group; t++) {
                lane[t] = acc_init(a);
                for (int64_t r = r0 + t; r < r1; r += pl->group) {
                    int64_t io[TCU_MAX_OPS];
                    offs(&pl->inner, use32, r, io);
                    acc_push(a, &lane[t], ob[1] + io[0], r);
                }
            }
            emu_group_combine(a, lane, pl->group);
            parts[y] = lane[0];
        }
        for (int y = 1; y < pl->split; y++) acc_combine(a, &parts[0], &parts[y]);
        acc_store(a, &parts[0], ob[0]);
        if (a->values) {  // reduce.cu's store_value
            int64_t io[TCU_MAX_OPS];
            offs(&pl->inner, use32, acc_index(a, &parts[0]), io);
            tcu_move_raw(a->values, ob[2], a->in, ob[1] + io[0], (int)torc_abi_dtype_size(a->in_dt));
        }
    }
    free(parts);
    return emu_launched();
}

// softmax.cu's three passes with the same lane/butterfly structure, in double or float.
static double sm_max(double x, double y) { return isnan(x) ? x : (isnan(y) ? y : (y > x ? y : x)); }

static double emu_group_reduce(double *v, int group, bool is_max, bool f32) {
    if (group > 1) {
        double next[TCU_THREADS];
        for (int m = 16; m >= 1; m >>= 1) {
            for (int t = 0; t < group; t++) {
                const double r = is_max ? sm_max(v[t], v[t ^ m]) : v[t] + v[t ^ m];
                next[t] = f32 ? (double)(float)r : r;
            }
            memcpy(v, next, (size_t)group * sizeof *v);
        }
        if (group == TCU_THREADS) {
            double r = v[0];
            for (int w = 1; w < TCU_THREADS / 32; w++) {
                r = is_max ? sm_max(r, v[32 * w]) : r + v[32 * w];
                if (f32) r = (float)r;
            }
            return r;
        }
    }
    return v[0];
}

// layer_norm.cu's kernels, row by row in the same math (float, double for f64; sums in thread
// order differ), one function for each.
#define LN_EMU(NAME, T, LOAD, STORE, RSQRT)                                                    \
    static void NAME(const tcu_ln_args *a) {                                                   \
        const int64_t N = a->n;                                                                \
        for (int64_t r = 0; r < a->rows; r++) {                                                \
            const int64_t base = r * N;                                                        \
            if (!a->backward) {                                                                \
                T sum = 0, ss = 0;                                                             \
                for (int64_t j = 0; j < N; j++) sum += LOAD(a->x, base + j, a->x_dt);          \
                const T mu = N ? sum / (T)N : (T)0;                                            \
                for (int64_t j = 0; j < N; j++) {                                              \
                    const T c = LOAD(a->x, base + j, a->x_dt) - mu;                            \
                    ss += c * c;                                                               \
                }                                                                              \
                const T rs = RSQRT((N ? ss / (T)N : (T)NAN) + (T)a->eps);                      \
                STORE(a->mean, r, a->s_dt, mu);                                                \
                STORE(a->rstd, r, a->s_dt, rs);                                                \
                for (int64_t j = 0; j < N; j++) {                                              \
                    T v = (LOAD(a->x, base + j, a->x_dt) - mu) * rs;                           \
                    if (a->w) v *= LOAD(a->w, j, a->p_dt);                                     \
                    if (a->b) v += LOAD(a->b, j, a->p_dt);                                     \
                    STORE(a->y, base + j, a->x_dt, v);                                         \
                }                                                                              \
                continue;                                                                      \
            }                                                                                  \
            if (N == 0) continue;                                                              \
            const T mu = LOAD(a->mean, r, a->s_dt), rs = LOAD(a->rstd, r, a->s_dt);            \
            T sg = 0, sgx = 0;                                                                 \
            for (int64_t j = 0; j < N; j++) {                                                  \
                T g = LOAD(a->dy, base + j, a->x_dt);                                          \
                if (a->w) g *= LOAD(a->w, j, a->p_dt);                                         \
                sg += g;                                                                       \
                sgx += g * ((LOAD(a->x, base + j, a->x_dt) - mu) * rs);                        \
            }                                                                                  \
            const T m1 = sg / (T)N, m2 = sgx / (T)N;                                           \
            for (int64_t j = 0; j < N; j++) {                                                  \
                T g = LOAD(a->dy, base + j, a->x_dt);                                          \
                if (a->w) g *= LOAD(a->w, j, a->p_dt);                                         \
                const T xh = (LOAD(a->x, base + j, a->x_dt) - mu) * rs;                        \
                STORE(a->dx, base + j, a->x_dt, rs * (g - m1 - xh * m2));                      \
            }                                                                                  \
        }                                                                                      \
        if (a->backward && (a->dw || a->db))                                                   \
            for (int64_t j = 0; j < N; j++) {                                                  \
                T sw = 0, sb = 0;                                                              \
                for (int64_t r = 0; r < a->rows; r++) {                                        \
                    const T d = LOAD(a->dy, r * N + j, a->x_dt);                               \
                    sw += d * ((LOAD(a->x, r * N + j, a->x_dt) - LOAD(a->mean, r, a->s_dt)) *  \
                               LOAD(a->rstd, r, a->s_dt));                                     \
                    sb += d;                                                                   \
                }                                                                              \
                if (a->dw) STORE(a->dw, j, a->p_dt, sw);                                       \
                if (a->db) STORE(a->db, j, a->p_dt, sb);                                       \
            }                                                                                  \
    }
static double rsqrt_d(double v) { return 1.0 / sqrt(v); }
static float rsqrt_f(float v) { return 1.0f / sqrtf(v); }
LN_EMU(ln_emu_f32, float, tcu_load_f32, tcu_store_f32, rsqrt_f)
LN_EMU(ln_emu_f64, double, tcu_load_f64, tcu_store_f64, rsqrt_d)

int tcu_launch_layer_norm(const tcu_ln_args *a, int sm_count, cudaStream_t s) {
    (void)sm_count;
    (void)s;
    if (a->x_dt == TORC_DTYPE_F64) ln_emu_f64(a);
    else ln_emu_f32(a);
    return 0;
}

int tcu_launch_softmax(int op, tcu_ctype ct, torc_dtype in_dt, torc_dtype out_dt, const void *in, void *out,
                       const tcu_rows_plan *pl, cudaStream_t s) {
    (void)s;
    if (pl->n_rows == 0 || pl->len == 0) return 0;
    const bool f32 = ct == TCU_CT_F32, use32 = pl->fits32 && !g_force64;
    double v[TCU_THREADS];
    for (int64_t row = 0; row < pl->n_rows; row++) {
        int64_t off[TCU_MAX_OPS];
        offs(&pl->rows, use32, row, off);
#define LOAD(j) (f32 ? (double)tcu_load_f32(in, off[1] + (j) * pl->in_step, in_dt) \
                     : tcu_load_f64(in, off[1] + (j) * pl->in_step, in_dt))
        for (int t = 0; t < pl->group; t++) {
            v[t] = -INFINITY;
            for (int64_t j = t; j < pl->len; j += pl->group) v[t] = sm_max(v[t], LOAD(j));
        }
        const double m = emu_group_reduce(v, pl->group, true, f32);
        for (int t = 0; t < pl->group; t++) {
            v[t] = 0;
            for (int64_t j = t; j < pl->len; j += pl->group) {
                v[t] += f32 ? (double)expf((float)(LOAD(j) - m)) : exp(LOAD(j) - m);
                if (f32) v[t] = (float)v[t];
            }
        }
        const double sum = emu_group_reduce(v, pl->group, false, f32);
        const double lse = f32 ? (double)logf((float)sum) : log(sum);
        for (int64_t j = 0; j < pl->len; j++) {
            const double x = LOAD(j);
            const int64_t o = off[0] + j * pl->out_step;
            if (f32) {
                const float r = op == TORC_OP_LOG_SOFTMAX ? (float)x - (float)m - (float)lse
                                                          : expf((float)x - (float)m) / (float)sum;
                tcu_store_f32(out, o, out_dt, r);
            } else {
                tcu_store_f64(out, o, out_dt, op == TORC_OP_LOG_SOFTMAX ? x - m - lse : exp(x - m) / sum);
            }
        }
#undef LOAD
    }
    return emu_launched();
}

int tcu_launch_index(const tcu_index_args *x, int sm_count, cudaStream_t s) {
    (void)sm_count;
    (void)s;
    for (int64_t i = 0; i < x->it.numel; i++) {
        int64_t c[TCU_D], off[TCU_MAX_OPS];
        tcu_coords64(&x->it, i, c);
        for (int k = 0; k < TCU_MAX_OPS; k++) {
            off[k] = 0;
            for (int d = 0; d < TCU_D; d++) off[k] += c[d] * x->it.stride[k][d];
        }
        tcu_index_element(x, off, c[TCU_D - 2], c[TCU_D - 1]);
    }
    return emu_launched();
}

size_t tcu_masked_scratch_bytes(int64_t numel) { return (size_t)(numel > 0 ? numel : 1) * 8; }

int tcu_launch_masked(const tcu_index_args *x, void *scratch, cudaStream_t s) {
    (void)scratch;
    (void)s;
    int64_t rank = 0;
    for (int64_t i = 0; i < x->it.numel; i++) {
        int64_t off[TCU_MAX_OPS];
        tcu_offsets64(&x->it, i, off);
        if (tcu_load_bool(x->idx, off[2], x->dt_idx)) tcu_masked_element(x, off, rank++);
    }
    return emu_launched();
}

// How often the emulations below ran (cuda_sim_test, which runs the kernels' own code on the CPU
// model of sim_thread_model.h instead, leaves them at zero).
static struct { int sorted; } g_index_add;
static struct { int fwd, bwd; } g_attn;

#ifndef TORC_CUDA_SIM
// INDEX_ADD's sorted path (index_add.cu) on the CPU: the positions stably sorted by destination
// (insertion sort), then each destination's run summed in order with the kernel's rounding.
size_t tcu_index_add_scratch_bytes(const tcu_index_add_args *x) {
    return (size_t)(x->n_idx > 0 ? x->n_idx : 1) * 2 * sizeof(int64_t);
}

int tcu_launch_index_add(const tcu_index_add_args *x, void *scratch, size_t scratch_bytes, int sm_count,
                         cudaStream_t s) {
    (void)sm_count;
    (void)s;
    const int64_t n = x->n_idx;
    ck_assert_uint_ge(scratch_bytes, (size_t)n * 2 * sizeof(int64_t));
    int64_t *keys = scratch, *vals = keys + n;
    g_index_add.sorted++;
    for (int64_t j = 0; j < n; j++) {
        int64_t v = ((const int64_t *)x->idx)[j * x->idx_step];
        if (v < 0 || v >= x->limit) *x->err = TCU_KERR_INDEX, v = x->limit;
        int64_t k = j;
        for (; k > 0 && keys[k - 1] > v; k--) keys[k] = keys[k - 1], vals[k] = vals[k - 1];  // stable
        keys[k] = v, vals[k] = j;
    }
    for (int64_t k = 0; k < n; k++) {
        if (keys[k] >= x->limit || (k > 0 && keys[k - 1] == keys[k])) continue;
        for (int64_t c = 0; c < x->cols.numel; c++) {
            int64_t off[TCU_MAX_OPS];
            tcu_offsets64(&x->cols, c, off);
            const int64_t dst = off[0] + keys[k] * x->out_dim_stride;
            double a64 = tcu_load_f64(x->out, dst, x->dt_out);
            float a32 = tcu_load_f32(x->out, dst, x->dt_out);
            for (int64_t kk = k; kk < n && keys[kk] == keys[k]; kk++) {
                const int64_t so = off[1] + vals[kk] * x->src_dim_stride;
                if (x->f64) a64 = tcu_round_f64_as(a64 + tcu_load_f64(x->src, so, x->dt_src), x->dt_out);
                else a32 = tcu_round_f32_as(a32 + tcu_load_f32(x->src, so, x->dt_src), x->dt_out);
            }
            if (x->f64) tcu_store_f64(x->out, dst, x->dt_out, a64);
            else tcu_store_f32(x->out, dst, x->dt_out, a32);
        }
    }
    return emu_launched();
}

// ATTENTION(_BACKWARD) on the CPU in float, row by row: the record run.c built (strides, dims,
// scale, causal, the backward's D scratch) against the reference's double loops.
size_t tcu_attention_smem_bytes(const tcu_attn_args *a) { return a->backward ? 2 : 1; }

static float attn_ld(const tcu_attn_tensor *t, torc_dtype dt, int64_t b, int64_t h, int64_t i, int64_t e) {
    return tcu_load_f32(t->data, b * t->st[0] + h * t->st[1] + i * t->st[2] + e * t->st[3], dt);
}
static void attn_st(const tcu_attn_tensor *t, torc_dtype dt, int64_t b, int64_t h, int64_t i, int64_t e, float v) {
    tcu_store_f32(t->data, b * t->st[0] + h * t->st[1] + i * t->st[2] + e * t->st[3], dt, v);
}
static float *attn_lse(const tcu_attn_args *a, int64_t b, int64_t h, int64_t i) {
    return (float *)a->lse.data + b * a->lse.st[0] + h * a->lse.st[1] + i * a->lse.st[2];
}
static float attn_score(const tcu_attn_args *a, int64_t b, int64_t h, int64_t i, int64_t j) {
    float d = 0;
    for (int64_t e = 0; e < a->E; e++) d += attn_ld(&a->q, a->dt, b, h, i, e) * attn_ld(&a->k, a->dt, b, h, j, e);
    return d * a->scale;
}

int tcu_launch_attention(const tcu_attn_args *a, int sm_count, cudaStream_t s) {
    (void)sm_count;
    (void)s;
    ck_assert(!a->backward || a->B * a->H * a->L == 0 || a->delta);
    a->backward ? g_attn.bwd++ : g_attn.fwd++;
    float *sc = malloc(sizeof *sc * (size_t)(a->S + 1));
    ck_assert_ptr_nonnull(sc);
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t h = 0; h < a->H; h++) {
            const int64_t bh = b * a->H + h;
            if (a->backward) {
                for (int64_t j = 0; j < a->S; j++) {  // dk, dv
                    for (int64_t e = 0; e < a->E; e++) attn_st(&a->dk, a->dt, b, h, j, e, 0);
                    for (int64_t e = 0; e < a->Ev; e++) attn_st(&a->dv, a->dt, b, h, j, e, 0);
                }
                for (int64_t i = 0; i < a->L; i++) {
                    float D = 0;
                    for (int64_t e = 0; e < a->Ev; e++)
                        D += attn_ld(&a->dout, a->dt, b, h, i, e) * attn_ld(&a->o, a->dt, b, h, i, e);
                    a->delta[bh * a->L + i] = D;
                }
            }
            for (int64_t i = 0; i < a->L; i++) {
                const int64_t n = a->causal ? (i + 1 < a->S ? i + 1 : a->S) : a->S;
                float m = -INFINITY, l = 0;
                for (int64_t j = 0; j < n; j++) m = fmaxf(m, sc[j] = attn_score(a, b, h, i, j));
                if (!a->backward) {
                    for (int64_t j = 0; j < n; j++) l += sc[j] = expf(sc[j] - m);
                    for (int64_t e = 0; e < a->Ev; e++) {
                        float acc = 0;
                        for (int64_t j = 0; j < n; j++) acc += sc[j] * attn_ld(&a->v, a->dt, b, h, j, e);
                        attn_st(&a->o, a->dt, b, h, i, e, l > 0 ? acc / l : 0);
                    }
                    *attn_lse(a, b, h, i) = l > 0 ? m + logf(l) : -INFINITY;
                    continue;
                }
                const float lse = *attn_lse(a, b, h, i), D = a->delta[bh * a->L + i];
                for (int64_t e = 0; e < a->E; e++) attn_st(&a->dq, a->dt, b, h, i, e, 0);
                for (int64_t j = 0; j < n; j++) {
                    const float p = expf(sc[j] - lse);
                    float dp = 0;
                    for (int64_t e = 0; e < a->Ev; e++)
                        dp += attn_ld(&a->dout, a->dt, b, h, i, e) * attn_ld(&a->v, a->dt, b, h, j, e);
                    const float ds = p * (dp - D);
                    for (int64_t e = 0; e < a->Ev; e++)  // read-modify-write through T (the tests use f32)
                        attn_st(&a->dv, a->dt, b, h, j, e,
                                attn_ld(&a->dv, a->dt, b, h, j, e) + p * attn_ld(&a->dout, a->dt, b, h, i, e));
                    for (int64_t e = 0; e < a->E; e++) {
                        attn_st(&a->dq, a->dt, b, h, i, e,
                                attn_ld(&a->dq, a->dt, b, h, i, e) + a->scale * ds * attn_ld(&a->k, a->dt, b, h, j, e));
                        attn_st(&a->dk, a->dt, b, h, j, e,
                                attn_ld(&a->dk, a->dt, b, h, j, e) + a->scale * ds * attn_ld(&a->q, a->dt, b, h, i, e));
                    }
                }
            }
        }
    free(sc);
    return emu_launched();
}
#endif  // TORC_CUDA_SIM

int tcu_launch_mm(const tcu_mm_args *m, int sm_count, cudaStream_t s) {
    (void)sm_count;
    (void)s;
    g_paths.mm++;
    for (int64_t i = 0; i < m->it.numel; i++) {
        int64_t off[TCU_MAX_OPS];
        tcu_offsets64(&m->it, i, off);
        tcu_mm_element(m, off);
    }
    return emu_launched();
}

int tcu_launch_smm(const tcu_smm_args *m, int sm_count, cudaStream_t s) {
    (void)sm_count;
    (void)s;
    g_paths.smm++;
    if (m->amax) *m->amax = 0;
    for (int64_t i = 0; i < m->M; i++)
        for (int64_t j = 0; j < m->N; j++) tcu_smm_element(m, i, j);
    return emu_launched();
}

// ---- an emulated cuBLASLt: the real library's host-side descriptors (they need no GPU), with
// the heuristic and the matmul emulated as strictly as the real ones refuse ----
// The heuristic answers no algorithm for what cuBLASLt has no fp8 kernel for (its "FP8 data
// types" table: e5m2 x e5m2, an e5m2 D from e4m3 x e4m3, an fp8 D without a 16-bit C, layouts
// other than TN) and for empty matrices; the algorithm it returns relies on the alignments the
// preference declared (256 bytes unless told) and on the epilogue the descriptor had (D scale,
// amax), and the emulated cublasLtMatmul refuses pointers or epilogues it was not chosen for.
static struct { int heuristic, refused, bad_calls; } g_lt;   // heuristic calls, no-kernel answers, misuses

enum { LT_ALGO_MAGIC = 0x5437 };
typedef struct lt_desc_view {
    cublasOperation_t ta, tb;
    const float *sa, *sb, *sd;
    float *amax;
} lt_desc_view;

static void lt_read_desc(cublasLtMatmulDesc_t op, lt_desc_view *v) {
    size_t w;
    memset(v, 0, sizeof *v);
    cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &v->ta, sizeof v->ta, &w);
    cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &v->tb, sizeof v->tb, &w);
    cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &v->sa, sizeof v->sa, &w);
    cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &v->sb, sizeof v->sb, &w);
    cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &v->sd, sizeof v->sd, &w);
    cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &v->amax, sizeof v->amax, &w);
}

typedef struct lt_layout_view {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
} lt_layout_view;

static void lt_read_layout(cublasLtMatrixLayout_t l, lt_layout_view *v) {
    size_t w;
    int32_t t = 0;
    cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_TYPE, &t, sizeof t, &w);
    v->type = (cudaDataType)t;
    cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &v->rows, sizeof v->rows, &w);
    cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_COLS, &v->cols, sizeof v->cols, &w);
    cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &v->ld, sizeof v->ld, &w);
}

static bool lt_is_f8(cudaDataType t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }

static torc_dtype lt_torc_type(cudaDataType t) {
    switch (t) {
    case CUDA_R_8F_E4M3: return TORC_DTYPE_F8_E4M3FN;
    case CUDA_R_8F_E5M2: return TORC_DTYPE_F8_E5M2;
    case CUDA_R_16BF: return TORC_DTYPE_BF16;
    case CUDA_R_16F: return TORC_DTYPE_F16;
    default: return TORC_DTYPE_F32;
    }
}

// cuBLASLt's fp8 table: does a kernel exist for these types?
static bool lt_types_ok(cudaDataType a, cudaDataType b, cudaDataType c, cudaDataType d) {
    if (!lt_is_f8(a) || !lt_is_f8(b) || (a == CUDA_R_8F_E5M2 && b == CUDA_R_8F_E5M2)) return false;
    if (d == CUDA_R_32F) return c == CUDA_R_32F;
    if (c != CUDA_R_16BF && c != CUDA_R_16F) return false;
    if (d == CUDA_R_16BF || d == CUDA_R_16F) return d == c;
    if (d == CUDA_R_8F_E5M2) return a == CUDA_R_8F_E5M2 || b == CUDA_R_8F_E5M2;
    return d == CUDA_R_8F_E4M3;
}

static cublasStatus_t emu_lt_create(cublasLtHandle_t *h) {
    *h = (cublasLtHandle_t)malloc(1);
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

static cublasStatus_t emu_lt_destroy(cublasLtHandle_t h) {
    free((void *)h);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t emu_lt_heuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t A,
                                       cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                                       cublasLtMatmulPreference_t pref, int requested,
                                       cublasLtMatmulHeuristicResult_t *res, int *found) {
    (void)h;
    g_lt.heuristic++;
    *found = 0;
    if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
    lt_desc_view dv;
    lt_layout_view la, lb, lc, ld;
    lt_read_desc(op, &dv);
    lt_read_layout(A, &la), lt_read_layout(B, &lb), lt_read_layout(C, &lc), lt_read_layout(D, &ld);
    if (!la.rows || !la.cols || !lb.rows || !lb.cols || !ld.rows || !ld.cols) return CUBLAS_STATUS_INVALID_VALUE;
    uint32_t al[4] = {256, 256, 256, 256};
    size_t w;
    for (int i = 0; i < 4; i++)
        cublasLtMatmulPreferenceGetAttribute(pref, (cublasLtMatmulPreferenceAttributes_t)(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i),
                                             &al[i], sizeof al[i], &w);
    const bool tn = dv.ta == CUBLAS_OP_T && dv.tb == CUBLAS_OP_N;
    bool aligned = true;
    for (int i = 0; i < 4; i++) aligned = aligned && al[i] >= 16;   // fp8 kernels need 16 bytes at least
    if (!tn || !aligned || !lt_types_ok(la.type, lb.type, lc.type, ld.type)) {
        g_lt.refused++;
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    memset(res, 0, sizeof *res);
    res->algo.data[0] = LT_ALGO_MAGIC;
    for (int i = 0; i < 4; i++) res->algo.data[1 + i] = al[i];    // what the algorithm may rely on
    res->algo.data[5] = dv.sd != NULL;
    res->algo.data[6] = dv.amax != NULL;
    res->state = CUBLAS_STATUS_SUCCESS;
    *found = 1;
    return CUBLAS_STATUS_SUCCESS;
}

// D' = scale_d * (scale_a * scale_b * op(A') op(B')), op(A') = T (A' stored k x mm), op(B') = N
// (B' stored k x nn), D' column-major; amax before scale_d; fp8 results saturate.
static cublasStatus_t emu_lt_matmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha, const void *A,
                                    cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc,
                                    const void *beta, const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                                    cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo, void *ws,
                                    size_t ws_size, cudaStream_t stream) {
    (void)h, (void)ws, (void)ws_size, (void)stream;
    lt_desc_view dv;
    lt_layout_view la, lb, ld;
    lt_read_desc(op, &dv);
    lt_read_layout(Adesc, &la), lt_read_layout(Bdesc, &lb), lt_read_layout(Ddesc, &ld);
    (void)Cdesc;
    if (!algo || algo->data[0] != LT_ALGO_MAGIC || *(const float *)alpha != 1.0f || *(const float *)beta != 0.0f) {
        g_lt.bad_calls++;
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const void *const ptrs[4] = {A, B, C, D};
    for (int i = 0; i < 4; i++)
        if ((uintptr_t)ptrs[i] % algo->data[1 + i]) {   // chosen for a stricter alignment
            g_lt.refused++;
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
    if (algo->data[5] != (dv.sd != NULL) || algo->data[6] != (dv.amax != NULL)) {  // another epilogue
        g_lt.refused++;
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    g_paths.lt++;
    const torc_dtype ta = lt_torc_type(la.type), tb = lt_torc_type(lb.type), td = lt_torc_type(ld.type);
    const double scale = (double)*dv.sa * (double)*dv.sb;
    double amax = 0;
    for (uint64_t i = 0; i < ld.rows; i++)
        for (uint64_t j = 0; j < ld.cols; j++) {
            double sum = 0;
            for (uint64_t k = 0; k < la.rows; k++)
                sum += tcu_load_f64(A, (int64_t)(k + i * (uint64_t)la.ld), ta) * tcu_load_f64(B, (int64_t)(k + j * (uint64_t)lb.ld), tb);
            const double r = sum * scale;
            amax = isnan(r) || isnan(amax) ? NAN : (fabs(r) > amax ? fabs(r) : amax);
            const int64_t o = (int64_t)(i + j * (uint64_t)ld.ld);
            if (tcu_is_fp8(td)) {
                const float v = (float)(r * (dv.sd ? (double)*dv.sd : 1.0));
                ((uint8_t *)D)[o] = td == TORC_DTYPE_F8_E4M3FN ? torc_f32_to_f8e4m3fn_sat(v) : torc_f32_to_f8e5m2_sat(v);
            } else {
                tcu_store_f64(D, o, td, r);
            }
        }
    if (dv.amax) *dv.amax = (float)amax;
    return CUBLAS_STATUS_SUCCESS;
}

static const tcu_lt_api EMU_LT = {emu_lt_create, emu_lt_destroy, cublasLtMatmulDescCreate, cublasLtMatmulDescDestroy,
                                  cublasLtMatmulDescSetAttribute, cublasLtMatrixLayoutCreate, cublasLtMatrixLayoutDestroy,
                                  cublasLtMatmulPreferenceCreate, cublasLtMatmulPreferenceSetAttribute,
                                  cublasLtMatmulPreferenceDestroy, emu_lt_heuristic, emu_lt_matmul};

// lt_matmul.c gets the emulated cuBLASLt: the test links with -Wl,--wrap=tcu_lt_api_get, and
// the real loader (blas_api.c) stays reachable as __real_tcu_lt_api_get.
const tcu_lt_api *__wrap_tcu_lt_api_get(void);
const tcu_lt_api *__real_tcu_lt_api_get(void);
const tcu_lt_api *__wrap_tcu_lt_api_get(void) { return &EMU_LT; }

// What cuBLAS computes for a plan (column-major, op flags, leading dims, strided batches).
static void emu_blas(const torc_op *op, const tcu_gemm_plan *pl) {
    const torc_operand *pa = pl->swap ? &op->in[1] : &op->in[0], *pb = pl->swap ? &op->in[0] : &op->in[1];
    const torc_dtype dt = op->in[0].dtype, odt = op->out[0].dtype;
    for (int64_t ob = 0; ob < pl->outer.numel; ob++) {
        int64_t off[TCU_MAX_OPS];
        tcu_offsets64(&pl->outer, ob, off);
        for (int64_t bi = 0; bi < pl->batch; bi++) {
            const int64_t A = off[1] + bi * pl->stride_a, B = off[2] + bi * pl->stride_b, C = off[0] + bi * pl->stride_c;
            for (int64_t i = 0; i < pl->m; i++)
                for (int64_t j = 0; j < pl->n; j++) {
                    double sum = 0;
                    for (int64_t p = 0; p < pl->k; p++) {
                        const int64_t ai = pl->trans_a ? p + i * pl->lda : i + p * pl->lda;
                        const int64_t bj = pl->trans_b ? j + p * pl->ldb : p + j * pl->ldb;
                        sum += tcu_load_f64(pa->data, A + ai, dt) * tcu_load_f64(pb->data, B + bj, dt);
                    }
                    tcu_store_f64(op->out[0].data, C + i + j * pl->ldc, odt, sum);
                }
        }
    }
}

int tcu_matmul(tcu_device *d, const torc_op *op) {  // gemm.c's decisions, cuBLAS emulated
    const torc_operand *a = &op->in[0], *b = &op->in[1], *c = &op->out[0];
    int64_t numel = 1;
    for (int i = 0; i < c->ndim; i++) numel *= c->shape[i];
    if (numel == 0) return TORC_OK;
    if (a->shape[c->ndim - 1] == 0) return tcu_fill_zero(d, c);
    if (tcu_gemm_blas_dtypes(a->dtype, b->dtype, c->dtype)) {
        tcu_gemm_plan pl;
        tcu_gemm_plan_build(&pl, a, b, c);
        if (pl.use_blas) {
            g_paths.blas++;
            emu_blas(op, &pl);
            return TORC_OK;
        }
    }
    tcu_mm_args m;
    if (!tcu_mm_args_build(&m, a, b, c)) return tcu_error(TORC_ERR_INVALID_ARG, "matmul: bad operands");
    return tcu_launch_mm(&m, d->sm_count, d->stream);
}

void tcu_gemm_release(tcu_device *d) { (void)d; }

// ---- the reference backend and a fake device ----
static const torc_backend_vtable *ref;
static void *ref_ctx, *v_ctx;  // the reference's context; the cuda plugin's, in the tests that load it
static void *ref_lib;
static int g_kerr;
static tcu_device g_dev;

static void *open_plugin(const char *name) {
    const char *dir = getenv("TORC_BUILD_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/lib/torc/libtorc_%s.so", dir ? dir : ".", name);
    // NODELETE: the CUDA plugin pulls in libstdc++ (cudart, cuBLAS); unloading it at dlclose
    // would strand libstdc++'s emergency exception pool, which LeakSanitizer then reports.
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    return h;
}

static void setup_ref(void) {
    ref_lib = open_plugin("reference");
    ck_assert_ptr_nonnull(ref_lib);
    torc_backend_entry_fn entry = (torc_backend_entry_fn)dlsym(ref_lib, TORC_BACKEND_ENTRY_SYMBOL);
    ck_assert_ptr_nonnull(entry);
    ref = entry(TORC_BACKEND_ABI_VERSION);
    ck_assert_ptr_nonnull(ref);
    ck_assert_int_eq(ref->init(NULL, &ref_ctx), TORC_OK);
    memset(&g_dev, 0, sizeof g_dev);
    g_dev.sm_count = 2;  // small, so that long reductions take the split path
    g_dev.cc_major = 9;
    g_dev.err_word = &g_kerr;
    pthread_mutex_init(&g_dev.lib_mu, NULL);
}

static void teardown_ref(void) {
    tcu_lt_release(&g_dev);
    pthread_mutex_destroy(&g_dev.lib_mu);
    ref->shutdown(ref_ctx);
    dlclose(ref_lib);
}

// Runs op on the emulated backend (twice: 32- and 64-bit index paths) and on the reference,
// every time from identical copies of out. Inputs are never written. Returns false on a
// mismatch; both sides refusing (or failing with the same status) counts as agreement.
static bool check_op(torc_op *op, tview *out, double rscale) {
    char why[160];
    const bool ours = tcu_supports_op(op, g_dev.cc_major * 10 + g_dev.cc_minor, why, sizeof why);
    const bool theirs = ref->supports(ref_ctx, 0, op);
    if (ours != theirs) {
        fprintf(stderr, "%s: supports() differs: cuda %d (%s), reference %d\n", g_case, ours, ours ? "" : why, theirs);
        return false;
    }
    if (!ours) return true;
    tview want = tv_clone(out);
    op->out[0].data = want.op.data;
    const int rs = ref->run(ref_ctx, 0, op);
    bool ok = true;
    for (int pass = 0; pass < 2 && ok; pass++) {
        tview got = tv_clone(out);
        op->out[0].data = got.op.data;
        g_force64 = pass == 1;
        g_kerr = 0;
        const int cs = tcu_run_op(&g_dev, op);
        if (cs == TORC_OK && g_kerr) {
            // an index error a kernel reported through the error word; the reference fails
            // synchronously (the device reports it at the next synchronize)
            ok = rs == TORC_ERR_INDEX;
            if (!ok) fprintf(stderr, "%s: kernel error %d but reference status %d\n", g_case, g_kerr, rs);
        } else if (cs != rs) {
            fprintf(stderr, "%s: status cuda %d (%s), reference %d (%s)\n", g_case, cs, cs ? g_err : "",
                    rs, rs ? ref->last_error(ref_ctx) : "");
            ok = false;
        } else if (cs == TORC_OK) {
            ok = tv_match(&got, &want, rscale);
        } else if (strncmp(ref->last_error(ref_ctx), "reference backend:", 18) != 0 &&
                   strcmp(g_err, ref->last_error(ref_ctx)) != 0) {  // PyTorch's texts must be the same
            fprintf(stderr, "%s: error text cuda '%s', reference '%s'\n", g_case, g_err, ref->last_error(ref_ctx));
            ok = false;
        }
        tv_free(&got);
    }
    g_force64 = false;
    op->out[0].data = out->op.data;
    tv_free(&want);
    return ok;
}

// ---- the emulated backend against the reference ----
// max_dim / min_dim: values (out) and indices (out[1], its view in ins after the inputs'), each side
// writing into its own copies of both, through both index widths.
static bool check_pair(torc_op *op, tview *const *ins, tview *out) {
    tview *idx = ins[op->n_in];
    char why[160];
    const bool ours = tcu_supports_op(op, g_dev.cc_major * 10 + g_dev.cc_minor, why, sizeof why);
    if (ours != ref->supports(ref_ctx, 0, op)) {
        fprintf(stderr, "%s: supports() differs: cuda %d (%s)\n", g_case, ours, ours ? "" : why);
        return false;
    }
    if (!ours) return true;
    tview wv = tv_clone(out), wi = tv_clone(idx);
    op->out[0].data = wv.op.data, op->out[1].data = wi.op.data;
    const int rs = ref->run(ref_ctx, 0, op);
    bool ok = true;
    for (int pass = 0; pass < 2 && ok; pass++) {
        tview gv = tv_clone(out), gi = tv_clone(idx);
        op->out[0].data = gv.op.data, op->out[1].data = gi.op.data;
        g_force64 = pass == 1;
        const int cs = tcu_run_op(&g_dev, op);
        if (cs != rs) {
            fprintf(stderr, "%s: status cuda %d (%s), reference %d (%s)\n", g_case, cs, cs ? g_err : "", rs,
                    rs ? ref->last_error(ref_ctx) : "");
            ok = false;
        } else if (cs == TORC_OK) {
            ok = tv_match(&gv, &wv, 0.0) && tv_match(&gi, &wi, 0.0);
        } else if (strcmp(g_err, ref->last_error(ref_ctx)) != 0) {
            fprintf(stderr, "%s: error text cuda '%s', reference '%s'\n", g_case, g_err, ref->last_error(ref_ctx));
            ok = false;
        }
        tv_free(&gv), tv_free(&gi);
    }
    g_force64 = false;
    op->out[0].data = out->op.data, op->out[1].data = idx->op.data;
    tv_free(&wv), tv_free(&wi);
    return ok;
}

static bool check_emulated(torc_op *op, tview *const *ins, tview *out, double rscale) {
    if (op->code == TORC_OP_MAX_DIM || op->code == TORC_OP_MIN_DIM) return check_pair(op, ins, out);
    if (op->n_out < 2) return check_op(op, out, rscale);  // host memory: the views are used where they are
    // amax (scaled_mm's out[1]): each side writes its own float; they must agree
    void *amax = op->out[1].data;
    float want = -1, got = -2;
    op->out[1].data = &want;
    tview w = tv_clone(out);
    op->out[0].data = w.op.data;
    const int rs = ref->run(ref_ctx, 0, op);
    op->out[1].data = &got;
    op->out[0].data = out->op.data;
    bool ok = check_op(op, out, rscale);  // outputs (amax written again, into got)
    if (rs == TORC_OK && !(isnan(want) ? isnan(got) : fabsf(got - want) <= 1e-5f * fabsf(want) + 1e-6f)) {
        fprintf(stderr, "%s: amax %g, reference %g\n", g_case, got, want);
        ok = false;
    }
    op->out[1].data = amax;
    tv_free(&w);
    return ok;
}

// run.c's layer norm path (supports, argument mapping, the no-rows zeros) over the emulated
// kernels, against the reference: forward, then backward from the reference's mean and rstd;
// a strided x is refused (the core hands the device contiguous copies).
enum { LN_M = 5, LN_N = 300 };
typedef struct ln_mem {  // room for f64 (any dtype's elements at the start)
    double x[LN_M * LN_N], w[LN_N], b[LN_N], y[LN_M * LN_N], m[LN_M], r[LN_M];
    double dy[LN_M * LN_N], dx[LN_M * LN_N], dw[LN_N], db[LN_N];
} ln_mem;

// Runs forward (side 0: the reference, 1: run.c) and then backward from ref_mr's mean and rstd
// (NULL: this side's own, which then become ref_mr).
static void ln_side(int side, torc_dtype xd, torc_dtype pd, int64_t M, int64_t N, ln_mem *k, ln_mem *ref_mr) {
    for (int64_t i = 0; i < M * N; i++) {
        tcu_store_f64(k->x, i, xd, sin((double)i) * 3 + 1);
        tcu_store_f64(k->dy, i, xd, cos((double)i * 0.3));
    }
    for (int64_t i = 0; i < N; i++) {
        tcu_store_f64(k->w, i, pd, 1 + 0.01 * (double)i);
        tcu_store_f64(k->b, i, pd, 0.1 * (double)(i % 7));
        tcu_store_f64(k->dw, i, pd, 7.0);  // stale values: with no rows they must become zeros
        tcu_store_f64(k->db, i, pd, 7.0);
    }
    const torc_operand x = {k->x, xd, 2, {M, N}, {N, 1}}, w = {k->w, pd, 1, {N}, {1}}, b = {k->b, pd, 1, {N}, {1}};
    const torc_operand m = {k->m, pd, 2, {M, 1}, {1, 1}}, r = {k->r, pd, 2, {M, 1}, {1, 1}};
    torc_op op = {.struct_size = sizeof op, .code = TORC_OP_LAYER_NORM, .n_in = 3, .n_out = 3};
    op.in[0] = x, op.in[1] = w, op.in[2] = b, op.out[1] = m, op.out[2] = r;
    op.out[0] = (torc_operand){k->y, xd, 2, {M, N}, {N, 1}};
    op.params.norm.eps = 1e-5, op.params.norm.axis = 1, op.params.norm.affine = 3;
    char why[160];
    ck_assert_msg(tcu_supports_op(&op, 90, why, sizeof why), "%s", why);
    ck_assert_int_eq(side ? tcu_run_op(&g_dev, &op) : ref->run(ref_ctx, 0, &op), TORC_OK);
    torc_op t = op;
    t.in[0].stride[0] = N + 1;
    ck_assert(M < 2 || !tcu_supports_op(&t, 90, why, sizeof why));
    if (ref_mr) {
        memcpy(k->m, ref_mr->m, sizeof k->m);
        memcpy(k->r, ref_mr->r, sizeof k->r);
    }
    torc_op bw = {.struct_size = sizeof bw, .code = TORC_OP_LAYER_NORM_BACKWARD, .n_in = 5, .n_out = 3};
    bw.in[0] = (torc_operand){k->dy, xd, 2, {M, N}, {N, 1}}, bw.in[1] = x, bw.in[2] = m, bw.in[3] = r, bw.in[4] = w;
    bw.out[0] = (torc_operand){k->dx, xd, 2, {M, N}, {N, 1}};
    bw.out[1] = (torc_operand){k->dw, pd, 1, {N}, {1}}, bw.out[2] = (torc_operand){k->db, pd, 1, {N}, {1}};
    bw.params = op.params;
    ck_assert_msg(tcu_supports_op(&bw, 90, why, sizeof why), "%s", why);
    ck_assert_int_eq(side ? tcu_run_op(&g_dev, &bw) : ref->run(ref_ctx, 0, &bw), TORC_OK);
}

static void ln_match(const char *what, const void *got, const void *want, torc_dtype dt, int64_t n, double tol) {
    for (int64_t i = 0; i < n; i++) {
        const double g = tcu_load_f64(got, i, dt), w = tcu_load_f64(want, i, dt);
        ck_assert_msg(isnan(w) ? isnan(g) : fabs(g - w) <= tol * (1 + fabs(w)), "%s: %s[%lld] %g, reference %g",
                      g_case, what, (long long)i, g, w);
    }
}

START_TEST(layer_norm_runs_through_run_c) {
    const torc_dtype dts[4][2] = {{TORC_DTYPE_F32, TORC_DTYPE_F32}, {TORC_DTYPE_BF16, TORC_DTYPE_BF16},
                                  {TORC_DTYPE_F16, TORC_DTYPE_F32},  // x, params (mixed: f32 stats too)
                                  {TORC_DTYPE_F64, TORC_DTYPE_F64}};
    const int64_t shapes[3][2] = {{3, 37}, {0, 4}, {LN_M, LN_N}};
    static ln_mem want, got;
    for (int di = 0; di < 4; di++)
        for (int si = 0; si < 3; si++) {
            const torc_dtype xd = dts[di][0], pd = dts[di][1];
            const int64_t M = shapes[si][0], N = shapes[si][1];
            const double tol = xd == TORC_DTYPE_F64 ? 1e-12 : xd == TORC_DTYPE_F32 ? 1e-4 : 3e-2;
            snprintf(g_case, sizeof g_case, "layer_norm dtype %d params %d shape %d", xd, pd, si);
            memset(&want, 0, sizeof want);
            memset(&got, 0, sizeof got);
            ln_side(0, xd, pd, M, N, &want, NULL);
            ln_side(1, xd, pd, M, N, &got, &want);
            ln_match("y", got.y, want.y, xd, M * N, tol);
            ln_match("dx", got.dx, want.dx, xd, M * N, tol);
            ln_match("dweight", got.dw, want.dw, pd, N, tol);
            ln_match("dbias", got.db, want.db, pd, N, tol);
            // mean and rstd: run.c's forward again, into got's m and r
            ln_mem own;
            memset(&own, 0, sizeof own);
            ln_side(1, xd, pd, M, N, &own, NULL);
            ln_match("mean", own.m, want.m, pd, M, tol);
            ln_match("rstd", own.r, want.r, pd, M, tol);
        }
}
END_TEST

START_TEST(unary_ops_match_reference) { ck_assert_int_eq(cases_unary(check_emulated), 0); }
END_TEST

START_TEST(binary_ops_match_reference) { ck_assert_int_eq(cases_binary(check_emulated), 0); }
END_TEST

START_TEST(contiguous_float_ops_take_the_vector_path) {
    const int64_t shape[1] = {1003};
    const torc_dtype dts[3] = {TORC_DTYPE_F32, TORC_DTYPE_F16, TORC_DTYPE_BF16};
    for (int i = 0; i < 3; i++) {
        tview a = tv_new(dts[i], 1, shape, L_CONTIG, -2, 2), b = tv_new(dts[i], 1, shape, L_CONTIG, -2, 2);
        tview out = tv_new(dts[i], 1, shape, L_CONTIG, 0, 0);
        torc_op op;
        memset(&op, 0, sizeof op);
        op.code = TORC_OP_MUL;
        op.n_out = 1;
        op.n_in = 2;
        op.in[0] = a.op;
        op.in[1] = b.op;
        op.out[0] = out.op;
        g_paths.fast = 0;
        snprintf(g_case, sizeof g_case, "vector mul dtype %d", dts[i]);
        ck_assert(check_op(&op, &out, 1.0));
        ck_assert_int_eq(g_paths.fast, 2);   // both passes
        // a broadcast scalar operand stays on the vector path
        op.in[1].stride[0] = 0;
        g_paths.fast = 0;
        ck_assert(check_op(&op, &out, 1.0));
        ck_assert_int_eq(g_paths.fast, 2);
        tv_free(&a);
        tv_free(&b);
        tv_free(&out);
    }
}
END_TEST

START_TEST(where_copy_fill_match_reference) { ck_assert_int_eq(cases_where_copy_fill(check_emulated), 0); }
END_TEST
START_TEST(fused_ops_match_reference) { ck_assert_int_eq(cases_fused(check_emulated), 0); }
END_TEST

START_TEST(ranges_and_rng_match_reference) { ck_assert_int_eq(cases_ranges_rng(check_emulated), 0); }
END_TEST

START_TEST(reductions_match_reference) {
    g_paths.split = 0;
    ck_assert_int_eq(cases_reductions(check_emulated), 0);
    ck_assert_int_eq(cases_max_dim(check_emulated), 0);
    ck_assert_int_gt(g_paths.split, 0);  // long reductions took the two-pass path
}
END_TEST

START_TEST(softmax_matches_reference) { ck_assert_int_eq(cases_softmax(check_emulated), 0); }
END_TEST

START_TEST(matmul_matches_reference) {
    const int blas_before = g_paths.blas, mm_before = g_paths.mm;
    ck_assert_int_eq(cases_matmul(check_emulated), 0);
    ck_assert_int_gt(g_paths.blas, blas_before);  // cuBLAS plans took most float cases
    ck_assert_int_gt(g_paths.mm, mm_before);      // and the generic kernel the rest
}
END_TEST

START_TEST(index_ops_match_reference) {
    g_index_add.sorted = 0;
    ck_assert_int_eq(cases_index(check_emulated), 0);
#ifndef TORC_CUDA_SIM
    ck_assert_int_gt(g_index_add.sorted, 0);  // floating index_add took the sorted, in-order path
#endif
}
END_TEST

// Floating index_add is the serial sum in index order, bit for bit: many duplicates and values
// whose float sum depends on the order (1e8 and small ones), the reference as the oracle.
START_TEST(index_add_sums_in_index_order) {
    const int64_t V = 5, C = 3, N = 64;
    const torc_dtype dts[] = {TORC_DTYPE_F32, TORC_DTYPE_BF16, TORC_DTYPE_F64};
    for (int di = 0; di < 3; di++) {
        const int64_t osh[2] = {V, C}, ssh[2] = {N, C};
        tview out = tv_new(dts[di], 2, osh, L_CONTIG, -1, 1), src = tv_new(dts[di], 2, ssh, L_TRANS, -1, 1);
        tview idx = tv_new(TORC_DTYPE_I64, 1, &N, L_STEP, 0, 0);
        for (int64_t j = 0; j < N; j++) {
            tcu_store_i64(idx.op.data, j * idx.op.stride[0], TORC_DTYPE_I64, (j * 7) % 3);  // rows 0..2 only
            for (int64_t c = 0; c < C; c++)
                tcu_store_f64(src.op.data, j * src.op.stride[0] + c * src.op.stride[1], dts[di],
                              j % 5 == 0 ? 1e8 * (j % 2 ? -1 : 1) : 0.37 * (double)(j % 11) + 0.01 * c);
        }
        torc_op op;
        memset(&op, 0, sizeof op);
        op.code = TORC_OP_INDEX_ADD;
        op.n_in = 2, op.n_out = 1;
        op.in[0] = src.op, op.in[1] = idx.op, op.out[0] = out.op;
        snprintf(g_case, sizeof g_case, "index_add in order dtype %d", dts[di]);
        ck_assert(check_emulated(&op, (tview *[]){&src, &idx}, &out, 0.0));  // rscale 0: exact
        tv_free(&out), tv_free(&src), tv_free(&idx);
    }
}
END_TEST

// p (inside from's storage) moved to the same place in to's.
static void *tv_rebase(const tview *from, const tview *to, const void *p) {
    return to->mem + ((const char *)p - from->mem);
}

// run.c's attention path (supports, the record, the backward's D scratch) over a float emulation
// of the kernels, against the reference: forward, then backward from the reference's o and lse.
START_TEST(attention_runs_through_run_c) {
    static const attn_cfg extra[] = {  // the widest heads: 128 both ways, 256 forward only
        {TORC_DTYPE_F32, 1, 2, 70, 70, 128, 128, 1, ATTN_PACKED},
        {TORC_DTYPE_BF16, 1, 1, 40, 40, 256, 256, 0, ATTN_STRIDED},
    };
    g_attn.fwd = g_attn.bwd = 0;
    for (int ci = 0; ci < N_ATTN_CFGS + 2; ci++) {
        const attn_cfg *c = ci < N_ATTN_CFGS ? &ATTN_CFGS[ci] : &extra[ci - N_ATTN_CFGS];
        attn_set s;
        attn_set_new(&s, c);
        snprintf(g_case, sizeof g_case, "attention cfg %d dtype %d %s causal %d", ci, c->dt, ATTN_LAYOUTS[c->layout],
                 c->causal);
        char why[256];
        ck_assert_msg(tcu_supports_op(&s.fwd, 90, why, sizeof why), "%s: %s", g_case, why);
        const bool bwd = c->E <= TCU_ATTN_MAX_E_BWD && c->Ev <= TCU_ATTN_MAX_E_BWD;
        ck_assert_msg(tcu_supports_op(&s.bwd, 90, why, sizeof why) == bwd, "%s: %s", g_case, why);
        ck_assert_int_eq(ref->run(ref_ctx, 0, &s.fwd), TORC_OK);
        const int fo[2] = {ATTN_O, ATTN_LSE}, bo[3] = {ATTN_DQ, ATTN_DK, ATTN_DV};
        tview got[3];
        torc_op op = s.fwd;
        for (int k = 0; k < 2; k++) {
            got[k] = tv_zeros_like(&s.mem[fo[k]]);
            op.out[k].data = tv_rebase(&s.mem[fo[k]], &got[k], op.out[k].data);
        }
        ck_assert_msg(tcu_run_op(&g_dev, &op) == TORC_OK, "%s: %s", g_case, g_err);
        for (int k = 0; k < 2; k++) {
            ck_assert(attn_close(&got[k], &s.mem[fo[k]], attn_tol(c->dt), k ? "lse" : "o"));
            tv_free(&got[k]);
        }
        if (!bwd) {
            attn_set_free(&s);
            continue;
        }
        ck_assert_int_eq(ref->run(ref_ctx, 0, &s.bwd), TORC_OK);
        op = s.bwd;
        for (int k = 0; k < 3; k++) {
            got[k] = tv_zeros_like(&s.mem[bo[k]]);
            op.out[k].data = tv_rebase(&s.mem[bo[k]], &got[k], op.out[k].data);
        }
        ck_assert_msg(tcu_run_op(&g_dev, &op) == TORC_OK, "%s: %s", g_case, g_err);
        for (int k = 0; k < 3; k++) {
            ck_assert(attn_close(&got[k], &s.mem[bo[k]], 4 * attn_tol(c->dt), k == 0 ? "dq" : k == 1 ? "dk" : "dv"));
            tv_free(&got[k]);
        }
        attn_set_free(&s);
    }
#ifndef TORC_CUDA_SIM
    ck_assert_int_eq(g_attn.fwd, N_ATTN_CFGS + 2);
    ck_assert_int_eq(g_attn.bwd, N_ATTN_CFGS + 1);
#endif
}
END_TEST

// What the kernels do not take is declined with a reason: f64 (the reference's), head dims past
// the registers' room (256 forward, 128 backward), lse of another dtype, shapes that do not fit.
START_TEST(attention_supports_what_the_kernels_take) {
    char why[256] = "";
    attn_cfg c = {TORC_DTYPE_F32, 1, 2, 8, 8, 256, 256, 1, ATTN_CONTIG};
    attn_set s;
    attn_set_new(&s, &c);
    ck_assert_msg(tcu_supports_op(&s.fwd, 80, why, sizeof why), "%s", why);
    ck_assert(!tcu_supports_op(&s.bwd, 80, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "head dims up to 128"));
    s.fwd.in[0].shape[3] = s.fwd.in[1].shape[3] = 257;
    ck_assert(!tcu_supports_op(&s.fwd, 80, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "head dims up to 256"));
    attn_set_free(&s);
    c.E = c.Ev = 64;
    attn_set_new(&s, &c);
    ck_assert(tcu_supports_op(&s.bwd, 80, why, sizeof why));
    torc_op bad = s.fwd;
    bad.out[1].dtype = TORC_DTYPE_F16;  // lse must be f32
    ck_assert(!tcu_supports_op(&bad, 80, why, sizeof why));
    bad = s.fwd;
    bad.in[1].shape[3] = 63;  // k's E differs from q's
    ck_assert(!tcu_supports_op(&bad, 80, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "do not fit"));
    bad = s.bwd;
    bad.out[1].shape[2] = 9;  // dk not k's shape
    ck_assert(!tcu_supports_op(&bad, 80, why, sizeof why));
    bad = s.fwd;
    bad.n_out = 1;
    ck_assert(!tcu_supports_op(&bad, 80, why, sizeof why));
    attn_set_free(&s);
    c.dt = TORC_DTYPE_F64;
    attn_set_new(&s, &c);
    ck_assert(!tcu_supports_op(&s.fwd, 80, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "float32, float16 or bfloat16"));
    attn_set_free(&s);
}
END_TEST
END_TEST

START_TEST(scaled_mm_matches_reference) {
    g_dev.cc_major = 9;  // Hopper: cuBLASLt where the layout allows, the generic kernel elsewhere
    g_dev.cc_minor = 0;
    const int lt_before = g_paths.lt, smm_before = g_paths.smm;
    ck_assert_int_eq(cases_scaled_mm(check_emulated), 0);
    ck_assert_int_gt(g_paths.lt, lt_before);
    ck_assert_int_gt(g_paths.smm, smm_before);
    // Ampere has no fp8 tensor cores: a clear refusal, as PyTorch's
    g_dev.cc_major = 8;
    const int64_t s2[2] = {16, 16}, one[1] = {1};
    tview a = tv_new(TORC_DTYPE_F8_E4M3FN, 2, s2, L_CONTIG, -1, 1), b = tv_new(TORC_DTYPE_F8_E4M3FN, 2, s2, L_TRANS, -1, 1);
    tview sc = tv_new(TORC_DTYPE_F32, 1, one, L_CONTIG, 1, 1), out = tv_new(TORC_DTYPE_BF16, 2, s2, L_CONTIG, 0, 0);
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_SCALED_MM;
    op.n_out = 1;
    op.n_in = 4;
    op.in[0] = a.op, op.in[1] = b.op, op.in[2] = sc.op, op.in[3] = sc.op, op.out[0] = out.op;
    ck_assert_int_eq(tcu_run_op(&g_dev, &op), TORC_ERR_NOT_SUPPORTED);
    ck_assert_ptr_nonnull(strstr(g_err, "compute capability 8.9"));
    g_dev.cc_major = 9;
    tv_free(&a);
    tv_free(&b);
    tv_free(&sc);
    tv_free(&out);
}
END_TEST

// ADAM_STEP_LIST through run.c (batches of TCU_ADAM_LIST_MAX a launch) against the reference
// running each element, bit for bit, for each dtype and flag set, each parameter at its own step;
// a list with one strided element is refused whole, naming why.
START_TEST(adam_step_list_matches_reference_bit_for_bit) {
    int failures = 0;
    for (size_t di = 0; di < sizeof ADAM_DTYPES / sizeof ADAM_DTYPES[0]; di++) {
        const torc_dtype dt = ADAM_DTYPES[di];
        const size_t es = (size_t)torc_abi_dtype_size(dt);
        for (size_t ci = 0; ci < sizeof ADAM_CFGS / sizeof ADAM_CFGS[0]; ci++) {
            const adam_cfg *cfg = &ADAM_CFGS[ci];
            const bool ams = cfg->flags & TORC_ADAM_AMSGRAD;
            const int nbuf = ams ? 5 : 4;
            static char *mine[ADAM_LIST_N][5], *ref_buf[ADAM_LIST_N][5];
            torc_op ops[ADAM_LIST_N], rops[ADAM_LIST_N];
            for (int t = 0; t < ADAM_LIST_N; t++) {
                const int64_t N = adam_list_numel(t);
                ops[t] = adam_op(cfg, nbuf - 1, 1 + t % 5);
                ops[t].struct_size = sizeof ops[t];
                rops[t] = ops[t];
                for (int k = 0; k < nbuf; k++) {
                    mine[t][k] = malloc(N * es + 1);
                    ref_buf[t][k] = malloc(N * es + 1);
                    ck_assert(mine[t][k] && ref_buf[t][k]);
                    for (int64_t i = 0; i < N; i++) tcu_store_f64(mine[t][k], i, dt, adam_value(k, ams, i + 7 * t));
                    memcpy(ref_buf[t][k], mine[t][k], N * es);
                    torc_operand *o = k < nbuf - 1 ? &ops[t].out[k] : &ops[t].in[0];
                    torc_operand *r = k < nbuf - 1 ? &rops[t].out[k] : &rops[t].in[0];
                    *o = (torc_operand){mine[t][k], dt, 1, {N}, {1}};
                    *r = (torc_operand){ref_buf[t][k], dt, 1, {N}, {1}};
                }
            }
            torc_op_list l;
            torc_op op = adam_list_op(&l, ops, ADAM_LIST_N);
            char why[160];
            ck_assert_msg(tcu_supports_op(&op, 90, why, sizeof why), "%s", why);
            ck_assert_int_eq(tcu_run_op(&g_dev, &op), TORC_OK);
            for (int t = 0; t < ADAM_LIST_N; t++) ck_assert_int_eq(ref->run(ref_ctx, 0, &rops[t]), TORC_OK);
            for (int t = 0; t < ADAM_LIST_N; t++)
                for (int k = 0; k < nbuf - 1; k++)
                    for (int64_t i = 0; i < adam_list_numel(t); i++)
                        if (memcmp(mine[t][k] + (size_t)i * es, ref_buf[t][k] + (size_t)i * es, es)) {
                            fprintf(stderr, "adam_step_list %s flags %u: parameter %d out[%d] element %lld is %.17g, "
                                    "the reference's %.17g\n", torc_abi_dtype_name(dt), cfg->flags, t, k, (long long)i,
                                    tcu_load_f64(mine[t][k], i, dt), tcu_load_f64(ref_buf[t][k], i, dt));
                            failures++;
                            break;
                        }
            // one strided grad: the whole list is refused (run() then writes nothing)
            ops[30].in[0].shape[0] = adam_list_numel(30) / 2;
            ops[30].in[0].stride[0] = 2;
            for (int k = 0; k < nbuf - 1; k++) ops[30].out[k].shape[0] = adam_list_numel(30) / 2;
            ck_assert(!tcu_supports_op(&op, 90, why, sizeof why));
            ck_assert_ptr_nonnull(strstr(why, "contiguous operands only"));
            for (int t = 0; t < ADAM_LIST_N; t++)
                for (int k = 0; k < nbuf; k++) {
                    free(mine[t][k]);
                    free(ref_buf[t][k]);
                }
        }
    }
    ck_assert_int_eq(failures, 0);
}
END_TEST

// ---- plans and math shared with the device ----
// randn's transform (philox.h) uses no math library, so the device gives the reference's bits;
// here: it is as accurate as libm's log and cos, and exact where the answer is.
// ADAM_STEP through run.c and the kernel's per-element code (adam_body.h) against the reference,
// bit for bit over 3 steps, for each dtype and flag set; strided operands are refused.
START_TEST(adam_step_matches_reference_bit_for_bit) {
    enum { N = 4099 };
    int failures = 0;
    for (size_t di = 0; di < sizeof ADAM_DTYPES / sizeof ADAM_DTYPES[0]; di++) {
        const torc_dtype dt = ADAM_DTYPES[di];
        const size_t es = (size_t)torc_abi_dtype_size(dt);
        for (size_t ci = 0; ci < sizeof ADAM_CFGS / sizeof ADAM_CFGS[0]; ci++) {
            const adam_cfg *cfg = &ADAM_CFGS[ci];
            const bool ams = cfg->flags & TORC_ADAM_AMSGRAD;
            const int nbuf = ams ? 5 : 4;  // param, exp_avg, exp_avg_sq, [max_exp_avg_sq,] grad
            char *mine[5], *ref_buf[5];
            for (int k = 0; k < nbuf; k++) {
                mine[k] = malloc(N * es);
                ref_buf[k] = malloc(N * es);
                ck_assert(mine[k] && ref_buf[k]);
                for (int64_t i = 0; i < N; i++) tcu_store_f64(mine[k], i, dt, adam_value(k, ams, i));
                memcpy(ref_buf[k], mine[k], N * es);
            }
            torc_op op, rop;
            for (int step = 1; step <= 3; step++) {
                op = adam_op(cfg, nbuf - 1, step);
                rop = op;
                for (int k = 0; k < nbuf; k++) {
                    torc_operand *o = k < nbuf - 1 ? &op.out[k] : &op.in[0], *r = k < nbuf - 1 ? &rop.out[k] : &rop.in[0];
                    *o = (torc_operand){mine[k], dt, 1, {N}, {1}};
                    *r = (torc_operand){ref_buf[k], dt, 1, {N}, {1}};
                }
                char why[160];
                ck_assert_msg(tcu_supports_op(&op, 90, why, sizeof why), "%s", why);
                ck_assert_int_eq(tcu_run_op(&g_dev, &op), TORC_OK);
                ck_assert_int_eq(ref->run(ref_ctx, 0, &rop), TORC_OK);
            }
            for (int k = 0; k < nbuf - 1; k++)
                for (int64_t i = 0; i < N; i++)
                    if (memcmp(mine[k] + (size_t)i * es, ref_buf[k] + (size_t)i * es, es)) {
                        fprintf(stderr, "adam_step %s flags %u: out[%d] element %lld is %.17g, the reference's %.17g\n",
                                torc_abi_dtype_name(dt), cfg->flags, k, (long long)i, tcu_load_f64(mine[k], i, dt),
                                tcu_load_f64(ref_buf[k], i, dt));
                        failures++;
                        break;
                    }
            // a strided grad is refused (the kernel walks dense operands)
            op.in[0].shape[0] = N / 2;
            op.in[0].stride[0] = 2;
            for (int k = 0; k < nbuf - 1; k++) op.out[k].shape[0] = N / 2;
            char why[160];
            ck_assert(!tcu_supports_op(&op, 90, why, sizeof why));
            ck_assert_ptr_nonnull(strstr(why, "contiguous operands only"));
            for (int k = 0; k < nbuf; k++) {
                free(mine[k]);
                free(ref_buf[k]);
            }
        }
    }
    ck_assert_int_eq(failures, 0);
}
END_TEST

START_TEST(philox_normal_needs_no_math_library) {
    ck_assert(torc_philox_log(1.0) == 0.0);
    ck_assert(torc_philox_log(0.5) == -0x1.62e42fefa39efp-1);   // -log 2, correctly rounded
    ck_assert(torc_philox_cos2pi(0) == 1.0);
    ck_assert(torc_philox_cos2pi(UINT64_C(1) << 52) == -1.0);   // half a turn
    ck_assert(fabs(torc_philox_cos2pi(UINT64_C(1) << 51)) < 1e-300);   // a quarter: 0
    double worst_log = 0, worst_cos = 0, worst_n = 0;
    for (uint64_t i = 0; i < 200000; i++) {
        uint32_t w[4];
        torc_philox_words(99, 5, i, w);
        const double u1 = (double)((((uint64_t)w[0] << 21) | (w[1] >> 11)) + 1) * 0x1.0p-53;
        const uint64_t v = ((uint64_t)w[2] << 21) | (w[3] >> 11);
        const double l = torc_philox_log(u1), c = torc_philox_cos2pi(v);
        const double want_c = cos(6.283185307179586476925 * (double)v * 0x1.0p-53);
        if (u1 != 1.0) worst_log = fmax(worst_log, fabs(l - log(u1)) / fabs(log(u1)));
        worst_cos = fmax(worst_cos, fabs(c - want_c));
        worst_n = fmax(worst_n, fabs(torc_philox_normal(99, 5, i) - sqrt(-2.0 * log(u1)) * want_c));
    }
    ck_assert_msg(worst_log < 5e-16, "log: worst relative error %g", worst_log);
    ck_assert_msg(worst_cos < 1e-15, "cos: worst absolute error %g", worst_cos);
    ck_assert_msg(worst_n < 1e-14, "normal: worst absolute difference to libm's Box-Muller %g", worst_n);
}
END_TEST

START_TEST(fast_division_is_exact) {
    const uint32_t specials[] = {1, 2, 3, 5, 7, 10, 31, 32, 33, 255, 256, 257, 1000, 65535, 65536, 65537,
                                 (1u << 20) + 1, 0x7FFFFFFFu, 0x40000000u, 0x40000001u, 123456789u};
    for (int i = 0; i < (int)(sizeof specials / sizeof specials[0]) + 3000; i++) {
        const uint32_t d = i < (int)(sizeof specials / sizeof specials[0]) ? specials[i] : (uint32_t)(rnd() % 0x7FFFFFFFu) + 1;
        const tcu_divider v = tcu_divider_make(d);
        const uint32_t ns[] = {0, 1, d - 1, d, d + 1, 2 * d - 1 < 0x7FFFFFFFu ? 2 * d - 1 : 5, 0x7FFFFFFEu, 0x7FFFFFFFu};
        for (int k = 0; k < 8; k++) ck_assert_uint_eq(tcu_div(ns[k], v), ns[k] / d);
        for (int k = 0; k < 50; k++) {
            const uint32_t n = (uint32_t)(rnd() & 0x7FFFFFFFu);
            ck_assert_uint_eq(tcu_div(n, v), n / d);
        }
    }
}
END_TEST

START_TEST(dims_merge_when_contiguous_for_every_operand) {
    tcu_iter it;
    const int64_t shape[4] = {2, 3, 4, 5};
    const int64_t contig[4] = {60, 20, 5, 1}, trans[4] = {60, 20, 1, 4}, bcast[4] = {0, 20, 5, 1};
    const int64_t *s1[1] = {contig};
    ck_assert(tcu_iter_build(&it, 4, shape, 1, s1, 0));
    ck_assert_int_eq(it.ndim, 1);
    ck_assert_int_eq(it.shape[TCU_D - 1], 120);
    ck_assert_int_eq(it.stride[0][TCU_D - 1], 1);
    const int64_t *s2[2] = {contig, trans};  // the transposed pair stays apart, the rest merges
    ck_assert(tcu_iter_build(&it, 4, shape, 2, s2, 0));
    ck_assert_int_eq(it.ndim, 3);
    ck_assert_int_eq(it.shape[TCU_D - 3], 6);
    ck_assert_int_eq(it.stride[1][TCU_D - 3], 20);
    ck_assert_int_eq(it.stride[1][TCU_D - 1], 4);
    const int64_t *s3[2] = {contig, bcast};  // a broadcast dim splits from its contiguous neighbours
    ck_assert(tcu_iter_build(&it, 4, shape, 2, s3, 0));
    ck_assert_int_eq(it.ndim, 2);
    ck_assert_int_eq(it.shape[TCU_D - 2], 2);
    ck_assert_int_eq(it.shape[TCU_D - 1], 60);
    ck_assert_int_eq(it.stride[1][TCU_D - 2], 0);
    // size-1 dims vanish; KEEP_LAST2 keeps the two matrix dims even when they could merge
    const int64_t sh1[4] = {1, 3, 1, 5}, st1[4] = {99, 5, 77, 1};
    const int64_t *s4[1] = {st1};
    ck_assert(tcu_iter_build(&it, 4, sh1, 1, s4, 0));
    ck_assert_int_eq(it.ndim, 1);
    ck_assert_int_eq(it.numel, 15);
    ck_assert(tcu_iter_build(&it, 4, shape, 1, s1, TCU_ITER_KEEP_LAST2));
    ck_assert_int_eq(it.ndim, 3);
    ck_assert_int_eq(it.shape[TCU_D - 1], 5);
    ck_assert_int_eq(it.shape[TCU_D - 2], 4);
    ck_assert_int_eq(it.shape[TCU_D - 3], 6);
    // a 0-dim scalar is one element
    ck_assert(tcu_iter_build(&it, 0, shape, 1, s1, 0));
    ck_assert_int_eq(it.ndim, 1);
    ck_assert_int_eq(it.numel, 1);
    // too many operands or dims is refused
    ck_assert(!tcu_iter_build(&it, 9, shape, 1, s1, 0));
}
END_TEST

START_TEST(index_math_picks_32_bit_only_when_it_fits) {
    tcu_iter it;
    int64_t shape[2] = {1 << 15, 1 << 16}, st[2] = {1 << 16, 1};  // 2^31 elements
    const int64_t *s[1] = {st};
    tcu_iter_build(&it, 2, shape, 1, s, 0);
    ck_assert(!tcu_iter_fits32(&it));
    shape[0] = (1 << 15) - 1;  // 2^31 - 2^16 elements
    tcu_iter_build(&it, 2, shape, 1, s, 0);
    ck_assert(tcu_iter_fits32(&it));
    // few elements but a reach beyond int32 (a huge stride)
    int64_t sh2[2] = {3, 4}, st2[2] = {INT64_C(1) << 31, 1};
    const int64_t *s2[1] = {st2};
    tcu_iter_build(&it, 2, sh2, 1, s2, 0);
    ck_assert(!tcu_iter_fits32(&it));
    st2[0] = (INT64_C(1) << 30) - 2;
    tcu_iter_build(&it, 2, sh2, 1, s2, 0);
    ck_assert(tcu_iter_fits32(&it));
    // where both fit, 32- and 64-bit offsets agree everywhere
    const int64_t sh3[4] = {3, 7, 5, 11}, a[4] = {0, 5, 1, 35}, b[4] = {385, 55, 11, 1}, c[4] = {2000, 3, 600, 40};
    const int64_t *s3[3] = {a, b, c};
    tcu_iter_build(&it, 4, sh3, 3, s3, 0);
    tcu_iter32 it32;
    tcu_iter_to32(&it, &it32);
    for (int64_t i = 0; i < it.numel; i++) {
        int64_t o64[TCU_MAX_OPS], crd[TCU_D];
        uint32_t o32[TCU_MAX_OPS];
        tcu_offsets64(&it, i, o64);
        tcu_offsets32(&it32, (uint32_t)i, o32);
        tcu_coords64(&it, i, crd);
        for (int k = 0; k < 3; k++) ck_assert_int_eq(o64[k], o32[k]);
        // and equal the row-major definition on the original shape
        int64_t rem = i, want[3] = {0, 0, 0};
        for (int d = 3; d >= 0; d--) {
            const int64_t cd = rem % sh3[d];
            rem /= sh3[d];
            want[0] += cd * a[d], want[1] += cd * b[d], want[2] += cd * c[d];
        }
        for (int k = 0; k < 3; k++) ck_assert_int_eq(o64[k], want[k]);
    }
}
END_TEST

START_TEST(few_strided_softmax_rows_share_threads) {
    // softmax over dim 0 of (50000, 8): 8 rows 8 elements apart share a block each, not a thread
    const int64_t shape[2] = {50000, 8}, stride[2] = {8, 1};
    const torc_operand x = {NULL, TORC_DTYPE_F32, 2, {shape[0], shape[1]}, {stride[0], stride[1]}};
    tcu_rows_plan pl;
    ck_assert(tcu_rows_plan_build(&pl, &x, &x, 0));
    ck_assert_int_eq(pl.n_rows, 8);
    ck_assert_int_eq(pl.group, TCU_THREADS);
    // many strided rows keep a thread each (coalesced across rows)
    const torc_operand y = {NULL, TORC_DTYPE_F32, 2, {64, 8192}, {8192, 1}};
    ck_assert(tcu_rows_plan_build(&pl, &y, &y, 0));
    ck_assert_int_eq(pl.group, 1);
}
END_TEST

START_TEST(launch_configuration_covers_the_work) {
    tcu_launch l = tcu_launch_1d(0, 132, 1);
    ck_assert_uint_eq(l.blocks, 0);
    l = tcu_launch_1d(1, 132, 1);
    ck_assert_uint_eq(l.blocks, 1);
    ck_assert_uint_eq(l.threads, 256);
    l = tcu_launch_1d(1000, 132, 4);
    ck_assert_uint_eq(l.blocks, 1);  // 1024 elements per block
    l = tcu_launch_1d(INT64_C(1) << 28, 132, 4);
    ck_assert_uint_eq(l.blocks, 132 * 32);  // capped at 4 waves of 8 blocks per SM
    l = tcu_launch_1d(INT64_C(1) << 40, 100000, 1);
    ck_assert_uint_le(l.blocks, TCU_MAX_BLOCKS);
    l = tcu_launch_1d(5000, 0, 0);  // nonsense hardware numbers still give a valid grid
    ck_assert_uint_ge(l.blocks, 1);
    // the reduction plan: contiguous long rows use a block per output, strided ones a thread
    torc_operand in, out;
    memset(&in, 0, sizeof in);
    memset(&out, 0, sizeof out);
    in.ndim = out.ndim = 2;
    in.shape[0] = 8, in.shape[1] = 100000, in.stride[0] = 100000, in.stride[1] = 1;
    out.shape[0] = 8, out.shape[1] = 1, out.stride[0] = 1, out.stride[1] = 1;
    tcu_reduce_plan pl;
    ck_assert(tcu_reduce_plan_build(&pl, &in, &out, NULL, 2, 132));
    ck_assert_int_eq(pl.group, 256);
    ck_assert_int_gt(pl.split, 1);
    ck_assert_int_ge(pl.chunk * pl.split, pl.n_red);
    ck_assert_int_lt((pl.split - 1) * pl.chunk, pl.n_red);  // no empty chunk
    in.shape[0] = 100000, in.shape[1] = 8, in.stride[0] = 1, in.stride[1] = 100000;  // reduce the strided dim
    out.shape[0] = 100000, out.shape[1] = 1;
    ck_assert(tcu_reduce_plan_build(&pl, &in, &out, NULL, 2, 132));
    ck_assert_int_eq(pl.group, 1);
    ck_assert_int_eq(pl.split, 1);
    ck_assert(pl.fits32);
}
END_TEST

START_TEST(conversions_match_convert_h) {
    for (uint32_t h = 0; h < 65536; h++) {  // every f16 and bf16 bit pattern
        const uint16_t v = (uint16_t)h;
        const float f = tcu_load_f32(&v, 0, TORC_DTYPE_F16), g = torc_f16_to_f32(v);
        ck_assert(memcmp(&f, &g, 4) == 0);
        const float bf = tcu_load_f32(&v, 0, TORC_DTYPE_BF16), bg = torc_bf16_to_f32(v);
        ck_assert(memcmp(&bf, &bg, 4) == 0);
        uint16_t back;
        if (f == f) {
            tcu_store_f32(&back, 0, TORC_DTYPE_F16, f);
            ck_assert_uint_eq(back, v);
            tcu_store_f64(&back, 0, TORC_DTYPE_BF16, (double)bf);
            ck_assert_uint_eq(back, v);
        }
    }
    for (uint32_t b = 0; b < 256; b++) {
        const uint8_t v = (uint8_t)b;
        const float f = tcu_load_f32(&v, 0, TORC_DTYPE_F8_E4M3FN), g = torc_f8e4m3fn_to_f32(v);
        ck_assert(memcmp(&f, &g, 4) == 0);
        const float e = tcu_load_f32(&v, 0, TORC_DTYPE_F8_E5M2), eg = torc_f8e5m2_to_f32(v);
        ck_assert(memcmp(&e, &eg, 4) == 0);
    }
    for (int i = 0; i < 200000; i++) {  // random floats of every magnitude round as convert.h
        uint32_t u = (uint32_t)rnd();
        float f;
        memcpy(&f, &u, 4);
        uint16_t h, b;
        uint8_t e4, e5;
        tcu_store_f32(&h, 0, TORC_DTYPE_F16, f);
        tcu_store_f32(&b, 0, TORC_DTYPE_BF16, f);
        tcu_store_f32(&e4, 0, TORC_DTYPE_F8_E4M3FN, f);
        tcu_store_f32(&e5, 0, TORC_DTYPE_F8_E5M2, f);
        ck_assert_uint_eq(h, torc_f32_to_f16(f));
        ck_assert_uint_eq(b, torc_f32_to_bf16(f));
        ck_assert_uint_eq(e4, torc_f32_to_f8e4m3fn(f));
        ck_assert_uint_eq(e5, torc_f32_to_f8e5m2(f));
    }
    // float -> integer as PyTorch on x86: NaN and overflow give the minimum
    int64_t i64;
    int32_t i32;
    int8_t i8;
    tcu_store_f64(&i64, 0, TORC_DTYPE_I64, NAN);
    ck_assert_int_eq(i64, INT64_MIN);
    tcu_store_f64(&i32, 0, TORC_DTYPE_I32, 3e9);
    ck_assert_int_eq(i32, INT32_MIN);
    tcu_store_f32(&i8, 0, TORC_DTYPE_I8, 300.7f);
    ck_assert_int_eq(i8, 44);  // 300 wraps to 44
    tcu_store_f64(&i64, 0, TORC_DTYPE_I64, -2.9);
    ck_assert_int_eq(i64, -2);
}
END_TEST

static torc_operand mat(int ndim, const int64_t *shape, const int64_t *stride, torc_dtype dt) {
    torc_operand o;
    memset(&o, 0, sizeof o);
    o.ndim = ndim;
    o.dtype = dt;
    for (int d = 0; d < ndim; d++) o.shape[d] = shape[d], o.stride[d] = stride[d];
    return o;
}

START_TEST(gemm_layouts_use_op_flags_not_copies) {
    tcu_gemm_plan pl;
    const torc_dtype f = TORC_DTYPE_F32;
    // contiguous (4, 6) @ (6, 5) -> (4, 5): C^T = B^T A^T, no transposes
    const int64_t sa[2] = {4, 6}, sb[2] = {6, 5}, sc[2] = {4, 5};
    torc_operand a = mat(2, sa, (int64_t[]){6, 1}, f), b = mat(2, sb, (int64_t[]){5, 1}, f), c = mat(2, sc, (int64_t[]){5, 1}, f);
    tcu_gemm_plan_build(&pl, &a, &b, &c);
    ck_assert(pl.use_blas);
    ck_assert(pl.swap);
    ck_assert(!pl.trans_a && !pl.trans_b);
    ck_assert_int_eq(pl.m, 5);
    ck_assert_int_eq(pl.n, 4);
    ck_assert_int_eq(pl.k, 6);
    ck_assert_int_eq(pl.lda, 5);
    ck_assert_int_eq(pl.ldb, 6);
    ck_assert_int_eq(pl.ldc, 5);
    ck_assert_int_eq(pl.batch, 1);
    // a = x.t() for x (6, 4): strides (1, 4) -> op flag on B' (which is a)
    a = mat(2, sa, (int64_t[]){1, 4}, f);
    tcu_gemm_plan_build(&pl, &a, &b, &c);
    ck_assert(pl.use_blas && pl.trans_b && !pl.trans_a);
    ck_assert_int_eq(pl.ldb, 4);
    // b = y.t() too
    b = mat(2, sb, (int64_t[]){1, 6}, f);
    tcu_gemm_plan_build(&pl, &a, &b, &c);
    ck_assert(pl.use_blas && pl.trans_a && pl.trans_b);
    ck_assert_int_eq(pl.lda, 6);
    // sliced columns: a[:, ::1] of a (4, 10) buffer -> ld 10
    a = mat(2, sa, (int64_t[]){10, 1}, f);
    b = mat(2, sb, (int64_t[]){5, 1}, f);
    tcu_gemm_plan_build(&pl, &a, &b, &c);
    ck_assert(pl.use_blas);
    ck_assert_int_eq(pl.ldb, 10);
    // a column-major out: C = A B directly
    c = mat(2, sc, (int64_t[]){1, 4}, f);
    a = mat(2, sa, (int64_t[]){6, 1}, f);
    tcu_gemm_plan_build(&pl, &a, &b, &c);
    ck_assert(pl.use_blas && !pl.swap && pl.trans_a && pl.trans_b);
    ck_assert_int_eq(pl.ldc, 4);
    // stepped inner dim (stride 2 along k): no unit stride -> the generic kernel
    c = mat(2, sc, (int64_t[]){5, 1}, f);
    a = mat(2, sa, (int64_t[]){12, 2}, f);
    tcu_gemm_plan_build(&pl, &a, &b, &c);
    ck_assert(!pl.use_blas);
    // a broadcast row (stride 0 along m): the generic kernel
    a = mat(2, sa, (int64_t[]){0, 1}, f);
    tcu_gemm_plan_build(&pl, &a, &b, &c);
    ck_assert(!pl.use_blas);
    // batched with a broadcast batch dim on b: one strided-batched call, stride_b 0 for B' = a
    const int64_t ba[3] = {3, 4, 6}, bb[3] = {3, 6, 5}, bc[3] = {3, 4, 5};
    a = mat(3, ba, (int64_t[]){24, 6, 1}, f);
    b = mat(3, bb, (int64_t[]){0, 5, 1}, f);
    c = mat(3, bc, (int64_t[]){20, 5, 1}, f);
    tcu_gemm_plan_build(&pl, &a, &b, &c);
    ck_assert(pl.use_blas);
    ck_assert_int_eq(pl.batch, 3);
    ck_assert_int_eq(pl.stride_a, 0);   // A' = b (swap)
    ck_assert_int_eq(pl.stride_b, 24);
    ck_assert_int_eq(pl.stride_c, 20);
    ck_assert_int_eq(pl.outer.numel, 1);
    // two batch dims that do not merge: the outer one loops on the host
    const int64_t qa[4] = {2, 3, 4, 6}, qb[4] = {2, 3, 6, 5}, qc[4] = {2, 3, 4, 5};
    a = mat(4, qa, (int64_t[]){1000, 24, 6, 1}, f);
    b = mat(4, qb, (int64_t[]){30, 0, 5, 1}, f);
    c = mat(4, qc, (int64_t[]){60, 20, 5, 1}, f);
    tcu_gemm_plan_build(&pl, &a, &b, &c);
    ck_assert(pl.use_blas);
    ck_assert_int_eq(pl.batch, 3);
    ck_assert_int_eq(pl.outer.numel, 2);
}
END_TEST

// ---- the caching allocator over a fake device memory ----
typedef struct fake_mem {
    size_t capacity, used;
    int live;
    bool fault;
} fake_mem;

// Blocks carry their size in a 64-byte header (which keeps the pointer well aligned).
static int fake_alloc(void *ctx, size_t n, void **out, char *why, size_t why_n) {
    fake_mem *m = ctx;
    if (m->fault) {   // a faulted context: every call fails with the same sticky error
        snprintf(why, why_n, "cudaErrorIllegalAddress (an illegal memory access was encountered)");
        return TCU_RAW_FAILED;
    }
    if (m->used + n > m->capacity) return TCU_RAW_OOM;
    char *p = malloc(n + 64);
    if (!p) return TCU_RAW_OOM;
    memcpy(p, &n, sizeof n);
    m->used += n;
    m->live++;
    *out = p + 64;
    return 0;
}

static void fake_free(void *ctx, void *q) {
    fake_mem *m = ctx;
    char *p = (char *)q - 64;
    size_t n;
    memcpy(&n, p, sizeof n);
    m->used -= n;
    m->live--;
    free(p);
}

START_TEST(allocator_reuses_splits_and_merges) {
    fake_mem mem = {(size_t)1 << 30, 0, 0, false};
    const tcu_raw_ops raw = {&mem, fake_alloc, fake_free};
    tcu_allocator a;
    tcu_allocator_init(&a, &raw);
    char err[256];
    ck_assert_uint_eq(tcu_round_size(1), 512);
    ck_assert_uint_eq(tcu_round_size(513), 1024);
    ck_assert_uint_eq(tcu_segment_size(512), (size_t)2 << 20);
    ck_assert_uint_eq(tcu_segment_size((size_t)5 << 20), (size_t)20 << 20);
    ck_assert_uint_eq(tcu_segment_size((size_t)11 << 20), (size_t)12 << 20);
    // small blocks come out of one 2 MiB segment
    void *p1 = tcu_allocator_alloc(&a, 1000, 0, NULL, err, sizeof err);
    void *p2 = tcu_allocator_alloc(&a, 3000, 0, NULL, err, sizeof err);
    ck_assert_ptr_nonnull(p1);
    ck_assert_ptr_nonnull(p2);
    ck_assert_int_eq((char *)p2 - (char *)p1, 1024);
    tcu_alloc_stats s;
    tcu_allocator_stats(&a, &s);
    ck_assert_uint_eq(s.raw_allocs, 1);
    ck_assert_uint_eq(s.allocated, 1024 + 3072);
    ck_assert_uint_eq(s.reserved, (size_t)2 << 20);
    // freeing and allocating the same size reuses the block without touching raw memory
    ck_assert(tcu_allocator_free(&a, p1));
    void *p3 = tcu_allocator_alloc(&a, 900, 0, NULL, err, sizeof err);
    ck_assert_ptr_eq(p3, p1);
    // freed neighbours merge back into the whole segment
    ck_assert(tcu_allocator_free(&a, p2));
    ck_assert(tcu_allocator_free(&a, p3));
    tcu_allocator_stats(&a, &s);
    ck_assert_uint_eq(s.allocated, 0);
    ck_assert_uint_eq(s.cached_blocks, 1);
    ck_assert(!tcu_allocator_free(&a, (char *)p1 + 8));  // not ours
    ck_assert(tcu_allocator_free(&a, NULL));
    // a different stream does not take another stream's cached block
    void *q = tcu_allocator_alloc(&a, 1000, 1, NULL, err, sizeof err);
    tcu_allocator_stats(&a, &s);
    ck_assert_uint_eq(s.raw_allocs, 2);
    tcu_allocator_free(&a, q);
    // large requests: own rounded segments, split only when the rest is worth keeping
    void *l1 = tcu_allocator_alloc(&a, (size_t)3 << 20, 0, NULL, err, sizeof err);   // from a new 20 MiB segment
    void *l2 = tcu_allocator_alloc(&a, (size_t)3 << 20, 0, NULL, err, sizeof err);   // same segment, split
    ck_assert_int_eq((char *)l2 - (char *)l1, 3 << 20);
    void *big = tcu_allocator_alloc(&a, (size_t)50 << 20, 0, NULL, err, sizeof err);
    tcu_allocator_stats(&a, &s);
    ck_assert_uint_eq(s.reserved, ((size_t)4 << 20) + ((size_t)20 << 20) + ((size_t)50 << 20));
    ck_assert_uint_eq(s.peak_reserved, s.reserved);
    tcu_allocator_free(&a, l1);
    tcu_allocator_free(&a, l2);
    tcu_allocator_free(&a, big);
    // empty_cache hands back every whole free segment
    tcu_allocator_empty_cache(&a);
    tcu_allocator_stats(&a, &s);
    ck_assert_uint_eq(s.reserved, 0);
    ck_assert_int_eq(mem.live, 0);
    ck_assert_uint_eq(s.peak_reserved, ((size_t)4 << 20) + ((size_t)20 << 20) + ((size_t)50 << 20));
    tcu_allocator_destroy(&a);
}
END_TEST

START_TEST(allocator_releases_cache_and_retries_on_oom) {
    fake_mem mem = {(size_t)64 << 20, 0, 0, false};
    const tcu_raw_ops raw = {&mem, fake_alloc, fake_free};
    tcu_allocator a;
    tcu_allocator_init(&a, &raw);
    char err[256];
    void *x = tcu_allocator_alloc(&a, (size_t)40 << 20, 0, NULL, err, sizeof err);
    ck_assert_ptr_nonnull(x);
    tcu_allocator_free(&a, x);  // cached: 40 MiB reserved, none allocated
    // 50 MiB does not fit next to the cached 40: the cache goes back and the retry succeeds
    void *y = tcu_allocator_alloc(&a, (size_t)50 << 20, 0, NULL, err, sizeof err);
    ck_assert_ptr_nonnull(y);
    tcu_alloc_stats s;
    tcu_allocator_stats(&a, &s);
    ck_assert_uint_eq(s.reserved, (size_t)50 << 20);
    // a request beyond the device fails with PyTorch's wording
    void *z = tcu_allocator_alloc(&a, (size_t)100 << 20, 0, NULL, err, sizeof err);
    ck_assert_ptr_null(z);
    ck_assert_ptr_nonnull(strstr(err, "CUDA out of memory. Tried to allocate 100.00 MiB"));
    tcu_allocator_free(&a, y);
    tcu_allocator_destroy(&a);
    ck_assert_int_eq(mem.live, 0);
}
END_TEST

START_TEST(allocator_stress_keeps_blocks_disjoint) {
    fake_mem mem = {(size_t)256 << 20, 0, 0, false};
    const tcu_raw_ops raw = {&mem, fake_alloc, fake_free};
    tcu_allocator a;
    tcu_allocator_init(&a, &raw);
    char err[256];
    enum { N = 400 };
    char *p[N] = {0};
    size_t sz[N] = {0};
    uint64_t live_bytes = 0, live_large = 0;
    for (int it = 0; it < 20000; it++) {
        const int i = (int)(rnd() % N);
        if (p[i]) {
            // the block still holds what we wrote: nobody else got it
            ck_assert_int_eq(p[i][0], (char)i);
            ck_assert_int_eq(p[i][sz[i] - 1], (char)i);
            ck_assert(tcu_allocator_free(&a, p[i]));
            live_bytes -= tcu_round_size(sz[i]);
            live_large -= tcu_round_size(sz[i]) > TCU_SMALL_SIZE;
            p[i] = NULL;
        } else {
            const uint64_t r = rnd();
            sz[i] = (r & 3) == 0 ? (size_t)(r >> 8) % (12 << 20) + 1 : (size_t)(r >> 8) % 70000 + 1;
            p[i] = tcu_allocator_alloc(&a, sz[i], (int)(r >> 60) & 1, NULL, err, sizeof err);
            if (!p[i]) continue;  // the fake device is small: OOM is allowed, not corruption
            // mark both ends (whole blocks would make the test slow without checking more)
            memset(p[i], i, sz[i] < 64 ? sz[i] : 64);
            memset(p[i] + sz[i] - (sz[i] < 64 ? sz[i] : 64), i, sz[i] < 64 ? sz[i] : 64);
            live_bytes += tcu_round_size(sz[i]);
            live_large += tcu_round_size(sz[i]) > TCU_SMALL_SIZE;
        }
        if (it % 997 == 0) {
            tcu_alloc_stats s;
            tcu_allocator_stats(&a, &s);
            // blocks are their rounded size, large ones plus a remainder of at most 1 MiB that
            // was not worth splitting off
            ck_assert_uint_ge(s.allocated, live_bytes);
            ck_assert_uint_le(s.allocated, live_bytes + live_large * TCU_SMALL_SIZE);
            ck_assert_uint_le(s.allocated, s.reserved);
            ck_assert_uint_le(s.reserved, mem.capacity);
        }
    }
    for (int i = 0; i < N; i++) {
        if (p[i]) ck_assert(tcu_allocator_free(&a, p[i]));
    }
    tcu_allocator_empty_cache(&a);
    tcu_alloc_stats s;
    tcu_allocator_stats(&a, &s);
    ck_assert_uint_eq(s.allocated, 0);
    ck_assert_uint_eq(s.reserved, 0);
    ck_assert_int_eq(mem.live, 0);
    tcu_allocator_destroy(&a);
}
END_TEST

// ---- the pinned staging pool with fake events ----
typedef struct fake_ev {
    bool done;
} fake_ev;
static int fh_alloc(void *ctx, size_t n, void **out) {
    (void)ctx;
    *out = malloc(n);
    return *out == NULL;
}
static void fh_free(void *ctx, void *p) {
    (void)ctx;
    free(p);
}
static void *fe_new(void *ctx) {
    (void)ctx;
    return calloc(1, sizeof(fake_ev));
}
static void fe_free(void *ctx, void *e) {
    (void)ctx;
    free(e);
}
static int fe_record(void *ctx, void *e, void *stream) {
    (void)ctx;
    (void)stream;
    ((fake_ev *)e)->done = false;  // the copy just enqueued is still running
    return 0;
}
static int fe_done(void *ctx, void *e) {
    (void)ctx;
    return ((fake_ev *)e)->done;
}

START_TEST(pinned_blocks_wait_for_their_copy) {
    const tcu_pinned_ops ops = {NULL, fh_alloc, fh_free, fe_new, fe_free, fe_record, fe_done};
    tcu_pinned_pool p;
    tcu_pinned_init(&p, &ops);
    void *b1, *b2, *b3;
    const int i1 = tcu_pinned_get(&p, 1000, &b1);
    ck_assert_int_ge(i1, 0);
    ck_assert_uint_eq(p.v[i1].size, TCU_PINNED_MIN);
    ck_assert_int_eq(tcu_pinned_release(&p, i1, NULL), 0);
    // the copy has not completed: a new request gets a different block
    const int i2 = tcu_pinned_get(&p, 1000, &b2);
    ck_assert_ptr_ne(b2, b1);
    ((fake_ev *)p.v[i1].event)->done = true;  // now the first copy finished
    const int i3 = tcu_pinned_get(&p, 2000, &b3);
    ck_assert_ptr_eq(b3, b1);
    ck_assert_int_eq(i3, i1);
    tcu_pinned_release(&p, i2, NULL);
    tcu_pinned_release(&p, i3, NULL);
    // beyond the cap: refused (the caller copies synchronously)
    void *huge;
    ck_assert_int_lt(tcu_pinned_get(&p, TCU_PINNED_CAP + 1, &huge), 0);
    ck_assert_uint_eq(tcu_pinned_class(TCU_PINNED_MIN + 1), TCU_PINNED_MIN * 2);
    for (size_t i = 0; i < p.n; i++)
        if (p.v[i].event) ((fake_ev *)p.v[i].event)->done = true;
    tcu_pinned_trim(&p);
    ck_assert_uint_eq(p.total, 0);
    tcu_pinned_destroy(&p);
}
END_TEST

// ---- the CUDA runtime's error state and cuBLASLt's refusals (emulated as the real ones) ----
static torc_op mul_op(tview *a, tview *b, tview *out) {
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_MUL;
    op.n_out = 1;
    op.n_in = 2;
    op.in[0] = a->op;
    op.in[1] = b->op;
    op.out[0] = out->op;
    return op;
}

// A kernel launch right after: it must report only its own errors.
static bool launch_is_clean(const char *after) {
    const int64_t shape[1] = {300};
    tview a = tv_new(TORC_DTYPE_F32, 1, shape, L_CONTIG, -2, 2), out = tv_new(TORC_DTYPE_F32, 1, shape, L_CONTIG, 0, 0);
    torc_op op = mul_op(&a, &a, &out);
    snprintf(g_case, sizeof g_case, "mul after %s", after);
    const bool ok = check_op(&op, &out, 1.0);
    tv_free(&a);
    tv_free(&out);
    return ok;
}

START_TEST(fp8_outputs_saturate_as_the_reference) {
    g_dev.cc_major = 9, g_dev.cc_minor = 0;
    ck_assert_int_eq(cases_fp8_saturation(check_emulated), 0);
}
END_TEST

START_TEST(pending_copies_leave_no_error_for_the_next_launch) {
    tcu_pinned_ops ops;
    tcu_device_pinned_ops(&g_dev, &ops);
    tcu_pinned_pool pool;
    tcu_pinned_init(&pool, &ops);
    // Two async copies from pageable memory, staged as cuda_copy stages them: the second finds
    // the first one's block still in flight (its event query answers "not ready").
    void *b1, *b2, *b3;
    const int i1 = tcu_pinned_get(&pool, 1000, &b1);
    ck_assert_int_ge(i1, 0);
    ck_assert_int_eq(tcu_pinned_release(&pool, i1, NULL), 0);
    const int i2 = tcu_pinned_get(&pool, 1000, &b2);
    ck_assert_int_ge(i2, 0);
    ck_assert_ptr_ne(b2, b1);
    ck_assert_int_eq(tcu_pinned_release(&pool, i2, NULL), 0);
    ck_assert(launch_is_clean("a pending copy"));
    ck_assert_int_eq(cudaPeekAtLastError(), cudaSuccess);
    // a pinned allocation that fails (the copy then runs synchronously) is handled too
    g_rt.host_alloc_fails = true;
    ck_assert_int_lt(tcu_pinned_get(&pool, 1 << 20, &b3), 0);
    g_rt.host_alloc_fails = false;
    ck_assert(launch_is_clean("a failed cudaHostAlloc"));
    ck_assert_int_eq(cudaPeekAtLastError(), cudaSuccess);
    tcu_pinned_destroy(&pool);
    ck_assert_int_eq(g_rt.events, 0);
}
END_TEST

START_TEST(raw_allocations_tell_oom_from_a_faulted_device) {
    tcu_raw_ops raw;
    tcu_device dev;
    memset(&dev, 0, sizeof dev);
    tcu_device_raw_ops(&dev, &raw);
    char why[200];
    void *p = NULL;
    g_rt.malloc_fails = cudaErrorMemoryAllocation;
    ck_assert_int_eq(raw.alloc(raw.ctx, 4096, &p, why, sizeof why), TCU_RAW_OOM);
    ck_assert_int_eq(cudaPeekAtLastError(), cudaSuccess);   // handled: the allocator retries
    g_rt.malloc_fails = cudaErrorIllegalAddress;
    ck_assert_int_eq(raw.alloc(raw.ctx, 4096, &p, why, sizeof why), TCU_RAW_FAILED);
    ck_assert_ptr_nonnull(strstr(why, "cudaErrorIllegalAddress"));
    g_rt.malloc_fails = cudaSuccess;
    ck_assert_int_eq(raw.alloc(raw.ctx, 4096, &p, why, sizeof why), 0);
    raw.free(raw.ctx, p);
}
END_TEST

START_TEST(make_current_follows_the_runtime) {
    t_device = 0;
    const int calls = g_rt.set_device;
    ck_assert_int_eq(tcu_make_current(1), TORC_OK);
    ck_assert_int_eq(t_device, 1);
    ck_assert_int_eq(tcu_make_current(1), TORC_OK);
    ck_assert_int_eq(g_rt.set_device, calls + 1);   // already current: no call
    cudaSetDevice(0);                               // application code switches behind torc's back
    ck_assert_int_eq(tcu_make_current(1), TORC_OK);
    ck_assert_int_eq(t_device, 1);
    ck_assert_int_ne(tcu_make_current(5), TORC_OK); // an invalid device: the runtime's error, cleared
    ck_assert_int_eq(cudaPeekAtLastError(), cudaSuccess);
}
END_TEST

START_TEST(supports_decides_fp8_matmul_by_compute_capability) {
    const int64_t s2[2] = {16, 16}, one[1] = {1};
    tview a = tv_new(TORC_DTYPE_F8_E4M3FN, 2, s2, L_CONTIG, -1, 1), sc = tv_new(TORC_DTYPE_F32, 1, one, L_CONTIG, 1, 1);
    tview out = tv_new(TORC_DTYPE_BF16, 2, s2, L_CONTIG, 0, 0);
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_SCALED_MM;
    op.n_out = 1;
    op.n_in = 4;
    op.in[0] = op.in[1] = a.op;
    op.in[2] = op.in[3] = sc.op;
    op.out[0] = out.op;
    char why[160];
    ck_assert(!tcu_supports_op(&op, 80, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "compute capability 8.9 or newer (this device is 8.0)"));
    ck_assert(!tcu_supports_op(&op, 86, why, sizeof why));
    ck_assert(tcu_supports_op(&op, 89, why, sizeof why));
    ck_assert(tcu_supports_op(&op, 90, why, sizeof why));
    tv_free(&a);
    tv_free(&sc);
    tv_free(&out);
}
END_TEST

// One fp8 matmul of the cuBLASLt kind (TN, multiples of 16) with a and b `shift` bytes into
// their storage; true when it matched the reference.
static bool lt_case(torc_dtype out_dt, int shift, bool amax, int64_t M, int64_t K, int64_t N) {
    const int64_t sa[2] = {M, K}, sb[2] = {K, N}, so[2] = {M, N}, one[1] = {1};
    tview a = tv_new_at(TORC_DTYPE_F8_E4M3FN, 2, sa, L_CONTIG, -4, 4, shift);
    tview b = tv_new_at(TORC_DTYPE_F8_E4M3FN, 2, sb, L_TRANS, -4, 4, shift);
    tview out = tv_new(out_dt, 2, so, L_CONTIG, 0, 0);
    tview sc = tv_new(TORC_DTYPE_F32, 1, one, L_CONTIG, 0.5, 0.5), am = tv_new(TORC_DTYPE_F32, 1, one, L_CONTIG, -1, -1);
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_SCALED_MM;
    op.n_out = 1;
    op.n_in = 4;
    op.in[0] = a.op, op.in[1] = b.op, op.in[2] = sc.op, op.in[3] = sc.op, op.out[0] = out.op;
    if (amax) op.out[op.n_out++] = am.op;
    snprintf(g_case, sizeof g_case, "scaled_mm e4m3 -> %d, %lldx%lldx%lld at +%d B, amax %d", out_dt, (long long)M,
             (long long)K, (long long)N, shift, amax);
    const bool ok = check_emulated(&op, (tview *[]){&a, &b, &sc, &sc, &am}, &out, 1.0);
    tv_free(&a);
    tv_free(&b);
    tv_free(&out);
    tv_free(&sc);
    tv_free(&am);
    return ok;
}

START_TEST(lt_algorithms_fit_the_operands_alignment_and_epilogue) {
    g_dev.cc_major = 9, g_dev.cc_minor = 0;
    // The same shape, first aligned without amax, then at +16 and +32 bytes with amax: each runs
    // on cuBLASLt (both check passes) with an algorithm chosen for its own pointers and epilogue.
    const int shifts[3] = {0, 16, 32};
    for (int i = 0; i < 3; i++) {
        const int lt0 = g_paths.lt, smm0 = g_paths.smm, refused0 = g_lt.refused;
        ck_assert(lt_case(TORC_DTYPE_F8_E4M3FN, shifts[i], i > 0, 32, 64, 48));
        ck_assert_int_eq(g_paths.lt - lt0, 2);
        ck_assert_int_eq(g_paths.smm, smm0);
        ck_assert_int_eq(g_lt.refused, refused0);
    }
    ck_assert_int_eq(g_lt.bad_calls, 0);
}
END_TEST

START_TEST(lt_without_a_kernel_falls_back_to_the_generic_kernel) {
    g_dev.cc_major = 9, g_dev.cc_minor = 0;
    // e4m3 x e4m3 with an e5m2 output: cuBLASLt has no kernel; the generic one gives the answer
    const int lt0 = g_paths.lt, smm0 = g_paths.smm;
    ck_assert(lt_case(TORC_DTYPE_F8_E5M2, 0, true, 32, 64, 48));
    ck_assert_int_eq(g_paths.lt, lt0);
    ck_assert_int_gt(g_paths.smm, smm0);
}
END_TEST

START_TEST(scaled_mm_with_an_empty_side_never_asks_cublaslt) {
    g_dev.cc_major = 9, g_dev.cc_minor = 0;
    const int h0 = g_lt.heuristic;
    ck_assert(lt_case(TORC_DTYPE_BF16, 0, true, 0, 32, 16));   // amax of nothing: 0, as the reference
    ck_assert(lt_case(TORC_DTYPE_BF16, 0, true, 16, 32, 0));
    ck_assert(lt_case(TORC_DTYPE_F8_E4M3FN, 0, true, 0, 32, 16));
    ck_assert(lt_case(TORC_DTYPE_F8_E4M3FN, 0, false, 16, 32, 0));
    ck_assert_int_eq(g_lt.heuristic, h0);
}
END_TEST

START_TEST(allocator_reports_a_faulted_device_not_oom) {
    fake_mem mem = {(size_t)64 << 20, 0, 0, false};
    const tcu_raw_ops raw = {&mem, fake_alloc, fake_free};
    tcu_allocator a;
    tcu_allocator_init(&a, &raw);
    char err[256];
    bool oom = true;
    void *x = tcu_allocator_alloc(&a, (size_t)4 << 20, 0, &oom, err, sizeof err);
    ck_assert_ptr_nonnull(x);
    tcu_allocator_free(&a, x);   // cached
    mem.fault = true;            // a kernel faulted: the context is gone
    void *y = tcu_allocator_alloc(&a, (size_t)40 << 20, 0, &oom, err, sizeof err);
    ck_assert_ptr_null(y);
    ck_assert(!oom);
    ck_assert_ptr_null(strstr(err, "out of memory"));
    ck_assert_ptr_nonnull(strstr(err, "cudaErrorIllegalAddress"));
    tcu_alloc_stats s;
    tcu_allocator_stats(&a, &s);
    ck_assert_uint_eq(s.raw_frees, 0);   // the cache was not released on a broken context
    mem.fault = false;
    ck_assert_ptr_null(tcu_allocator_alloc(&a, (size_t)100 << 20, 0, &oom, err, sizeof err));
    ck_assert(oom);
    tcu_allocator_destroy(&a);
    ck_assert_int_eq(mem.live, 0);
}
END_TEST

// ---- device table ----
START_TEST(device_table_promises_datasheet_peaks) {
    torc_device_info info;
    memset(&info, 0, sizeof info);
    tcu_fill_peaks(&info, "NVIDIA H100 80GB HBM3", 9, 0, 132, false);
    ck_assert_double_eq(info.peak_flops[TORC_DTYPE_BF16], 989e12);
    ck_assert_double_eq(info.peak_flops[TORC_DTYPE_F16], 989e12);
    ck_assert_double_eq(info.peak_flops[TORC_DTYPE_F8_E4M3FN], 1979e12);
    ck_assert_double_eq(info.peak_flops[TORC_DTYPE_F32], 67e12);
    ck_assert_ptr_nonnull(strstr(info.peak_source, "sm_90, 132 SMs"));
    tcu_fill_peaks(&info, "NVIDIA H100 80GB HBM3", 9, 0, 132, true);  // TORC_ALLOW_TF32=1
    ck_assert_double_eq(info.peak_flops[TORC_DTYPE_F32], 495e12);
    tcu_fill_peaks(&info, "NVIDIA H100 PCIe", 9, 0, 114, false);
    ck_assert_double_eq(info.peak_flops[TORC_DTYPE_BF16], 756e12);
    ck_assert_double_eq(info.peak_flops[TORC_DTYPE_F8_E5M2], 1513e12);
    tcu_fill_peaks(&info, "NVIDIA H200", 9, 0, 132, false);
    ck_assert_double_eq(info.peak_flops[TORC_DTYPE_BF16], 989e12);
    tcu_fill_peaks(&info, "NVIDIA A100-SXM4-80GB", 8, 0, 108, true);
    ck_assert_double_eq(info.peak_flops[TORC_DTYPE_F32], 156e12);
    ck_assert_double_eq(info.peak_flops[TORC_DTYPE_BF16], 312e12);
    ck_assert_double_eq(info.peak_flops[TORC_DTYPE_F8_E4M3FN], 0);  // no fp8 on Ampere
    tcu_fill_peaks(&info, "NVIDIA L40S", 8, 9, 142, false);
    ck_assert_double_eq(info.peak_flops[TORC_DTYPE_F32], 91.6e12);
    ck_assert_double_eq(info.peak_flops[TORC_DTYPE_F8_E4M3FN], 733e12);
    tcu_fill_peaks(&info, "NVIDIA GeForce RTX 4090", 8, 9, 128, false);
    ck_assert_double_eq(info.peak_flops[TORC_DTYPE_BF16], 165e12);
    tcu_fill_peaks(&info, "NVIDIA B200", 10, 0, 148, false);
    ck_assert_double_eq(info.peak_flops[TORC_DTYPE_F8_E4M3FN], 4500e12);
    ck_assert_ptr_null(tcu_peak_lookup("NVIDIA L40"));      // not the L40S
    ck_assert_ptr_null(tcu_peak_lookup("NVIDIA H100 NVL"));
    tcu_fill_peaks(&info, "NVIDIA T4", 7, 5, 40, false);
    for (int d = 0; d < TORC_DTYPE_COUNT; d++) ck_assert_double_eq(info.peak_flops[d], 0);
    ck_assert_ptr_nonnull(strstr(info.peak_source, "unknown device: no promise"));
}
END_TEST

// ---- cuBLASLt fp8 planning ----
static tcu_lt_problem lt_problem(int64_t m, int64_t n, int64_t k) {
    tcu_lt_problem p;
    memset(&p, 0, sizeof p);
    p.a = TORC_DTYPE_F8_E4M3FN;
    p.b = TORC_DTYPE_F8_E4M3FN;
    p.out = TORC_DTYPE_BF16;
    p.m = m, p.n = n, p.k = k;
    p.a_rs = k, p.a_cs = 1;     // a row-major
    p.b_rs = 1, p.b_cs = k;     // b column-major (b.t() contiguous)
    p.c_rs = n, p.c_cs = 1;     // out row-major
    p.cc_major = 9;
    return p;
}

START_TEST(lt_plans_fp8_tn_layouts_and_says_why_not) {
    tcu_lt_plan pl;
    tcu_lt_problem p = lt_problem(64, 32, 128);
    tcu_lt_plan_build(&p, &pl);
    ck_assert(pl.ok);
    ck_assert(pl.swap);
    ck_assert_int_eq(pl.mm, 32);
    ck_assert_int_eq(pl.nn, 64);
    ck_assert_int_eq(pl.lda, 128);
    ck_assert_int_eq(pl.ldb, 128);
    ck_assert_int_eq(pl.ldc, 32);
    ck_assert_int_eq(pl.type_d, CUDA_R_16BF);
    ck_assert_uint_eq(pl.workspace, (size_t)32 << 20);
    p.cc_major = 8, p.cc_minor = 9;
    tcu_lt_plan_build(&p, &pl);
    ck_assert(pl.ok);
    ck_assert_uint_eq(pl.workspace, (size_t)4 << 20);
    p.cc_minor = 0;  // A100
    tcu_lt_plan_build(&p, &pl);
    ck_assert(!pl.ok);
    ck_assert_ptr_nonnull(strstr(pl.why, "compute capability 8.9"));
    p = lt_problem(64, 32, 128);
    p.a = p.b = TORC_DTYPE_F8_E5M2;
    tcu_lt_plan_build(&p, &pl);
    ck_assert(!pl.ok);
    ck_assert_ptr_nonnull(strstr(pl.why, "e5m2 x e5m2"));
    p = lt_problem(64, 30, 128);
    tcu_lt_plan_build(&p, &pl);
    ck_assert(!pl.ok);
    ck_assert_ptr_nonnull(strstr(pl.why, "multiple of 16"));
    p = lt_problem(64, 32, 128);
    p.b_rs = 32, p.b_cs = 1;  // b row-major: not TN
    tcu_lt_plan_build(&p, &pl);
    ck_assert(!pl.ok);
    ck_assert_ptr_nonnull(strstr(pl.why, "column-major"));
    // fp8 out: C is bf16, scale and amax pointers go on the descriptor; a column-major out: no swap
    p = lt_problem(64, 32, 128);
    p.out = TORC_DTYPE_F8_E4M3FN;
    p.c_rs = 1, p.c_cs = 64;
    p.fast_accum = true;
    tcu_lt_plan_build(&p, &pl);
    ck_assert(pl.ok);
    ck_assert(!pl.swap);
    ck_assert_int_eq(pl.type_c, CUDA_R_16BF);
    ck_assert_int_eq(pl.type_d, CUDA_R_8F_E4M3);
    float *sa = (float *)(uintptr_t)0x1000, *sb = (float *)(uintptr_t)0x2000, *sd = (float *)(uintptr_t)0x3000,
          *am = (float *)(uintptr_t)0x4000;
    const tcu_lt_ptrs ptrs = {sa, sb, sd, am};
    tcu_lt_descs d;
    char err[128];
    // the plugin reaches cuBLASLt through dlopen'ed entry points; this test links it directly
    static const tcu_lt_api direct = {cublasLtCreate, cublasLtDestroy, cublasLtMatmulDescCreate, cublasLtMatmulDescDestroy,
                                      cublasLtMatmulDescSetAttribute, cublasLtMatrixLayoutCreate, cublasLtMatrixLayoutDestroy,
                                      cublasLtMatmulPreferenceCreate, cublasLtMatmulPreferenceSetAttribute,
                                      cublasLtMatmulPreferenceDestroy, cublasLtMatmulAlgoGetHeuristic, cublasLtMatmul};
    ck_assert_int_eq(tcu_lt_descs_build(&direct, &pl, &p, &ptrs, &d, err, sizeof err), 0);
    int8_t fast = 0;
    size_t wrote = 0;
    ck_assert_int_eq(cublasLtMatmulDescGetAttribute(d.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast, &wrote), 0);
    ck_assert_int_eq(fast, 1);
    cublasOperation_t ta = CUBLAS_OP_N;
    ck_assert_int_eq(cublasLtMatmulDescGetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta, &wrote), 0);
    ck_assert_int_eq(ta, CUBLAS_OP_T);
    const float *got = NULL;
    ck_assert_int_eq(cublasLtMatmulDescGetAttribute(d.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &got, sizeof got, &wrote), 0);
    ck_assert_ptr_eq(got, sa);
    void *amax = NULL;
    ck_assert_int_eq(cublasLtMatmulDescGetAttribute(d.op, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &amax, sizeof amax, &wrote), 0);
    ck_assert_ptr_eq(amax, am);
    uint64_t rows = 0;
    ck_assert_int_eq(cublasLtMatrixLayoutGetAttribute(d.a, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows, &wrote), 0);
    ck_assert_uint_eq(rows, 128);  // A' stored k x mm for op T
    tcu_lt_descs_destroy(&d);
    // the algorithm cache: hit after put, LRU eviction when full
    tcu_lt_cache *cache = calloc(1, sizeof *cache);
    tcu_lt_key key, k16, kno_amax;
    const char *base = (const char *)(uintptr_t)0x10000;
    tcu_lt_key_of(&pl, &p, &ptrs, base, base + 0x1000, base + 0x2000, &key);
    ck_assert_uint_eq(key.align_a, 256);
    // the key tells apart what the heuristic's choice depends on: alignment and epilogue
    tcu_lt_key_of(&pl, &p, &ptrs, base + 16, base + 0x1000, base + 0x2000, &k16);
    ck_assert_uint_eq(k16.align_a, 16);
    const tcu_lt_ptrs no_amax = {sa, sb, sd, NULL};
    tcu_lt_key_of(&pl, &p, &no_amax, base, base + 0x1000, base + 0x2000, &kno_amax);
    cublasLtMatmulAlgo_t algo, hit;
    ck_assert(!tcu_lt_cache_find(cache, &key, &hit));
    memset(&algo, 7, sizeof algo);
    tcu_lt_cache_put(cache, &key, &algo);
    ck_assert(tcu_lt_cache_find(cache, &key, &hit));
    ck_assert(memcmp(&hit, &algo, sizeof algo) == 0);
    ck_assert(!tcu_lt_cache_find(cache, &k16, &hit));
    ck_assert(!tcu_lt_cache_find(cache, &kno_amax, &hit));
    for (int i = 0; i < TCU_LT_CACHE_SLOTS; i++) {
        tcu_lt_key k2 = key;
        k2.k = 1000 + i;
        tcu_lt_cache_put(cache, &k2, &algo);
    }
    ck_assert(!tcu_lt_cache_find(cache, &key, &hit));  // evicted as least recently used
    free(cache);
}
END_TEST

// ---- the real plugin on a machine without a GPU ----
START_TEST(plugin_loads_and_fails_init_cleanly_without_a_device) {
    void *h = open_plugin("cuda");
    ck_assert_ptr_nonnull(h);
    torc_backend_entry_fn entry = (torc_backend_entry_fn)dlsym(h, TORC_BACKEND_ENTRY_SYMBOL);
    ck_assert_ptr_nonnull(entry);
    ck_assert_ptr_null(entry(TORC_BACKEND_ABI_VERSION + (1u << 16)));  // another ABI major
    const torc_backend_vtable *v = entry(TORC_BACKEND_ABI_VERSION);
    ck_assert_ptr_nonnull(v);
    ck_assert_str_eq(v->name, "cuda");
    ck_assert_uint_eq(v->abi_version, TORC_BACKEND_ABI_VERSION);
    ck_assert_uint_eq(v->struct_size, sizeof(torc_backend_vtable));
    ck_assert_ptr_nonnull(v->memory_stats);
    ck_assert_ptr_nonnull(v->empty_cache);
    // an option it does not take is refused by name, before anything touches a driver
    void *c = NULL;
    ck_assert_int_eq(v->init((const char *const[]){"allow_tf32=1", "bogus=3", NULL}, &c), TORC_ERR_INVALID_ARG);
    ck_assert_str_eq(v->last_error(NULL), "cuda: unknown option 'bogus' (it takes allow_tf32)");
    ck_assert_int_eq(v->init((const char *const[]){"allow_tf32=yes", NULL}, &c), TORC_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(v->last_error(NULL), "allow_tf32 takes 0 or 1"));
    ck_assert_ptr_null(c);
    // before init, nothing works and nothing crashes
    ck_assert_int_eq(v->device_count(v_ctx), 0);
    ck_assert_ptr_null(v->alloc(v_ctx, 0, 16));
    ck_assert_ptr_nonnull(strstr(v->last_error(v_ctx), "before init()"));
    const int rc = v->init(NULL, &v_ctx);
    if (rc == TORC_OK) {  // a machine with a GPU: the GPU suite covers it
        ck_assert_int_gt(v->device_count(v_ctx), 0);
        v->shutdown(v_ctx);
        dlclose(h);
        return;
    }
    ck_assert_int_eq(rc, TORC_ERR_BACKEND);
    const char *msg = v->last_error(v_ctx);
    ck_assert(strncmp(msg, "no CUDA driver found", 20) == 0 ||
              strncmp(msg, "CUDA driver found but no CUDA device (cudaGetDeviceCount: ", 58) == 0);
    char first[512];
    snprintf(first, sizeof first, "%s", msg);
    ck_assert_int_eq(v->init(NULL, &v_ctx), TORC_ERR_BACKEND);  // twice: the same clean answer
    ck_assert_str_eq(v->last_error(v_ctx), first);
    ck_assert_int_eq(v->device_count(v_ctx), 0);
    ck_assert_ptr_null(v->alloc(v_ctx, 0, 16));
    ck_assert_ptr_nonnull(strstr(v->last_error(v_ctx), first));
    torc_device_info info;
    ck_assert_int_eq(v->device_info(v_ctx, 0, &info), TORC_ERR_BACKEND);
    ck_assert_int_eq(v->synchronize(v_ctx, 0), TORC_ERR_BACKEND);
    uint64_t al = 1, re = 1, pk = 1;
    ck_assert_int_eq(v->memory_stats(v_ctx, 0, &al, &re, &pk), TORC_ERR_BACKEND);
    ck_assert_int_eq(v->empty_cache(v_ctx, 0), TORC_ERR_BACKEND);
    char buf[4];
    ck_assert_int_eq(v->copy(v_ctx, 0, buf, buf, 4, TORC_COPY_DEVICE_TO_DEVICE, false), TORC_ERR_BACKEND);
    torc_op op;
    memset(&op, 0, sizeof op);
    op.code = TORC_OP_FILL;
    op.n_out = 1;
    // supports() decides by the device's compute capability: without a device, nothing
    ck_assert(!v->supports(v_ctx, 0, &op));
    ck_assert_ptr_nonnull(strstr(v->last_error(v_ctx), first));
    ck_assert_int_eq(v->run(v_ctx, 0, &op), TORC_ERR_BACKEND);
    v->free(v_ctx, 0, NULL);
    v->shutdown(v_ctx);
    ck_assert_int_eq(v->init(NULL, &v_ctx), TORC_ERR_BACKEND);  // after shutdown, init probes again: same answer
    ck_assert_str_eq(v->last_error(v_ctx), first);
    v->shutdown(v_ctx);
    dlclose(h);
}
END_TEST

static bool mapped(const char *needle) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    bool found = false;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, needle)) found = true;
    if (f) fclose(f);
    return found;
}

START_TEST(loading_the_plugin_maps_no_cublas) {
    // cuBLAS is ~600 MB of code: only the first matmul may bring it in, not dlopen or init.
    void *h = open_plugin("cuda");
    ck_assert_ptr_nonnull(h);
    const torc_backend_vtable *v = ((torc_backend_entry_fn)dlsym(h, TORC_BACKEND_ENTRY_SYMBOL))(TORC_BACKEND_ABI_VERSION);
    v->init(NULL, &v_ctx);
    ck_assert(!mapped("/libcublas.so"));
    v->shutdown(v_ctx);
    dlclose(h);
    // and the lazy loader finds it (the toolkit is installed here)
    const tcu_blas_api *api = tcu_blas_api_get();
    ck_assert_msg(api != NULL, "%s", g_err);
    ck_assert_ptr_nonnull(api->gemm_strided_batched_ex);
    ck_assert_ptr_nonnull(__real_tcu_lt_api_get());
    ck_assert_ptr_nonnull(__real_tcu_lt_api_get()->matmul);
    ck_assert(mapped("/libcublas.so"));
}
END_TEST

START_TEST(supports_refuses_malformed_descriptors) {
    torc_op op;
    memset(&op, 0, sizeof op);
    char why[160];
    op.code = TORC_OP_COUNT;
    op.n_out = 1;
    ck_assert(!tcu_supports_op(&op, 90, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "unknown opcode"));
    op.code = TORC_OP_MATMUL_ROUNDED;  // declined whatever the operands: autocast casts instead
    op.n_in = 2;
    ck_assert(!tcu_supports_op(&op, 90, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "matmul_rounded is not taken on cuda"));
    op.code = TORC_OP_CROSS_ENTROPY;  // ABI 2.5: declined whatever the operands, the core composes it
    op.n_in = 3;
    op.n_out = 2;
    ck_assert(!tcu_supports_op(&op, 90, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "cross_entropy is not implemented on cuda"));
    op.code = TORC_OP_ADD;
    op.n_out = 1;
    op.n_in = 1;
    ck_assert(!tcu_supports_op(&op, 90, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "takes 2 inputs"));
    op.n_in = 2;
    op.out[0].ndim = 9;
    ck_assert(!tcu_supports_op(&op, 90, why, sizeof why));
    op.out[0].ndim = 1;
    op.out[0].shape[0] = 3;
    op.in[0].ndim = op.in[1].ndim = 1;
    op.in[0].shape[0] = 3;
    op.in[1].shape[0] = 2;
    ck_assert(!tcu_supports_op(&op, 90, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "not broadcast"));
    op.in[1].shape[0] = 3;
    op.in[1].stride[0] = -1;
    ck_assert(!tcu_supports_op(&op, 90, why, sizeof why));
    op.in[1].stride[0] = 1;
    ck_assert(tcu_supports_op(&op, 90, why, sizeof why));
}
END_TEST

int main(void) {
    Suite *s = suite_create("cuda_host");
    TCase *plans = tcase_create("plans");
    tcase_set_timeout(plans, 120);
    tcase_add_test(plans, fast_division_is_exact);
    tcase_add_test(plans, philox_normal_needs_no_math_library);
    tcase_add_test(plans, dims_merge_when_contiguous_for_every_operand);
    tcase_add_test(plans, index_math_picks_32_bit_only_when_it_fits);
    tcase_add_test(plans, launch_configuration_covers_the_work);
    tcase_add_test(plans, few_strided_softmax_rows_share_threads);
    tcase_add_test(plans, conversions_match_convert_h);
    tcase_add_test(plans, gemm_layouts_use_op_flags_not_copies);
    tcase_add_test(plans, lt_plans_fp8_tn_layouts_and_says_why_not);
    tcase_add_test(plans, device_table_promises_datasheet_peaks);
    tcase_add_test(plans, supports_refuses_malformed_descriptors);
    tcase_add_test(plans, supports_decides_fp8_matmul_by_compute_capability);
    suite_add_tcase(s, plans);
    TCase *mem = tcase_create("memory");
    tcase_set_timeout(mem, 120);
    tcase_add_test(mem, allocator_reuses_splits_and_merges);
    tcase_add_test(mem, allocator_releases_cache_and_retries_on_oom);
    tcase_add_test(mem, allocator_stress_keeps_blocks_disjoint);
    tcase_add_test(mem, pinned_blocks_wait_for_their_copy);
    tcase_add_test(mem, allocator_reports_a_faulted_device_not_oom);
    tcase_add_test(mem, raw_allocations_tell_oom_from_a_faulted_device);
    tcase_add_test(mem, make_current_follows_the_runtime);
    suite_add_tcase(s, mem);
    TCase *emu = tcase_create("emulated_kernels_vs_reference");
    tcase_add_checked_fixture(emu, setup_ref, teardown_ref);
    tcase_set_timeout(emu, 600);
    tcase_add_test(emu, unary_ops_match_reference);
    tcase_add_test(emu, binary_ops_match_reference);
    tcase_add_test(emu, contiguous_float_ops_take_the_vector_path);
    tcase_add_test(emu, where_copy_fill_match_reference);
    tcase_add_test(emu, fused_ops_match_reference);
    tcase_add_test(emu, adam_step_matches_reference_bit_for_bit);
    tcase_add_test(emu, adam_step_list_matches_reference_bit_for_bit);
    tcase_add_test(emu, ranges_and_rng_match_reference);
    tcase_add_test(emu, reductions_match_reference);
    tcase_add_test(emu, softmax_matches_reference);
    tcase_add_test(emu, layer_norm_runs_through_run_c);
    tcase_add_test(emu, matmul_matches_reference);
    tcase_add_test(emu, index_ops_match_reference);
    tcase_add_test(emu, index_add_sums_in_index_order);
    tcase_add_test(emu, attention_runs_through_run_c);
    tcase_add_test(emu, attention_supports_what_the_kernels_take);
    tcase_add_test(emu, scaled_mm_matches_reference);
    tcase_add_test(emu, fp8_outputs_saturate_as_the_reference);
    tcase_add_test(emu, pending_copies_leave_no_error_for_the_next_launch);
    tcase_add_test(emu, lt_algorithms_fit_the_operands_alignment_and_epilogue);
    tcase_add_test(emu, lt_without_a_kernel_falls_back_to_the_generic_kernel);
    tcase_add_test(emu, scaled_mm_with_an_empty_side_never_asks_cublaslt);
    suite_add_tcase(s, emu);
    TCase *plugin = tcase_create("plugin");
    tcase_add_test(plugin, plugin_loads_and_fails_init_cleanly_without_a_device);
    tcase_add_test(plugin, loading_the_plugin_maps_no_cublas);
    suite_add_tcase(s, plugin);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    const int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
