// backends/cpu_onednn/cache.c — the primitive cache: plans keyed by everything of an op
// descriptor except its data pointers, bounded, least-recently-used eviction.
// Creating a oneDNN primitive (JIT code generation) costs far more than running a small one,
// so a training loop must build each primitive once. Declines are cached too: supports()
// is asked before every op. Callers hold the backend's lock.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onednn-impl.h"

#define ONEDNN_CACHE_CAPACITY 512

// The key: a flat record compared with memcmp, zero-filled so padding and unused dims match.
typedef struct onednn_key {
    int32_t code, n_in;
    int32_t dtype[TORC_OP_MAX_INPUTS + 1], ndim[TORC_OP_MAX_INPUTS + 1];
    int64_t shape[TORC_OP_MAX_INPUTS + 1][TORC_MAX_DIMS];
    int64_t stride[TORC_OP_MAX_INPUTS + 1][TORC_MAX_DIMS];
    double pvalue;   // the params this op reads (scalar value, alpha)
    int64_t pint;    // (gelu approximate, reduce mask, softmax dim)
} onednn_key;

typedef struct onednn_entry {
    uint64_t tick;   // last use, for LRU eviction
    onednn_key key;
    int status;      // 0: plan is valid; else the cached decline
    char why[256];   // the decline's message
    onednn_plan plan;
} onednn_entry;

// The hashes sit in their own array, so a lookup scans one contiguous run instead of chasing a
// pointer an entry (the scan cost ~1% of a small model's step when it read e->hash).
static onednn_entry *g_entries[ONEDNN_CACHE_CAPACITY];
static uint64_t g_hashes[ONEDNN_CACHE_CAPACITY];
static int g_count;
static uint64_t g_tick;

static void put_operand(onednn_key *k, int i, const torc_operand *x) {
    k->dtype[i] = (int32_t)x->dtype;
    k->ndim[i] = x->ndim;
    for (int d = 0; d < x->ndim && d < TORC_MAX_DIMS; d++) {
        k->shape[i][d] = x->shape[d];
        k->stride[i][d] = x->stride[d];
    }
}

static void make_key(onednn_key *k, const torc_op *op) {
    memset(k, 0, sizeof *k);
    k->code = (int32_t)op->code;
    k->n_in = op->n_in;
    for (int i = 0; i < op->n_in && i < TORC_OP_MAX_INPUTS; i++) put_operand(k, i, &op->in[i]);
    put_operand(k, TORC_OP_MAX_INPUTS, &op->out[0]);
    switch (op->code) {
    case TORC_OP_ADD: case TORC_OP_SUB: case TORC_OP_POW_SCALAR:
        k->pvalue = op->params.scalar.value;
        break;
    case TORC_OP_GELU: k->pint = op->params.gelu.approximate; break;
    case TORC_OP_SUM: case TORC_OP_MEAN: case TORC_OP_PROD: case TORC_OP_MAX: case TORC_OP_MIN:
        k->pint = op->params.reduce.mask;
        break;
    case TORC_OP_SOFTMAX: case TORC_OP_LOG_SOFTMAX: k->pint = op->params.dim.dim; break;
    case TORC_OP_MATMUL_ROUNDED: k->pint = op->params.matmul.dtype; break;
    default: break;
    }
}

// Word-wise multiply hash in four independent lanes: the key is ~700 bytes and is hashed on
// every op (twice: supports, then run), and one serial multiply-xorshift chain over it cost
// ~0.15 us, 10% of a tiny model's step. A collision only costs a memcmp.
_Static_assert(sizeof(onednn_key) % (4 * sizeof(uint64_t)) == 0, "key hashed as whole words, four lanes");
static uint64_t hash_key(const onednn_key *k) {
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h[4] = {UINT64_C(0x9E3779B97F4A7C15), UINT64_C(0xC2B2AE3D27D4EB4F), UINT64_C(0x165667B19E3779F9),
                     UINT64_C(0x27D4EB2F165667C5)};
    for (size_t i = 0; i < sizeof *k; i += 4 * sizeof(uint64_t))
        for (int j = 0; j < 4; j++) {
            uint64_t w;
            memcpy(&w, p + i + j * sizeof w, sizeof w);
            h[j] = (h[j] ^ w) * UINT64_C(0xBF58476D1CE4E5B9);
            h[j] ^= h[j] >> 31;
        }
    uint64_t x = h[0] ^ (h[1] << 16 | h[1] >> 48) ^ (h[2] << 32 | h[2] >> 32) ^ (h[3] << 48 | h[3] >> 16);
    x ^= x >> 31;
    x *= UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 29);
}

// oneDNN 2.6 computes bf16 in JIT code from AVX512_CORE only; below it (AVX2, SSE4.1, or
// ONEDNN_MAX_CPU_ISA) it takes emulated or reference paths, and its SSE4.1 binary kernel read a
// broadcast bf16 operand beside an f32 one wrongly. Those ops go to the reference. (bf16 matmuls
// choose their own path: matmul.c; strided f32 <-> bf16 copies are torc's own conversion loops,
// copy.c, no oneDNN kernel: under the AVX2 cap the reference's element loop ran bf16 autocast's
// casts of q, k and v, 97 ms of a 1.7 s GPT step, config B.)
static bool own_bf16_convert(const torc_op *op) {
    if (op->code != TORC_OP_COPY || op->n_in != 1) return false;
    const torc_dtype s = op->in[0].dtype, d = op->out[0].dtype;
    return (s == TORC_DTYPE_F32 && d == TORC_DTYPE_BF16) || (s == TORC_DTYPE_BF16 && d == TORC_DTYPE_F32);
}

static int bf16_ok(const torc_op *op) {
    if (onednn__is_matmul(op->code) || own_bf16_convert(op) || onednn__dnnl_isa() >= ONEDNN_ISA_AVX512_CORE) return 0;
    bool bf16 = op->out[0].dtype == TORC_DTYPE_BF16;
    for (int i = 0; i < op->n_in; i++) bf16 = bf16 || op->in[i].dtype == TORC_DTYPE_BF16;
    if (!bf16) return 0;
    return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s in bfloat16 is left to the reference backend: "
                         "oneDNN's ISA here is %s, and its bf16 kernels need AVX512_CORE",
                         onednn__op_name(op->code), onednn__isa_name(onednn__dnnl_isa()));
}

static int build(const torc_op *op, onednn_plan *p) {
    int st = bf16_ok(op);
    if (st) return st;
    switch (op->code) {
    case TORC_OP_MATMUL: case TORC_OP_MATMUL_ROUNDED: return onednn__build_matmul(op, p);
    case TORC_OP_NEG: case TORC_OP_ABS: case TORC_OP_SQRT: case TORC_OP_RSQRT:
    case TORC_OP_SQUARE: case TORC_OP_RECIPROCAL: case TORC_OP_EXP: case TORC_OP_LOG:
    case TORC_OP_TANH: case TORC_OP_SIGMOID: case TORC_OP_RELU: case TORC_OP_GELU:
    case TORC_OP_POW_SCALAR:
        return onednn__build_unary(op, p);
    case TORC_OP_ADD: case TORC_OP_SUB: case TORC_OP_MUL: case TORC_OP_DIV:
    case TORC_OP_MAXIMUM: case TORC_OP_MINIMUM:
        return onednn__build_binary(op, p);
    case TORC_OP_SUM: case TORC_OP_MEAN: case TORC_OP_PROD: case TORC_OP_MAX: case TORC_OP_MIN:
        return onednn__build_reduce(op, p);
    case TORC_OP_SOFTMAX: case TORC_OP_LOG_SOFTMAX: return onednn__build_softmax(op, p);
    case TORC_OP_COPY: return onednn__build_copy(op, p);
    default:
        return onednn__error(TORC_ERR_NOT_SUPPORTED, "onednn: %s is not implemented by this backend",
                             onednn__op_name(op->code));
    }
}

int64_t onednn__work(const torc_op *op) {
    // A malformed descriptor counts as large, so check_op sees it and says what is wrong.
    if ((unsigned)op->n_in > TORC_OP_MAX_INPUTS || (unsigned)op->out[0].ndim > TORC_MAX_DIMS) return INT64_MAX;
    for (int i = 0; i < op->n_in; i++)
        if ((unsigned)op->in[i].ndim > TORC_MAX_DIMS) return INT64_MAX;
    if (onednn__is_matmul(op->code) && (op->in[0].ndim < 1 || op->n_in < 1)) return INT64_MAX;
    int64_t w = onednn__numel(&op->out[0]);
    for (int i = 0; i < op->n_in; i++) {
        const int64_t n = onednn__numel(&op->in[i]);
        if (n > w) w = n;
    }
    if (onednn__is_matmul(op->code) && op->out[0].ndim >= 2)  // batch x M x N x K
        w = onednn__numel(&op->out[0]) * op->in[0].shape[op->in[0].ndim - 1];
    return w;
}

static void entry_destroy(onednn_entry *e) {
    onednn__plan_destroy(&e->plan);
    free(e);
}

// Validates what the key and the builders read unchecked.
static int check_op(const torc_op *op) {
    if ((int)op->code < 0 || op->code >= TORC_OP_COUNT)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: unknown opcode %d", (int)op->code);
    if (op->n_in < 0 || op->n_in > TORC_OP_MAX_INPUTS)
        return onednn__error(TORC_ERR_INVALID_ARG, "onednn: %s has n_in %d (allowed 0..%d)",
                             onednn__op_name(op->code), op->n_in, TORC_OP_MAX_INPUTS);
    static const char *names[TORC_OP_MAX_INPUTS] = {"in[0]", "in[1]", "in[2]", "in[3]"};
    for (int i = 0; i < op->n_in; i++) {
        int st = onednn__check_operand(&op->in[i], names[i]);
        if (st) return st;
    }
    return onednn__check_operand(&op->out[0], "out");
}

int onednn__cache_get(const torc_op *op, const onednn_plan **plan) {
    int st = check_op(op);
    if (st) return st;
    onednn_key key;
    make_key(&key, op);
    const uint64_t h = hash_key(&key);
    for (int i = 0; i < g_count; i++) {
        if (g_hashes[i] != h) continue;
        onednn_entry *e = g_entries[i];
        if (memcmp(&e->key, &key, sizeof key) != 0) continue;
        e->tick = ++g_tick;
        if (e->status) return onednn__error(e->status, "%s", e->why);
        *plan = &e->plan;
        return 0;
    }

    onednn_entry *e = calloc(1, sizeof *e);
    if (!e) return onednn__error(TORC_ERR_OOM, "onednn: out of memory for the primitive cache");
    e->key = key;
    // Kernels sized for one thread from the start: some size their parallel split at creation.
    const bool single = onednn__single_thread(op->code, onednn__work(op));
    const int nthr = omp_get_max_threads();
    if (single) omp_set_num_threads(1);
    st = build(op, &e->plan);
    if (single) omp_set_num_threads(nthr);
    e->plan.single_thread = single;
    if (st) {
        onednn__plan_destroy(&e->plan);
        if (st != TORC_ERR_NOT_SUPPORTED) {  // a real failure (out of memory...) may pass
            free(e);
            return st;
        }
        e->status = st;
        snprintf(e->why, sizeof e->why, "%s", onednn__last_error_text());
    }
    if (g_count == ONEDNN_CACHE_CAPACITY) {  // evict the least recently used
        int lru = 0;
        for (int i = 1; i < g_count; i++)
            if (g_entries[i]->tick < g_entries[lru]->tick) lru = i;
        entry_destroy(g_entries[lru]);
        g_entries[lru] = g_entries[--g_count];
        g_hashes[lru] = g_hashes[g_count];
    }
    e->tick = ++g_tick;
    g_hashes[g_count] = h;
    g_entries[g_count++] = e;
    if (e->status) return e->status;  // the error is still set from the build
    *plan = &e->plan;
    return 0;
}

void onednn__cache_clear(void) {
    for (int i = 0; i < g_count; i++) entry_destroy(g_entries[i]);
    g_count = 0;
}
