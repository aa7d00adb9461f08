// tools/torc-xcheck.c — cross-checks a backend against the reference backend: every op x dtype x
// shape family as one op on the backend (torc_run_op, the public single-op API, with
// TORC_RUN_NATIVE) over sentinel-guarded buffers (or through the frontends where the op falls
// back), gradients by finite differences (--grad) and timings (--perf).
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <torc/convert.h>
#include <torc/gpt.h>
#include <torc/torc.h>

// Tools may exit on setup errors (STYLE.md); the library never does.
#define xcheck_die(...) (fprintf(stderr, "torc-xcheck: " __VA_ARGS__), fputc('\n', stderr), exit(2))

// ---- options ----
typedef struct options {
    const char *backend;                  // NULL: TORC_BACKEND / the default device
    bool op_on[TORC_OP_COUNT];            // --op filter
    bool dtype_on[TORC_DTYPE_COUNT];      // --dtype filter
    bool check, grad, perf;               // modes (check when neither --grad nor --perf)
    bool csv, quiet, color, verbose;
    bool api;                             // --api: every family through the public API as well
    double tol_scale;                     // multiplies every tolerance
    uint64_t seed;
    int64_t perf_n;                       // elements of an elementwise op under --perf
    int64_t perf_mm;                      // M = N = K of matmul under --perf
    int sweep;                            // --sweep: 1, --sweep=full: 2 (layout sweeps; see there)
} options;
static options g_opt;

// The backend under test and the oracle.
typedef struct target {
    torc_device *dev, *ref;
    bool host;     // the backend's memory is host memory (ops it lacks fall back to the reference)
    bool fallback; // ops it declines run on the reference: host memory, or a device backend under
                   // TORC_DEVICE_FALLBACK=1 (copied to the host and back)
} target;
static target g_t;

static bool g_any_failure;

// ---- small utilities ----
typedef struct rng { uint64_t s; } rng;  // splitmix64: deterministic data for every case

static uint64_t rng_next(rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double rng_unit(rng *r) { return (double)(rng_next(r) >> 11) * 0x1p-53; }
static int64_t rng_int(rng *r, int64_t lo, int64_t hi) {  // inclusive
    return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}
static uint64_t hash_str(uint64_t h, const char *s) {
    while (*s) h = (h ^ (unsigned char)*s++) * 0x100000001B3ull;
    return h;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static size_t esize(torc_dtype d) { return torc_dtype_size(d); }
static bool is_float(torc_dtype d) { return torc_dtype_is_floating(d); }
static const char *dshort(torc_dtype d) { return torc_dtype_short_name(d); }

// One ulp at 1.0 of a floating dtype (torch.finfo(d).eps); 0 for exact dtypes.
static double eps_of(torc_dtype d) {
    double e = 0;
    if (is_float(d)) torc_finfo(d, NULL, NULL, &e, NULL);
    return e;
}

// Element load/store for every dtype, as the reference backend does them.
static double ld_f(const unsigned char *p, torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_F64: { double v; memcpy(&v, p, 8); return v; }
    case TORC_DTYPE_F32: { float v; memcpy(&v, p, 4); return v; }
    case TORC_DTYPE_F16: { uint16_t v; memcpy(&v, p, 2); return torc_f16_to_f32(v); }
    case TORC_DTYPE_BF16: { uint16_t v; memcpy(&v, p, 2); return torc_bf16_to_f32(v); }
    case TORC_DTYPE_F8_E4M3FN: return torc_f8e4m3fn_to_f32(*p);
    case TORC_DTYPE_F8_E5M2: return torc_f8e5m2_to_f32(*p);
    case TORC_DTYPE_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case TORC_DTYPE_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case TORC_DTYPE_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case TORC_DTYPE_I8: return (int8_t)*p;
    case TORC_DTYPE_U8: return *p;
    case TORC_DTYPE_BOOL: return *p != 0;
    default: return NAN;
    }
}

static int64_t ld_i(const unsigned char *p, torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_I64: { int64_t v; memcpy(&v, p, 8); return v; }
    case TORC_DTYPE_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case TORC_DTYPE_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case TORC_DTYPE_I8: return (int8_t)*p;
    case TORC_DTYPE_U8: case TORC_DTYPE_BOOL: return *p;
    default: return (int64_t)ld_f(p, d);
    }
}

// Stores v (already integral and in range for integer dtypes) rounded to d.
static void st_f(unsigned char *p, torc_dtype d, double v) {
    switch (d) {
    case TORC_DTYPE_F64: memcpy(p, &v, 8); return;
    case TORC_DTYPE_F32: { float f = (float)v; memcpy(p, &f, 4); return; }
    case TORC_DTYPE_F16: { uint16_t h = torc_f32_to_f16((float)v); memcpy(p, &h, 2); return; }
    case TORC_DTYPE_BF16: { uint16_t h = torc_f32_to_bf16((float)v); memcpy(p, &h, 2); return; }
    case TORC_DTYPE_F8_E4M3FN: *p = torc_f32_to_f8e4m3fn((float)v); return;
    case TORC_DTYPE_F8_E5M2: *p = torc_f32_to_f8e5m2((float)v); return;
    case TORC_DTYPE_I64: { int64_t i = (int64_t)v; memcpy(p, &i, 8); return; }
    case TORC_DTYPE_I32: { int32_t i = (int32_t)v; memcpy(p, &i, 4); return; }
    case TORC_DTYPE_I16: { int16_t i = (int16_t)v; memcpy(p, &i, 2); return; }
    case TORC_DTYPE_I8: { int8_t i = (int8_t)v; memcpy(p, &i, 1); return; }
    case TORC_DTYPE_U8: *p = (uint8_t)v; return;
    case TORC_DTYPE_BOOL: *p = v != 0; return;
    default: return;
    }
}

// ---- operand specs and buffer images ----
// A strided operand inside its own buffer. The buffer's host image is PAD sentinel bytes, then
// `extent` elements, then PAD sentinel bytes; element [0, ...] sits `offset` elements in.
// A tight operand (the sweeps' inputs) has no bytes after its last element, and its buffer is a
// whole number of 64-byte blocks, so that a backend reading past the view reads past the device's
// allocation, which AddressSanitizer reports even where the values read would not show.
#define PAD 64
#define SENTINEL 0xA5

typedef struct spec {
    torc_dtype dtype;
    int ndim;
    int64_t shape[TORC_MAX_DIMS], stride[TORC_MAX_DIMS];
    int64_t offset, extent;
    bool tight;
} spec;

static int64_t numel_of(int nd, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    return n;
}
static int64_t spec_numel(const spec *s) { return numel_of(s->ndim, s->shape); }
static size_t image_bytes(const spec *s) { return (s->tight ? 1 : 2) * PAD + (size_t)s->extent * esize(s->dtype); }

static void contig_strides(int nd, const int64_t *shape, int64_t *stride) {
    int64_t st = 1;
    for (int i = nd - 1; i >= 0; i--) {
        stride[i] = st;
        st *= shape[i] > 0 ? shape[i] : 1;
    }
}

// Fixes extent: the last element reached plus three spare elements, so a write just past the
// view lands in the buffer where the guard sees it. A tight spec: no spare elements, and offset
// the holes that make the buffer a multiple of 64 bytes.
static spec spec_done(spec s) {
    int64_t reach = 0;
    bool empty = false;
    for (int i = 0; i < s.ndim; i++) {
        if (s.shape[i] == 0) empty = true;
        else reach += (s.shape[i] - 1) * s.stride[i];
    }
    const int64_t used = empty ? 0 : reach + 1;
    if (s.tight) {
        const int64_t es = (int64_t)esize(s.dtype), bytes = used * es;
        s.offset = (64 - bytes % 64) % 64 / es;
        s.extent = s.offset + used;
        if (s.extent == 0) s.offset = 0, s.extent = 64 / es;  // (no zero-byte buffers: one block of holes)
        return s;
    }
    s.extent = s.offset + used + 3;
    return s;
}

static spec sp_tight(spec s) {
    s.tight = true;
    return spec_done(s);
}

static spec sp_contig(torc_dtype dt, int nd, const int64_t *shape) {
    spec s = {.dtype = dt, .ndim = nd};
    memcpy(s.shape, shape, (size_t)nd * sizeof *shape);
    contig_strides(nd, shape, s.stride);
    return spec_done(s);
}

// A transposed view: memory holds the last two dims swapped.
static spec sp_trans(torc_dtype dt, int nd, const int64_t *shape) {
    if (nd < 2) return sp_contig(dt, nd, shape);
    spec s = sp_contig(dt, nd, shape);
    int64_t m[TORC_MAX_DIMS], ms[TORC_MAX_DIMS];
    memcpy(m, shape, (size_t)nd * sizeof *shape);
    m[nd - 1] = shape[nd - 2], m[nd - 2] = shape[nd - 1];
    contig_strides(nd, m, ms);
    s.stride[nd - 1] = ms[nd - 2], s.stride[nd - 2] = ms[nd - 1];
    return spec_done(s);
}

// Python's t[1::3, 1::2]-style slice: a step on the first and last dims, starting one element in.
static spec sp_step(torc_dtype dt, int nd, const int64_t *shape) {
    spec s = {.dtype = dt, .ndim = nd};
    memcpy(s.shape, shape, (size_t)nd * sizeof *shape);
    int64_t m[TORC_MAX_DIMS] = {0}, ms[TORC_MAX_DIMS], step[TORC_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        step[i] = i == nd - 1 ? 2 : (i == 0 ? 3 : 1);
        m[i] = shape[i] * step[i] + 1;
    }
    contig_strides(nd, m, ms);
    for (int i = 0; i < nd; i++) {
        s.stride[i] = ms[i] * step[i];
        s.offset += ms[i];
    }
    return spec_done(s);
}

// The frontend's expand: dims in bmask have stride 0.
static spec sp_bcast(torc_dtype dt, int nd, const int64_t *shape, unsigned bmask) {
    int64_t r[TORC_MAX_DIMS] = {0};
    for (int i = 0; i < nd; i++) r[i] = (bmask >> i & 1) ? 1 : shape[i];
    spec s = sp_contig(dt, nd, r);
    memcpy(s.shape, shape, (size_t)nd * sizeof *shape);
    for (int i = 0; i < nd; i++)
        if (bmask >> i & 1) s.stride[i] = 0;
    return spec_done(s);
}

typedef enum { L_C, L_T, L_S, L_B } layout;  // contiguous, transposed, sliced with step, broadcast
static spec sp_make(layout l, torc_dtype dt, int nd, const int64_t *shape, unsigned bmask) {
    switch (l) {
    case L_T: return sp_trans(dt, nd, shape);
    case L_S: return sp_step(dt, nd, shape);
    case L_B: return sp_bcast(dt, nd, shape, bmask);
    default: return sp_contig(dt, nd, shape);
    }
}

// Element offset (in elements, from the buffer start) of the lin-th element in row-major order.
static int64_t spec_lin(const spec *s, int64_t lin) {
    int64_t off = s->offset;
    for (int d = s->ndim - 1; d >= 0; d--) {
        off += (lin % s->shape[d]) * s->stride[d];
        lin /= s->shape[d];
    }
    return off;
}
// The element offsets of s in row-major order (malloc'ed, numel entries), by an odometer instead
// of spec_lin's divisions per dim per element, which the sweeps' many elements felt.
static int64_t *spec_offsets(const spec *s) {
    const int64_t n = spec_numel(s);
    int64_t *o = malloc(sizeof *o * (size_t)(n > 0 ? n : 1)), idx[TORC_MAX_DIMS] = {0}, off = s->offset;
    if (!o) xcheck_die("out of memory");
    for (int64_t i = 0; i < n; i++) {
        o[i] = off;
        for (int d = s->ndim - 1; d >= 0; d--) {
            if (++idx[d] < s->shape[d]) {
                off += s->stride[d];
                break;
            }
            off -= (s->shape[d] - 1) * s->stride[d];
            idx[d] = 0;
        }
    }
    return o;
}
static void unravel(int nd, const int64_t *shape, int64_t lin, int64_t *idx) {
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = shape[d] ? lin % shape[d] : 0;
        lin = shape[d] ? lin / shape[d] : 0;
    }
}
static unsigned char *elem(unsigned char *img, const spec *s, int64_t off) {
    return img + PAD + (size_t)off * esize(s->dtype);
}
static const unsigned char *celem(const unsigned char *img, const spec *s, int64_t off) {
    return img + PAD + (size_t)off * esize(s->dtype);
}

static const char *idx_str(const spec *s, int64_t lin, char *buf, size_t n) {
    int64_t idx[TORC_MAX_DIMS];
    unravel(s->ndim, s->shape, lin, idx);
    size_t u = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < s->ndim && u < n; d++) u += (size_t)snprintf(buf + u, n - u, "%s%lld", d ? ", " : "", (long long)idx[d]);
    if (u < n) snprintf(buf + u, n - u, "]");
    return buf;
}

// ---- input data ----
typedef enum {
    D_REAL,      // uniform in [-2, 2] * scale
    D_POS,       // [0.1, 4]: sqrt, log, pow bases
    D_AWAY0,     // +-[0.5, 2]: divisors
    D_UNIT,      // (-0.95, 0.95) * scale: erfinv
    D_DISCRETE,  // a few values with repeats, so comparisons meet equality
    D_NEAR1,     // +-[0.9, 1.1]: long products
    D_WIDE,      // [-100, 100] * scale: casts
    D_UWIDE,     // [0, 200) (integers [0, 100]): casts to uint8
    D_INDEX,     // integers in [0, hi]
    D_SPECIAL,   // NaN, +-inf, +-0, a subnormal, mixed with ordinary values
    D_EXPONENT,  // integer exponents [0, 5] / real [-2, 2]
} dom_kind;
typedef struct domain { dom_kind kind; double scale; int64_t hi; } domain;
#define DOM(k) ((domain){(k), 1.0, 0})
#define DOMS(k, s) ((domain){(k), (s), 0})
#define DOMI(hi) ((domain){D_INDEX, 1.0, (hi)})

static double gen_value(rng *r, domain dm, torc_dtype dt) {
    if (dm.kind == D_INDEX) return (double)rng_int(r, 0, dm.hi);
    if (dt == TORC_DTYPE_BOOL) return (double)(rng_next(r) & 1);
    if (!is_float(dt)) {
        int64_t lo = -9, hi = 9;
        switch (dm.kind) {
        case D_POS: lo = 1; break;
        case D_AWAY0: { int64_t v = rng_int(r, 1, 9); return (double)(dt != TORC_DTYPE_U8 && (rng_next(r) & 1) ? -v : v); }
        case D_NEAR1: lo = -2, hi = 2; break;
        case D_EXPONENT: lo = 0, hi = 5; break;
        case D_DISCRETE: lo = -2, hi = 2; break;
        case D_WIDE: lo = -100, hi = 100; break;
        case D_UWIDE: lo = 0, hi = 100; break;
        default: break;
        }
        if (dt == TORC_DTYPE_U8 && lo < 0) hi -= lo, lo = 0;
        return (double)rng_int(r, lo, hi);
    }
    const double u = rng_unit(r), sign = (rng_next(r) & 1) ? -1.0 : 1.0;
    switch (dm.kind) {
    case D_POS: return 0.1 + 3.9 * u;
    case D_AWAY0: return sign * (0.5 + 1.5 * u);
    case D_UNIT: return (1.9 * u - 0.95) * dm.scale;
    case D_DISCRETE: { static const double v[] = {-1, -0.5, 0, 0.5, 1, 2}; return v[rng_next(r) % 6]; }
    case D_NEAR1: return sign * (0.9 + 0.2 * u);
    case D_WIDE: return (200 * u - 100) * dm.scale;
    case D_UWIDE: return 200 * u;
    case D_EXPONENT: return 4 * u - 2;
    case D_SPECIAL:
        if (rng_next(r) % 5 < 2) {
            const double sub = dt == TORC_DTYPE_F64 ? 1e-310 : dt == TORC_DTYPE_F16 ? 1e-6 : 1e-40;
            const double v[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 1e-3, sub, -sub};
            return v[rng_next(r) % (sizeof v / sizeof v[0])];
        }
        return 4 * u - 2;
    default: return (4 * u - 2) * dm.scale;
    }
}

// Fills an input image: sentinel pads, "hole" values between elements (NaN for floats, so a
// backend that reads a gap shows up), then the elements.
static unsigned char *make_input(const spec *s, domain dm, rng *r) {
    unsigned char *img = malloc(image_bytes(s));
    if (!img) xcheck_die("out of memory");
    memset(img, SENTINEL, image_bytes(s));
    const double hole = is_float(s->dtype) ? NAN : (s->dtype == TORC_DTYPE_BOOL ? 1 : 99);
    unsigned char hb[8];
    const size_t es = esize(s->dtype);
    st_f(hb, s->dtype, hole);
    for (int64_t e = 0; e < s->extent; e++) memcpy(elem(img, s, e), hb, es);
    const int64_t n = spec_numel(s), *off = spec_offsets(s);
    for (int64_t i = 0; i < n; i++) st_f(elem(img, s, off[i]), s->dtype, gen_value(r, dm, s->dtype));
    free((void *)off);
    return img;
}

// ---- cases ----
typedef struct xcase {
    torc_opcode code;
    const char *family;
    int n_in;
    spec in[TORC_OP_MAX_INPUTS], out;
    torc_op_params params;
    bool alias;       // out is in[0] itself (in-place elementwise: same buffer, dtype and strides)
    bool xalias;      // out[1] is in[0] itself (cross_entropy's gradient over the logits); xoimg[0]
                      // then holds a copy of in[0]'s image, its state before the run
    bool out_read;    // the op reads out's old values (index_add, scatter_add, masked_scatter)
    bool frontend;    // check through the public API on the backend's device
    bool sweep;       // a --sweep case: where the backend declines it, counted, not run (emit)
    unsigned char *img[TORC_OP_MAX_INPUTS];
    unsigned char *oimg;  // out's image before the run (NULL when alias: it is img[0])
    int64_t n_acc;    // terms accumulated per output element (for tolerances)
    // SCALED_MM's pointer params: scale_out's value (0: none) and whether amax_out is asked for.
    double sm_scale_out;
    bool sm_amax;
    // The outputs after out (the multi-output ops of ABI 2.1): their views and their images
    // before the run (sentinel, or data where the op reads them).
    int n_xout;
    spec xout[TORC_OP_MAX_OUTPUTS - 1];
    unsigned char *xoimg[TORC_OP_MAX_OUTPUTS - 1];
} xcase;

static void xc_free(xcase *c) {
    for (int k = 0; k < TORC_OP_MAX_INPUTS; k++) free(c->img[k]);
    for (int k = 0; k < c->n_xout; k++) free(c->xoimg[k]);
    free(c->oimg);
}
static const unsigned char *xc_out_before(const xcase *c) { return c->alias ? c->img[0] : c->oimg; }

typedef enum { EMIT_CHECK, EMIT_PERF, EMIT_PROBE } emit_mode;

typedef enum { M_NATIVE, M_FALLBACK, M_UNSUPPORTED, M_FRONTEND, M_COUNT } run_mode;
static const char *const g_mode_names[M_COUNT] = {"native", "fallback", "unsupported", "frontend"};

// Results of one (op, dtype) row of the table.
typedef struct row {
    char op[32], label[40];
    int cases, failed, na, by_mode[M_COUNT];
    double max_abs, max_nmse, max_ratio;
    char msgs[4][600];
    int n_msgs;
} row;

typedef struct builder {
    torc_opcode code;
    torc_dtype dt, odt;     // the row's dtype; odt: matmul's wider out dtype (or dt)
    torc_dtype dt2;         // scaled_mm's second operand
    char label[40];
    emit_mode mode;
    rng rng;
    row *row;
    int probe_native, probe_total;  // EMIT_PROBE: contig cases the backend runs natively
} builder;

static void emit(builder *b, xcase *c);

static void xc_begin(xcase *c, builder *b, const char *family, int n_in) {
    memset(c, 0, sizeof *c);
    c->code = b->code;
    c->family = family;
    c->n_in = n_in;
    c->n_acc = 1;
    b->rng.s = hash_str(hash_str(g_opt.seed ^ 0xCBF29CE484222325ull, b->label), family) ^ (uint64_t)b->code << 32;
}
static void xc_in(xcase *c, builder *b, int k, spec s, domain dm) {
    c->in[k] = s;
    c->img[k] = make_input(&s, dm, &b->rng);
}
static void xc_out(xcase *c, spec s) {
    c->out = s;
    c->oimg = malloc(image_bytes(&s));
    if (!c->oimg) xcheck_die("out of memory");
    memset(c->oimg, SENTINEL, image_bytes(&s));
}
// An out the op reads (in-place index ops): elements hold data, the gaps stay sentinel.
static void xc_out_data(xcase *c, builder *b, spec s, domain dm) {
    xc_out(c, s);
    c->out_read = true;
    const int64_t n = spec_numel(&s);
    for (int64_t i = 0; i < n; i++) st_f(elem(c->oimg, &s, spec_lin(&s, i)), s.dtype, gen_value(&b->rng, dm, s.dtype));
}
// The next output after out: sentinel bytes, or data (dm) when the op reads it (in place).
static void xc_xout(xcase *c, builder *b, spec s, const domain *dm) {
    const int k = c->n_xout++;
    c->xout[k] = s;
    c->xoimg[k] = dm ? make_input(&s, *dm, &b->rng) : malloc(image_bytes(&s));
    if (!c->xoimg[k]) xcheck_die("out of memory");
    if (!dm) memset(c->xoimg[k], SENTINEL, image_bytes(&s));
}
static void xc_alias(xcase *c) {
    c->alias = true;
    c->out = c->in[0];
}

// ---- tolerances ----
// Exact ops must agree bit for bit (NaN positions included); the others within
// |got - want| <= rtol * |want| + atol * mag, where mag is the scale the op's rounding error
// grows with (|want|, 1, or the sum of |terms| for sums and matmuls), and the RMS error must
// stay within 0.7 of the RMS of those bounds (a normalised-MSE check: it catches an error that
// is systematic, such as a lower working precision, even where no element crosses its bound).
typedef enum { MAG_R, MAG_ONE, MAG_ADD, MAG_SUMABS, MAG_MM, MAG_SRC } mag_kind;
typedef struct tolspec { bool exact, zero_sign; double rtol, atol; mag_kind mag; } tolspec;

static tolspec tol_for(const xcase *c, int k) {
    tolspec t = {.mag = MAG_R};
    const torc_dtype od = k ? c->xout[k - 1].dtype : c->out.dtype;
    if (!is_float(od)) {
        t.exact = true;
        return t;
    }
    // MATMUL_ROUNDED rounds its sums to c whatever out's dtype: c's epsilon.
    const double e = eps_of(c->code == TORC_OP_MATMUL_ROUNDED ? (torc_dtype)c->params.matmul.dtype : od),
                 ec = od == TORC_DTYPE_F64 ? eps_of(TORC_DTYPE_F64) : eps_of(TORC_DTYPE_F32);
    const double sq = sqrt((double)(c->n_acc > 1 ? c->n_acc : 1));
    switch (c->code) {
    case TORC_OP_FILL: case TORC_OP_COPY: case TORC_OP_NEG: case TORC_OP_ABS: case TORC_OP_WHERE:
    case TORC_OP_INDEX_SELECT: case TORC_OP_GATHER: case TORC_OP_MASKED_SELECT: case TORC_OP_MASKED_SCATTER:
    case TORC_OP_TRIU: case TORC_OP_TRIL:
        t.exact = t.zero_sign = true;
        break;
    case TORC_OP_FLOOR_DIVIDE: case TORC_OP_REMAINDER: case TORC_OP_FMOD:  // the contract's steps, zeros' signs too
        t.exact = t.zero_sign = true;
        break;
    case TORC_OP_SIGN: case TORC_OP_RELU: case TORC_OP_MAXIMUM: case TORC_OP_MINIMUM: case TORC_OP_MAX:
    case TORC_OP_MIN: case TORC_OP_RAND_INT:
    case TORC_OP_ADDCMUL: case TORC_OP_ADDCDIV: case TORC_OP_LERP:  // PyTorch's rounding steps, the contract
        t.exact = true;
        break;
    case TORC_OP_ADD: case TORC_OP_SUB:
        t.rtol = 2 * e, t.atol = 2 * e, t.mag = MAG_ADD;
        break;
    // Transcendental functions: vector libraries trade ulps for speed (oneDNN's f32 log is up to
    // ~30 ulp of 1.0 off in absolute terms near x = 1, where log x is small). 32 ulp relative,
    // plus 64 ulp of max(|want|, 1) absolute for the functions with zeros, stays tighter than
    // torch.testing.assert_close's float32 default (rtol 1.3e-6, atol 1e-5).
    case TORC_OP_EXP: case TORC_OP_SIGMOID: case TORC_OP_RSQRT: case TORC_OP_RAND_NORMAL: case TORC_OP_POW:
    case TORC_OP_POW_SCALAR:
        t.rtol = 32 * e;
        break;
    case TORC_OP_LOG: case TORC_OP_SIN: case TORC_OP_COS: case TORC_OP_TANH: case TORC_OP_ERF:
    case TORC_OP_ERFINV: case TORC_OP_GELU: case TORC_OP_GELU_BACKWARD:  // dy * gelu'(x), |gelu'| <= 1.13
        t.rtol = 32 * e, t.atol = 64 * e, t.mag = MAG_ONE;
        break;
    case TORC_OP_SUM: case TORC_OP_MEAN:
        t.rtol = 2 * e, t.atol = 4 * ec * sq, t.mag = MAG_SUMABS;
        break;
    case TORC_OP_MATMUL: case TORC_OP_MATMUL_ROUNDED:
        t.rtol = 2 * e, t.atol = 4 * ec * sq, t.mag = MAG_MM;
        break;
    case TORC_OP_SCALED_MM:  // the contract's allowance for fp8 tensor cores' 13-bit running sums
        t.rtol = 2 * e, t.atol = 4 * ec * sq + TORC_FP8_MMA_SUM_TOL, t.mag = MAG_MM;
        break;
    case TORC_OP_PROD: case TORC_OP_VAR: case TORC_OP_STD: case TORC_OP_NORM:
        t.rtol = 4 * e + 4 * ec * sq;
        break;
    case TORC_OP_SOFTMAX:  // exp, a sum, a division
        t.rtol = 32 * e + 4 * ec * sq;
        break;
    case TORC_OP_LOGSUMEXP: case TORC_OP_LOG_SOFTMAX:  // exp, a sum, a log
        t.rtol = 32 * e, t.atol = 64 * e + 4 * ec * sq, t.mag = MAG_ONE;
        break;
    case TORC_OP_INDEX_ADD: case TORC_OP_SCATTER_ADD:
        t.rtol = 2 * e, t.atol = 4 * ec * sq + 2 * e, t.mag = MAG_SRC;
        break;
    case TORC_OP_MAX_DIM: case TORC_OP_MIN_DIM: case TORC_OP_ADAM_STEP:  // selections; Adam's rounding steps
        t.exact = true;
        break;
    // layer_norm: n_acc = N, the normalized elements per row. Inputs are O(1), so are y, mean,
    // rstd and dx: each within a rounding of its dtype plus a sum's error over N (or, for
    // dweight / dbias, over the rows) relative to 1.
    case TORC_OP_LAYER_NORM:
        t.rtol = 2 * e + (k == 2 ? 8 * ec * sq : 0), t.atol = 8 * ec * sq, t.mag = MAG_ONE;
        break;
    case TORC_OP_LAYER_NORM_BACKWARD: {
        const double rows = (double)spec_numel(&c->out) / (double)(c->n_acc > 0 ? c->n_acc : 1);
        t.rtol = 2 * e, t.atol = 16 * ec * (k ? rows : sq), t.mag = MAG_ONE;
        break;
    }
    // attention (inputs O(1)): each output within one rounding of its dtype (2 eps: the backend's
    // rounding and the reference's of the exact value) plus f32's (f64's) accumulation over the
    // sums the contract lets a backend order as it likes: E-term scores (their error grows with
    // |scale| sqrt(E), 1 at the default scale), S-term softmax and p v, and for the backward also
    // Ev-term dp and D and L-term dk, dv; relative to max(|want|, 1). A backend computing in bf16
    // or f16 (errors of 1e-2, 1e-3) fails it; onednn's FlashAttention-2 tiles in f32 stay within 0.4
    // of it, their f16 / bf16 within 0.5 (the two roundings) (Xeon, AVX-512, seed 20240501).
    case TORC_OP_ATTENTION: case TORC_OP_ATTENTION_BACKWARD: {
        const bool bwd = c->code == TORC_OP_ATTENTION_BACKWARD;
        const spec *q = &c->in[bwd ? 1 : 0], *v = &c->in[bwd ? 3 : 2];
        const double E = (double)q->shape[3], L = (double)q->shape[2], S = (double)v->shape[2], Ev = (double)v->shape[3];
        const double sharp = fmax(1.0, fabs(c->params.attention.scale) * sqrt(E));
        t.rtol = 2 * e, t.atol = 8 * ec * (sharp * sqrt(E) + sqrt(S) + (bwd ? sqrt(L) + sqrt(Ev) : 0)), t.mag = MAG_ONE;
        break;
    }
    // cross_entropy: the loss (k 0, opmath) within a rounding plus f32's sum of V exps (relative to
    // max(|want|, 1): the error is the log's, absolute); the gradient (k 1) within exp's and the
    // scaling's roundings, four of its dtype's eps relative (onednn: 3 float ulps measured).
    case TORC_OP_CROSS_ENTROPY:
        if (k == 0) t.rtol = 2 * e, t.atol = 8 * ec, t.mag = MAG_ONE;
        else t.rtol = 4 * e;
        break;
    default:  // rounding once: arange, linspace, uniform, square, mul, div, sqrt, reciprocal
        t.rtol = 2 * e;
        break;
    }
    t.rtol *= g_opt.tol_scale, t.atol *= g_opt.tol_scale;
    return t;
}

// Per-element magnitudes for MAG_ADD / MAG_SUMABS / MAG_MM (NULL for the others).
static double *magnitudes(const xcase *c, mag_kind mk) {
    const spec *o = &c->out;
    const int64_t n = spec_numel(o);
    if (mk != MAG_ADD && mk != MAG_SUMABS && mk != MAG_MM) return NULL;
    double *m = calloc((size_t)(n ? n : 1), sizeof *m);
    if (!m) xcheck_die("out of memory");
    int64_t idx[TORC_MAX_DIMS];
    if (mk == MAG_ADD) {
        const double alpha = fabs(c->params.scalar.value);
        for (int64_t i = 0; i < n; i++)
            m[i] = fabs(ld_f(celem(c->img[0], &c->in[0], spec_lin(&c->in[0], i)), c->in[0].dtype)) +
                   alpha * fabs(ld_f(celem(c->img[1], &c->in[1], spec_lin(&c->in[1], i)), c->in[1].dtype));
    } else if (mk == MAG_SUMABS) {  // reductions: out has in's ndim with reduced dims of size 1
        const spec *a = &c->in[0];
        const int64_t na = spec_numel(a);
        for (int64_t i = 0; i < na; i++) {
            unravel(a->ndim, a->shape, i, idx);
            int64_t oi = 0;
            for (int d = 0; d < a->ndim; d++) oi = oi * o->shape[d] + ((c->params.reduce.mask >> d & 1) ? 0 : idx[d]);
            m[oi] += fabs(ld_f(celem(c->img[0], a, spec_lin(a, i)), a->dtype));
        }
        if (c->code == TORC_OP_MEAN && c->n_acc > 0)
            for (int64_t i = 0; i < n; i++) m[i] /= (double)c->n_acc;
    } else {  // matmul: sum_k |a_ik| |b_kj| per batch (a and b have out's batch dims)
        const spec *a = &c->in[0], *b = &c->in[1];
        const int nd = o->ndim;
        const int64_t K = a->shape[nd - 1], M = o->shape[nd - 2], N = o->shape[nd - 1];
        const int64_t na = spec_numel(a), nb = spec_numel(b);
        int64_t *oa = spec_offsets(a), *ob = spec_offsets(b);
        double *aa = malloc(sizeof *aa * (size_t)(na + 1)), *ab = malloc(sizeof *ab * (size_t)(nb + 1));
        if (!aa || !ab) xcheck_die("out of memory");
        for (int64_t i = 0; i < na; i++) aa[i] = fabs(ld_f(celem(c->img[0], a, oa[i]), a->dtype));
        for (int64_t i = 0; i < nb; i++) ab[i] = fabs(ld_f(celem(c->img[1], b, ob[i]), b->dtype));
        for (int64_t i = 0; i < n; i++) {
            const int64_t bl = i / (M * N), row = i / N % M, col = i % N;
            const double *pa = aa + (bl * M + row) * K, *pb = ab + bl * K * N + col;
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += pa[k] * pb[k * N];
            m[i] = s;
        }
        free(oa), free(ob), free(aa), free(ab);
        if (c->code == TORC_OP_SCALED_MM) {  // r = scale_a * scale_b * (a @ b) [* scale_out]
            double f = fabs(ld_f(celem(c->img[2], &c->in[2], c->in[2].offset), TORC_DTYPE_F32) *
                            ld_f(celem(c->img[3], &c->in[3], c->in[3].offset), TORC_DTYPE_F32));
            if (c->sm_scale_out != 0) f *= fabs(c->sm_scale_out);
            for (int64_t i = 0; i < n; i++) m[i] *= f;
        }
    }
    return m;
}

// ---- comparing ----
typedef struct cmp {
    bool ok;
    double max_abs, ratio, nmse;
    char msg[400];
} cmp;

static void cmp_fail(cmp *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cmp_fail(cmp *m, const char *fmt, ...) {
    if (!m->ok) return;  // keep the first failure
    m->ok = false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->msg, sizeof m->msg, fmt, ap);
    va_end(ap);
}

// Compares actual (image + spec) with the reference's out (c->out in eimg), element by element
// in row-major order.
// k: which output (0: out, else xout[k - 1]).
static void compare(const xcase *c, int k, const unsigned char *eimg, const unsigned char *aimg, const spec *as,
                    float eamax, float aamax, cmp *m) {
    const spec *es = k ? &c->xout[k - 1] : &c->out;
    const torc_dtype dt = es->dtype;
    const int64_t n = spec_numel(es);
    if (spec_numel(as) != n) {
        cmp_fail(m, "result has %lld elements, expected %lld", (long long)spec_numel(as), (long long)n);
        return;
    }
    const tolspec t = tol_for(c, k);
    double *mag = k ? NULL : magnitudes(c, t.mag);
    double src_mag = 0;
    if (t.mag == MAG_SRC) {
        const spec *s = &c->in[0];
        for (int64_t i = 0, ns = spec_numel(s); i < ns; i++)
            src_mag = fmax(src_mag, fabs(ld_f(celem(c->img[0], s, spec_lin(s, i)), s->dtype)));
    }
    double e2 = 0, r2 = 0, t2 = 0;
    char ib[96];
    int64_t *oe = spec_offsets(es), *oa = spec_offsets(as);
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *pe = celem(eimg, es, oe[i]), *pa = celem(aimg, as, oa[i]);
        if (dt == TORC_DTYPE_BOOL) {  // raw bytes: a bool must be 0 or 1
            if (*pe != *pa) {
                cmp_fail(m, "element %s is byte %u, expected %u", idx_str(es, i, ib, sizeof ib), *pa, *pe);
                m->ratio = INFINITY;
            }
            continue;
        }
        if (!is_float(dt)) {
            const int64_t ve = ld_i(pe, dt), va = ld_i(pa, dt);
            if (ve != va) {
                cmp_fail(m, "element %s is %lld, expected %lld", idx_str(es, i, ib, sizeof ib), (long long)va, (long long)ve);
                m->ratio = INFINITY;
                m->max_abs = fmax(m->max_abs, fabs((double)va - (double)ve));
            }
            continue;
        }
        const double ve = ld_f(pe, dt), va = ld_f(pa, dt);
        if (isnan(ve) || isnan(va) || isinf(ve) || isinf(va)) {
            if (isnan(ve) != isnan(va) || (!isnan(ve) && ve != va)) {
                cmp_fail(m, "element %s is %.9g, expected %.9g (NaN/inf positions differ)", idx_str(es, i, ib, sizeof ib), va, ve);
                m->ratio = INFINITY;
            }
            continue;
        }
        const double err = fabs(va - ve);
        m->max_abs = fmax(m->max_abs, err);
        if (t.exact) {
            if (err != 0 || (t.zero_sign && signbit(va) != signbit(ve))) {
                cmp_fail(m, "element %s is %.9g, expected exactly %.9g", idx_str(es, i, ib, sizeof ib), va, ve);
                m->ratio = INFINITY;
            }
            continue;
        }
        double mg;
        switch (t.mag) {
        case MAG_ONE: mg = fmax(fabs(ve), 1.0); break;
        case MAG_SRC: mg = fmax(fabs(ve), src_mag); break;
        case MAG_R: mg = fabs(ve); break;
        default: mg = mag[i]; break;
        }
        double tiny = 0;
        torc_finfo(dt, NULL, NULL, NULL, &tiny);
        const double tol = t.rtol * fabs(ve) + t.atol * mg + tiny;
        const double ratio = err / tol;
        e2 += err * err, r2 += ve * ve, t2 += tol * tol;
        if (ratio > m->ratio) m->ratio = ratio;
        if (ratio > 1)
            cmp_fail(m, "element %s is %.9g, expected %.9g (|err| %.3g > tol %.3g)", idx_str(es, i, ib, sizeof ib), va,
                     ve, err, tol);
    }
    m->nmse = e2 / (r2 > 0 ? r2 : 1e-300);
    if (c->sm_amax && k == 0) {  // SCALED_MM's max |r| (before scale_out), NaN if any r is NaN
        double mmax = 0;
        for (int64_t i = 0; mag && i < n; i++) mmax = fmax(mmax, mag[i]);
        if (c->sm_scale_out != 0) mmax /= fabs(c->sm_scale_out);
        const double err = fabs((double)aamax - (double)eamax), tol = 4 * eps_of(TORC_DTYPE_F32) * fabs(eamax) + t.atol * mmax + 1e-30;
        if (isnan(eamax) != isnan(aamax) || (!isnan(eamax) && err > tol))
            cmp_fail(m, "amax_out is %.9g, expected %.9g", aamax, eamax);
    }
    if (m->ok && e2 > 0.5 * t2)
        cmp_fail(m, "RMS error %.3g exceeds 0.7 of the RMS tolerance, %.3g (normalised MSE %.3g)", sqrt(e2 / (double)n),
                 sqrt(0.5 * t2 / (double)n), m->nmse);
    free(mag);
    free(oe);
    free(oa);
}

// Bytes of an image that are not elements of s must be as they were before the run.
static void check_guard(const unsigned char *before, const unsigned char *after, const spec *s, const char *what,
                        cmp *m) {
    const size_t nb = image_bytes(s), es = esize(s->dtype);
    unsigned char *is_elem = calloc(nb, 1);
    if (!is_elem) xcheck_die("out of memory");
    const int64_t n = spec_numel(s), *off = spec_offsets(s);
    for (int64_t i = 0; i < n; i++) memset(is_elem + PAD + (size_t)off[i] * es, 1, es);
    free((void *)off);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < nb; i++)
        if (!is_elem[i] && before[i] != after[i] && bad++ == 0) first = i;
    free(is_elem);
    if (bad) {
        const size_t body_end = PAD + (size_t)s->extent * es;
        const char *where = first < PAD ? "before the buffer" : first >= body_end ? "after the buffer" : "in a gap or past the last element";
        cmp_fail(m, "%s: %zu byte(s) written outside its elements (first %s, byte %lld of the view's buffer)", what, bad,
                 where, (long long)first - PAD);
        m->ratio = INFINITY;
    }
}

// ---- running a case as one backend op (torc_run_op) ----
// Every image (pads included) becomes a tensor on the device; the op's operands are strided views
// inside them, and after the run every image comes back so the guards and the inputs can be
// checked. The buffers live in a scope of their own, popped by db_release.
typedef struct devbufs {
    torc_tensor *base[TORC_OP_MAX_INPUTS + 1];  // inputs' images, then out's (in0's when alias)
    torc_tensor *amax;                          // SCALED_MM's out[1]
    torc_tensor *xbase[TORC_OP_MAX_OUTPUTS - 1];  // the images of the outputs after out
    torc_op_call call;
} devbufs;

typedef struct run_out {
    unsigned char *obuf;                       // out's image after the run
    unsigned char *ibuf[TORC_OP_MAX_INPUTS];   // inputs' images after the run
    float amax;                                // SCALED_MM's amax_out after the run
    unsigned char *xobuf[TORC_OP_MAX_OUTPUTS - 1];  // the images of the outputs after out
    char msg[512];
} run_out;

static void run_out_free(run_out *r) {
    free(r->obuf);
    for (int k = 0; k < TORC_OP_MAX_OUTPUTS - 1; k++) free(r->xobuf[k]);
    for (int k = 0; k < TORC_OP_MAX_INPUTS; k++) free(r->ibuf[k]);
    memset(r, 0, sizeof *r);
}

static void db_release(devbufs *d) {
    torc_scope_pop();
    memset(d, 0, sizeof *d);
}

// s's view of base, a whole image as a 1-D tensor.
static torc_tensor *spec_view(torc_tensor *base, const spec *s) {
    return torc_as_strided(base, s->ndim, s->shape, s->stride, (int64_t)(PAD / esize(s->dtype)) + s->offset);
}

// The whole image (pads included) as a 1-D tensor on dev, and s's view of it.
static torc_tensor *image_view(torc_device *dev, const unsigned char *img, const spec *s, torc_tensor **base) {
    const int64_t n = (int64_t)(image_bytes(s) / esize(s->dtype));
    torc_set_default_device(dev);
    *base = torc_tensor_from(img, 1, &n, s->dtype);
    torc_set_default_device(NULL);
    return *base ? spec_view(*base, s) : NULL;
}

static bool db_prepare(devbufs *d, torc_device *dev, const xcase *c, char *msg, size_t msz) {
    memset(d, 0, sizeof *d);
    torc_scope_push();
    torc_op_call *call = &d->call;
    call->code = c->code;
    call->n_in = c->n_in;
    call->n_out = 1;
    call->params = c->params;
    for (int k = 0; k < c->n_in; k++)
        if (!(call->in[k] = image_view(dev, c->img[k], &c->in[k], &d->base[k]))) goto fail;
    if (c->alias) {
        d->base[TORC_OP_MAX_INPUTS] = d->base[0];
        call->out[0] = spec_view(d->base[0], &c->out);
    } else {
        call->out[0] = image_view(dev, c->oimg, &c->out, &d->base[TORC_OP_MAX_INPUTS]);
    }
    if (!call->out[0]) goto fail;
    for (int k = 0; k < c->n_xout; k++) {
        if (k == 0 && c->xalias) {
            d->xbase[0] = d->base[0];
            if (!(call->out[call->n_out++] = spec_view(d->base[0], &c->xout[0]))) goto fail;
            continue;
        }
        if (!(call->out[call->n_out++] = image_view(dev, c->xoimg[k], &c->xout[k], &d->xbase[k]))) goto fail;
    }
    if (c->code == TORC_OP_SCALED_MM) {  // scale_out: the optional in4; amax: the optional out[1]
        const float so = (float)c->sm_scale_out, am = NAN;
        torc_set_default_device(dev);
        if (so != 0 && !(call->in[call->n_in++] = torc_tensor_from(&so, 1, (int64_t[]){1}, TORC_DTYPE_F32))) goto fail;
        if (c->sm_amax && !(call->out[call->n_out++] = d->amax = torc_tensor_from(&am, 1, (int64_t[]){1}, TORC_DTYPE_F32)))
            goto fail;
        torc_set_default_device(NULL);
    }
    return true;
fail:
    torc_set_default_device(NULL);
    snprintf(msg, msz, "making the operands failed: %s", torc_last_error());
    db_release(d);
    return false;
}

static unsigned char *download(const torc_tensor *base, char *msg, size_t msz) {
    const size_t nb = torc_nbytes(base);
    unsigned char *h = malloc(nb);
    if (!h) xcheck_die("out of memory");
    if (torc_copy_to_host(base, h, nb)) {
        snprintf(msg, msz, "copy from device failed: %s", torc_last_error());
        free(h);
        return NULL;
    }
    return h;
}

typedef enum { RUN_OK, RUN_UNSUPPORTED, RUN_FAILED } run_status;

// Runs c on dev through torc_run_op. native: only dev's own backend (RUN_UNSUPPORTED where it
// declines); else what the core does for every frontend, the reference's kernel on a host
// backend's memory where dev's backend declines.
static run_status run_op(torc_device *dev, bool native, const xcase *c, run_out *r) {
    devbufs d;
    if (!db_prepare(&d, dev, c, r->msg, sizeof r->msg)) return RUN_FAILED;
    if (native && torc_op_supported(dev, &d.call) != TORC_OK) {
        db_release(&d);
        torc_clear_error();
        return RUN_UNSUPPORTED;
    }
    run_status st = RUN_OK;
    if (torc_run_op(dev, &d.call, native ? TORC_RUN_NATIVE : 0) != TORC_OK || torc_device_synchronize(dev) != TORC_OK) {
        snprintf(r->msg, sizeof r->msg, "run failed: %s", torc_last_error());
        st = RUN_FAILED;
    }
    if (st == RUN_OK) {
        r->obuf = download(d.base[TORC_OP_MAX_INPUTS], r->msg, sizeof r->msg);
        for (int k = 0; k < c->n_in && r->obuf; k++)
            if (!((c->alias || c->xalias) && k == 0) && !(r->ibuf[k] = download(d.base[k], r->msg, sizeof r->msg)))
                st = RUN_FAILED;
        for (int k = 0; k < c->n_xout && st == RUN_OK; k++)
            if (!(r->xobuf[k] = download(d.xbase[k], r->msg, sizeof r->msg))) st = RUN_FAILED;
        if (!r->obuf) st = RUN_FAILED;
        if (st == RUN_OK && d.amax && torc_copy_to_host(d.amax, &r->amax, sizeof r->amax)) {
            snprintf(r->msg, sizeof r->msg, "copy from device failed: %s", torc_last_error());
            st = RUN_FAILED;
        }
    }
    db_release(&d);
    return st;
}

// ---- running a case through the public API ----
static double g_frontend_amax;  // SCALED_MM's amax_out from the last frontend call
static torc_scalar scalar_like(torc_dtype d, double v) {
    if (d == TORC_DTYPE_BOOL) return torc_scalar_b(v != 0);
    return is_float(d) ? torc_scalar_f(v) : torc_scalar_i((int64_t)v);
}

static int mask_dims(uint32_t mask, int nd, int *dims) {
    int n = 0;
    for (int d = 0; d < nd; d++)
        if (mask >> d & 1) dims[n++] = d;
    return n;
}

// The frontend call that produces c's op. v: the input views; ov: out's view for ops that write
// into an existing tensor. Sets *inexpressible when the public API has no way to ask for it
// (in-place index ops, in-place forms torc.h does not offer).
static torc_tensor *frontend_apply(const xcase *c, torc_tensor *const *v, torc_tensor *ov, torc_generator *gen,
                                   bool *inexpressible) {
    const torc_op_params *p = &c->params;
    const torc_dtype od = c->out.dtype;
    torc_status st = TORC_OK;
    int dims[TORC_MAX_DIMS];
    *inexpressible = false;
    if (c->alias) {  // in-place elementwise forms
        torc_tensor *s = v[0];
        switch (c->code) {
        case TORC_OP_ADD: st = p->scalar.value == 1 ? torc_add_(s, v[1]) : torc_add_scaled_(s, v[1], scalar_like(od, p->scalar.value)); break;
        case TORC_OP_SUB: st = p->scalar.value == 1 ? torc_sub_(s, v[1]) : torc_add_scaled_(s, v[1], scalar_like(od, -p->scalar.value)); break;
        case TORC_OP_MUL: st = torc_mul_(s, v[1]); break;
        case TORC_OP_DIV: st = torc_div_(s, v[1]); break;
        case TORC_OP_MAXIMUM: st = torc_maximum_(s, v[1]); break;
        case TORC_OP_NEG: st = torc_neg_(s); break;
        case TORC_OP_SQRT: st = torc_sqrt_(s); break;
        case TORC_OP_EXP: st = torc_exp_(s); break;
        case TORC_OP_RELU: st = torc_relu_(s); break;
        case TORC_OP_SIGMOID: st = torc_sigmoid_(s); break;
        case TORC_OP_POW_SCALAR: st = torc_pow_scalar_(s, is_float(od) ? torc_scalar_f(p->scalar.value) : torc_scalar_i((int64_t)p->scalar.value)); break;
        case TORC_OP_COPY: st = torc_copy_(s, v[0]); break;
        case TORC_OP_ADDCMUL: st = torc_addcmul_(s, v[1], v[2], scalar_like(od, p->scalar.value)); break;
        case TORC_OP_ADDCDIV: st = torc_addcdiv_(s, v[1], v[2], scalar_like(od, p->scalar.value)); break;
        case TORC_OP_LERP: st = torc_lerp_(s, v[1], torc_scalar_f(p->scalar.value)); break;
        default: *inexpressible = true; return NULL;
        }
        return st ? NULL : s;
    }
    switch (c->code) {
    case TORC_OP_FILL: {
        // fill_ refuses a finite value beyond a floating dtype's range, as PyTorch does
        // (core/fill.c); the backend's FILL still gets it, its cast deciding.
        double max = 0;
        if (is_float(od) && torc_finfo(od, NULL, &max, NULL, NULL) == TORC_OK && isfinite(p->scalar.value) &&
            fabs(p->scalar.value) > max) {
            *inexpressible = true;
            return NULL;
        }
        return torc_fill_(ov, scalar_like(od, p->scalar.value)) ? NULL : ov;
    }
    case TORC_OP_COPY: return torc_copy_(ov, v[0]) ? NULL : ov;
    case TORC_OP_ARANGE:  // an end half a step past the last element gives exactly count elements
        return torc_arange(p->range.start,
                           p->range.count ? p->range.start + p->range.step * ((double)p->range.count - 0.5) : p->range.start,
                           p->range.step, od);
    case TORC_OP_LINSPACE: return torc_linspace(p->range.start, p->range.end, p->range.count, od);
    case TORC_OP_RAND_UNIFORM: return torc_uniform_(ov, p->rng.a, p->rng.b, gen) ? NULL : ov;
    case TORC_OP_RAND_NORMAL: return torc_normal_(ov, p->rng.a, p->rng.b, gen) ? NULL : ov;
    case TORC_OP_RAND_INT:
        return torc_randint((int64_t)p->rng.a, (int64_t)p->rng.b, c->out.ndim, c->out.shape, od, gen);
    case TORC_OP_NEG: return torc_neg(v[0]);
    case TORC_OP_ABS: return torc_abs(v[0]);
    case TORC_OP_SIGN: return torc_sign(v[0]);
    case TORC_OP_SQRT: return torc_sqrt(v[0]);
    case TORC_OP_RSQRT: return torc_rsqrt(v[0]);
    case TORC_OP_SQUARE: return torc_square(v[0]);
    case TORC_OP_RECIPROCAL: return torc_reciprocal(v[0]);
    case TORC_OP_EXP: return torc_exp(v[0]);
    case TORC_OP_LOG: return torc_log(v[0]);
    case TORC_OP_SIN: return torc_sin(v[0]);
    case TORC_OP_COS: return torc_cos(v[0]);
    case TORC_OP_TANH: return torc_tanh(v[0]);
    case TORC_OP_SIGMOID: return torc_sigmoid(v[0]);
    case TORC_OP_RELU: return torc_relu(v[0]);
    case TORC_OP_GELU: return torc_gelu(v[0], p->gelu.approximate != 0);
    case TORC_OP_POW_SCALAR:
        return torc_pow_scalar(v[0], is_float(c->in[0].dtype) ? torc_scalar_f(p->scalar.value) : torc_scalar_i((int64_t)p->scalar.value));
    case TORC_OP_ERF: return torc_erf(v[0]);
    case TORC_OP_ERFINV: return torc_erfinv(v[0]);
    case TORC_OP_LOGICAL_NOT: return torc_logical_not(v[0]);
    case TORC_OP_ADD:
        return p->scalar.value == 1 ? torc_add(v[0], v[1]) : torc_add_scaled(v[0], v[1], scalar_like(od, p->scalar.value));
    case TORC_OP_SUB:
        return p->scalar.value == 1 ? torc_sub(v[0], v[1]) : torc_add_scaled(v[0], v[1], scalar_like(od, -p->scalar.value));
    case TORC_OP_MUL: return torc_mul(v[0], v[1]);
    case TORC_OP_DIV: return torc_div(v[0], v[1]);
    case TORC_OP_POW: return torc_pow(v[0], v[1]);
    case TORC_OP_MAXIMUM: return torc_maximum(v[0], v[1]);
    case TORC_OP_MINIMUM: return torc_minimum(v[0], v[1]);
    case TORC_OP_EQ: return torc_eq(v[0], v[1]);
    case TORC_OP_NE: return torc_ne(v[0], v[1]);
    case TORC_OP_LT: return torc_lt(v[0], v[1]);
    case TORC_OP_LE: return torc_le(v[0], v[1]);
    case TORC_OP_GT: return torc_gt(v[0], v[1]);
    case TORC_OP_GE: return torc_ge(v[0], v[1]);
    case TORC_OP_LOGICAL_AND: return torc_logical_and(v[0], v[1]);
    case TORC_OP_LOGICAL_OR: return torc_logical_or(v[0], v[1]);
    case TORC_OP_FLOOR_DIVIDE: return torc_floor_divide(v[0], v[1]);
    case TORC_OP_REMAINDER: return torc_remainder(v[0], v[1]);
    case TORC_OP_FMOD: return torc_fmod(v[0], v[1]);
    case TORC_OP_WHERE: return torc_where(v[0], v[1], v[2]);
    case TORC_OP_ADDCMUL: return torc_addcmul(v[0], v[1], v[2], scalar_like(od, p->scalar.value));
    case TORC_OP_ADDCDIV: return torc_addcdiv(v[0], v[1], v[2], scalar_like(od, p->scalar.value));
    case TORC_OP_LERP: return torc_lerp(v[0], v[1], torc_scalar_f(p->scalar.value));
    case TORC_OP_SUM: case TORC_OP_MEAN: case TORC_OP_PROD: case TORC_OP_MAX: case TORC_OP_MIN: case TORC_OP_VAR:
    case TORC_OP_STD: case TORC_OP_NORM: case TORC_OP_LOGSUMEXP: {
        const int n = mask_dims(p->reduce.mask, c->in[0].ndim, dims);
        const int *dp = n ? dims : NULL;
        switch (c->code) {
        case TORC_OP_SUM: return torc_sum(v[0], n, dp, true);
        case TORC_OP_MEAN: return torc_mean(v[0], n, dp, true);
        case TORC_OP_PROD: return torc_prod(v[0], n, dp, true);
        case TORC_OP_MAX: return torc_amax(v[0], n, dp, true);
        case TORC_OP_MIN: return torc_amin(v[0], n, dp, true);
        case TORC_OP_VAR: return torc_var(v[0], n, dp, p->reduce.correction, true);
        case TORC_OP_STD: return torc_std(v[0], n, dp, p->reduce.correction, true);
        case TORC_OP_NORM: return torc_norm(v[0], p->reduce.p, n, dp, true);
        default: return torc_logsumexp(v[0], n, dp, true);
        }
    }
    case TORC_OP_ARGMAX: case TORC_OP_ARGMIN: {
        const int n = mask_dims(p->reduce.mask, c->in[0].ndim, dims);
        if (n != 1) break;
        return c->code == TORC_OP_ARGMAX ? torc_argmax(v[0], dims[0], true) : torc_argmin(v[0], dims[0], true);
    }
    case TORC_OP_SOFTMAX: return torc_softmax(v[0], p->dim.dim);
    case TORC_OP_LOG_SOFTMAX: return torc_log_softmax(v[0], p->dim.dim);
    case TORC_OP_MATMUL:
        return od == c->in[0].dtype ? torc_matmul(v[0], v[1]) : torc_matmul_out_dtype(v[0], v[1], od);
    case TORC_OP_INDEX_SELECT: return torc_index_select(v[0], p->dim.dim, v[1]);
    case TORC_OP_GATHER: return torc_gather(v[0], p->dim.dim, v[1]);
    case TORC_OP_MASKED_SELECT: return torc_masked_select(v[0], v[1]);
    case TORC_OP_SCALED_MM: {
        torc_tensor *so = c->sm_scale_out != 0 ? torc_scalar_tensor(c->sm_scale_out, TORC_DTYPE_F32) : NULL;
        torc_tensor *am = c->sm_amax ? torc_scalar_tensor(NAN, TORC_DTYPE_F32) : NULL;
        torc_tensor *r = torc_scaled_mm(v[0], v[1], v[2], v[3], od, so, am);
        if (r && am && torc_item(am, &g_frontend_amax)) return NULL;
        return r;
    }
    case TORC_OP_ATTENTION:
        return torc_scaled_dot_product_attention(v[0], v[1], v[2], NULL, 0.0, p->attention.causal != 0, p->attention.scale,
                                                 false, NULL);
    case TORC_OP_TRIU: return torc_triu(v[0], p->tri.k);
    case TORC_OP_TRIL: return torc_tril(v[0], p->tri.k);
    default: break;
    }
    *inexpressible = true;  // INDEX_ADD, SCATTER_ADD, MASKED_SCATTER: no public entry point
    return NULL;
}

static bool writes_into_out(torc_opcode code) {
    return code == TORC_OP_FILL || code == TORC_OP_COPY || code == TORC_OP_RAND_UNIFORM || code == TORC_OP_RAND_NORMAL;
}

// Runs c through the public API with tensors on the target device. The result comes back as an
// image: out's own (spec c->out) for ops that write into a view, else a contiguous one (*as).
static run_status run_frontend(const xcase *c, run_out *r, spec *as) {
    torc_set_default_device(g_t.dev);
    torc_scope_push();
    run_status rs = RUN_OK;
    torc_tensor *base[TORC_OP_MAX_INPUTS] = {0}, *v[TORC_OP_MAX_INPUTS] = {0}, *obase = NULL, *ov = NULL;
    torc_generator *gen = torc_generator_new(c->params.rng.seed);
    torc_generator_set_state(gen, c->params.rng.seed, c->params.rng.offset);
    for (int k = 0; k < c->n_in; k++)
        if (!(v[k] = image_view(g_t.dev, c->img[k], &c->in[k], &base[k]))) goto api_error;
    if (!c->alias && writes_into_out(c->code) && !(ov = image_view(g_t.dev, c->oimg, &c->out, &obase))) goto api_error;
    torc_set_default_device(g_t.dev);  // image_view leaves none set; the frontends allocate there
    bool inexpressible;
    torc_tensor *res = frontend_apply(c, v, ov, gen, &inexpressible);
    if (inexpressible) {
        rs = RUN_UNSUPPORTED;
        goto done;
    }
    if (!res) goto api_error;
    r->amax = (float)g_frontend_amax;
    torc_tensor *whole = c->alias ? base[0] : (ov ? obase : NULL);
    if (whole) {  // the op wrote into a view: bring back the whole buffer, gaps included
        *as = c->out;
        if (!(r->obuf = download(whole, r->msg, sizeof r->msg))) {
            rs = RUN_FAILED;
            goto done;
        }
    } else {
        if (torc_get_dtype(res) != c->out.dtype) {
            snprintf(r->msg, sizeof r->msg, "the frontend returned dtype %s, the descriptor has %s",
                     dshort(torc_get_dtype(res)), dshort(c->out.dtype));
            rs = RUN_FAILED;
            goto done;
        }
        *as = sp_contig(torc_get_dtype(res), torc_ndim(res), torc_shape(res));
        r->obuf = malloc(image_bytes(as));
        if (!r->obuf) xcheck_die("out of memory");
        memset(r->obuf, SENTINEL, image_bytes(as));
        if (torc_copy_to_host(res, r->obuf + PAD, (size_t)spec_numel(as) * esize(as->dtype))) goto api_error;
    }
    for (int k = 0; k < c->n_in; k++) {
        if (c->alias && k == 0) continue;
        if (!(r->ibuf[k] = download(base[k], r->msg, sizeof r->msg))) {
            rs = RUN_FAILED;
            goto done;
        }
    }
    goto done;
api_error:
    snprintf(r->msg, sizeof r->msg, "%s", torc_last_error());
    rs = RUN_FAILED;
done:
    torc_generator_free(gen);
    torc_scope_pop();
    torc_set_default_device(NULL);
    return rs;
}

// ---- results ----
static struct {
    char native[2400], fallback[2400], partial[2400], unsupported[2400];
} g_opsum[TORC_OP_COUNT];

static void csv_field(const char *s) {
    putchar('"');
    for (; *s; s++) putchar(*s == '"' ? '\'' : (*s == '\n' ? ' ' : *s));
    putchar('"');
}

static void record(builder *b, const xcase *c, run_mode mode, const cmp *m) {
    row *r = b->row;
    r->cases++;
    r->by_mode[mode]++;
    if (!m->ok) {
        r->failed++;
        g_any_failure = true;
        if (r->n_msgs < 4)
            snprintf(r->msgs[r->n_msgs++], sizeof r->msgs[0], "[%s, %s] %s", c->family, g_mode_names[mode], m->msg);
    }
    r->max_abs = fmax(r->max_abs, m->max_abs);
    r->max_nmse = fmax(r->max_nmse, m->nmse);
    r->max_ratio = fmax(r->max_ratio, m->ratio);
    if (g_opt.csv) {
        printf("%s,%s,%s,%s,%s,%lld,%.6g,%.6g,%.6g,", r->op, r->label, c->family, g_mode_names[mode],
               m->ok ? "ok" : "FAIL", (long long)spec_numel(&c->out), m->max_abs, m->nmse, m->ratio);
        csv_field(m->ok ? "" : m->msg);
        putchar('\n');
    }
}

static const char *row_mode(const row *r, char *buf, size_t n) {
    const int checks = r->cases - r->by_mode[M_FRONTEND];
    if (checks == 0) return "frontend";
    for (int m = 0; m < M_COUNT; m++)
        if (m != M_FRONTEND && r->by_mode[m] == checks) return g_mode_names[m];
    snprintf(buf, n, "native %d/%d", r->by_mode[M_NATIVE], checks);
    return buf;
}

static void append_word(char *list, size_t n, const char *w) {
    const size_t u = strlen(list);
    snprintf(list + u, n - u, "%s%s", u ? " " : "", w);
}

static void print_table_header(void) {
    printf("%-19s %-16s %-12s %6s %10s %10s %8s  %s\n", "op", "dtype", "mode", "cases", "max|err|", "nmse", "err/tol",
           "result");
}

static void finish_row(torc_opcode code, const row *r) {
    if (r->cases == 0) {
        if (g_opt.verbose && !g_opt.csv)
            printf("%-19s %-16s (%s: not checked)\n", r->op, r->label,
                   r->na ? "the reference has no kernel for it" : "PyTorch does not define it");
        return;
    }
    char mb[32];
    const char *mode = row_mode(r, mb, sizeof mb);
    const int checks = r->cases - r->by_mode[M_FRONTEND];
    if (checks > 0) {
        char *list = r->by_mode[M_NATIVE] == checks ? g_opsum[code].native
                   : r->by_mode[M_FALLBACK] == checks ? g_opsum[code].fallback
                   : r->by_mode[M_UNSUPPORTED] == checks ? g_opsum[code].unsupported : g_opsum[code].partial;
        append_word(list, sizeof g_opsum[code].native, r->label);
    }
    if (g_opt.csv || (g_opt.quiet && !r->failed)) return;
    const bool col = g_opt.color;
    printf("%-19s %-16s %-12s %6d %10.3g %10.3g %8.3g  %s%s%s\n", r->op, r->label, mode, r->cases, r->max_abs,
           r->max_nmse, r->max_ratio, r->failed && col ? "\033[31m" : "", r->failed ? "FAIL" : "ok",
           r->failed && col ? "\033[0m" : "");
    for (int i = 0; i < r->n_msgs; i++) printf("    %s\n", r->msgs[i]);
    if (r->failed > r->n_msgs) printf("    ... and %d more failing case(s)\n", r->failed - r->n_msgs);
    fflush(stdout);
}

// ---- --perf ----
// The course's time_matmul: warm up, then time runs with a synchronize after each, take the median.
static double time_runs(torc_device *dev, const devbufs *d) {
    if (torc_run_op(dev, &d->call, TORC_RUN_NATIVE) || torc_device_synchronize(dev)) return -1;
    double t[64], total = 0;
    int n = 0;
    while (n < 64 && (n < 3 || (total < 0.2 && n < 25))) {
        const double t0 = now_s();
        if (torc_run_op(dev, &d->call, TORC_RUN_NATIVE) || torc_device_synchronize(dev)) return -1;
        t[n] = now_s() - t0;
        total += t[n++];
        if (t[0] > 1.0 && n >= 1) break;  // a slow reference kernel: one timed run is enough
    }
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return t[n / 2];
}

// The median time of c on dev's own backend, -1 where it declines or fails.
static double time_case(torc_device *dev, const xcase *c) {
    char msg[512];
    devbufs d;
    double t = -1;
    if (db_prepare(&d, dev, c, msg, sizeof msg)) {
        if (torc_op_supported(dev, &d.call) == TORC_OK) t = time_runs(dev, &d);
        db_release(&d);
    }
    torc_clear_error();
    return t;
}

static void perf_case(builder *b, const xcase *c) {
    const double tb = time_case(g_t.dev, c), tr = time_case(g_t.ref, c);
    const bool native = tb >= 0;
    if (tr < 0 && tb < 0) return;
    double bytes = (double)spec_numel(&c->out) * (double)esize(c->out.dtype) * (c->out_read ? 2 : 1), flops = 0;
    for (int k = 0; k < c->n_in; k++) bytes += (double)spec_numel(&c->in[k]) * (double)esize(c->in[k].dtype);
    if (c->code == TORC_OP_MATMUL) {
        const int nd = c->out.ndim;
        flops = 2.0 * (double)spec_numel(&c->out) * (double)c->in[0].shape[nd - 1];
    }
    if (c->code == TORC_OP_ATTENTION || c->code == TORC_OP_ATTENTION_BACKWARD) {  // as the core counts them
        const bool bwd = c->code == TORC_OP_ATTENTION_BACKWARD;
        const spec *q = &c->in[bwd], *v = &c->in[bwd + 2];
        flops = (bwd ? 4.0 : 2.0) * (double)(q->shape[0] * q->shape[1] * q->shape[2] * v->shape[2]) *
                (double)(q->shape[3] + v->shape[3]);
    }
    char shape[96];
    size_t u = 0;
    const spec *s = c->n_in ? &c->in[0] : &c->out;
    for (int i = 0; i < s->ndim; i++) u += (size_t)snprintf(shape + u, sizeof shape - u, "%s%lld", i ? "x" : "", (long long)s->shape[i]);
    if (c->code == TORC_OP_MATMUL) snprintf(shape + u, sizeof shape - u, "@%lldx%lld", (long long)c->in[1].shape[0], (long long)c->in[1].shape[1]);
    const char *unit = flops > 0 ? "GFLOP/s" : "GB/s";
    const double work = flops > 0 ? flops : bytes;
    if (g_opt.csv) {
        printf("%s,%s,%s,%s,%.6g,%.6g,%.6g,%.6g,%s\n", b->row->op, b->label, shape, native ? "native" : (g_t.fallback ? "fallback" : "unsupported"),
               tb * 1e3, tb > 0 ? work / tb * 1e-9 : 0.0, tr * 1e3, tr > 0 ? work / tr * 1e-9 : 0.0, unit);
        return;
    }
    char bt[40] = "fallback", br[40] = "-", rt[40] = "-", rr[40] = "-", sp[24] = "-";
    if (!native && !g_t.fallback) snprintf(bt, sizeof bt, "unsupported");
    if (tb > 0) snprintf(bt, sizeof bt, "%.4g ms", tb * 1e3), snprintf(br, sizeof br, "%.4g %s", work / tb * 1e-9, unit);
    if (tr > 0) snprintf(rt, sizeof rt, "%.4g ms", tr * 1e3), snprintf(rr, sizeof rr, "%.4g %s", work / tr * 1e-9, unit);
    if (tb > 0 && tr > 0) snprintf(sp, sizeof sp, "%.2fx", tr / tb);
    printf("%-19s %-16s %-18s %12s %16s %12s %16s %9s\n", b->row->op, b->label, shape, bt, br, rt, rr, sp);
    fflush(stdout);
}

// ---- running one case ----
static void check_inputs(const xcase *c, const run_out *r, cmp *m, const char *who) {
    for (int k = 0; k < c->n_in; k++) {
        if (((c->alias || c->xalias) && k == 0) || !r->ibuf[k]) continue;
        const size_t nb = image_bytes(&c->in[k]);
        if (!memcmp(r->ibuf[k], c->img[k], nb)) continue;
        for (size_t i = 0; i < nb; i++)
            if (r->ibuf[k][i] != c->img[k][i]) {
                cmp_fail(m, "%s wrote into input %d (byte %lld of its buffer)", who, k, (long long)i - PAD);
                m->ratio = INFINITY;
                break;
            }
    }
}

static void emit(builder *b, xcase *c) {
    char msg[512];
    if (b->mode == EMIT_PROBE) {
        devbufs d;
        if (db_prepare(&d, g_t.dev, c, msg, sizeof msg)) {
            b->probe_total++;
            if (torc_op_supported(g_t.dev, &d.call) == TORC_OK) b->probe_native++;
            db_release(&d);
        }
        torc_clear_error();
        xc_free(c);
        return;
    }
    if (b->mode == EMIT_PERF) {
        perf_case(b, c);
        xc_free(c);
        return;
    }
    // A sweep case the backend declines is counted as the fallback (or unsupported) it is, not
    // run: its fallback is the oracle itself, whose public path the ordinary families check.
    if (c->sweep && !c->frontend) {
        devbufs d;
        bool declined = false;
        if (db_prepare(&d, g_t.dev, c, msg, sizeof msg)) {
            declined = torc_op_supported(g_t.dev, &d.call) != TORC_OK;
            db_release(&d);
        }
        torc_clear_error();
        if (declined) {
            const cmp ok = {.ok = true};
            record(b, c, g_t.fallback ? M_FALLBACK : M_UNSUPPORTED, &ok);
            xc_free(c);
            return;
        }
    }
    // The oracle: the reference on its own buffers, never aliased, so it gives the true values.
    xcase u = *c;
    u.alias = false;
    u.xalias = false;  // its out[1] starts as a copy of in[0] (xoimg[0]), in a buffer of its own
    if (c->alias) xc_out(&u, c->out);  // else u borrows c's out image
    const unsigned char *ubefore = c->alias ? u.oimg : c->oimg;
    run_out ref = {0}, got = {0};
    cmp m = {.ok = true};
    run_mode mode = c->frontend ? M_FRONTEND : M_NATIVE;
    run_status rs = run_op(g_t.ref, true, &u, &ref);
    if (rs == RUN_UNSUPPORTED) {
        b->row->na++;
        goto done;
    }
    if (rs == RUN_FAILED) {
        cmp_fail(&m, "the reference failed: %s", ref.msg);
        record(b, c, mode, &m);
        goto done;
    }
    check_guard(ubefore, ref.obuf, &c->out, "the reference's out", &m);
    for (int k = 0; k < c->n_xout; k++) check_guard(c->xoimg[k], ref.xobuf[k], &c->xout[k], "the reference's other outputs", &m);
    check_inputs(c, &ref, &m, "the reference");
    spec as = c->out;
    bool out_image = true;  // the result is out's whole buffer (guards can be checked)
    if (c->frontend) {
        rs = run_frontend(c, &got, &as);
        if (rs == RUN_UNSUPPORTED) goto done;  // no public entry point: nothing to add
        if (rs == RUN_FAILED && !g_t.fallback && strstr(got.msg, "TORC_DEVICE_FALLBACK")) {
            mode = M_UNSUPPORTED;  // the device backend declined an op of it: declined, not failed
            record(b, c, mode, &m);
            goto done;
        }
        out_image = c->alias || writes_into_out(c->code);
    } else {
        rs = run_op(g_t.dev, true, c, &got);
        if (rs == RUN_UNSUPPORTED) {
            if (!g_t.fallback) {  // a device backend without TORC_DEVICE_FALLBACK: an error there
                mode = M_UNSUPPORTED;
                record(b, c, mode, &m);
                goto done;
            }
            // What the core does: the reference runs it (on a device, on host copies). Checked
            // through the public API where torc.h can express the op.
            mode = M_FALLBACK;
            rs = run_frontend(c, &got, &as);
            out_image = c->alias || writes_into_out(c->code);
            if (rs == RUN_UNSUPPORTED) {
                rs = run_op(g_t.dev, false, c, &got);
                as = c->out;
                out_image = true;
            }
        }
    }
    if (rs != RUN_OK) {
        cmp_fail(&m, "%s", got.msg);
    } else {
        if (out_image) check_guard(xc_out_before(c), got.obuf, &c->out, "out", &m);
        check_inputs(c, &got, &m, "the backend");
        compare(c, 0, ref.obuf, got.obuf, &as, ref.amax, got.amax, &m);
        for (int k = 0; k < c->n_xout && got.xobuf[k]; k++) {  // the multi-output ops' other outputs
            char what[24];
            snprintf(what, sizeof what, "out[%d]", k + 1);
            check_guard(c->xoimg[k], got.xobuf[k], &c->xout[k], what, &m);
            cmp mk = {.ok = true};
            compare(c, k + 1, ref.xobuf[k], got.xobuf[k], &c->xout[k], 0, 0, &mk);
            m.max_abs = fmax(m.max_abs, mk.max_abs), m.ratio = fmax(m.ratio, mk.ratio), m.nmse = fmax(m.nmse, mk.nmse);
            if (!mk.ok) cmp_fail(&m, "%s: %s", what, mk.msg);
        }
    }
    record(b, c, mode, &m);
    if (g_opt.api && mode == M_NATIVE) {
        // --api: the same family through the public API too (what a fallback would run), which
        // also checks that the descriptors built here are the ones the frontend sends.
        run_out api = {0};
        cmp ma = {.ok = true};
        spec aas = c->out;
        rs = run_frontend(c, &api, &aas);
        if (rs != RUN_UNSUPPORTED) {
            if (rs != RUN_OK) cmp_fail(&ma, "%s", api.msg);
            else compare(c, 0, ref.obuf, api.obuf, &aas, ref.amax, api.amax, &ma);
            record(b, c, M_FRONTEND, &ma);
        }
        run_out_free(&api);
    }
done:
    run_out_free(&ref);
    run_out_free(&got);
    if (c->alias) free(u.oimg);
    xc_free(c);
}

// ---- --sweep: layout sweeps of the paths that pack or convert operands ----
// The matmuls (MATMUL, MATMUL_ROUNDED, SCALED_MM), casts and copies (COPY) and LAYER_NORM (and its
// backward) also run, under --sweep, over every layout of every operand at sizes on both sides of
// the edges of the backends' blocking, instead of the sample of families each builder emits: a
// path that one layout and size alone takes (onednn's f16 / bf16 GEMM read an expanded or sliced B
// of K = 1 as contiguous, issue 34) cannot hide between samples. The sweeps' inputs are tight
// (spec): under AddressSanitizer a read past one fails the run even where the values read would
// not. A case the backend declines is counted as its fallback, not run (emit). --sweep is the
// CI's size: each size of each dim with three sets of partner sizes for the others, out's layouts
// in turn; --sweep=full (hours on the reference's loops) adds partners, every out layout and every
// batch form.
//
// A matrix operand's layout (its last two dims, R x C): row-major, column-major, a row expanded
// (row stride 0), a column expanded (column stride 0), [:, ::2] of a wider buffer, and a
// column-major one sliced [::3, ::3]. Outs take c, t and s2 (an expanded out has no meaning).
typedef enum { W_C, W_T, W_E0, W_E1, W_S2, W_S3, W_COUNT } wlay;
static const char *const g_wlay_name[W_COUNT] = {"c", "t", "e0", "e1", "s2", "s3"};
static const wlay g_wlay_out[3] = {W_C, W_T, W_S2};

// nb batch dims (batch; those in bmask stride 0, the broadcast ones) over an R x C matrix of layout l.
static spec sp_matrix(wlay l, torc_dtype dt, int nb, const int64_t *batch, unsigned bmask, int64_t R, int64_t C) {
    spec s = {.dtype = dt, .ndim = nb + 2};
    const int64_t r = R > 0 ? R : 1, c = C > 0 ? C : 1;
    int64_t rs = c, cs = 1, span = r * c;
    switch (l) {
    case W_T: rs = 1, cs = r; break;
    case W_E0: rs = 0, span = c; break;
    case W_E1: rs = 1, cs = 0, span = r; break;
    case W_S2: rs = 2 * c + 1, cs = 2, span = r * rs; break;
    case W_S3: rs = 3, cs = 3 * r + 1, span = c * cs; break;
    default: break;
    }
    for (int d = nb - 1; d >= 0; d--) {
        const bool bc = bmask >> d & 1;
        s.shape[d] = batch[d];
        s.stride[d] = bc ? 0 : span;
        if (!bc) span *= batch[d] > 0 ? batch[d] : 1;
    }
    s.shape[nb] = R, s.shape[nb + 1] = C, s.stride[nb] = rs, s.stride[nb + 1] = cs;
    return spec_done(s);
}

// Sizes on both sides of the edges of the backends' blocking. onednn's FMA GEMM: AVX2 tiles of 6 x
// 16 (4- and 2-row ones), AVX-512 12 x 32 (8, 4), Zen 4 16 x 16; its small path's vectors of 8 / 16
// and runs of 4 of them, its 4-row GEMV, 4-column dots and 8-lane dot products; blocks of 96 rows,
// runs of 256 and 2048 k, 128-column pack groups; CUDA's tiles of 16 to 128. Each size of one dim
// meets partner sizes of the other two (sweep_mm_shapes).
static const int64_t SW_M[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 15, 16, 17, 95, 96, 97};
static const int64_t SW_N[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129};
static const int64_t SW_K[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 255, 256, 257, 2047, 2048, 2049};
#define SW_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct mm_shape { int64_t m, k, n; } mm_shape;

// The sweep's (M, K, N) into sh (at most cap), without repeats: each size v of each dim with the
// other two dims (small, mid), (mid, small) and (wide, wide); small from 1, 2, 3 and mid from 8,
// 17, 33 in turn (--sweep=full: every pair of them), mid 5, 7, 9 beside K >= 255 (the work stays
// small); wide from 16, 17, 33 and 17, 33, 16 in turn, where no dim is under 16 (onednn's AMX
// GEMM), beside K >= 255 only past its blocks (257, 2049: 16 and 17, most of the sweep's work).
static int sweep_mm_shapes(mm_shape *sh, int cap) {
    static const int64_t small[] = {1, 2, 3}, mid[] = {8, 17, 33}, mid_long[] = {5, 7, 9}, wide[] = {16, 17, 33};
    const int64_t *lists[3] = {SW_M, SW_K, SW_N};
    const int lens[3] = {SW_LEN(SW_M), SW_LEN(SW_K), SW_LEN(SW_N)};
    int n = 0;
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < lens[d]; i++) {
            const int64_t v = lists[d][i];
            const bool long_k = d == 1 && v >= 255;
            const int np = g_opt.sweep >= 2 ? 9 : 1;
            for (int p = 0; p < np; p++) {
                const int si = np == 1 ? i % 3 : p / 3, mi = np == 1 ? i % 3 : p % 3;
                const int64_t lo = small[si], hi = long_k ? mid_long[mi] : mid[mi];
                for (int o = 0; o < 3; o++) {
                    if (o == 2 && (p > 0 || (long_k && v != 257 && v != 2049))) break;
                    int64_t x[3];
                    x[d] = v;
                    x[(d + 1) % 3] = o == 2 ? wide[long_k ? 0 : i % 3] : o ? hi : lo;
                    x[(d + 2) % 3] = o == 2 ? wide[long_k ? 1 : (i + 1) % 3] : o ? lo : hi;
                    bool seen = false;
                    for (int j = 0; j < n && !seen; j++) seen = sh[j].m == x[0] && sh[j].k == x[1] && sh[j].n == x[2];
                    if (!seen && n < cap) sh[n++] = (mm_shape){x[0], x[1], x[2]};
                }
            }
        }
    return n;
}

// The batch forms of a batched case: (2, 3) with a and b whole, a broadcast along dim 0, b along
// dim 1, a one matrix for all (both dims), b one matrix for all.
static const unsigned g_bforms[5][2] = {{0, 0}, {0x1, 0}, {0, 0x2}, {0x3, 0}, {0, 0x3}};

static void sweep_matmul(builder *b);
static void sweep_layer_norm(builder *b);

// Whether a row's sweep runs: checking values, and the backend ran some of the row's ordinary
// families itself (a row it declines entirely would sweep the reference against itself).
static bool sweep_row(const builder *b) {
    return g_opt.sweep && b->mode == EMIT_CHECK && b->row->by_mode[M_NATIVE] > 0;
}

// ---- case builders: one per op class, each emitting its shape families ----
static const int64_t S_713[] = {7, 13}, S_137[] = {13, 7}, S_59[] = {5, 9}, S_345[] = {3, 4, 5}, S_305[] = {3, 0, 5},
                     S_11[] = {1, 1}, S_3573[] = {3, 5, 7, 3}, S_LARGE[] = {3, 1031}, S_1113[] = {11, 13};

// Elementwise ops (fills, copies, random, unary, binary, where): inputs already broadcast to
// out's shape.
typedef struct ew {
    int n_in;
    torc_dtype in_dt[3];
    domain dom[3];
    torc_dtype out_dt;
    torc_op_params params;
    bool alias_ok;  // out may be in0 itself (the op has an in-place form)
    bool bcast_ok;  // inputs may have stride-0 dims
    bool no_special;  // NaN/inf inputs are undefined behaviour for this op (float -> int casts)
} ew;

static void ew_case(builder *b, const ew *e, const char *fam, int nd, const int64_t *shape, layout lin, layout lout,
                    const unsigned *bm, bool special, bool alias) {
    xcase c;
    xc_begin(&c, b, fam, e->n_in);
    c.frontend = !strcmp(fam, "frontend");
    c.params = e->params;
    for (int k = 0; k < e->n_in; k++) {
        const domain dm = special && is_float(e->in_dt[k]) ? DOM(D_SPECIAL) : e->dom[k];
        xc_in(&c, b, k, sp_make(lin, e->in_dt[k], nd, shape, bm ? bm[k] : 0), dm);
    }
    if (alias) xc_alias(&c);
    else xc_out(&c, sp_make(lout, e->out_dt, nd, shape, 0));
    emit(b, &c);
}

static void emit_ew(builder *b, const ew *e) {
    if (b->mode == EMIT_PERF) {
        const int64_t ps[2] = {g_opt.perf_n / 1024 > 0 ? g_opt.perf_n / 1024 : 1, 1024};
        ew_case(b, e, "perf", 2, ps, L_C, L_C, NULL, false, false);
        return;
    }
    ew_case(b, e, "contig", 2, S_713, L_C, L_C, NULL, false, false);
    if (b->mode == EMIT_PROBE) return;
    ew_case(b, e, "frontend", 2, S_713, L_C, L_C, NULL, false, false);
    if (e->n_in) ew_case(b, e, "transposed", 2, S_137, L_T, L_C, NULL, false, false);
    ew_case(b, e, e->n_in ? "out_transposed" : "transposed", 2, S_137, L_C, L_T, NULL, false, false);
    ew_case(b, e, "sliced", 2, S_59, L_S, L_S, NULL, false, false);
    if (e->n_in && e->bcast_ok) {
        const unsigned bm[3] = {0x2, 0x5, 0x1};
        ew_case(b, e, "broadcast", 3, S_345, L_B, L_C, bm, false, false);
    }
    if (e->n_in >= 2 && e->bcast_ok) {  // a scalar operand (x + 2.0): every stride 0
        const unsigned bm[3] = {0, 0x3, 0};
        ew_case(b, e, "scalar_operand", 2, S_713, L_B, L_C, bm, false, false);
    }
    ew_case(b, e, "zero_size", 3, S_305, L_C, L_C, NULL, false, false);
    ew_case(b, e, "zero_dim", 0, S_11, L_C, L_C, NULL, false, false);
    ew_case(b, e, "size1", 2, S_11, L_C, L_C, NULL, false, false);
    ew_case(b, e, "odd", 4, S_3573, L_C, L_C, NULL, false, false);
    ew_case(b, e, "large", 2, S_LARGE, L_C, L_C, NULL, false, false);
    ew_case(b, e, "large_sliced", 2, S_LARGE, L_S, L_S, NULL, false, false);
    if (e->alias_ok && e->n_in && e->in_dt[0] == e->out_dt) {
        ew_case(b, e, "inplace", 2, S_713, L_C, L_C, NULL, false, true);
        ew_case(b, e, "inplace_sliced", 2, S_59, L_S, L_S, NULL, false, true);
        ew_case(b, e, "inplace_large", 2, S_LARGE, L_C, L_C, NULL, false, true);
    }
    bool any_float = false;
    for (int k = 0; k < e->n_in; k++) any_float |= is_float(e->in_dt[k]);
    if (any_float && !e->no_special) ew_case(b, e, "special", 2, S_1113, L_C, L_C, NULL, true, false);
}

static torc_dtype unary_out(torc_opcode code, torc_dtype d) {
    switch (code) {
    case TORC_OP_NEG: case TORC_OP_ABS: case TORC_OP_RELU: return d == TORC_DTYPE_BOOL ? TORC_DTYPE_COUNT : d;
    case TORC_OP_SIGN: case TORC_OP_SQUARE: return d;
    case TORC_OP_GELU: return is_float(d) ? d : TORC_DTYPE_COUNT;
    case TORC_OP_LOGICAL_NOT: return TORC_DTYPE_BOOL;
    case TORC_OP_POW_SCALAR: return is_float(d) ? d : (d == TORC_DTYPE_BOOL ? TORC_DTYPE_I64 : d);  // result_type
    default: return is_float(d) ? d : torc_get_default_dtype();  // torch.sqrt(int) is float
    }
}

static domain unary_dom(torc_opcode code) {
    switch (code) {
    case TORC_OP_SQRT: case TORC_OP_RSQRT: case TORC_OP_LOG: case TORC_OP_POW_SCALAR: return DOM(D_POS);
    case TORC_OP_RECIPROCAL: return DOM(D_AWAY0);
    case TORC_OP_ERFINV: return DOM(D_UNIT);
    case TORC_OP_TANH: case TORC_OP_SIGMOID: case TORC_OP_GELU: case TORC_OP_ERF: case TORC_OP_SIN: case TORC_OP_COS:
        return DOMS(D_REAL, 2);
    default: return DOM(D_REAL);
    }
}

static void build_unary(builder *b) {
    const torc_dtype d = b->dt;
    ew e = {.n_in = 1, .in_dt = {d}, .dom = {unary_dom(b->code)}, .out_dt = unary_out(b->code, d), .alias_ok = true,
            .bcast_ok = true};
    if (e.out_dt == TORC_DTYPE_COUNT) return;
    if (b->code == TORC_OP_POW_SCALAR) e.params.scalar.value = is_float(d) ? 2.5 : 3;
    emit_ew(b, &e);
    if (b->mode != EMIT_CHECK) return;
    if (b->code == TORC_OP_GELU) {
        e.params.gelu.approximate = 1;
        ew_case(b, &e, "tanh_approx", 2, S_713, L_C, L_C, NULL, false, false);
        ew_case(b, &e, "tanh_approx_large", 2, S_LARGE, L_C, L_C, NULL, false, false);
    }
    if (b->code == TORC_OP_POW_SCALAR && is_float(d)) {
        e.dom[0] = DOM(D_REAL);
        e.params.scalar.value = 2.0;
        ew_case(b, &e, "exponent_2", 2, S_713, L_C, L_C, NULL, false, false);
        e.params.scalar.value = -1.0;
        e.dom[0] = DOM(D_AWAY0);
        ew_case(b, &e, "exponent_-1", 2, S_713, L_C, L_C, NULL, false, false);
        e.params.scalar.value = 0.5;
        e.dom[0] = DOM(D_POS);
        ew_case(b, &e, "exponent_0.5", 2, S_LARGE, L_C, L_C, NULL, false, false);
    }
}

static bool is_cmp_or_logical(torc_opcode c) {
    return (c >= TORC_OP_EQ && c <= TORC_OP_GE) || c == TORC_OP_LOGICAL_AND || c == TORC_OP_LOGICAL_OR;
}
static bool is_divmod(torc_opcode c) { return c == TORC_OP_FLOOR_DIVIDE || c == TORC_OP_REMAINDER || c == TORC_OP_FMOD; }

static torc_dtype binary_out(torc_opcode code, torc_dtype a, torc_dtype b) {
    torc_dtype c;
    if (torc_promote_types(a, b, &c)) {
        torc_clear_error();
        return TORC_DTYPE_COUNT;
    }
    if (is_cmp_or_logical(code)) return TORC_DTYPE_BOOL;
    if (code == TORC_OP_DIV && !is_float(c)) return torc_get_default_dtype();
    // PyTorch refuses subtraction with any bool operand (the frontend never sends it).
    if (code == TORC_OP_SUB && (a == TORC_DTYPE_BOOL || b == TORC_DTYPE_BOOL)) return TORC_DTYPE_COUNT;
    if (is_divmod(code) && (c == TORC_DTYPE_BOOL || torc_dtype_is_fp8(c))) return TORC_DTYPE_COUNT;  // no kernels
    return c;
}

static void build_binary(builder *b) {
    const torc_opcode code = b->code;
    const torc_dtype d = b->dt;
    ew e = {.n_in = 2, .in_dt = {d, d}, .dom = {DOM(D_REAL), DOM(D_REAL)}, .out_dt = binary_out(code, d, d),
            .alias_ok = true, .bcast_ok = true};
    if (e.out_dt == TORC_DTYPE_COUNT) return;
    e.params.scalar.value = 1.0;  // alpha of add/sub
    if (code == TORC_OP_DIV || is_divmod(code)) e.dom[1] = DOM(D_AWAY0);  // no integer division by zero
    if (code == TORC_OP_POW) e.dom[0] = is_float(d) ? DOM(D_POS) : DOM(D_REAL), e.dom[1] = DOM(D_EXPONENT);
    if (is_cmp_or_logical(code) || code == TORC_OP_MAXIMUM || code == TORC_OP_MINIMUM)
        e.dom[0] = e.dom[1] = DOM(D_DISCRETE);
    emit_ew(b, &e);
    if (b->mode != EMIT_CHECK) return;
    // Mixed input dtypes: the frontend passes operands uncast and the backend converts on load.
    torc_dtype partner = d == TORC_DTYPE_F16 || d == TORC_DTYPE_BF16 ? TORC_DTYPE_F32
                       : is_float(d) ? TORC_DTYPE_I32 : d == TORC_DTYPE_BOOL ? TORC_DTYPE_U8 : TORC_DTYPE_BOOL;
    if (is_divmod(code) && partner == TORC_DTYPE_BOOL) partner = TORC_DTYPE_I8;  // a bool divisor can be 0
    ew m = e;
    m.in_dt[1] = partner;
    m.out_dt = binary_out(code, d, partner);
    m.alias_ok = m.out_dt == d;
    if (m.out_dt != TORC_DTYPE_COUNT && !torc_dtype_is_fp8(d)) {
        ew_case(b, &m, "mixed", 2, S_713, L_C, L_C, NULL, false, false);
        const unsigned bm[2] = {0, 0x3};
        ew_case(b, &m, "mixed_scalar", 2, S_LARGE, L_B, L_C, bm, false, false);
        if (m.alias_ok) ew_case(b, &m, "mixed_inplace", 2, S_713, L_C, L_C, NULL, false, true);
    }
    if ((code == TORC_OP_ADD || code == TORC_OP_SUB) && d != TORC_DTYPE_BOOL) {
        ew a = e;
        a.params.scalar.value = is_float(e.out_dt) ? -0.5 : 2;
        ew_case(b, &a, "alpha", 2, S_713, L_C, L_C, NULL, false, false);
        ew_case(b, &a, "alpha_large", 2, S_LARGE, L_C, L_C, NULL, false, false);
        ew_case(b, &a, "alpha_inplace", 2, S_59, L_S, L_S, NULL, false, true);
    }
}

// GELU_BACKWARD (dy, x -> dx): the float dtypes, x over the tails (|x| up to 8, where tanh is 1 in
// float), both approximations.
static void build_gelu_backward(builder *b) {
    const torc_dtype d = b->dt;
    if (d != TORC_DTYPE_F64 && d != TORC_DTYPE_F32 && d != TORC_DTYPE_F16 && d != TORC_DTYPE_BF16) return;
    ew e = {.n_in = 2, .in_dt = {d, d}, .dom = {DOM(D_REAL), DOMS(D_REAL, 4)}, .out_dt = d, .alias_ok = true,
            .bcast_ok = true};
    emit_ew(b, &e);
    if (b->mode != EMIT_CHECK) return;
    e.params.gelu.approximate = 1;
    ew_case(b, &e, "tanh_approx", 2, S_713, L_C, L_C, NULL, false, false);
    ew_case(b, &e, "tanh_approx_large", 2, S_LARGE, L_C, L_C, NULL, false, false);
    ew_case(b, &e, "tanh_approx_sliced", 2, S_LARGE, L_S, L_S, NULL, false, false);
    ew_case(b, &e, "tanh_approx_inplace", 2, S_LARGE, L_C, L_C, NULL, false, true);
    ew_case(b, &e, "tanh_approx_special", 2, S_1113, L_C, L_C, NULL, true, false);
}

static void build_where(builder *b) {
    const torc_dtype d = b->dt;
    ew e = {.n_in = 3, .in_dt = {TORC_DTYPE_BOOL, d, d}, .dom = {DOM(D_REAL), DOM(D_REAL), DOM(D_REAL)}, .out_dt = d,
            .bcast_ok = true};
    emit_ew(b, &e);
}

// The fused pointwise ops: every dtype PyTorch's kernels take (integers for addcmul only), a
// divisor away from 0, both lerp branches.
static void build_fused(builder *b) {
    const torc_dtype d = b->dt;
    const bool fl = d == TORC_DTYPE_F64 || d == TORC_DTYPE_F32 || d == TORC_DTYPE_F16 || d == TORC_DTYPE_BF16;
    if (!fl && !(b->code == TORC_OP_ADDCMUL && !is_float(d) && d != TORC_DTYPE_BOOL)) return;
    ew e = {.n_in = b->code == TORC_OP_LERP ? 2 : 3, .in_dt = {d, d, d}, .dom = {DOM(D_REAL), DOM(D_REAL), DOM(D_REAL)},
            .out_dt = d, .alias_ok = true, .bcast_ok = true};
    if (b->code == TORC_OP_ADDCDIV) e.dom[2] = DOM(D_AWAY0);
    e.params.scalar.value = b->code == TORC_OP_LERP ? 0.3 : fl ? -0.7 : 2;
    emit_ew(b, &e);
    if (b->mode != EMIT_CHECK || b->code != TORC_OP_LERP) return;
    e.params.scalar.value = 0.8;  // the other branch: fma(w - 1, end - self, end)
    ew_case(b, &e, "weight_large", 2, S_713, L_C, L_C, NULL, false, false);
    ew_case(b, &e, "weight_large_big", 2, S_LARGE, L_C, L_C, NULL, false, false);
    ew_case(b, &e, "weight_large_inplace", 2, S_LARGE, L_C, L_C, NULL, false, true);
}

static void sweep_copy(builder *b, const ew *e);

// COPY: b->dt is the source dtype, b->odt the destination's.
static void build_copy(builder *b) {
    const torc_dtype s = b->dt, d = b->odt;
    // Values the destination holds: a float cast out of an integer's range is undefined in PyTorch.
    ew e = {.n_in = 1, .in_dt = {s}, .dom = {DOM(d == TORC_DTYPE_U8 ? D_UWIDE : D_WIDE)}, .out_dt = d,
            .alias_ok = s == d, .bcast_ok = true, .no_special = !is_float(d) && d != TORC_DTYPE_BOOL};
    emit_ew(b, &e);
    if (sweep_row(b)) sweep_copy(b, &e);
}

static void build_fill(builder *b) {
    const torc_dtype d = b->dt;
    ew e = {.out_dt = d};
    e.params.scalar.value = is_float(d) ? -1.75 : (d == TORC_DTYPE_BOOL ? 1 : 7);
    emit_ew(b, &e);
    if (b->mode != EMIT_CHECK || !is_float(d)) return;
    e.params.scalar.value = NAN;
    ew_case(b, &e, "nan", 2, S_713, L_C, L_C, NULL, false, false);
    e.params.scalar.value = 1e5;  // overflows f16 and fp8: the cast's rounding rules decide
    ew_case(b, &e, "overflow", 2, S_713, L_C, L_C, NULL, false, false);
}

static void build_random(builder *b) {
    const torc_dtype d = b->dt;
    ew e = {.out_dt = d};
    e.params.rng.seed = 1234 + (uint64_t)d;
    e.params.rng.offset = 17;
    switch (b->code) {
    case TORC_OP_RAND_UNIFORM: e.params.rng.a = -1, e.params.rng.b = 3; break;
    case TORC_OP_RAND_NORMAL: e.params.rng.a = 0.5, e.params.rng.b = 2; break;
    default:
        e.params.rng.a = d == TORC_DTYPE_U8 ? 3 : d == TORC_DTYPE_BOOL ? 0 : d == TORC_DTYPE_I8 ? -100 : -5;
        e.params.rng.b = d == TORC_DTYPE_U8 ? 200 : d == TORC_DTYPE_BOOL ? 2 : d == TORC_DTYPE_I8 ? 100 : 17;
        break;
    }
    emit_ew(b, &e);
}

// ARANGE / LINSPACE: 1-D outs.
static void range_case(builder *b, const char *fam, int64_t n, layout lo) {
    const torc_dtype d = b->dt;
    xcase c;
    xc_begin(&c, b, fam, 0);
    c.frontend = !strcmp(fam, "frontend");
    const bool fl = is_float(d), u8 = d == TORC_DTYPE_U8;
    if (b->code == TORC_OP_ARANGE) {
        c.params.range.start = fl ? -3.5 : u8 ? 2 : -7;
        c.params.range.step = fl ? 0.25 : 3;
    } else {
        c.params.range.start = fl ? -2 : u8 ? 2 : -7;
        c.params.range.end = fl ? 5.5 : u8 ? 50 : 29;
    }
    c.params.range.count = n;
    xc_out(&c, sp_make(lo, d, 1, &n, 0));
    emit(b, &c);
}

static void build_range(builder *b) {
    if (b->dt == TORC_DTYPE_BOOL) return;
    if (b->mode == EMIT_PERF) { range_case(b, "perf", g_opt.perf_n, L_C); return; }
    range_case(b, "contig", 37, L_C);
    if (b->mode == EMIT_PROBE) return;
    range_case(b, "frontend", 37, L_C);
    range_case(b, "sliced", 37, L_S);
    range_case(b, "zero_size", 0, L_C);
    range_case(b, "size1", 1, L_C);
    range_case(b, "large", 4099, L_C);
}

// ---- reductions ----
static torc_dtype reduce_out(torc_opcode code, torc_dtype d) {
    const bool fl = is_float(d);
    switch (code) {
    case TORC_OP_SUM: case TORC_OP_PROD: return fl ? d : TORC_DTYPE_I64;
    case TORC_OP_MAX: case TORC_OP_MIN: return d;
    case TORC_OP_ARGMAX: case TORC_OP_ARGMIN: return TORC_DTYPE_I64;
    case TORC_OP_LOGSUMEXP: return fl ? d : torc_get_default_dtype();
    default: return fl ? d : TORC_DTYPE_COUNT;  // mean, var, std, norm take floats only
    }
}

static void reduce_case(builder *b, const char *fam, int nd, const int64_t *shape, layout li, uint32_t mask,
                        const torc_op_params *p, bool special) {
    const torc_opcode code = b->code;
    xcase c;
    xc_begin(&c, b, fam, 1);
    c.frontend = !strcmp(fam, "frontend");
    c.params = *p;
    c.params.reduce.mask = mask;
    domain dm = code == TORC_OP_PROD ? DOM(D_NEAR1)
              : (code == TORC_OP_MAX || code == TORC_OP_MIN || code == TORC_OP_ARGMAX || code == TORC_OP_ARGMIN) ? DOM(D_DISCRETE)
              : code == TORC_OP_LOGSUMEXP ? DOMS(D_REAL, 3) : DOM(D_REAL);
    if (special && is_float(b->dt)) dm = DOM(D_SPECIAL);
    xc_in(&c, b, 0, sp_make(li, b->dt, nd, shape, 0), dm);
    int64_t os[TORC_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        os[d] = (mask >> d & 1) ? 1 : shape[d];
        if (mask >> d & 1) c.n_acc *= shape[d];
    }
    xc_out(&c, sp_make(li == L_S ? L_S : L_C, reduce_out(code, b->dt), nd, os, 0));
    emit(b, &c);
}

static void build_reduce(builder *b) {
    const torc_opcode code = b->code;
    if (reduce_out(code, b->dt) == TORC_DTYPE_COUNT) return;
    const bool arg = code == TORC_OP_ARGMAX || code == TORC_OP_ARGMIN;
    const bool nonempty = arg || code == TORC_OP_MAX || code == TORC_OP_MIN;  // a zero-size reduced dim is an error
    torc_op_params p = {.reduce = {0, 1.0, 2.0}};  // Bessel's correction; the 2-norm
    if (b->mode == EMIT_PERF) {
        const int64_t ps[2] = {g_opt.perf_n / 1024 > 0 ? g_opt.perf_n / 1024 : 1, 1024};
        { reduce_case(b, "perf", 2, ps, L_C, 0x2, &p, false); return; }
    }
    static const int64_t s357[] = {3, 5, 7}, s05[] = {0, 5}, s40[] = {4, 0}, s4l[] = {3, 1031}, sflat[] = {4099}, s611[] = {6, 11};
    reduce_case(b, "last_dim", 2, S_713, L_C, 0x2, &p, false);
    if (b->mode == EMIT_PROBE) return;
    reduce_case(b, "frontend", 2, S_713, L_C, 0x2, &p, false);
    reduce_case(b, "first_dim", 2, S_713, L_C, 0x1, &p, false);
    if (!arg) reduce_case(b, "all_dims", 2, S_713, L_C, 0x3, &p, false);
    reduce_case(b, "middle_dim", 3, s357, L_C, 0x2, &p, false);
    if (!arg) reduce_case(b, "outer_dims", 3, s357, L_C, 0x5, &p, false);
    reduce_case(b, "transposed", 2, S_137, L_T, 0x2, &p, false);
    reduce_case(b, "sliced", 2, S_59, L_S, 0x2, &p, false);
    if (!nonempty) reduce_case(b, "zero_size", 2, s05, L_C, 0x1, &p, false);
    reduce_case(b, "zero_kept", 2, s40, L_C, 0x1, &p, false);
    if (!arg) reduce_case(b, "zero_dim", 0, S_11, L_C, 0, &p, false);
    reduce_case(b, "size1", 2, S_11, L_C, arg ? 0x1 : 0x3, &p, false);
    reduce_case(b, "large", 2, s4l, L_C, 0x2, &p, false);
    reduce_case(b, "large_flat", 1, sflat, L_C, 0x1, &p, false);
    if (is_float(b->dt)) reduce_case(b, "special", 2, s611, L_C, 0x2, &p, true);
    if (code == TORC_OP_VAR || code == TORC_OP_STD) {
        torc_op_params q = p;
        q.reduce.correction = 0;
        reduce_case(b, "correction0", 2, S_713, L_C, 0x2, &q, false);
    }
    if (code == TORC_OP_NORM) {
        static const struct { const char *name; double p; } ps[] = {{"p1", 1}, {"p3", 3}, {"pinf", INFINITY}, {"p0.5", 0.5}};
        for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
            torc_op_params q = p;
            q.reduce.p = ps[i].p;
            reduce_case(b, ps[i].name, 2, S_713, L_C, 0x2, &q, false);
        }
    }
}

static void softmax_case(builder *b, const char *fam, int nd, const int64_t *shape, layout l, int dim, bool special) {
    xcase c;
    xc_begin(&c, b, fam, 1);
    c.frontend = !strcmp(fam, "frontend");
    c.params.dim.dim = dim;
    c.n_acc = shape[dim];
    xc_in(&c, b, 0, sp_make(l, b->dt, nd, shape, 0), special ? DOM(D_SPECIAL) : DOMS(D_REAL, 3));
    xc_out(&c, sp_make(l == L_S ? L_S : L_C, b->dt, nd, shape, 0));
    emit(b, &c);
}

static void build_softmax(builder *b) {
    if (!is_float(b->dt)) return;  // PyTorch's softmax takes floats only
    if (b->mode == EMIT_PERF) {
        const int64_t ps[2] = {g_opt.perf_n / 1024 > 0 ? g_opt.perf_n / 1024 : 1, 1024};
        { softmax_case(b, "perf", 2, ps, L_C, 1, false); return; }
    }
    static const int64_t s357[] = {3, 5, 7}, s07[] = {0, 7}, s51[] = {5, 1}, s3l[] = {3, 1031}, s611[] = {6, 11};
    softmax_case(b, "last_dim", 2, S_713, L_C, 1, false);
    if (b->mode == EMIT_PROBE) return;
    softmax_case(b, "frontend", 2, S_713, L_C, 1, false);
    softmax_case(b, "first_dim", 2, S_713, L_C, 0, false);
    softmax_case(b, "middle_dim", 3, s357, L_C, 1, false);
    softmax_case(b, "transposed", 2, S_137, L_T, 1, false);
    softmax_case(b, "sliced", 2, S_59, L_S, 1, false);
    softmax_case(b, "zero_size", 2, s07, L_C, 1, false);
    softmax_case(b, "size1", 2, S_11, L_C, 1, false);
    softmax_case(b, "column1", 2, s51, L_C, 1, false);
    softmax_case(b, "large", 2, s3l, L_C, 1, false);
    softmax_case(b, "special", 2, s611, L_C, 1, true);
}

// ---- cross_entropy (loss and gradient of rows of logits) ----
// N rows of V classes, logits of layout l, targets uniform with every fourth row ignored (-100),
// weights positive; out[0] the loss (opmath), out[1] the gradient (the logits' dtype, dense or,
// for sliced logits, sliced too).
static void ce_case(builder *b, const char *fam, int64_t N, int64_t V, layout l, bool special, bool in_place) {
    xcase c;
    xc_begin(&c, b, fam, 3);
    const torc_dtype om = b->dt == TORC_DTYPE_F64 ? TORC_DTYPE_F64 : TORC_DTYPE_F32;
    const int64_t xs[2] = {N, V}, ns[1] = {N};
    c.n_acc = V;
    xc_in(&c, b, 0, sp_make(l, b->dt, 2, xs, 0), special ? DOM(D_SPECIAL) : DOMS(D_REAL, 4));
    xc_in(&c, b, 1, sp_contig(TORC_DTYPE_I64, 1, ns), DOMI(V > 0 ? V - 1 : 0));
    for (int64_t i = 0; i < N; i++)
        if (i % 4 == 2 || V == 0) st_f(elem(c.img[1], &c.in[1], spec_lin(&c.in[1], i)), TORC_DTYPE_I64, -100);
    xc_in(&c, b, 2, sp_contig(om, 1, ns), DOM(D_POS));
    xc_out(&c, sp_contig(om, 1, ns));
    if (in_place) {  // the gradient over the logits: out[1] is in[0]
        xc_xout(&c, b, c.in[0], NULL);
        c.xalias = true;
        memcpy(c.xoimg[0], c.img[0], image_bytes(&c.in[0]));
    } else {
        xc_xout(&c, b, sp_make(l == L_S ? L_S : L_C, b->dt, 2, xs, 0), NULL);
    }
    emit(b, &c);
}

static void build_cross_entropy(builder *b) {
    const torc_dtype d = b->dt;
    if (d != TORC_DTYPE_F64 && d != TORC_DTYPE_F32 && d != TORC_DTYPE_F16 && d != TORC_DTYPE_BF16) return;
    if (b->mode == EMIT_PERF) {
        ce_case(b, "perf", g_opt.perf_n / 50257 > 0 ? g_opt.perf_n / 50257 : 1, 50257, L_C, false, false);
        return;
    }
    ce_case(b, "rows", 7, 13, L_C, false, false);
    if (b->mode == EMIT_PROBE) return;
    ce_case(b, "one_class", 5, 1, L_C, false, false);
    ce_case(b, "large", 9, 1031, L_C, false, false);
    ce_case(b, "vocab", 3, 50257, L_C, false, false);
    ce_case(b, "transposed", 13, 7, L_T, false, false);
    ce_case(b, "sliced", 5, 9, L_S, false, false);
    ce_case(b, "zero_rows", 0, 7, L_C, false, false);
    ce_case(b, "zero_classes", 3, 0, L_C, false, false);
    ce_case(b, "special", 6, 11, L_C, true, false);
    ce_case(b, "inplace", 9, 1031, L_C, false, true);
    ce_case(b, "inplace_sliced", 5, 9, L_S, false, true);
    ce_case(b, "inplace_special", 6, 11, L_C, true, true);
}

// ---- matmul ----
static void mm_case(builder *b, const char *fam, int nb, const int64_t *batch, int64_t M, int64_t K, int64_t N,
                    layout la, layout lb, layout lo, unsigned bma, unsigned bmb, bool special) {
    const int nd = nb + 2;
    int64_t sa[TORC_MAX_DIMS], sb[TORC_MAX_DIMS], so[TORC_MAX_DIMS];
    for (int i = 0; i < nb; i++) sa[i] = sb[i] = so[i] = batch[i];
    sa[nb] = M, sa[nb + 1] = K, sb[nb] = K, sb[nb + 1] = N, so[nb] = M, so[nb + 1] = N;
    xcase c;
    xc_begin(&c, b, fam, 2);
    c.frontend = !strcmp(fam, "frontend");
    c.n_acc = K;
    xc_in(&c, b, 0, sp_make(la, b->dt, nd, sa, bma), special ? DOM(D_SPECIAL) : DOM(D_REAL));
    xc_in(&c, b, 1, sp_make(lb, b->dt, nd, sb, bmb), DOM(D_REAL));
    xc_out(&c, sp_make(lo, b->odt, nd, so, 0));
    emit(b, &c);
}

// MATMUL_ROUNDED in c = b->dt: each of a, b and out c or f32 (ta, tb, to), sizes around the 1M
// multiply-adds where onednn's FMA GEMM takes it (below, it declines and the reference runs them).
static void mmr_case(builder *b, const char *fam, int64_t M, int64_t K, int64_t N, layout la, layout lb,
                     torc_dtype ta, torc_dtype tb, torc_dtype to) {
    const int64_t sa[2] = {M, K}, sb[2] = {K, N}, so[2] = {M, N};
    xcase c;
    xc_begin(&c, b, fam, 2);
    c.n_acc = K;
    c.params.matmul.dtype = (int32_t)b->dt;
    xc_in(&c, b, 0, sp_make(la, ta, 2, sa, 0), DOM(D_REAL));
    xc_in(&c, b, 1, sp_make(lb, tb, 2, sb, 0), DOM(D_REAL));
    xc_out(&c, sp_make(L_C, to, 2, so, 0));
    emit(b, &c);
}

static void build_matmul_rounded(builder *b) {
    const torc_dtype c = b->dt, F = TORC_DTYPE_F32;
    if (c != TORC_DTYPE_F16 && c != TORC_DTYPE_BF16) return;
    if (b->mode == EMIT_PERF) {
        const int64_t n = g_opt.perf_mm;
        mmr_case(b, "perf", n, n, n, L_C, L_T, c, F, c);
        return;
    }
    // autocast's three: forward (activation c, f32 weight seen transposed), the input's gradient
    // (c @ f32 weight), the weight's gradient (c^T @ c, out f32); and f32 x f32 both ways.
    mmr_case(b, "contig", 7, 13, 5, L_C, L_C, F, F, c);
    if (b->mode == EMIT_PROBE) return;
    mmr_case(b, "forward", 130, 97, 90, L_C, L_T, c, F, c);
    mmr_case(b, "grad_input", 130, 90, 97, L_C, L_C, c, F, c);
    mmr_case(b, "grad_weight", 90, 130, 97, L_T, L_C, c, c, F);
    mmr_case(b, "f32_inputs", 129, 100, 88, L_C, L_C, F, F, c);
    mmr_case(b, "f32_out", 129, 100, 88, L_T, L_T, F, F, F);
    mmr_case(b, "sliced", 130, 97, 90, L_S, L_S, F, c, c);
    mmr_case(b, "small", 33, 65, 17, L_C, L_T, c, F, F);
    mmr_case(b, "zero_k", 7, 0, 5, L_C, L_C, F, F, c);
    if (sweep_row(b)) sweep_matmul(b);
}

// SCALED_MM: a (b->dt) @ b (b->dt2) with one-element f32 scales -> b->odt; fp8 outs get a
// scale_out, and some families ask for amax_out.
static void smm_case(builder *b, const char *fam, int64_t M, int64_t K, int64_t N, layout la, layout lb, layout lo,
                     double scale_out, bool amax) {
    const int64_t sa[2] = {M, K}, sb[2] = {K, N}, so[2] = {M, N};
    xcase c;
    xc_begin(&c, b, fam, 4);
    c.frontend = !strcmp(fam, "frontend");
    c.n_acc = K;
    c.sm_scale_out = torc_dtype_is_fp8(b->odt) ? scale_out : 0;
    c.sm_amax = amax || torc_dtype_is_fp8(b->odt);
    xc_in(&c, b, 0, sp_make(la, b->dt, 2, sa, 0), DOM(D_REAL));
    xc_in(&c, b, 1, sp_make(lb, b->dt2, 2, sb, 0), DOM(D_REAL));
    xc_in(&c, b, 2, sp_contig(TORC_DTYPE_F32, 0, S_11), DOM(D_REAL));
    xc_in(&c, b, 3, sp_contig(TORC_DTYPE_F32, 0, S_11), DOM(D_REAL));
    st_f(elem(c.img[2], &c.in[2], 0), TORC_DTYPE_F32, 0.75);
    st_f(elem(c.img[3], &c.in[3], 0), TORC_DTYPE_F32, 1.25);
    xc_out(&c, sp_make(lo, b->odt, 2, so, 0));
    emit(b, &c);
}

static void build_scaled_mm(builder *b) {
    if (b->mode == EMIT_PERF) {
        const int64_t n = g_opt.perf_mm;
        smm_case(b, "perf", n, n, n, L_C, L_T, L_C, 0.5, false);
        return;
    }
    smm_case(b, "contig", 7, 13, 5, L_C, L_C, L_C, 0.5, false);
    if (b->mode == EMIT_PROBE) return;
    smm_case(b, "frontend", 7, 13, 5, L_C, L_C, L_C, 0.5, false);
    smm_case(b, "transposed_b", 7, 13, 5, L_C, L_T, L_C, 0.5, false);  // cuBLASLt's favourite layout
    smm_case(b, "transposed_a", 7, 13, 5, L_T, L_C, L_C, 0.5, false);
    smm_case(b, "sliced", 7, 13, 5, L_S, L_S, L_S, 0.5, false);
    smm_case(b, "amax", 7, 13, 5, L_C, L_C, L_C, 0.5, true);
    smm_case(b, "zero_m", 0, 13, 5, L_C, L_C, L_C, 0.5, false);
    smm_case(b, "zero_k", 7, 0, 5, L_C, L_C, L_C, 0.5, true);
    smm_case(b, "size1", 1, 1, 1, L_C, L_C, L_C, 0.5, false);
    smm_case(b, "odd", 33, 65, 17, L_C, L_T, L_C, 0.5, true);
    smm_case(b, "large", 64, 96, 48, L_C, L_T, L_C, 0.5, true);
    if (torc_dtype_is_fp8(b->odt)) smm_case(b, "saturate", 7, 13, 5, L_C, L_C, L_C, 64.0, true);
    if (sweep_row(b)) sweep_matmul(b);
}

static void build_matmul(builder *b) {
    const torc_dtype d = b->dt;
    if (d == TORC_DTYPE_BOOL || torc_dtype_is_fp8(d)) return;  // torch.matmul refuses them
    if (b->mode == EMIT_PERF) {
        const int64_t n = g_opt.perf_mm;
        { mm_case(b, "perf", 0, NULL, n, n, n, L_C, L_C, L_C, 0, 0, false); return; }
    }
    static const int64_t b23[] = {2, 3};
    mm_case(b, "contig", 0, NULL, 7, 13, 5, L_C, L_C, L_C, 0, 0, false);
    if (b->mode == EMIT_PROBE) return;
    mm_case(b, "frontend", 0, NULL, 7, 13, 5, L_C, L_C, L_C, 0, 0, false);
    mm_case(b, "transposed_a", 0, NULL, 7, 13, 5, L_T, L_C, L_C, 0, 0, false);
    mm_case(b, "transposed_b", 0, NULL, 7, 13, 5, L_C, L_T, L_C, 0, 0, false);
    mm_case(b, "transposed_ab", 0, NULL, 7, 13, 5, L_T, L_T, L_C, 0, 0, false);
    mm_case(b, "sliced", 0, NULL, 7, 13, 5, L_S, L_S, L_S, 0, 0, false);
    mm_case(b, "batched", 2, b23, 7, 13, 5, L_C, L_C, L_C, 0, 0, false);
    mm_case(b, "broadcast_b", 2, b23, 7, 13, 5, L_C, L_B, L_C, 0, 0x3, false);
    mm_case(b, "broadcast_a", 2, b23, 7, 13, 5, L_B, L_C, L_C, 0x1, 0, false);
    mm_case(b, "batched_transposed", 2, b23, 7, 13, 5, L_T, L_T, L_C, 0, 0, false);
    mm_case(b, "zero_m", 0, NULL, 0, 13, 5, L_C, L_C, L_C, 0, 0, false);
    mm_case(b, "zero_k", 0, NULL, 7, 0, 5, L_C, L_C, L_C, 0, 0, false);
    mm_case(b, "zero_n", 0, NULL, 7, 13, 0, L_C, L_C, L_C, 0, 0, false);
    mm_case(b, "size1", 0, NULL, 1, 1, 1, L_C, L_C, L_C, 0, 0, false);
    mm_case(b, "row", 0, NULL, 1, 13, 5, L_C, L_C, L_C, 0, 0, false);
    mm_case(b, "column", 0, NULL, 7, 13, 1, L_C, L_C, L_C, 0, 0, false);
    mm_case(b, "odd", 0, NULL, 33, 65, 17, L_C, L_C, L_C, 0, 0, false);
    mm_case(b, "large", 0, NULL, 64, 96, 48, L_C, L_C, L_C, 0, 0, false);
    mm_case(b, "large_transposed", 0, NULL, 48, 80, 40, L_T, L_T, L_C, 0, 0, false);
    // Over 8M multiply-adds: where backends change kernels (onednn: bf16 through f32 without AMX).
    if (is_float(d)) mm_case(b, "over_8m", 0, NULL, 257, 129, 255, L_C, L_T, L_C, 0, 0, false);
    if (is_float(d)) mm_case(b, "special", 0, NULL, 6, 7, 5, L_C, L_C, L_C, 0, 0, true);
    if (sweep_row(b)) sweep_matmul(b);
}

// ---- indexing ----
static void index_select_case(builder *b, const char *fam, int nd, const int64_t *shape, layout l, int dim, int64_t n) {
    xcase c;
    xc_begin(&c, b, fam, 2);
    c.frontend = !strcmp(fam, "frontend");
    c.params.dim.dim = dim;
    xc_in(&c, b, 0, sp_make(l, b->dt, nd, shape, 0), DOM(D_REAL));
    xc_in(&c, b, 1, sp_make(l == L_S ? L_S : L_C, TORC_DTYPE_I64, 1, &n, 0), DOMI(shape[dim] - 1));
    int64_t os[TORC_MAX_DIMS];
    memcpy(os, shape, (size_t)nd * sizeof *os);
    os[dim] = n;
    xc_out(&c, sp_make(l == L_S ? L_S : L_C, b->dt, nd, os, 0));
    emit(b, &c);
}

static void gather_case(builder *b, const char *fam, int nd, const int64_t *shape, layout l, int dim, const int64_t *ishape) {
    xcase c;
    xc_begin(&c, b, fam, 2);
    c.frontend = !strcmp(fam, "frontend");
    c.params.dim.dim = dim;
    xc_in(&c, b, 0, sp_make(l, b->dt, nd, shape, 0), DOM(D_REAL));
    xc_in(&c, b, 1, sp_make(l == L_S ? L_S : L_C, TORC_DTYPE_I64, nd, ishape, 0), DOMI(shape[dim] - 1));
    xc_out(&c, sp_make(l == L_S ? L_S : L_C, b->dt, nd, ishape, 0));
    emit(b, &c);
}

static int64_t count_true(const unsigned char *img, const spec *s) {
    int64_t n = 0;
    for (int64_t i = 0, m = spec_numel(s); i < m; i++) n += *celem(img, s, spec_lin(s, i)) != 0;
    return n;
}

static void masked_select_case(builder *b, const char *fam, int nd, const int64_t *shape, layout l, unsigned bmask,
                               bool none) {
    xcase c;
    xc_begin(&c, b, fam, 2);
    c.frontend = !strcmp(fam, "frontend");
    xc_in(&c, b, 0, sp_make(l, b->dt, nd, shape, 0), DOM(D_REAL));
    xc_in(&c, b, 1, sp_make(bmask ? L_B : l, TORC_DTYPE_BOOL, nd, shape, bmask), DOM(D_REAL));
    if (none)
        for (int64_t i = 0, m = spec_numel(&c.in[1]); i < m; i++) *elem(c.img[1], &c.in[1], spec_lin(&c.in[1], i)) = 0;
    const int64_t n = count_true(c.img[1], &c.in[1]);
    xc_out(&c, sp_contig(b->dt, 1, &n));
    emit(b, &c);
}

// In-place index ops: in0 is the source, in1 the index (or mask); out is read and written.
static void index_add_case(builder *b, const char *fam, const int64_t *oshape, layout l, int dim, int64_t n) {
    xcase c;
    xc_begin(&c, b, fam, 2);
    c.params.dim.dim = dim;
    c.n_acc = n;
    int64_t ss[2] = {oshape[0], oshape[1]};
    ss[dim] = n;
    xc_in(&c, b, 0, sp_make(l, b->dt, 2, ss, 0), DOM(D_REAL));
    xc_in(&c, b, 1, sp_contig(TORC_DTYPE_I64, 1, &n), DOMI(oshape[dim] - 1));
    xc_out_data(&c, b, sp_make(l, b->dt, 2, oshape, 0), DOM(D_REAL));
    emit(b, &c);
}

static void scatter_add_case(builder *b, const char *fam, const int64_t *oshape, layout l, int dim, const int64_t *ishape) {
    xcase c;
    xc_begin(&c, b, fam, 2);
    c.params.dim.dim = dim;
    c.n_acc = ishape[dim];
    xc_in(&c, b, 0, sp_make(l, b->dt, 2, ishape, 0), DOM(D_REAL));
    xc_in(&c, b, 1, sp_make(l, TORC_DTYPE_I64, 2, ishape, 0), DOMI(oshape[dim] - 1));
    xc_out_data(&c, b, sp_make(l, b->dt, 2, oshape, 0), DOM(D_REAL));
    emit(b, &c);
}

static void masked_scatter_case(builder *b, const char *fam, const int64_t *oshape, layout l) {
    xcase c;
    xc_begin(&c, b, fam, 2);
    spec mask = sp_make(l, TORC_DTYPE_BOOL, 2, oshape, 0);
    unsigned char *mimg = make_input(&mask, DOM(D_REAL), &b->rng);
    const int64_t n = count_true(mimg, &mask) + 5;  // the source may be longer than needed
    xc_in(&c, b, 0, sp_contig(b->dt, 1, &n), DOM(D_REAL));
    c.in[1] = mask, c.img[1] = mimg;
    xc_out_data(&c, b, sp_make(l, b->dt, 2, oshape, 0), DOM(D_REAL));
    emit(b, &c);
}

static void build_index(builder *b) {
    static const int64_t s357[] = {3, 5, 7}, s64[] = {64, 257}, s05[] = {0, 5};
    const bool perf = b->mode == EMIT_PERF;
    const int64_t pr = g_opt.perf_n / 256 > 0 ? g_opt.perf_n / 256 : 1, sp[2] = {pr, 256};
    switch (b->code) {
    case TORC_OP_INDEX_SELECT:
        if (perf) { index_select_case(b, "perf", 2, sp, L_C, 0, pr); return; }
        index_select_case(b, "dim0", 2, S_713, L_C, 0, 5);
        if (b->mode == EMIT_PROBE) return;
        index_select_case(b, "frontend", 2, S_713, L_C, 0, 5);
        index_select_case(b, "dim1", 2, S_713, L_C, 1, 9);
        index_select_case(b, "transposed", 2, S_137, L_T, 0, 5);
        index_select_case(b, "sliced", 2, S_59, L_S, 1, 4);
        index_select_case(b, "zero_size", 2, S_713, L_C, 0, 0);
        index_select_case(b, "size1", 2, S_11, L_C, 0, 1);
        index_select_case(b, "middle_dim", 3, s357, L_C, 1, 6);
        index_select_case(b, "large", 2, s64, L_C, 0, 50);
        break;
    case TORC_OP_GATHER: {
        static const int64_t i59[] = {5, 9}, i74[] = {7, 4}, i95[] = {9, 5}, i54[] = {5, 4}, i09[] = {0, 9},
                             i64[] = {64, 100}, i346[] = {3, 4, 6};
        const int64_t pi[2] = {pr, 128};
        if (perf) { gather_case(b, "perf", 2, sp, L_C, 1, pi); return; }
        gather_case(b, "dim0", 2, S_713, L_C, 0, i59);
        if (b->mode == EMIT_PROBE) return;
        gather_case(b, "frontend", 2, S_713, L_C, 0, i59);
        gather_case(b, "dim1", 2, S_713, L_C, 1, i74);
        gather_case(b, "transposed", 2, S_137, L_T, 0, i95);
        gather_case(b, "sliced", 2, S_59, L_S, 1, i54);
        gather_case(b, "zero_size", 2, S_713, L_C, 0, i09);
        gather_case(b, "middle_dim", 3, s357, L_C, 2, i346);
        gather_case(b, "large", 2, s64, L_C, 1, i64);
        break;
    }
    case TORC_OP_MASKED_SELECT:
        if (perf) { masked_select_case(b, "perf", 2, sp, L_C, 0, false); return; }
        masked_select_case(b, "contig", 2, S_713, L_C, 0, false);
        if (b->mode == EMIT_PROBE) return;
        masked_select_case(b, "frontend", 2, S_713, L_C, 0, false);
        masked_select_case(b, "transposed", 2, S_137, L_T, 0, false);
        masked_select_case(b, "sliced", 2, S_59, L_S, 0, false);
        masked_select_case(b, "broadcast_mask", 2, S_713, L_C, 0x1, false);
        masked_select_case(b, "zero_size", 2, s05, L_C, 0, false);
        masked_select_case(b, "zero_dim", 0, S_11, L_C, 0, false);
        masked_select_case(b, "large", 2, S_LARGE, L_C, 0, false);
        masked_select_case(b, "none_selected", 2, S_713, L_C, 0, true);
        break;
    case TORC_OP_INDEX_ADD:
        if (perf) { index_add_case(b, "perf", sp, L_C, 0, pr); return; }
        index_add_case(b, "dim0", S_713, L_C, 0, 5);
        if (b->mode == EMIT_PROBE) return;
        index_add_case(b, "dim1", S_713, L_C, 1, 9);
        index_add_case(b, "sliced", S_59, L_S, 1, 4);
        index_add_case(b, "transposed", S_137, L_T, 0, 6);
        index_add_case(b, "zero_size", S_713, L_C, 0, 0);
        index_add_case(b, "large", s64, L_C, 0, 100);
        break;
    case TORC_OP_SCATTER_ADD: {
        static const int64_t i59[] = {5, 9}, i74[] = {7, 4}, i54[] = {5, 4}, i09[] = {0, 9}, i64[] = {64, 100};
        const int64_t pi[2] = {pr, 128};
        if (perf) { scatter_add_case(b, "perf", sp, L_C, 1, pi); return; }
        scatter_add_case(b, "dim0", S_713, L_C, 0, i59);
        if (b->mode == EMIT_PROBE) return;
        scatter_add_case(b, "dim1", S_713, L_C, 1, i74);
        scatter_add_case(b, "sliced", S_59, L_S, 1, i54);
        scatter_add_case(b, "zero_size", S_713, L_C, 0, i09);
        scatter_add_case(b, "large", s64, L_C, 1, i64);
        break;
    }
    case TORC_OP_MASKED_SCATTER:
        if (perf) { masked_scatter_case(b, "perf", sp, L_C); return; }
        masked_scatter_case(b, "contig", S_713, L_C);
        if (b->mode == EMIT_PROBE) return;
        masked_scatter_case(b, "transposed", S_137, L_T);
        masked_scatter_case(b, "sliced", S_59, L_S);
        masked_scatter_case(b, "zero_size", s05, L_C);
        masked_scatter_case(b, "large", S_LARGE, L_C);
        break;
    default: break;
    }
}

static void tri_case(builder *b, const char *fam, int nd, const int64_t *shape, layout l, int64_t k) {
    xcase c;
    xc_begin(&c, b, fam, 1);
    c.frontend = !strcmp(fam, "frontend");
    c.params.tri.k = k;
    xc_in(&c, b, 0, sp_make(l, b->dt, nd, shape, 0), DOM(D_REAL));
    xc_out(&c, sp_make(l == L_S ? L_S : L_C, b->dt, nd, shape, 0));
    emit(b, &c);
}

static void build_tri(builder *b) {
    static const int64_t s99[] = {9, 9}, s256[] = {2, 5, 6}, s05[] = {0, 5}, s64[] = {64, 257};
    if (b->mode == EMIT_PERF) {
        const int64_t ps[2] = {g_opt.perf_n / 1024 > 0 ? g_opt.perf_n / 1024 : 1, 1024};
        { tri_case(b, "perf", 2, ps, L_C, 0); return; }
    }
    tri_case(b, "k0", 2, S_713, L_C, 0);
    if (b->mode == EMIT_PROBE) return;
    tri_case(b, "frontend", 2, S_713, L_C, 0);
    tri_case(b, "k2", 2, S_713, L_C, 2);
    tri_case(b, "k-3", 2, S_713, L_C, -3);
    tri_case(b, "k20", 2, S_713, L_C, 20);
    tri_case(b, "square", 2, s99, L_C, 0);
    tri_case(b, "batched", 3, s256, L_C, 1);
    tri_case(b, "transposed", 2, S_137, L_T, 1);
    tri_case(b, "sliced", 2, S_59, L_S, -1);
    tri_case(b, "zero_size", 2, s05, L_C, 0);
    tri_case(b, "large", 2, s64, L_C, 3);
}

// ---- the multi-output ops of ABI 2.1 ----
static bool is_std_float(torc_dtype d) {
    return d == TORC_DTYPE_F32 || d == TORC_DTYPE_F64 || d == TORC_DTYPE_F16 || d == TORC_DTYPE_BF16;
}

// max / min along dim: values (in0's dtype) and i64 indices, the dim kept with size 1.
static void max_dim_case(builder *b, const char *fam, int nd, const int64_t *shape, layout l, int dim, bool special) {
    xcase c;
    xc_begin(&c, b, fam, 1);
    c.params.dim.dim = dim;
    xc_in(&c, b, 0, sp_make(l, b->dt, nd, shape, 0), special ? DOM(D_SPECIAL) : DOM(D_DISCRETE));  // ties, NaN
    int64_t os[TORC_MAX_DIMS];
    for (int d = 0; d < nd; d++) os[d] = d == dim ? 1 : shape[d];
    xc_out(&c, sp_make(l == L_S ? L_S : L_C, b->dt, nd, os, 0));
    xc_xout(&c, b, sp_contig(TORC_DTYPE_I64, nd, os), NULL);
    emit(b, &c);
}

static void build_max_dim(builder *b) {
    if (b->mode == EMIT_PERF) {
        const int64_t ps[2] = {g_opt.perf_n / 1024 > 0 ? g_opt.perf_n / 1024 : 1, 1024};
        max_dim_case(b, "perf", 2, ps, L_C, 1, false);
        return;
    }
    static const int64_t s357[] = {3, 5, 7}, sl3[] = {1031, 3}, s611[] = {6, 11};
    max_dim_case(b, "last_dim", 2, S_713, L_C, 1, false);
    if (b->mode == EMIT_PROBE) return;
    max_dim_case(b, "first_dim", 2, S_713, L_C, 0, false);
    max_dim_case(b, "middle_dim", 3, s357, L_C, 1, false);
    max_dim_case(b, "transposed", 2, S_137, L_T, 1, false);
    max_dim_case(b, "sliced", 2, S_59, L_S, 1, false);
    max_dim_case(b, "size1", 2, S_11, L_C, 1, false);
    max_dim_case(b, "large", 2, S_LARGE, L_C, 1, false);
    max_dim_case(b, "large_first", 2, sl3, L_C, 0, false);
    if (is_float(b->dt)) max_dim_case(b, "special", 2, s611, L_C, 1, true);
}

// layer_norm over dims axis.. (forward: x [, weight] [, bias] -> y, mean, rstd; backward: dy, x,
// mean, rstd [, weight] -> dx [, dweight] [, dbias]). The statistics are f32 (f64 for f64 x),
// which the contract allows beside x's own dtype. The backward's mean and rstd are random, not
// x's: its formula holds for any.
static void layer_norm_case(builder *b, const char *fam, int nd, const int64_t *shape, layout l, int axis,
                            unsigned affine) {
    const bool bwd = b->code == TORC_OP_LAYER_NORM_BACKWARD;
    const int n_aff = (affine & 1) + (bwd ? 0 : (affine >> 1 & 1));
    xcase c;
    xc_begin(&c, b, fam, (bwd ? 4 : 1) + n_aff);
    c.params.norm.eps = 1e-5, c.params.norm.axis = axis, c.params.norm.affine = affine;
    int64_t ss[TORC_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        ss[d] = d >= axis ? 1 : shape[d];
        if (d >= axis) c.n_acc *= shape[d];
    }
    const torc_dtype sd = b->dt == TORC_DTYPE_F64 ? TORC_DTYPE_F64 : TORC_DTYPE_F32;
    const int nn = nd - axis;
    int k = 0;
    if (bwd) xc_in(&c, b, k++, sp_make(l, b->dt, nd, shape, 0), DOM(D_REAL));  // dy
    xc_in(&c, b, k++, sp_make(l, b->dt, nd, shape, 0), DOM(D_REAL));           // x
    if (bwd) {
        xc_in(&c, b, k++, sp_contig(sd, nd, ss), DOMS(D_REAL, 0.25));  // mean
        xc_in(&c, b, k++, sp_contig(sd, nd, ss), DOM(D_POS));          // rstd
    }
    for (int bit = 0; bit < 2; bit++)
        if ((affine >> bit & 1) && !(bwd && bit == 1)) xc_in(&c, b, k++, sp_contig(b->dt, nn, shape + axis), DOM(D_REAL));
    xc_out(&c, sp_make(l == L_S ? L_S : L_C, b->dt, nd, shape, 0));
    if (bwd) {
        for (int bit = 0; bit < 2; bit++)
            if (affine >> bit & 1) xc_xout(&c, b, sp_contig(b->dt, nn, shape + axis), NULL);
    } else {
        xc_xout(&c, b, sp_contig(sd, nd, ss), NULL);
        xc_xout(&c, b, sp_contig(sd, nd, ss), NULL);
    }
    emit(b, &c);
}

static void build_layer_norm(builder *b) {
    if (!is_std_float(b->dt)) return;  // PyTorch's layer_norm takes these
    if (b->mode == EMIT_PERF) {
        const int64_t ps[2] = {g_opt.perf_n / 1024 > 0 ? g_opt.perf_n / 1024 : 1, 1024};
        layer_norm_case(b, "perf", 2, ps, L_C, 1, 3);
        return;
    }
    static const int64_t s357[] = {3, 5, 7}, s51[] = {5, 1}, s05[] = {0, 5}, sbig[] = {64, 1031};
    layer_norm_case(b, "last_dim", 2, S_713, L_C, 1, 3);
    if (b->mode == EMIT_PROBE) return;
    layer_norm_case(b, "no_affine", 2, S_713, L_C, 1, 0);
    layer_norm_case(b, "weight_only", 2, S_713, L_C, 1, 1);
    layer_norm_case(b, "bias_only", 2, S_713, L_C, 1, 2);
    layer_norm_case(b, "two_dims", 3, s357, L_C, 1, 3);
    layer_norm_case(b, "all_dims", 3, s357, L_C, 0, 3);
    layer_norm_case(b, "transposed", 2, S_137, L_T, 1, 3);
    layer_norm_case(b, "sliced", 2, S_59, L_S, 1, 3);
    layer_norm_case(b, "size1_rows", 2, s51, L_C, 1, 3);
    layer_norm_case(b, "zero_rows", 2, s05, L_C, 1, 3);
    layer_norm_case(b, "large", 2, S_LARGE, L_C, 1, 3);
    layer_norm_case(b, "many_rows", 2, sbig, L_C, 1, 3);
    if (sweep_row(b)) sweep_layer_norm(b);
}

// ---- attention (ATTENTION, ATTENTION_BACKWARD) ----
// Operands (B, H, rows, features) in one of these layouts: contiguous; the GPT's split heads (a
// third of x (B, rows, 3, H, features): strides (rows 3 H f, f, 3 H f, 1)); features-major in a head
// (transposed); sliced with a step (sp_step); stride 0 on the heads or the batch (broadcast).
typedef enum { A_C, A_SPLIT, A_T, A_S, A_BH, A_BB } att_layout;

static spec att_spec(att_layout l, torc_dtype dt, int64_t B, int64_t H, int64_t R, int64_t C) {
    const int64_t shape[4] = {B, H, R, C};
    switch (l) {
    case A_SPLIT: {
        spec s = {.dtype = dt, .ndim = 4, .shape = {B, H, R, C}, .stride = {R * 3 * H * C, C, 3 * H * C, 1}};
        s.offset = H * C;  // the middle third (k's)
        return spec_done(s);
    }
    case A_T: return sp_trans(dt, 4, shape);
    case A_S: return sp_step(dt, 4, shape);
    case A_BH: return sp_bcast(dt, 4, shape, 0x2);
    case A_BB: return sp_bcast(dt, 4, shape, 0x1);
    default: return sp_contig(dt, 4, shape);
    }
}

// Element (b, h, i, e) of input k's image (its last index ignored for lse's 3 dims), and a store.
static int64_t att_off(const spec *s, int64_t b, int64_t h, int64_t i, int64_t e) {
    return s->offset + b * s->stride[0] + h * s->stride[1] + i * s->stride[2] + (s->ndim > 3 ? e * s->stride[3] : 0);
}
static double att_ld(const xcase *c, int k, int64_t b, int64_t h, int64_t i, int64_t e) {
    return ld_f(celem(c->img[k], &c->in[k], att_off(&c->in[k], b, h, i, e)), c->in[k].dtype);
}
static void att_st(xcase *c, int k, int64_t b, int64_t h, int64_t i, int64_t e, double x) {
    st_f(elem(c->img[k], &c->in[k], att_off(&c->in[k], b, h, i, e)), c->in[k].dtype, x);
}

// The backward's o (in4) and lse (in5) from its q, k, v (in1..3), in double on the host, as the
// forward would have written them: the contract's formula holds for any o and lse, but only these
// keep p within [0, 1] and D the size it has in training.
static void att_fill_forward(xcase *c) {
    const spec *q = &c->in[1], *k = &c->in[2], *v = &c->in[3];
    const int64_t B = q->shape[0], H = q->shape[1], L = q->shape[2], E = q->shape[3], S = k->shape[2], Ev = v->shape[3];
    double *sc = malloc(sizeof *sc * (size_t)(S + 1));
    if (!sc) xcheck_die("out of memory");
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < L; i++) {
                const int64_t n = c->params.attention.causal && i + 1 < S ? i + 1 : S;
                double m = -INFINITY, z = 0;
                for (int64_t j = 0; j < n; j++) {
                    double d = 0;
                    for (int64_t e = 0; e < E; e++) d += att_ld(c, 1, b, h, i, e) * att_ld(c, 2, b, h, j, e);
                    sc[j] = c->params.attention.scale * d;
                    m = fmax(m, sc[j]);
                }
                for (int64_t j = 0; j < n; j++) z += exp(sc[j] - m);
                for (int64_t e = 0; e < Ev; e++) {
                    double o = 0;
                    for (int64_t j = 0; j < n; j++) o += exp(sc[j] - m) / z * att_ld(c, 3, b, h, j, e);
                    att_st(c, 4, b, h, i, e, o);
                }
                att_st(c, 5, b, h, i, 0, n ? m + log(z) : -INFINITY);
            }
    free(sc);
}

// One case: q (B, H, L, E), k (B, H, S, E), v (B, H, S, Ev) in layouts lq, lk, lv (the backward's do
// in lq's), outputs contiguous or (so) sliced; scale NAN: 1 / sqrt(E). A sweep case's inputs are
// tight (spec).
static void att_case_x(builder *b, const char *fam, const int64_t *d, bool causal, double scale, att_layout lq,
                       att_layout lk, att_layout lv, bool so, bool sweep) {
    const int64_t B = d[0], H = d[1], L = d[2], S = d[3], E = d[4], Ev = d[5];
    const bool bwd = b->code == TORC_OP_ATTENTION_BACKWARD;
    const torc_dtype lt = b->dt == TORC_DTYPE_F64 ? TORC_DTYPE_F64 : TORC_DTYPE_F32;
    xcase c;
    xc_begin(&c, b, fam, bwd ? 6 : 3);
    c.frontend = !strcmp(fam, "frontend");
    c.sweep = sweep;
    c.params.attention.scale = isnan(scale) ? 1 / sqrt((double)(E ? E : 1)) : scale;
    c.params.attention.causal = causal;
    const layout ol = so ? L_S : L_C;
    const int64_t oshape[4] = {B, H, L, Ev}, lshape[3] = {B, H, L};
    int k = 0;
#define ATT_IN(sp) (sweep ? sp_tight(sp) : (sp))
    if (bwd) xc_in(&c, b, k++, ATT_IN(att_spec(lq, b->dt, B, H, L, Ev)), DOM(D_REAL));  // do
    xc_in(&c, b, k++, ATT_IN(att_spec(lq, b->dt, B, H, L, E)), DOM(D_REAL));
    xc_in(&c, b, k++, ATT_IN(att_spec(lk, b->dt, B, H, S, E)), DOM(D_REAL));
    xc_in(&c, b, k++, ATT_IN(att_spec(lv, b->dt, B, H, S, Ev)), DOM(D_REAL));
    if (bwd) {
        xc_in(&c, b, k++, ATT_IN(sp_contig(b->dt, 4, oshape)), DOM(D_REAL));  // o and lse, then overwritten
        xc_in(&c, b, k++, ATT_IN(sp_contig(lt, 3, lshape)), DOM(D_REAL));
#undef ATT_IN
        att_fill_forward(&c);
        const int64_t kshape[4] = {B, H, S, E}, vshape[4] = {B, H, S, Ev}, qshape[4] = {B, H, L, E};
        xc_out(&c, sp_make(ol, b->dt, 4, qshape, 0));
        xc_xout(&c, b, sp_make(ol, b->dt, 4, kshape, 0), NULL);
        xc_xout(&c, b, sp_make(ol, b->dt, 4, vshape, 0), NULL);
    } else {
        xc_out(&c, sp_make(ol, b->dt, 4, oshape, 0));
        xc_xout(&c, b, sp_make(ol, lt, 3, lshape, 0), NULL);
    }
    emit(b, &c);
}
static void att_case(builder *b, const char *fam, const int64_t *d, bool causal, double scale, att_layout lq,
                     att_layout lk, att_layout lv, bool so) {
    att_case_x(b, fam, d, causal, scale, lq, lk, lv, so, false);
}

// L and S around the edges of the kernels' tiles (16, 64), E and Ev those of GPT heads and odd ones.
static const int64_t AT_LS[] = {1, 15, 16, 17, 63, 64, 65, 130};
static const int64_t AT_E[] = {8, 32, 64, 80};

static void build_attention(builder *b) {
    if (!is_std_float(b->dt)) return;
    const bool bwd = b->code == TORC_OP_ATTENTION_BACKWARD;
    if (b->mode == EMIT_PERF) {
        const int64_t d[6] = {1, 4, 256, 256, 64, 64};
        att_case(b, "perf", d, true, NAN, A_C, A_C, A_C, false);
        return;
    }
    const int64_t base[6] = {2, 3, 17, 33, 32, 24};
    att_case(b, "contig", base, false, NAN, A_C, A_C, A_C, false);
    if (b->mode == EMIT_PROBE) return;
    att_case(b, "causal", base, true, NAN, A_C, A_C, A_C, false);
    if (!bwd) att_case(b, "frontend", base, true, NAN, A_C, A_C, A_C, false);
    att_case(b, "split_heads", base, true, NAN, A_SPLIT, A_SPLIT, A_SPLIT, false);
    att_case(b, "transposed", base, false, NAN, A_T, A_T, A_C, false);
    att_case(b, "sliced", base, true, NAN, A_S, A_S, A_S, true);
    att_case(b, "broadcast_heads", base, false, NAN, A_C, A_BH, A_BH, false);
    att_case(b, "broadcast_batch", base, true, NAN, A_BB, A_C, A_C, false);
    att_case(b, "scale", base, false, -0.7, A_C, A_C, A_C, false);
    att_case(b, "scale_zero", base, true, 0.0, A_C, A_C, A_C, false);
    att_case(b, "e_ne_ev", (const int64_t[]){1, 2, 16, 16, 64, 8}, true, NAN, A_C, A_C, A_C, false);
    att_case(b, "zero_keys", (const int64_t[]){1, 2, 5, 0, 8, 4}, false, NAN, A_C, A_C, A_C, false);
    att_case(b, "zero_keys_causal", (const int64_t[]){1, 2, 5, 0, 8, 4}, true, NAN, A_C, A_C, A_C, false);
    att_case(b, "zero_queries", (const int64_t[]){1, 2, 0, 5, 8, 4}, true, NAN, A_C, A_C, A_C, false);
    att_case(b, "zero_batch", (const int64_t[]){0, 2, 5, 5, 8, 4}, false, NAN, A_C, A_C, A_C, false);
    // the tile edges: each L with an S of another tile class, and square, causal and not in turn;
    // E and Ev in turn. One head where L S E is largest (the reference's loops are slow).
    char fam[64];
    const int n = SW_LEN(AT_LS);
    for (int i = 0; i < n; i++)
        for (int form = 0; form < 3; form++) {
            const int64_t L = AT_LS[i], S = form == 0 ? L : AT_LS[(i + (form == 1 ? 3 : 6)) % n];
            const int64_t E = AT_E[(i + form) % 4], Ev = AT_E[(i + form + 1) % 4], big = L * S * (E + Ev) > 200000;
            const bool causal = (i + form) % 2 == 0;
            snprintf(fam, sizeof fam, "tile %lldx%lld e%lld ev%lld%s", (long long)L, (long long)S, (long long)E,
                     (long long)Ev, causal ? " causal" : "");
            att_case(b, fam, (const int64_t[]){1, big ? 1 : 2, L, S, E, Ev}, causal, NAN, A_C, A_C, A_C, false);
        }
    if (!sweep_row(b)) return;
    // --sweep: every (L, S) pair, inputs tight (a read past an operand fails under ASan), the
    // layouts, E, Ev and causal in turn.
    static const att_layout lays[5] = {A_C, A_SPLIT, A_T, A_S, A_BH};
    static const char *const lay_name[5] = {"c", "split", "t", "s", "bh"};
    int turn = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++, turn++) {
            const int64_t L = AT_LS[i], S = AT_LS[j], E = AT_E[turn % 4], Ev = AT_E[(turn / 4 + 1) % 4];
            const int l = turn % 5;
            const bool causal = turn % 3 != 0;
            snprintf(fam, sizeof fam, "sweep %lldx%lld e%lld ev%lld %s%s", (long long)L, (long long)S, (long long)E,
                     (long long)Ev, lay_name[l], causal ? " causal" : "");
            att_case_x(b, fam, (const int64_t[]){1, 2, L, S, E, Ev}, causal, NAN, lays[l], lays[l], lays[(l + 2) % 5],
                       false, true);
        }
}

// One Adam/AdamW step in place: param (out), exp_avg, exp_avg_sq [, max_exp_avg_sq] hold data.
static void adam_case(builder *b, const char *fam, int nd, const int64_t *shape, layout l, uint32_t flags, double wd) {
    xcase c;
    xc_begin(&c, b, fam, 1);
    const double lr = 1e-3, b1 = 0.9, b2 = 0.999, step = 3;
    c.params.adam.lr = lr, c.params.adam.beta1 = b1, c.params.adam.beta2 = b2, c.params.adam.eps = 1e-8;
    c.params.adam.weight_decay = wd, c.params.adam.flags = flags;
    c.params.adam.step_size = lr / (1 - pow(b1, step)), c.params.adam.bc2_sqrt = sqrt(1 - pow(b2, step));
    xc_in(&c, b, 0, sp_make(l, b->dt, nd, shape, 0), DOM(D_REAL));  // grad
    const spec ps = sp_make(l, b->dt, nd, shape, 0);
    const domain real = DOM(D_REAL), pos = DOM(D_POS);
    xc_out_data(&c, b, ps, real);  // param
    xc_xout(&c, b, ps, &real);     // exp_avg
    xc_xout(&c, b, ps, &pos);      // exp_avg_sq
    if (flags & TORC_ADAM_AMSGRAD) xc_xout(&c, b, ps, &pos);
    emit(b, &c);
}

static void build_adam(builder *b) {
    if (!is_std_float(b->dt)) return;
    if (b->mode == EMIT_PERF) {
        const int64_t ps[1] = {g_opt.perf_n};
        adam_case(b, "perf", 1, ps, L_C, TORC_ADAM_DECOUPLED, 0.01);
        return;
    }
    static const int64_t s05[] = {0, 5}, sbig[] = {64, 1031};
    adam_case(b, "adam", 2, S_713, L_C, 0, 0);
    if (b->mode == EMIT_PROBE) return;
    adam_case(b, "adam_l2", 2, S_713, L_C, 0, 0.01);
    adam_case(b, "adamw", 2, S_713, L_C, TORC_ADAM_DECOUPLED, 0.01);
    adam_case(b, "amsgrad", 2, S_713, L_C, TORC_ADAM_AMSGRAD | TORC_ADAM_DECOUPLED, 0.01);
    adam_case(b, "maximize", 2, S_713, L_C, TORC_ADAM_MAXIMIZE, 0.01);
    adam_case(b, "transposed", 2, S_137, L_T, TORC_ADAM_DECOUPLED, 0.01);
    adam_case(b, "sliced", 2, S_59, L_S, 0, 0.01);
    adam_case(b, "zero_size", 2, s05, L_C, 0, 0);
    adam_case(b, "large", 2, sbig, L_C, TORC_ADAM_DECOUPLED, 0.01);
    adam_case(b, "large_amsgrad", 2, sbig, L_C, TORC_ADAM_AMSGRAD, 0.01);
}

// ---- --sweep: the sweeps themselves (see "--sweep" above) ----
// One matmul-family case: a (.., M, K) @ b (.., K, N) -> out, the inputs tight. MATMUL_ROUNDED's
// operands and out take their dtypes from the specs; SCALED_MM gets its two scales. Where a's rows
// and b's columns are each one value (a:e1, b:e0) every term of a sum is the same product, and an
// f32 sum's rounding errors add up with K, not as a random walk with sqrt(K) (the tolerance's
// model): n_acc K^2 then gives the bound of a sum in order, about K ulps.
static void mm_sweep_case(builder *b, const char *fam, spec sa, spec sb, spec so, int64_t K, bool same_terms) {
    xcase c;
    const bool smm = b->code == TORC_OP_SCALED_MM;
    xc_begin(&c, b, fam, smm ? 4 : 2);
    c.sweep = true;
    c.n_acc = same_terms ? K * K : K;
    if (b->code == TORC_OP_MATMUL_ROUNDED) c.params.matmul.dtype = (int32_t)b->dt;
    xc_in(&c, b, 0, sp_tight(sa), DOM(D_REAL));
    xc_in(&c, b, 1, sp_tight(sb), DOM(D_REAL));
    if (smm) {
        c.sm_scale_out = torc_dtype_is_fp8(b->odt) ? 0.5 : 0;
        c.sm_amax = true;
        xc_in(&c, b, 2, sp_tight(sp_contig(TORC_DTYPE_F32, 0, S_11)), DOM(D_REAL));
        xc_in(&c, b, 3, sp_tight(sp_contig(TORC_DTYPE_F32, 0, S_11)), DOM(D_REAL));
        st_f(elem(c.img[2], &c.in[2], c.in[2].offset), TORC_DTYPE_F32, 0.75);
        st_f(elem(c.img[3], &c.in[3], c.in[3].offset), TORC_DTYPE_F32, 1.25);
    }
    xc_out(&c, so);
    emit(b, &c);
}

// MATMUL (b->dt x b->dt -> b->odt), MATMUL_ROUNDED in b->dt (operands and out f32 or b->dt, the
// combinations autocast makes in turn) and SCALED_MM (b->dt x b->dt2 -> b->odt, 2-D only) over
// every (a, b) layout pair of every sweep shape, out's layout in turn (--sweep=full: each), and
// batched: every 4th shape of up to 32K multiply-adds (--sweep=full: each) in a batch form in turn
// (each).
static void sweep_matmul(builder *b) {
    static mm_shape sh[2048];
    const int n = sweep_mm_shapes(sh, SW_LEN(sh));
    const bool full = g_opt.sweep >= 2, smm = b->code == TORC_OP_SCALED_MM, mmr = b->code == TORC_OP_MATMUL_ROUNDED;
    const torc_dtype F = TORC_DTYPE_F32, c = b->dt;
    // MATMUL_ROUNDED's (a, b, out) dtypes: forward (f32 weight), grad input, grad weight, all f32
    const torc_dtype rdt[4][3] = {{c, F, c}, {c, F, c}, {c, c, F}, {F, F, F}};
    static const int64_t batch[2] = {2, 3};
    int turn = 0;
    for (int i = 0; i < n; i++) {
        const int64_t M = sh[i].m, K = sh[i].k, N = sh[i].n;
        if (smm && !full && i % 2) continue;  // (one path for every size: fp8 decoded, then sgemm)
        for (int la = 0; la < W_COUNT; la++)
            for (int lb = 0; lb < W_COUNT; lb++) {
                const int nlo = full ? 3 : 1, nbf = smm ? 0 : full ? 5 : (i % 4 == 0 && M * N * K <= 32768);
                for (int q = 0; q < nlo + nbf; q++, turn++) {
                    const bool batched = q >= nlo;
                    const int lo = full ? q % 3 : (i + la + lb) % 3, bf = full ? q - nlo : turn % 5;
                    const int nb = batched ? 2 : 0;
                    const unsigned bma = batched ? g_bforms[bf][0] : 0, bmb = batched ? g_bforms[bf][1] : 0;
                    const torc_dtype *r = rdt[turn % 4];
                    const torc_dtype ta = mmr ? r[0] : b->dt, tb = mmr ? r[1] : smm ? b->dt2 : b->dt,
                                     to = mmr ? r[2] : b->odt;
                    char fam[96];
                    snprintf(fam, sizeof fam, "sweep %lldx%lldx%lld a:%s b:%s out:%s%s%s", (long long)M, (long long)K,
                             (long long)N, g_wlay_name[la], g_wlay_name[lb], g_wlay_name[g_wlay_out[lo]],
                             batched ? " batch:" : "", batched ? (bf == 0 ? "2x3" : bf == 1 ? "a0" : bf == 2 ? "b1" : bf == 3 ? "a_one" : "b_one") : "");
                    mm_sweep_case(b, fam, sp_matrix((wlay)la, ta, nb, batch, bma, M, K),
                                  sp_matrix((wlay)lb, tb, nb, batch, bmb, K, N),
                                  sp_matrix(g_wlay_out[lo], to, nb, batch, 0, M, N), K, la == W_E1 && lb == W_E0);
                }
            }
    }
}

// COPY (b->dt -> b->odt): 1-D runs around the vector widths (and past the threads' threshold,
// ONEDNN_SMALL_STREAM); 2-D over every in layout, out's in turn (--sweep=full: each), sizes around
// the 32 x 32 blocks of a transposing move; batched with a broadcast; a large transpose.
static void sweep_copy(builder *b, const ew *e) {
    static const int64_t runs[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 65537};
    static const int64_t sizes[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65};
    static const int64_t partners[] = {3, 17, 33, 1, 2, 8, 64};
    static const int64_t batch[2] = {2, 3};
    const bool full = g_opt.sweep >= 2;
    const domain dm = e->dom[0];
    char fam[96];
    for (int i = 0; i < SW_LEN(runs); i++) {
        xcase c;
        snprintf(fam, sizeof fam, "sweep run %lld", (long long)runs[i]);
        xc_begin(&c, b, fam, 1);
        c.sweep = true;
        xc_in(&c, b, 0, sp_tight(sp_contig(b->dt, 1, &runs[i])), dm);
        xc_out(&c, sp_contig(b->odt, 1, &runs[i]));
        emit(b, &c);
    }
    int turn = 0;
    for (int i = 0; i < SW_LEN(sizes); i++)
        for (int p = 0; p < (full ? SW_LEN(partners) : 1); p++)
            for (int o = 0; o < 2; o++) {
                const int64_t v = sizes[i], w = partners[full ? p : i % 3], R = o ? w : v, C = o ? v : w;
                for (int li = 0; li < W_COUNT; li++)
                    for (int q = 0; q < (full ? 3 : 1) + (i % 4 == 0 || full); q++, turn++) {
                        const bool batched = q == (full ? 3 : 1);
                        const int lo = full ? q % 3 : (i + li + o) % 3;
                        const unsigned bm = batched ? (turn % 2 ? 0x1 : 0x2) : 0;
                        snprintf(fam, sizeof fam, "sweep %lldx%lld in:%s out:%s%s", (long long)R, (long long)C,
                                 g_wlay_name[li], g_wlay_name[g_wlay_out[lo]], batched ? (bm == 1 ? " batch:a0" : " batch:a1") : "");
                        xcase c;
                        xc_begin(&c, b, fam, 1);
                        c.sweep = true;
                        xc_in(&c, b, 0, sp_tight(sp_matrix((wlay)li, b->dt, batched ? 2 : 0, batch, bm, R, C)), dm);
                        xc_out(&c, sp_matrix(g_wlay_out[lo], b->odt, batched ? 2 : 0, batch, 0, R, C));
                        emit(b, &c);
                    }
            }
    // past the threads' threshold: a transposing move / cast of 257 x 257
    xcase c;
    xc_begin(&c, b, "sweep 257x257 in:t out:c", 1);
    c.sweep = true;
    xc_in(&c, b, 0, sp_tight(sp_matrix(W_T, b->dt, 0, NULL, 0, 257, 257)), dm);
    xc_out(&c, sp_matrix(W_C, b->odt, 0, NULL, 0, 257, 257));
    emit(b, &c);
}

// LAYER_NORM / LAYER_NORM_BACKWARD over rows of N around the vector widths, M rows in turn, every x
// (and dy) layout, affine forms in turn, weight and bias in x's dtype or f32 (for f16 / bf16 x, in
// turn), and two normalized dims; --sweep=full: every M, affine form and parameter dtype.
static void ln_sweep_case(builder *b, const char *fam, int nb, const int64_t *batch, int64_t M, int64_t N, wlay l,
                          unsigned affine, torc_dtype pd) {
    const bool bwd = b->code == TORC_OP_LAYER_NORM_BACKWARD;
    const int n_aff = (affine & 1) + (bwd ? 0 : (affine >> 1 & 1));
    xcase c;
    xc_begin(&c, b, fam, (bwd ? 4 : 1) + n_aff);
    c.sweep = true;
    // x (batch.., M, N) normalized over its last dim (nb = 0) or its last two (nb = 1: axis 1 of 3)
    const int nd = nb + 2, axis = 1;
    int64_t shape[TORC_MAX_DIMS], ss[TORC_MAX_DIMS];
    for (int d = 0; d < nb; d++) shape[d] = batch[d];
    shape[nb] = M, shape[nb + 1] = N;
    c.params.norm.eps = 1e-5, c.params.norm.axis = axis, c.params.norm.affine = affine;
    for (int d = 0; d < nd; d++) {
        ss[d] = d >= axis ? 1 : shape[d];
        if (d >= axis) c.n_acc *= shape[d];
    }
    const torc_dtype sd = b->dt == TORC_DTYPE_F64 ? TORC_DTYPE_F64 : TORC_DTYPE_F32;
    const int nn = nd - axis;
    int k = 0;
    if (bwd) xc_in(&c, b, k++, sp_tight(sp_matrix(l, b->dt, nb, batch, 0, M, N)), DOM(D_REAL));  // dy
    xc_in(&c, b, k++, sp_tight(sp_matrix(l, b->dt, nb, batch, 0, M, N)), DOM(D_REAL));           // x
    if (bwd) {
        xc_in(&c, b, k++, sp_tight(sp_contig(sd, nd, ss)), DOMS(D_REAL, 0.25));  // mean
        xc_in(&c, b, k++, sp_tight(sp_contig(sd, nd, ss)), DOM(D_POS));          // rstd
    }
    for (int bit = 0; bit < 2; bit++)
        if ((affine >> bit & 1) && !(bwd && bit == 1)) xc_in(&c, b, k++, sp_tight(sp_contig(pd, nn, shape + axis)), DOM(D_REAL));
    xc_out(&c, sp_matrix(l == W_S2 || l == W_T ? l : W_C, b->dt, nb, batch, 0, M, N));
    if (bwd) {
        for (int bit = 0; bit < 2; bit++)
            if (affine >> bit & 1) xc_xout(&c, b, sp_contig(pd, nn, shape + axis), NULL);
    } else {
        xc_xout(&c, b, sp_contig(sd, nd, ss), NULL);
        xc_xout(&c, b, sp_contig(sd, nd, ss), NULL);
    }
    emit(b, &c);
}

static void sweep_layer_norm(builder *b) {
    static const int64_t Ns[] = {1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129};
    static const int64_t Ms[] = {1, 2, 3, 5, 0};
    static const int64_t batch[1] = {3};
    const bool full = g_opt.sweep >= 2, mixed = b->dt == TORC_DTYPE_F16 || b->dt == TORC_DTYPE_BF16;
    int turn = 0;
    char fam[96];
    for (int i = 0; i < SW_LEN(Ns); i++)
        for (int mi = 0; mi < (full ? SW_LEN(Ms) : 1); mi++)
            for (int l = 0; l < W_COUNT; l++)
                for (int a = 0; a < (full ? 8 : 1); a++, turn++) {
                    const int64_t M = Ms[full ? mi : turn % SW_LEN(Ms)], N = Ns[i];
                    const unsigned affine = (unsigned)(full ? a % 4 : turn % 4);
                    const torc_dtype pd = mixed && (full ? a >= 4 : turn % 3 == 1) ? TORC_DTYPE_F32 : b->dt;
                    const bool two = !full && turn % 5 == 2;  // normalized over two dims: (3, M, N), axis 1
                    snprintf(fam, sizeof fam, "sweep %s%lldx%lld x:%s affine:%u params:%s", two ? "3x" : "", (long long)M,
                             (long long)N, g_wlay_name[l], affine, dshort(pd));
                    ln_sweep_case(b, fam, two ? 1 : 0, batch, M, N, (wlay)l, affine, pd);
                }
}

static void build_op(builder *b) {
    switch (b->code) {
    case TORC_OP_FILL: build_fill(b); return;
    case TORC_OP_COPY: build_copy(b); return;
    case TORC_OP_ARANGE: case TORC_OP_LINSPACE: build_range(b); return;
    case TORC_OP_RAND_UNIFORM: case TORC_OP_RAND_NORMAL: case TORC_OP_RAND_INT: build_random(b); return;
    case TORC_OP_WHERE: build_where(b); return;
    case TORC_OP_GELU_BACKWARD: build_gelu_backward(b); return;
    case TORC_OP_CROSS_ENTROPY: build_cross_entropy(b); return;
    case TORC_OP_ADDCMUL: case TORC_OP_ADDCDIV: case TORC_OP_LERP: build_fused(b); return;
    case TORC_OP_SOFTMAX: case TORC_OP_LOG_SOFTMAX: build_softmax(b); return;
    case TORC_OP_MATMUL: build_matmul(b); return;
    case TORC_OP_MATMUL_ROUNDED: build_matmul_rounded(b); return;
    case TORC_OP_SCALED_MM: build_scaled_mm(b); return;
    case TORC_OP_TRIU: case TORC_OP_TRIL: build_tri(b); return;
    case TORC_OP_MAX_DIM: case TORC_OP_MIN_DIM: build_max_dim(b); return;
    case TORC_OP_LAYER_NORM: case TORC_OP_LAYER_NORM_BACKWARD: build_layer_norm(b); return;
    case TORC_OP_ADAM_STEP: build_adam(b); return;
    case TORC_OP_ATTENTION: case TORC_OP_ATTENTION_BACKWARD: build_attention(b); return;
    case TORC_OP_INDEX_SELECT: case TORC_OP_GATHER: case TORC_OP_MASKED_SELECT: case TORC_OP_INDEX_ADD:
    case TORC_OP_SCATTER_ADD: case TORC_OP_MASKED_SCATTER: build_index(b); return;
    default: break;
    }
    if (b->code >= TORC_OP_NEG && b->code <= TORC_OP_LOGICAL_NOT) build_unary(b);
    if ((b->code >= TORC_OP_ADD && b->code <= TORC_OP_LOGICAL_OR) || is_divmod(b->code)) build_binary(b);
    if (b->code >= TORC_OP_SUM && b->code <= TORC_OP_LOGSUMEXP) build_reduce(b);
}

// ---- --grad: gradients by central finite differences ----
// Each differentiable op runs through the public API on the backend's device: the analytic
// gradient of L = sum(op(x) * w) (w random, fixed) from torc_autograd_grad against
// (L(x + h) - L(x - h)) / 2h per input element. f64 where the backend runs the op natively in
// f64, else f32 with a larger step and a looser tolerance.
typedef struct gcase {
    const char *family;
    int n_in;
    int nd[3];
    int64_t shape[3][4];
    torc_dtype dt[3];     // the float dtype G, or I64 / BOOL for indices and masks
    domain dom[3];
    bool diff[3];         // the gradient is checked for this input
    bool transpose[3];    // the op sees the leaf transposed (last two dims)
    torc_op_params params;
} gcase;

static bool differentiable(torc_opcode c) {
    if (c >= TORC_OP_NEG && c <= TORC_OP_ERFINV) return true;
    if (c >= TORC_OP_ADD && c <= TORC_OP_MINIMUM) return true;
    if (c == TORC_OP_REMAINDER || c == TORC_OP_FMOD) return true;  // floor_divide has no derivative
    if (c >= TORC_OP_SUM && c <= TORC_OP_LOGSUMEXP) return c != TORC_OP_ARGMAX && c != TORC_OP_ARGMIN;
    switch (c) {
    case TORC_OP_WHERE: case TORC_OP_SOFTMAX: case TORC_OP_LOG_SOFTMAX: case TORC_OP_MATMUL: case TORC_OP_INDEX_SELECT:
    case TORC_OP_GATHER: case TORC_OP_MASKED_SELECT: case TORC_OP_TRIU: case TORC_OP_TRIL: case TORC_OP_ADDCMUL:
    case TORC_OP_ADDCDIV: case TORC_OP_LERP: case TORC_OP_ATTENTION: return true;
    default: return false;
    }
}

// Host values of the inputs, as raw bytes in their dtypes.
typedef struct gdata { unsigned char *raw[3]; int64_t n[3]; } gdata;

static void gd_free(gdata *d) {
    for (int k = 0; k < 3; k++) free(d->raw[k]);
}

static void grad_xcase(const gcase *g, torc_opcode code, xcase *c) {
    memset(c, 0, sizeof *c);
    c->code = code;
    c->family = g->family;
    c->n_in = g->n_in;
    c->params = g->params;
    for (int k = 0; k < g->n_in; k++) c->in[k].dtype = g->dt[k], c->in[k].ndim = g->nd[k];
    c->out.dtype = code == TORC_OP_WHERE ? g->dt[1] : g->dt[0];
}

// Forward pass on tensors built from d; with grad, leaves of the diff inputs require grad.
static torc_tensor *grad_forward(const gcase *g, const xcase *c, const gdata *d, torc_tensor **leaf) {
    torc_tensor *v[3] = {0};
    for (int k = 0; k < g->n_in; k++) {
        int64_t sh[4];
        memcpy(sh, g->shape[k], sizeof sh);
        if (g->transpose[k]) sh[g->nd[k] - 1] = g->shape[k][g->nd[k] - 2], sh[g->nd[k] - 2] = g->shape[k][g->nd[k] - 1];
        torc_tensor *t = torc_tensor_from(d->raw[k], g->nd[k], sh, g->dt[k]);
        if (!t) return NULL;
        if (leaf) {
            leaf[k] = t;
            if (g->diff[k] && torc_set_requires_grad(t, true)) return NULL;
        }
        v[k] = g->transpose[k] ? torc_transpose(t, -2, -1) : t;
        if (!v[k]) return NULL;
    }
    bool inexpressible;
    return frontend_apply(c, v, NULL, NULL, &inexpressible);
}

static bool host_values(torc_tensor *t, double *out) {
    torc_tensor *f = torc_to_dtype(t, TORC_DTYPE_F64);
    return f && torc_copy_to_host(f, out, (size_t)torc_numel(t) * sizeof(double)) == TORC_OK;
}

// L = sum(y * w) in double on the host, from a forward pass without grad.
static bool grad_loss(const gcase *g, const xcase *c, const gdata *d, const double *w, int64_t ny, double *L) {
    torc_scope_push();
    torc_no_grad_begin();
    bool ok = false;
    torc_tensor *y = grad_forward(g, c, d, NULL);
    double *yv = malloc(sizeof(double) * (size_t)(ny ? ny : 1));
    if (y && yv && torc_numel(y) == ny && host_values(y, yv)) {
        double s = 0;
        for (int64_t i = 0; i < ny; i++) s += yv[i] * w[i];
        *L = s;
        ok = true;
    }
    free(yv);
    torc_no_grad_end();
    torc_scope_pop();
    return ok;
}

static void grad_case(builder *b, torc_opcode code, const gcase *g, run_mode mode) {
    const torc_dtype G = g->dt[0] == TORC_DTYPE_BOOL ? g->dt[1] : g->dt[0];
    const bool f64 = G == TORC_DTYPE_F64;
    xcase c;
    grad_xcase(g, code, &c);
    b->rng.s = hash_str(hash_str(g_opt.seed ^ 0x6A09E667F3BCC908ull, b->label), g->family) ^ (uint64_t)code << 32;
    gdata d;
    memset(&d, 0, sizeof d);
    for (int k = 0; k < g->n_in; k++) {
        d.n[k] = numel_of(g->nd[k], g->shape[k]);
        d.raw[k] = malloc((size_t)d.n[k] * esize(g->dt[k]) + 1);
        if (!d.raw[k]) xcheck_die("out of memory");
        for (int64_t i = 0; i < d.n[k]; i++) st_f(d.raw[k] + i * esize(g->dt[k]), g->dt[k], gen_value(&b->rng, g->dom[k], g->dt[k]));
    }
    // Keep the op away from its kinks: maximum/minimum operands apart, amax/amin values distinct.
    if (code == TORC_OP_MAXIMUM || code == TORC_OP_MINIMUM)
        for (int64_t i = 0; i < d.n[0]; i++) {
            const double a = ld_f(d.raw[0] + i * esize(G), G), bb = ld_f(d.raw[1] + i * esize(G), G);
            if (fabs(a - bb) < 0.25) st_f(d.raw[1] + i * esize(G), G, a + (bb >= a ? 0.5 : -0.5));
        }
    if (code == TORC_OP_MAX || code == TORC_OP_MIN)
        for (int64_t i = 0; i < d.n[0]; i++) st_f(d.raw[0] + i * esize(G), G, -1.5 + 0.25 * (double)((i * 7) % d.n[0]));
    // remainder/fmod jump where a / b is an integer: a / b half-way between two
    if (code == TORC_OP_REMAINDER || code == TORC_OP_FMOD)
        for (int64_t i = 0; i < d.n[0]; i++) {
            const double a = ld_f(d.raw[0] + i * esize(G), G), bb = ld_f(d.raw[1] + (i % d.n[1]) * esize(G), G);
            st_f(d.raw[0] + i * esize(G), G, bb * (trunc(a / bb) + (a / bb < 0 ? -0.5 : 0.5)));
        }

    cmp m = {.ok = true};
    torc_set_default_device(g_t.dev);
    torc_scope_push();
    torc_tensor *leaf[3] = {0}, *gr[3] = {0}, *dl[3] = {0};
    int ndiff = 0, which[3];
    double *w = NULL, *ga = NULL;
    torc_tensor *y = grad_forward(g, &c, &d, leaf);
    if (!y) {
        cmp_fail(&m, "forward failed: %s", torc_last_error());
        goto done;
    }
    const int64_t ny = torc_numel(y);
    w = malloc(sizeof(double) * (size_t)(ny ? ny : 1));
    unsigned char *wraw = malloc((size_t)(ny ? ny : 1) * esize(torc_get_dtype(y)));
    if (!w || !wraw) xcheck_die("out of memory");
    for (int64_t i = 0; i < ny; i++) {
        st_f(wraw + i * esize(torc_get_dtype(y)), torc_get_dtype(y), 2 * rng_unit(&b->rng) - 1);
        w[i] = ld_f(wraw + i * esize(torc_get_dtype(y)), torc_get_dtype(y));
    }
    torc_tensor *W = torc_tensor_from(wraw, torc_ndim(y), torc_shape(y), torc_get_dtype(y));
    free(wraw);
    torc_tensor *L = W ? torc_sum(torc_mul(y, W), TORC_ALL_DIMS, false) : NULL;
    for (int k = 0; k < g->n_in; k++)
        if (g->diff[k]) which[ndiff] = k, dl[ndiff++] = leaf[k];
    if (!L || torc_autograd_grad(1, &L, NULL, ndiff, dl, false, true, gr)) {
        cmp_fail(&m, "backward failed: %s", torc_last_error());
        goto done;
    }
    for (int i = 0; i < ndiff && m.ok; i++) {
        const int k = which[i];
        const size_t es = esize(G);
        ga = realloc(ga, sizeof(double) * (size_t)d.n[k]);
        if (!ga) xcheck_die("out of memory");
        if (!gr[i]) memset(ga, 0, sizeof(double) * (size_t)d.n[k]);
        else if (torc_numel(gr[i]) != d.n[k] || !host_values(gr[i], ga)) {
            cmp_fail(&m, "the gradient of input %d has %lld elements, expected %lld (%s)", k,
                     (long long)torc_numel(gr[i]), (long long)d.n[k], torc_last_error());
            break;
        }
        double scale = 1.0;
        double *gn = malloc(sizeof(double) * (size_t)d.n[k]);
        if (!gn) xcheck_die("out of memory");
        for (int64_t j = 0; j < d.n[k] && m.ok; j++) {
            unsigned char *p = d.raw[k] + (size_t)j * es;
            unsigned char keep[8];
            memcpy(keep, p, es);
            const double x = ld_f(p, G), h = (f64 ? 1e-6 : 1e-2) * fmax(1.0, fabs(x));
            double Lp = 0, Lm = 0;  // (read only when both forwards succeeded; clang cannot tell)
            st_f(p, G, x + h);
            const double xp = ld_f(p, G);
            bool ok = grad_loss(g, &c, &d, w, ny, &Lp);
            st_f(p, G, x - h);
            const double xm = ld_f(p, G);
            ok = ok && grad_loss(g, &c, &d, w, ny, &Lm);
            memcpy(p, keep, es);
            if (!ok) cmp_fail(&m, "forward failed: %s", torc_last_error());
            gn[j] = (Lp - Lm) / (xp - xm);
            scale = fmax(scale, fabs(gn[j]));
        }
        const double rtol = (f64 ? 1e-5 : 2e-2) * g_opt.tol_scale, atol = (f64 ? 1e-6 : 1e-2) * g_opt.tol_scale;
        double e2 = 0, r2 = 0;
        for (int64_t j = 0; j < d.n[k]; j++) e2 += (ga[j] - gn[j]) * (ga[j] - gn[j]), r2 += gn[j] * gn[j];
        m.nmse = fmax(m.nmse, e2 / (r2 > 0 ? r2 : 1e-300));
        for (int64_t j = 0; j < d.n[k] && m.ok; j++) {
            const double err = fabs(ga[j] - gn[j]), tol = rtol * fabs(gn[j]) + atol * scale;
            m.max_abs = fmax(m.max_abs, err);
            m.ratio = fmax(m.ratio, isnan(err) ? INFINITY : err / tol);
            if (!(err <= tol))
                cmp_fail(&m, "d/d input%d[%lld]: autograd %.9g, finite differences %.9g (|err| %.3g > tol %.3g)", k,
                         (long long)j, ga[j], gn[j], err, tol);
        }
        free(gn);
    }
done:
    torc_scope_pop();
    torc_set_default_device(NULL);
    xcase rc = {.family = g->family, .out = {.ndim = 0}};
    record(b, &rc, mode, &m);
    free(w);
    free(ga);
    gd_free(&d);
}

static gcase gc1(const char *fam, torc_dtype G, int nd, const int64_t *shape, domain dm) {
    gcase g = {.family = fam, .n_in = 1, .nd = {nd}, .dt = {G}, .dom = {dm}, .diff = {true}};
    memcpy(g.shape[0], shape, (size_t)nd * sizeof *shape);
    return g;
}
static void gc_add(gcase *g, int nd, const int64_t *shape, torc_dtype dt, domain dm, bool diff) {
    const int k = g->n_in++;
    g->nd[k] = nd, g->dt[k] = dt, g->dom[k] = dm, g->diff[k] = diff;
    memcpy(g->shape[k], shape, (size_t)nd * sizeof *shape);
}

static domain grad_dom(torc_opcode code) {
    switch (code) {
    case TORC_OP_ABS: case TORC_OP_RELU: case TORC_OP_SIGN: case TORC_OP_RECIPROCAL: case TORC_OP_NORM: return DOM(D_AWAY0);
    case TORC_OP_SQRT: case TORC_OP_RSQRT: case TORC_OP_LOG: case TORC_OP_POW_SCALAR: return DOM(D_POS);
    case TORC_OP_ERFINV: return DOMS(D_UNIT, 0.75);
    case TORC_OP_PROD: return DOM(D_NEAR1);
    default: return DOM(D_REAL);
    }
}

static void build_grad(builder *b, torc_dtype G, run_mode mode) {
    const torc_opcode code = b->code;
    static const int64_t s34[] = {3, 4}, s14[] = {1, 4}, s31[] = {3, 1}, s45[] = {4, 5}, s54[] = {5, 4}, s234[] = {2, 3, 4},
                         s3[] = {3}, s32[] = {3, 2};
    const domain dm = grad_dom(code);
    if (code >= TORC_OP_NEG && code <= TORC_OP_ERFINV) {
        gcase g = gc1("contig", G, 2, s34, dm);
        if (code == TORC_OP_POW_SCALAR) g.params.scalar.value = 2.5;
        grad_case(b, code, &g, mode);
        if (code == TORC_OP_GELU) {
            g.family = "tanh_approx";
            g.params.gelu.approximate = 1;
            grad_case(b, code, &g, mode);
        }
        return;
    }
    if (code >= TORC_OP_ADD && code <= TORC_OP_MINIMUM) {
        const domain d0 = code == TORC_OP_POW ? DOM(D_POS) : DOM(D_REAL);
        const domain d1 = code == TORC_OP_DIV ? DOM(D_AWAY0) : code == TORC_OP_POW ? DOM(D_EXPONENT) : DOM(D_REAL);
        gcase g = gc1("contig", G, 2, s34, d0);
        g.params.scalar.value = 1;
        gc_add(&g, 2, s34, G, d1, true);
        grad_case(b, code, &g, mode);
        if (code == TORC_OP_MAXIMUM || code == TORC_OP_MINIMUM) return;  // broadcast operands tie
        g.family = "broadcast_b";
        g.nd[1] = 2, memcpy(g.shape[1], s14, sizeof s14);
        grad_case(b, code, &g, mode);
        g.family = "broadcast_a";
        memcpy(g.shape[0], s31, sizeof s31), memcpy(g.shape[1], s34, sizeof s34);
        grad_case(b, code, &g, mode);
        if (code == TORC_OP_ADD || code == TORC_OP_SUB) {
            g = gc1("alpha", G, 2, s34, d0);
            gc_add(&g, 2, s34, G, d1, true);
            g.params.scalar.value = -0.5;
            grad_case(b, code, &g, mode);
        }
        return;
    }
    if (code == TORC_OP_REMAINDER || code == TORC_OP_FMOD) {
        gcase g = gc1("contig", G, 2, s34, DOM(D_REAL));
        gc_add(&g, 2, s34, G, DOM(D_AWAY0), true);
        grad_case(b, code, &g, mode);
        return;
    }
    if (code >= TORC_OP_SUM && code <= TORC_OP_LOGSUMEXP) {
        gcase g = gc1("dim1", G, 2, s34, dm);
        g.params.reduce.mask = 0x2, g.params.reduce.correction = 1, g.params.reduce.p = 2;
        grad_case(b, code, &g, mode);
        g.family = "all_dims";
        g.params.reduce.mask = 0x3;
        grad_case(b, code, &g, mode);
        return;
    }
    gcase g;
    switch (code) {
    case TORC_OP_ADDCMUL: case TORC_OP_ADDCDIV: case TORC_OP_LERP:
        g = gc1("broadcast", G, 2, s34, DOM(D_REAL));
        gc_add(&g, 2, s14, G, DOM(D_REAL), true);
        if (code != TORC_OP_LERP) gc_add(&g, 2, s31, G, code == TORC_OP_ADDCDIV ? DOM(D_AWAY0) : DOM(D_REAL), true);
        g.params.scalar.value = code == TORC_OP_LERP ? 0.3 : -0.7;
        grad_case(b, code, &g, mode);
        break;
    case TORC_OP_WHERE:
        g = gc1("contig", TORC_DTYPE_BOOL, 2, s34, DOM(D_REAL));
        g.diff[0] = false;
        gc_add(&g, 2, s34, G, DOM(D_REAL), true);
        gc_add(&g, 2, s14, G, DOM(D_REAL), true);
        grad_case(b, code, &g, mode);
        break;
    case TORC_OP_SOFTMAX: case TORC_OP_LOG_SOFTMAX:
        g = gc1("dim1", G, 2, s34, DOMS(D_REAL, 2));
        g.params.dim.dim = 1;
        grad_case(b, code, &g, mode);
        g.family = "dim0", g.params.dim.dim = 0;
        grad_case(b, code, &g, mode);
        break;
    case TORC_OP_MATMUL:
        g = gc1("contig", G, 2, s34, DOM(D_REAL));
        gc_add(&g, 2, s45, G, DOM(D_REAL), true);
        grad_case(b, code, &g, mode);
        g.family = "transposed_b";
        g.transpose[1] = true;
        grad_case(b, code, &g, mode);
        g = gc1("batched", G, 3, s234, DOM(D_REAL));
        gc_add(&g, 2, s45, G, DOM(D_REAL), true);
        grad_case(b, code, &g, mode);
        break;
    case TORC_OP_INDEX_SELECT:
        g = gc1("dim0", G, 2, s54, DOM(D_REAL));
        gc_add(&g, 1, s3, TORC_DTYPE_I64, DOMI(4), false);
        grad_case(b, code, &g, mode);
        break;
    case TORC_OP_GATHER:
        g = gc1("dim1", G, 2, s34, DOM(D_REAL));
        gc_add(&g, 2, s32, TORC_DTYPE_I64, DOMI(3), false);
        g.params.dim.dim = 1;
        grad_case(b, code, &g, mode);
        break;
    case TORC_OP_MASKED_SELECT:
        g = gc1("contig", G, 2, s34, DOM(D_REAL));
        gc_add(&g, 2, s34, TORC_DTYPE_BOOL, DOM(D_REAL), false);
        grad_case(b, code, &g, mode);
        break;
    case TORC_OP_ATTENTION: {  // through scaled_dot_product_attention: q (1, 2, 3, 4), k (.., 5, 4), v (.., 5, 3)
        static const int64_t sq[4] = {1, 2, 3, 4}, sk[4] = {1, 2, 5, 4}, sv[4] = {1, 2, 5, 3};
        g = gc1("contig", G, 4, sq, DOM(D_REAL));
        gc_add(&g, 4, sk, G, DOM(D_REAL), true);
        gc_add(&g, 4, sv, G, DOM(D_REAL), true);
        g.params.attention.scale = 0.6;
        grad_case(b, code, &g, mode);
        g.family = "causal", g.params.attention.causal = 1;
        grad_case(b, code, &g, mode);
        g.family = "causal_transposed_k", g.transpose[1] = true;
        grad_case(b, code, &g, mode);
        break;
    }
    case TORC_OP_TRIU: case TORC_OP_TRIL:
        g = gc1("k1", G, 2, s45, DOM(D_REAL));
        g.params.tri.k = 1;
        grad_case(b, code, &g, mode);
        break;
    default: break;
    }
}

// ---- main ----
static void usage(FILE *f) {
    fprintf(f,
            "usage: torc-xcheck [--backend NAME] [--op NAME[,NAME...]] [--dtype NAME[,NAME...]]\n"
            "                   [--grad] [--perf] [--check] [--csv] [--quiet] [--verbose] [--api]\n"
            "                   [--tol-scale X] [--seed N] [--perf-n ELEMENTS] [--perf-mm N] [--sweep[=full]]\n"
            "       torc-xcheck [--backend NAME] [--seed N] --workload train|gpt\n"
            "Cross-checks a backend against the reference backend: every op x dtype x shape family\n"
            "(contiguous, transposed, sliced with a step, broadcast, zero-size, zero-dim, size 1, odd\n"
            "sizes, large, in place, NaN/inf) runs as one op on the backend (torc_run_op) with sentinel bytes\n"
            "around every buffer; ops the backend lacks are checked through the public API, where they\n"
            "fall back to the reference. The onednn backend's small-op hand-off to the reference\n"
            "(TORC_ONEDNN_MIN_WORK) is off here unless set, so every family reaches its kernels.\n"
            "Exit status: 0 all passed, 1 a check failed, 2 usage/setup.\n"
            "  --backend NAME  backend or device to check (default: TORC_BACKEND or the default device)\n"
            "  --op, --dtype   only these ops (torc_op_name) / dtypes (f32, bfloat16, ...)\n"
            "  --grad          check gradients of differentiable ops by finite differences\n"
            "  --perf          time each op on the backend and on the reference\n"
            "  --check         value checks too (the default when neither --grad nor --perf is given)\n"
            "  --csv           one line per case (per timing under --perf) for machines\n"
            "  --quiet         print failing rows and the summary only\n"
            "  --verbose       also list op/dtype pairs the reference has no kernel for\n"
            "  --api           run every shape family through the public API as well (as a fallback\n"
            "                  would), not only the 'frontend' family\n"
            "  --tol-scale X   multiply every tolerance by X (default 1)\n"
            "  --sweep         also sweep the ops that pack or convert operands (matmul, matmul_rounded,\n"
            "                  scaled_mm, copy, layer_norm, layer_norm_backward, attention,\n"
            "                  attention_backward) over every layout of every operand (contiguous,\n"
            "                  transposed, expanded, sliced by 2 and 3, batched with broadcast,\n"
            "                  attention's split heads) at sizes around the backends' tile and vector\n"
            "                  edges, inputs in buffers that end at their last element (for ASan)\n"
            "  --sweep=full    the exhaustive sweep: more partner sizes, every out layout and batch\n"
            "                  form (hours; narrow it with --op and --dtype)\n"
            "  --workload NAME run a workload on the backend instead of the checks and list the ops and\n"
            "                  dtypes it dispatches and which the backend declines: train (torc-train's\n"
            "                  Cruncher: Linear layers, mse_loss, backward, adam) or gpt (a tiny GPT:\n"
            "                  forward with targets, backward, clip_grad_norm, adamw); exit status 0\n"
            "                  (informational) unless the workload cannot run\n");
}

static void parse_list(const char *arg, bool *on, int n, bool is_op) {
    char *copy = strdup(arg), *save = NULL;
    if (!copy) xcheck_die("out of memory");
    memset(on, 0, (size_t)n * sizeof *on);
    for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        bool found = false;
        if (is_op) {
            for (int i = 0; i < n; i++)
                if (!strcmp(torc_op_name((torc_opcode)i), w)) on[i] = found = true;
        } else {
            torc_dtype d;
            if (torc_dtype_from_name(w, &d) == TORC_OK) on[d] = found = true;
        }
        if (!found) {
            fprintf(stderr, "torc-xcheck: unknown %s '%s'; known: ", is_op ? "op" : "dtype", w);
            for (int i = 0; i < n; i++)
                fprintf(stderr, "%s%s", i ? " " : "", is_op ? torc_op_name((torc_opcode)i) : dshort((torc_dtype)i));
            fputc('\n', stderr);
            free(copy);
            exit(2);
        }
    }
    free(copy);
}

static const char *arg_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) xcheck_die("%s needs a value", argv[*i]);
    return argv[++*i];
}

static void run_row2(torc_opcode code, torc_dtype dt, torc_dtype dt2, torc_dtype odt, const char *label, emit_mode mode) {
    row r;
    memset(&r, 0, sizeof r);
    snprintf(r.op, sizeof r.op, "%s", torc_op_name(code));
    snprintf(r.label, sizeof r.label, "%s", label);
    builder b = {.code = code, .dt = dt, .dt2 = dt2, .odt = odt, .mode = mode, .row = &r};
    snprintf(b.label, sizeof b.label, "%s", label);
    build_op(&b);
    if (mode == EMIT_CHECK) finish_row(code, &r);
}
static void run_row(torc_opcode code, torc_dtype dt, torc_dtype odt, const char *label, emit_mode mode) {
    run_row2(code, dt, dt, odt, label, mode);
}

// scaled_mm's rows: (a, b, out) dtype triples, as cuBLASLt takes them.
static void scaled_mm_rows(emit_mode mode) {
    const torc_dtype E4 = TORC_DTYPE_F8_E4M3FN, E5 = TORC_DTYPE_F8_E5M2;
    static const struct { int a, b, o; } rows[] = {
        {TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F32}, {TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_BF16},
        {TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F16}, {TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E4M3FN},
        {TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E5M2, TORC_DTYPE_F32}, {TORC_DTYPE_F8_E5M2, TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_BF16},
        {TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E4M3FN, TORC_DTYPE_F8_E5M2},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const torc_dtype a = (torc_dtype)rows[i].a, bb = (torc_dtype)rows[i].b, o = (torc_dtype)rows[i].o;
        if (!g_opt.dtype_on[a] && !g_opt.dtype_on[bb] && !g_opt.dtype_on[o]) continue;
        if (mode == EMIT_PERF && o != TORC_DTYPE_F32 && o != TORC_DTYPE_BF16) continue;
        char label[40];
        snprintf(label, sizeof label, "%s*%s->%s", a == E4 ? "e4m3" : "e5m2", bb == E4 ? "e4m3" : "e5m2",
                 o == E4 ? "e4m3" : o == E5 ? "e5m2" : dshort(o));
        run_row2(TORC_OP_SCALED_MM, a, bb, o, label, mode);
    }
}

// Calls fn for every (op, dtype) row the filters select.
static void for_each_row(emit_mode mode) {
    for (int ci = 0; ci < TORC_OP_COUNT; ci++) {
        const torc_opcode code = (torc_opcode)ci;
        if (!g_opt.op_on[code]) continue;
        if (code == TORC_OP_SCALED_MM) {
            scaled_mm_rows(mode);
            continue;
        }
        for (int di = 0; di < TORC_DTYPE_COUNT; di++) {
            const torc_dtype d = (torc_dtype)di;
            if (code == TORC_OP_COPY) {  // every (source, destination) pair
                for (int oi = 0; oi < TORC_DTYPE_COUNT; oi++) {
                    const torc_dtype o = (torc_dtype)oi;
                    if (!g_opt.dtype_on[d] && !g_opt.dtype_on[o]) continue;
                    if (mode == EMIT_PERF && d != o && d != TORC_DTYPE_F32 && o != TORC_DTYPE_F32) continue;
                    char label[40];
                    snprintf(label, sizeof label, "%s->%s", dshort(d), dshort(o));
                    run_row(code, d, o, label, mode);
                }
                continue;
            }
            if (!g_opt.dtype_on[d]) continue;
            run_row(code, d, d, dshort(d), mode);
            if (code == TORC_OP_MATMUL && (d == TORC_DTYPE_BF16 || d == TORC_DTYPE_F16)) {
                char label[40];  // mixed precision: bf16 x bf16 -> f32
                snprintf(label, sizeof label, "%s->f32", dshort(d));
                run_row(code, d, TORC_DTYPE_F32, label, mode);
            }
        }
    }
}

static bool probe_native(torc_opcode code, torc_dtype dt) {
    row r;
    memset(&r, 0, sizeof r);
    builder b = {.code = code, .dt = dt, .dt2 = dt, .odt = dt, .mode = EMIT_PROBE, .row = &r};
    snprintf(b.label, sizeof b.label, "%s", dshort(dt));
    build_op(&b);
    return b.probe_total > 0 && b.probe_native == b.probe_total;
}

// ---- --workload: the ops a training workload dispatches, and which of them the backend declines ----
// The workload runs on the backend's device under op tracing (torc_op_trace_start); each op is
// recorded by (opcode, first input's dtype, output's dtype) with whether the backend took it or
// declined it at that very dispatch, so the table is the workload's own descriptors, not a probe.
// On a device-memory backend TORC_DEVICE_FALLBACK=1 is set, so its declined ops run on the host
// and the workload runs to the end (a host backend's declined ops run on the reference anyway).
#define WL_OK(x) \
    do { if ((x) != TORC_OK) xcheck_die("--workload: %s failed: %s", #x, torc_last_error()); } while (0)
#define WL_PTR(p) \
    do { if (!(p)) xcheck_die("--workload: %s failed: %s", #p, torc_last_error()); } while (0)

enum { WL_STEPS = 2 };

// A Cruncher (torc-train's model: Linear(D, D) x L without bias, then Linear(D, 1)) learning
// random targets with mse_loss, backward and an Adam step, as torc-train's loop does.
static void workload_train(void) {
    const int64_t D = 16, B = 8;
    torc_generator *gen = torc_generator_new(g_opt.seed);
    WL_PTR(gen);
    torc_module *model = torc_cruncher_new(D, 2, TORC_DTYPE_F32, gen);
    WL_PTR(model);
    const int n = torc_module_param_count(model);
    if (n < 1 || n > 64) xcheck_die("--workload train: the Cruncher has %d parameters", n);
    torc_tensor *params[64];
    for (int i = 0; i < n; i++) params[i] = torc_module_param(model, i);
    torc_optimizer *opt = torc_optimizer_new("adam", n, params, "lr=0.001");
    WL_PTR(opt);
    printf("workload 'train': Cruncher(dim=%lld, layers=2), batch %lld, mse_loss, backward, adam; %d steps\n",
           (long long)D, (long long)B, WL_STEPS);
    for (int step = 0; step < WL_STEPS; step++) {
        torc_scope_push();
        torc_tensor *x = torc_randn(2, (int64_t[]){B, D}, TORC_DTYPE_F32, gen);
        WL_PTR(x);
        torc_tensor *y = torc_randn(1, (int64_t[]){B}, TORC_DTYPE_F32, gen);
        WL_PTR(y);
        torc_tensor *pred = torc_module_forward(model, x);
        WL_PTR(pred);
        torc_tensor *l = torc_mse_loss(pred, y);
        WL_PTR(l);
        WL_OK(torc_backward(l, NULL, false));
        double v;
        WL_OK(torc_item(l, &v));
        WL_OK(torc_optimizer_step(opt));
        WL_OK(torc_optimizer_zero_grad(opt, true));
        torc_scope_pop();
    }
    torc_optimizer_free(opt);
    torc_module_free(model);
    torc_generator_free(gen);
}

// A tiny GPT (torc/gpt.h) trained as train_gpt does: forward with targets, backward, the
// gradients clipped to norm 1, an AdamW step with weight decay on the matrices.
static void workload_gpt(void) {
    const torc_gpt_config cfg = {64, 0, 16, 2, 2, 32, 0.0, true};
    const int64_t B = 2, T = 16;
    torc_generator *gen = torc_generator_new(g_opt.seed);
    WL_PTR(gen);
    torc_gpt *m = torc_gpt_new(&cfg, gen);
    WL_PTR(m);
    const int n = torc_gpt_param_count(m);
    if (n < 1 || n > 256) xcheck_die("--workload gpt: the model has %d parameters", n);
    torc_tensor *params[256];
    const char *names[256];
    for (int i = 0; i < n; i++) params[i] = torc_gpt_param(m, i), names[i] = torc_gpt_param_name(m, i);
    torc_optimizer *opt = torc_optimizer_new_decay_groups("adamw", n, names, params, "lr=6e-4 betas=0.9,0.95 eps=1e-8",
                                                          0.1, NULL, NULL, NULL);
    WL_PTR(opt);
    printf("workload 'gpt': GPT(vocab=%lld, block=%lld, layers=%lld, heads=%lld, embd=%lld), batch %lld x %lld, "
           "forward with targets, backward, clip_grad_norm 1, adamw; %d steps\n",
           (long long)cfg.vocab_size, (long long)cfg.block_size, (long long)cfg.n_layer, (long long)cfg.n_head,
           (long long)cfg.n_embd, (long long)B, (long long)T, WL_STEPS);
    for (int step = 0; step < WL_STEPS; step++) {
        torc_scope_push();
        torc_tensor *idx = torc_randint(0, cfg.vocab_size, 2, (int64_t[]){B, T}, TORC_DTYPE_I64, gen);
        WL_PTR(idx);
        torc_tensor *tgt = torc_randint(0, cfg.vocab_size, 2, (int64_t[]){B, T}, TORC_DTYPE_I64, gen);
        WL_PTR(tgt);
        torc_tensor *loss = NULL;
        WL_OK(torc_gpt_forward(m, idx, tgt, gen, NULL, &loss));
        WL_OK(torc_backward(loss, NULL, false));
        torc_tensor *norm = torc_clip_grad_norm_(n, params, 1.0, 2.0, false);
        WL_PTR(norm);
        double v;
        WL_OK(torc_item(loss, &v));
        WL_OK(torc_optimizer_step(opt));
        WL_OK(torc_optimizer_zero_grad(opt, true));
        torc_scope_pop();
    }
    torc_optimizer_free(opt);
    torc_gpt_free(m);
    torc_generator_free(gen);
}

// Runs workload name on g_t.dev under op tracing and prints the table; exit status 0.
static int run_workload(const char *name) {
    if (!g_t.host) setenv("TORC_DEVICE_FALLBACK", "1", 1);  // read by the core at the first declined op
    WL_OK(torc_set_default_device(g_t.dev));
    const char *bname = torc_device_backend_name(g_t.dev);
    torc_op_trace_start();
    if (!strcmp(name, "train")) workload_train();
    else workload_gpt();
    torc_op_trace_stop();
    printf("\n%-19s %-16s %8s  %s\n", "op", "dtypes", "count", bname);
    int pairs = 0, declined = 0;
    for (int o = 0; o < TORC_OP_COUNT; o++) {
        if (!torc_op_trace_count(o, -1, -1, -1)) continue;
        for (int i = -2; i < TORC_DTYPE_COUNT; i++) {
            if (i == -1) continue;
            for (int d = 0; d < TORC_DTYPE_COUNT; d++) {
                const uint64_t took = torc_op_trace_count(o, i, d, 0), no = torc_op_trace_count(o, i, d, 1);
                if (!took && !no) continue;
                char dt[40];
                if (i == -2) snprintf(dt, sizeof dt, "-> %s", dshort((torc_dtype)d));
                else if (i == d) snprintf(dt, sizeof dt, "%s", dshort((torc_dtype)d));
                else snprintf(dt, sizeof dt, "%s -> %s", dshort((torc_dtype)i), dshort((torc_dtype)d));
                char verdict[64];
                if (!no) snprintf(verdict, sizeof verdict, "takes");
                else if (!took) snprintf(verdict, sizeof verdict, "DECLINES");
                else snprintf(verdict, sizeof verdict, "DECLINES %llu of them", (unsigned long long)no);
                printf("%-19s %-16s %8llu  %s\n", torc_op_name((torc_opcode)o), dt, (unsigned long long)(took + no), verdict);
                pairs++;
                declined += no != 0;
            }
        }
    }
    printf("\ntorc-xcheck: %d of %d op/dtype pairs declined by '%s' in workload '%s'%s\n", declined, pairs, bname, name,
           declined && !g_t.host ? " (they ran on the host: TORC_DEVICE_FALLBACK=1)"
           : declined           ? " (the reference backend ran them on the same memory)"
                                : "");
    return 0;
}

int main(int argc, char **argv) {
    g_opt.tol_scale = 1;
    g_opt.seed = 20240501;
    g_opt.perf_n = 1 << 20;
    g_opt.perf_mm = 512;
    for (int i = 0; i < TORC_OP_COUNT; i++) g_opt.op_on[i] = true;
    for (int i = 0; i < TORC_DTYPE_COUNT; i++) g_opt.dtype_on[i] = true;
    bool want_check = false;
    const char *workload = NULL;  // --workload NAME
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--backend")) g_opt.backend = arg_value(argc, argv, &i);
        else if (!strcmp(a, "--op")) parse_list(arg_value(argc, argv, &i), g_opt.op_on, TORC_OP_COUNT, true);
        else if (!strcmp(a, "--dtype")) parse_list(arg_value(argc, argv, &i), g_opt.dtype_on, TORC_DTYPE_COUNT, false);
        else if (!strcmp(a, "--grad")) g_opt.grad = true;
        else if (!strcmp(a, "--perf")) g_opt.perf = true;
        else if (!strcmp(a, "--check")) want_check = true;
        else if (!strcmp(a, "--csv")) g_opt.csv = true;
        else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) g_opt.quiet = true;
        else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) g_opt.verbose = true;
        else if (!strcmp(a, "--api")) g_opt.api = true;
        else if (!strcmp(a, "--sweep")) g_opt.sweep = 1;
        else if (!strcmp(a, "--sweep=full")) g_opt.sweep = 2;
        else if (!strcmp(a, "--tol-scale")) g_opt.tol_scale = atof(arg_value(argc, argv, &i));
        else if (!strcmp(a, "--seed")) g_opt.seed = strtoull(arg_value(argc, argv, &i), NULL, 0);
        else if (!strcmp(a, "--perf-n")) g_opt.perf_n = atoll(arg_value(argc, argv, &i));
        else if (!strcmp(a, "--perf-mm")) g_opt.perf_mm = atoll(arg_value(argc, argv, &i));
        else if (!strcmp(a, "--workload")) {
            workload = arg_value(argc, argv, &i);
            if (strcmp(workload, "train") && strcmp(workload, "gpt"))
                xcheck_die("--workload '%s': known workloads are train and gpt", workload);
        }
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout), 0;
        else return usage(stderr), 2;
    }
    if (!(g_opt.tol_scale > 0) || g_opt.perf_n < 1 || g_opt.perf_mm < 1) xcheck_die("--tol-scale, --perf-n and --perf-mm must be positive");
    g_opt.check = want_check || (!g_opt.grad && !g_opt.perf);
    g_opt.color = !g_opt.csv && isatty(STDOUT_FILENO);

    // The onednn backend hands ops under TORC_ONEDNN_MIN_WORK elements (4096 by default) to the
    // reference, which would leave most shape families checking the reference against itself:
    // unless the user sets it, every family reaches oneDNN's kernels here.
    if (!getenv("TORC_ONEDNN_MIN_WORK")) setenv("TORC_ONEDNN_MIN_WORK", "0", 1);
    g_t.ref = torc_device_get("reference");
    if (!g_t.ref) xcheck_die("cannot load the reference backend: %s", torc_last_error());
    g_t.dev = g_opt.backend ? torc_device_get(g_opt.backend) : torc_default_device();
    if (!g_t.dev) xcheck_die("cannot load backend '%s': %s", g_opt.backend ? g_opt.backend : "(default)", torc_last_error());
    torc_device_info info;
    torc_device_info_get(g_t.dev, &info);
    g_t.host = info.host_memory;
    const char *fb = getenv("TORC_DEVICE_FALLBACK");  // read as the core reads it (backends.md)
    g_t.fallback = g_t.host || (fb && *fb && strcmp(fb, "0") != 0);
    if (!g_opt.csv)
        printf("torc-xcheck: backend '%s' (device %s: %s, %s memory) %s; seed %llu\n",
               torc_device_backend_name(g_t.dev), torc_device_name(g_t.dev), info.name, g_t.host ? "host" : "device",
               workload ? "under op tracing" : "against the reference", (unsigned long long)g_opt.seed);
    if (workload) return run_workload(workload);

    if (g_opt.check) {
        if (g_opt.csv) printf("op,dtype,family,mode,status,numel,max_abs_err,nmse,err_over_tol,detail\n");
        else print_table_header();
        for_each_row(EMIT_CHECK);
        if (!g_opt.csv) {
            printf("\nops by how '%s' runs them (dtypes; 'partial': some shape families natively):\n",
                   torc_device_backend_name(g_t.dev));
            for (int i = 0; i < TORC_OP_COUNT; i++) {
                if (!g_opt.op_on[i]) continue;
                const char *lists[4] = {g_opsum[i].native, g_opsum[i].partial, g_opsum[i].fallback, g_opsum[i].unsupported};
                const char *names[4] = {"native", "partial", "fallback", "unsupported"};
                bool any = false;
                for (int k = 0; k < 4; k++) any |= lists[k][0] != 0;
                if (!any) continue;
                printf("  %-19s", torc_op_name((torc_opcode)i));
                for (int k = 0; k < 4; k++)
                    if (lists[k][0]) printf(" %s: %s;", names[k], lists[k]);
                putchar('\n');
            }
        }
    }
    if (g_opt.grad) {
        if (g_opt.csv) printf("op,dtype,family,mode,status,numel,max_abs_err,nmse,err_over_tol,detail\n");
        else printf("\ngradients by central finite differences (f64 where the backend runs the op natively in f64):\n"), print_table_header();
        for (int ci = 0; ci < TORC_OP_COUNT; ci++) {
            const torc_opcode code = (torc_opcode)ci;
            if (!g_opt.op_on[code] || !differentiable(code)) continue;
            torc_dtype G = probe_native(code, TORC_DTYPE_F64) ? TORC_DTYPE_F64 : TORC_DTYPE_F32;
            if (!g_opt.dtype_on[G]) G = g_opt.dtype_on[TORC_DTYPE_F64] ? TORC_DTYPE_F64 : TORC_DTYPE_F32;
            const run_mode mode = probe_native(code, G) ? M_NATIVE : (g_t.fallback ? M_FALLBACK : M_UNSUPPORTED);
            row r;
            memset(&r, 0, sizeof r);
            snprintf(r.op, sizeof r.op, "%s", torc_op_name(code));
            snprintf(r.label, sizeof r.label, "%s", dshort(G));
            builder b = {.code = code, .dt = G, .dt2 = G, .odt = G, .mode = EMIT_CHECK, .row = &r};
            snprintf(b.label, sizeof b.label, "grad-%s", dshort(G));
            build_grad(&b, G, mode);
            finish_row(code, &r);
        }
    }
    if (g_opt.perf) {
        if (g_opt.csv) printf("op,dtype,shape,mode,backend_ms,backend_rate,reference_ms,reference_rate,unit\n");
        else printf("\n%-19s %-16s %-18s %12s %16s %12s %16s %9s\n", "op", "dtype", "shape", torc_device_backend_name(g_t.dev),
                    "rate", "reference", "rate", "speedup");
        for_each_row(EMIT_PERF);
    }
    if (!g_opt.csv) printf("\ntorc-xcheck: %s\n", g_any_failure ? "FAILED (see the rows marked FAIL)" : "all checks passed");
    return g_any_failure ? 1 : 0;
}
