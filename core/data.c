// core/data.c — datasets on disk: a raw binary or .npy array memory-mapped read-only (the
// course's np.memmap), get_batch's random (B, L) windows with their shifted targets, and llm.c's
// in-order batches. Token files (llm.c shards, checked tokens) are core/tokens.c's.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data-impl.h"
#include "torc/philox.h"

static const torc__elem_type g_types[] = {
    {"uint8", 'u', 1, TORC_DTYPE_I64},   {"int8", 'i', 1, TORC_DTYPE_I64},   {"uint16", 'u', 2, TORC_DTYPE_I64},
    {"int16", 'i', 2, TORC_DTYPE_I64},   {"uint32", 'u', 4, TORC_DTYPE_I64}, {"int32", 'i', 4, TORC_DTYPE_I64},
    {"int64", 'i', 8, TORC_DTYPE_I64},   {"float16", 'f', 2, TORC_DTYPE_F16}, {"float32", 'f', 4, TORC_DTYPE_F32},
    {"float64", 'f', 8, TORC_DTYPE_F64},
};
#define N_TYPES (int)(sizeof g_types / sizeof g_types[0])

const torc__elem_type *torc__elem_type_find(const char *s) {
    for (int i = 0; i < N_TYPES; i++)
        if (!strcmp(g_types[i].name, s)) return &g_types[i];
    const char *c = s;
    if (*c == '<' || *c == '|' || *c == '=') c++;
    if (strlen(c) != 2) return NULL;
    for (int i = 0; i < N_TYPES; i++)
        if (c[0] == g_types[i].kind && c[1] - '0' == g_types[i].size) return &g_types[i];
    return NULL;
}

torc_dataset *torc__data_fail(torc_dataset *ds, torc_status st, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    torc_dataset_close(ds);
    torc__error(st, "%s", msg);
    return NULL;
}

// The shape tuple as Python writes it: "()", "(5,)", "(3, 4)", "(3L, 4L)" (Python 2 longs): digits
// only, one comma between dims, each dim within int64_t. Returns NULL or what is wrong with it.
static const char *parse_npy_shape(const char *s, int *ndim, int64_t *shape) {
    const char *bad = "its header is malformed (shape)";
    while (*s == ' ') s++;
    if (*s++ != '(') return bad;
    *ndim = 0;
    for (;;) {
        while (*s == ' ') s++;
        if (*s == ')') return NULL;
        if (*s < '0' || *s > '9') return bad;
        int64_t v = 0;
        for (; *s >= '0' && *s <= '9'; s++)
            if (!torc__size_mul(v, 10, &v) || !torc__size_add(v, *s - '0', &v)) return "its shape has a dim past 2^63";
        if (*s == 'L') s++;
        if (*ndim == TORC_MAX_DIMS) return "its array has more than 8 dims";
        shape[(*ndim)++] = v;
        while (*s == ' ') s++;
        if (*s == ',') s++;
        else if (*s != ')') return bad;
    }
}

// Parses the .npy header dict "{'descr': '<u2', 'fortran_order': False, 'shape': (3, 4), }".
// Returns NULL or what is wrong with it.
static const char *parse_npy_dict(const char *h, size_t n, char *descr, size_t dcap, bool *fortran, int *ndim,
                                  int64_t *shape) {
    char *dict = strndup(h, n);
    if (!dict) return "out of memory";
    const char *err = NULL;
    const char *d = strstr(dict, "'descr':"), *f = strstr(dict, "'fortran_order':"), *s = strstr(dict, "'shape':");
    if (!d || !f || !s) err = "its header lacks 'descr', 'fortran_order' or 'shape'";
    if (!err) {
        d += 8;
        while (*d == ' ') d++;
        if (*d != '\'') err = "its dtype is not a simple type (structured arrays are not supported)";
        else {
            const char *e = strchr(d + 1, '\'');
            if (!e || (size_t)(e - d - 1) >= dcap) err = "its header is malformed";
            else snprintf(descr, dcap, "%.*s", (int)(e - d - 1), d + 1);
        }
    }
    if (!err) {
        f += 16;
        while (*f == ' ') f++;
        if (!strncmp(f, "True", 4)) *fortran = true;
        else if (!strncmp(f, "False", 5)) *fortran = false;
        else err = "its header is malformed (fortran_order)";
    }
    if (!err) err = parse_npy_shape(s + 8, ndim, shape);
    free(dict);
    return err;
}

torc_dataset *torc__data_map(const char *path, const char *what) {
    torc_dataset *ds = calloc(1, sizeof *ds);
    if (!ds || !(ds->path = strdup(path))) {
        free(ds);
        return TORC_FAIL_NULL(TORC_ERR_OOM, "out of memory");
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const int e = errno;
        return torc__data_fail(ds, TORC_ERR_IO, "cannot open %s '%s': %s", what, path, strerror(e));
    }
    struct stat sb;
    const bool stat_ok = fstat(fd, &sb) == 0;
    if (!stat_ok || !S_ISREG(sb.st_mode)) {
        const char *why = stat_ok ? "not a regular file" : strerror(errno);  // (sb is unset when fstat failed)
        close(fd);
        return torc__data_fail(ds, TORC_ERR_IO, "cannot open %s '%s': %s", what, path, why);
    }
    if (sb.st_size == 0) {
        close(fd);
        return torc__data_fail(ds, TORC_ERR_IO, "%s '%s' is empty", what, path);
    }
    ds->map_len = (size_t)sb.st_size;
    ds->map = mmap(NULL, ds->map_len, PROT_READ, MAP_SHARED, fd, 0);
    const int e = errno;
    close(fd);
    if (ds->map == MAP_FAILED) {
        ds->map = NULL;
        return torc__data_fail(ds, TORC_ERR_IO, "cannot map %s '%s': %s", what, path, strerror(e));
    }
    madvise(ds->map, ds->map_len, MADV_RANDOM);  // batches touch scattered windows; no read-ahead
    return ds;
}

torc_dataset *torc__npy_read(torc_dataset *ds, const torc__elem_type *want) {
    // .npy: magic, version, header length (u16 for v1, u32 for v2/v3), the header dict.
    const unsigned char *m = ds->map;
    const char *path = ds->path;
    if (ds->map_len < 10) return torc__data_fail(ds, TORC_ERR_IO, "'%s' is a truncated .npy file", path);
    const int major = m[6];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = (size_t)m[8] | (size_t)m[9] << 8;
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (ds->map_len < 12) return torc__data_fail(ds, TORC_ERR_IO, "'%s' is a truncated .npy file", path);
        hlen = (size_t)m[8] | (size_t)m[9] << 8 | (size_t)m[10] << 16 | (size_t)m[11] << 24;
        hstart = 12;
    } else {
        return torc__data_fail(ds, TORC_ERR_IO, "'%s' is a .npy file of an unknown format version (%d at byte offset 6)",
                               path, major);
    }
    if (hstart + hlen > ds->map_len)
        return torc__data_fail(ds, TORC_ERR_IO,
                               "'%s' is a truncated .npy file (its header runs past the end): %zu header bytes from "
                               "byte offset %zu, the file holds %zu bytes",
                               path, hlen, hstart, ds->map_len);
    char descr[32];
    bool fortran = false;
    const char *err = parse_npy_dict((const char *)m + hstart, hlen, descr, sizeof descr, &fortran, &ds->ndim, ds->shape);
    if (err) return torc__data_fail(ds, TORC_ERR_IO, ".npy file '%s': %s", path, err);
    if (descr[0] == '>' && strcmp(descr + 1, "u1") && strcmp(descr + 1, "i1"))
        return torc__data_fail(ds, TORC_ERR_IO, ".npy file '%s' holds big-endian data (%s); save it little-endian", path,
                               descr);
    const torc__elem_type *have = torc__elem_type_find(descr[0] == '>' ? descr + 1 : descr);
    if (!have)
        return torc__data_fail(ds, TORC_ERR_IO, ".npy file '%s' holds dtype '%s', which torc cannot read", path, descr);
    if (want && want != have)
        return torc__data_fail(ds, TORC_ERR_IO, ".npy file '%s' holds %s data, not %s", path, have->name, want->name);
    if (fortran && ds->ndim > 1)
        return torc__data_fail(ds, TORC_ERR_IO, ".npy file '%s' is Fortran-ordered; save it C-ordered", path);
    ds->type = have;
    ds->data_off = hstart + hlen;
    size_t need;
    if (!torc__numel_checked(ds->ndim, ds->shape, &ds->numel) ||
        !torc__nbytes_checked(ds->numel, (size_t)have->size, &need)) {
        char sh[TORC_SHAPE_STR_MAX];
        return torc__data_fail(ds, TORC_ERR_IO, ".npy file '%s': its shape %s holds more bytes than fit in memory", path,
                               torc__shape_str(ds->ndim, ds->shape, sh, sizeof sh));
    }
    const size_t got = ds->map_len - ds->data_off;
    if (need > got)
        return torc__data_fail(ds, TORC_ERR_IO,
                               ".npy file '%s' is truncated: it holds %zu data bytes but its header promises %zu "
                               "(data from byte offset %zu; the file ends at byte %zu)",
                               path, got, need, ds->data_off, ds->map_len);
    if (need < got)
        return torc__data_fail(ds, TORC_ERR_IO,
                               ".npy file '%s' holds %zu data bytes but its header describes %zu (corrupted?): the data "
                               "from byte offset %zu should end at byte %zu",
                               path, got, need, ds->data_off, ds->data_off + need);
    ds->data = m + ds->data_off;
    return ds;
}

torc_dataset *torc_dataset_open(const char *path, const char *dtype) {
    if (!path) return TORC_NULL_ARG_FAIL("torc_dataset_open: path is NULL");
    const torc__elem_type *want = NULL;
    if (dtype && !(want = torc__elem_type_find(dtype)))
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG,
                              "unknown dataset dtype '%s' (uint8, int8, uint16, int16, uint32, int32, int64, float16, "
                              "float32, float64)",
                              dtype);
    torc_dataset *ds = torc__data_map(path, "dataset");
    if (!ds) return NULL;
    if (ds->map_len >= 6 && !memcmp(ds->map, "\x93NUMPY", 6)) return torc__npy_read(ds, want);
    if (!want)
        return torc__data_fail(ds, TORC_ERR_INVALID_ARG, "'%s' is a raw file (no .npy header): say its dtype", path);
    if (ds->map_len % (size_t)want->size)
        return torc__data_fail(ds, TORC_ERR_IO,
                               "raw dataset '%s' is %zu bytes, not a whole number of %d-byte %s elements (truncated?)",
                               path, ds->map_len, want->size, want->name);
    ds->type = want;
    ds->ndim = 1;
    ds->numel = ds->shape[0] = (int64_t)(ds->map_len / (size_t)want->size);
    ds->data = ds->map;
    return ds;
}

void torc_dataset_close(torc_dataset *ds) {
    if (!ds) return;
    for (int i = 0; i < 2; i++) {
        if (!ds->stage[i]) continue;
        if (ds->pinned) {
            if (ds->in_flight[i]) torc__dev_sync(ds->stage_dev);
            torc__dev_host_free(ds->stage_dev, ds->stage[i]);
        } else {
            free(ds->stage[i]);
        }
    }
    if (ds->map) munmap(ds->map, ds->map_len);
    free(ds->path);
    free(ds);
}

int64_t torc_dataset_numel(const torc_dataset *ds) { return ds ? ds->numel : 0; }
const char *torc_dataset_dtype(const torc_dataset *ds) { return ds ? ds->type->name : "(null)"; }

int torc_dataset_shape(const torc_dataset *ds, int64_t *shape) {
    if (!ds) return 0;
    if (shape) memcpy(shape, ds->shape, sizeof(int64_t) * (size_t)ds->ndim);
    return ds->ndim;
}

int64_t torc_dataset_position(const torc_dataset *ds) { return ds ? ds->position : 0; }

torc_status torc_dataset_set_position(torc_dataset *ds, int64_t position) {
    if (!ds) return torc__null_arg("torc_dataset_set_position: dataset is NULL");
    if (position < 0 || position > ds->numel)
        return torc__error(TORC_ERR_INVALID_ARG, "set_position: position %lld is outside [0, %lld] of '%s'",
                           (long long)position, (long long)ds->numel, ds->path);
    ds->position = position;
    return TORC_OK;
}

// ---- gathering a batch ----
// Element i as int64 (integer data) or in the file's own floating type, written at out.
static int64_t load_int(const torc_dataset *ds, int64_t i) {
    const unsigned char *p = ds->data + (size_t)i * (size_t)ds->type->size;
    switch (ds->type->size * (ds->type->kind == 'u' ? 1 : -1)) {
    case 1: return *p;
    case -1: return (int8_t)*p;
    case 2: { uint16_t x; memcpy(&x, p, 2); return x; }
    case -2: { int16_t x; memcpy(&x, p, 2); return x; }
    case 4: { uint32_t x; memcpy(&x, p, 4); return x; }
    case -4: { int32_t x; memcpy(&x, p, 4); return x; }
    default: { int64_t x; memcpy(&x, p, 8); return x; }
    }
}

torc_status torc__data_bad_token(const torc_dataset *ds, int64_t i, int64_t v) {
    const size_t off = ds->data_off + (size_t)i * (size_t)ds->type->size;
    if (v < 0)
        return torc__error(TORC_ERR_IO, "token file '%s': the token at byte offset %zu (token %lld) is %lld, negative",
                           ds->path, off, (long long)i, (long long)v);
    return torc__error(TORC_ERR_IO,
                       "token file '%s': the token at byte offset %zu (token %lld) is %lld, not below vocab_size %lld",
                       ds->path, off, (long long)i, (long long)v, (long long)ds->vocab);
}

// A host buffer of n bytes to gather into for dev: pinned from the backend if it offers it.
static void *staging(torc_dataset *ds, torc_device *dev, size_t n, int *which) {
    if (ds->stage_dev != dev || ds->stage_cap < n) {
        for (int i = 0; i < 2; i++) {
            if (ds->stage[i] && ds->pinned) {
                if (ds->in_flight[i]) torc__dev_sync(ds->stage_dev);
                torc__dev_host_free(ds->stage_dev, ds->stage[i]);
            } else {
                free(ds->stage[i]);
            }
            ds->stage[i] = NULL;
            ds->in_flight[i] = false;
        }
        ds->stage_dev = dev;
        ds->stage_cap = n;
        ds->stage[0] = torc__dev_host_alloc(dev, n);
        ds->stage[1] = ds->stage[0] ? torc__dev_host_alloc(dev, n) : NULL;
        ds->pinned = ds->stage[0] && ds->stage[1];
        if (!ds->pinned) {
            torc__dev_host_free(dev, ds->stage[0]);
            ds->stage[0] = malloc(n);
            ds->stage[1] = malloc(n);
        }
        if (!ds->stage[0] || !ds->stage[1]) {
            for (int i = 0; i < 2; i++) free(ds->stage[i]), ds->stage[i] = NULL;
            ds->stage_cap = 0;
            torc__error(TORC_ERR_OOM, "out of host memory for a %zu-byte batch", n);
            return NULL;
        }
    }
    *which = ds->next;
    ds->next ^= 1;
    // A pinned buffer may still be read by the copy issued two batches ago.
    if (ds->pinned && ds->in_flight[*which]) {
        if (torc__dev_sync(dev)) return NULL;
        ds->in_flight[0] = ds->in_flight[1] = false;
    }
    return ds->stage[*which];
}

// Where each row of a batch starts: a random window (get_batch) or the next of consecutive ones.
typedef struct windows {
    bool in_order;
    uint64_t seed, first;   // random: row b starts at floor(uniform(seed, first, row0 + b) * range)
    int64_t row0, range;
    int64_t base;           // in order: row b starts at base + b * seq_len
} windows;

// The checks every batch function makes, before it draws or moves: arguments, the rank's rows
// and the bytes of x and y together. Sets *x (and *y) to NULL and *dev to the device.
static torc_status batch_args(const char *fn, torc_dataset *ds, int64_t batch, int64_t seq_len, int rank, int world,
                              torc_device **dev, torc_tensor **x, torc_tensor **y) {
    if (x) *x = NULL;
    if (y) *y = NULL;
    if (world < 1 || rank < 0 || rank >= world)
        return torc__error(TORC_ERR_INVALID_ARG, "%s: rank %d is out of range for world size %d", fn, rank, world);
    if (!ds || !x) return torc__null_arg("torc_%s: NULL argument", fn);
    if (batch < 1 || seq_len < 1)
        return torc__error(TORC_ERR_INVALID_ARG, "%s: batch and seq_len must be at least 1 (got %lld, %lld)", fn,
                           (long long)batch, (long long)seq_len);
    if (batch % world)
        return torc__error(TORC_ERR_INVALID_ARG, "%s: global batch %lld is not divisible by world size %d", fn,
                           (long long)batch, world);
    size_t both;
    if (!torc__nbytes_err(3, (int64_t[]){2, batch / world, seq_len}, torc_dtype_size(ds->type->out), &both))
        return torc_last_status();
    if (!*dev && !(*dev = torc_default_device())) return torc_last_status();
    return TORC_OK;
}

// The (rows, seq_len) windows w describes, and their targets one element on, on dev.
static torc_status gather(torc_dataset *ds, const windows *w, int64_t rows, int64_t seq_len, torc_device *dev,
                          torc_tensor **x, torc_tensor **y) {
    const torc_dtype out = ds->type->out;
    const size_t esize = torc_dtype_size(out);
    const size_t per = (size_t)rows * (size_t)seq_len * esize;  // batch_args checked twice this
    const int n_out = y ? 2 : 1;
    torc_tensor *t[2] = {NULL, NULL};
    for (int k = 0; k < n_out; k++)
        if (!(t[k] = torc__new(dev, out, 2, (int64_t[]){rows, seq_len}))) {
            torc_release(t[0]);
            return torc_last_status();
        }
    int which = 0;
    unsigned char *host = dev->host_memory ? NULL : staging(ds, dev, per * (size_t)n_out, &which);
    if (!dev->host_memory && !host) {
        torc_release(t[0]);
        torc_release(t[1]);
        return torc_last_status();
    }
    unsigned char *dst[2];
    for (int k = 0; k < n_out; k++) dst[k] = host ? host + per * (size_t)k : (unsigned char *)t[k]->storage->data;
    const bool ints = ds->type->kind != 'f';
    torc_status st = TORC_OK;
    for (int64_t b = 0; b < rows && !st; b++) {
        const int64_t s = w->in_order ? w->base + b * seq_len
                                      : (int64_t)(torc_philox_uniform(w->seed, w->first, (uint64_t)(w->row0 + b)) *
                                                  (double)w->range);
        for (int k = 0; k < n_out && !st; k++) {
            unsigned char *d = dst[k] + (size_t)(b * seq_len) * esize;
            if (!ints) {
                memcpy(d, ds->data + (size_t)(s + k) * (size_t)ds->type->size, (size_t)seq_len * esize);
                continue;
            }
            for (int64_t l = 0; l < seq_len; l++) {
                const int64_t v = load_int(ds, s + k + l);
                if (ds->tokens && (v < 0 || (ds->vocab && v >= ds->vocab))) {
                    st = torc__data_bad_token(ds, s + k + l, v);
                    break;
                }
                memcpy(d + (size_t)l * esize, &v, 8);
            }
        }
    }
    for (int k = 0; k < n_out && host && !st; k++)
        st = ds->pinned ? torc__dev_copy_async(dev, t[k]->storage->data, dst[k], per, TORC_COPY_HOST_TO_DEVICE)
                        : torc__dev_copy(dev, t[k]->storage->data, dst[k], per, TORC_COPY_HOST_TO_DEVICE);
    if (host && ds->pinned) ds->in_flight[which] = true;  // (a copy may have been issued before a failure)
    if (st) {
        torc_release(t[0]);
        torc_release(t[1]);
        return st;
    }
    *x = torc__register(t[0]);
    if (y) *y = torc__register(t[1]);
    return TORC_OK;
}

static const char *noun(const torc_dataset *ds) { return ds->tokens ? "token file" : "dataset"; }
static const char *elems(const torc_dataset *ds) { return ds->tokens ? "tokens" : "elements"; }

// ---- random windows (the course's get_batch) ----
// Rows [rank * rows, (rank + 1) * rows) of the batch torc_get_batch(ds, batch, ...) would draw:
// the generator advances by `batch` counters whatever the rows, so every rank's stream stays aligned.
static torc_status get_batch_rows(const char *fn, torc_dataset *ds, int64_t batch, int64_t seq_len, int rank,
                                  int world, torc_device *dev, torc_generator *gen, torc_tensor **x, torc_tensor **y) {
    torc_status st = batch_args(fn, ds, batch, seq_len, rank, world, &dev, x, y);
    if (st) return st;
    if (ds->numel <= seq_len)
        return torc__error(TORC_ERR_INVALID_ARG, "get_batch: %s '%s' has %lld %s, too few for windows of %lld plus a target",
                           noun(ds), ds->path, (long long)ds->numel, elems(ds), (long long)seq_len);
    const int64_t rows = batch / world;
    // Random starts in [0, numel - seq_len), as torc_randint draws them (one counter each).
    windows w = {.row0 = (int64_t)rank * rows, .range = ds->numel - seq_len};
    w.first = torc__generator_reserve(gen, (uint64_t)batch, &w.seed);
    return gather(ds, &w, rows, seq_len, dev, x, y);
}

torc_status torc_get_batch(torc_dataset *ds, int64_t batch, int64_t seq_len, torc_device *dev, torc_generator *gen,
                           torc_tensor **x, torc_tensor **y) {
    return get_batch_rows("get_batch", ds, batch, seq_len, 0, 1, dev, gen, x, y);
}

torc_status torc_get_batch_shard(torc_dataset *ds, int64_t global_batch, int64_t seq_len, int rank, int world,
                                 torc_device *dev, torc_generator *gen, torc_tensor **x, torc_tensor **y) {
    return get_batch_rows("get_batch_shard", ds, global_batch, seq_len, rank, world, dev, gen, x, y);
}

// ---- in order (llm.c's DataLoader) ----
torc_status torc_next_batch_shard(torc_dataset *ds, int64_t global_batch, int64_t seq_len, int rank, int world,
                                  torc_device *dev, torc_tensor **x, torc_tensor **y) {
    const char *fn = world == 1 && rank == 0 ? "next_batch" : "next_batch_shard";
    torc_status st = batch_args(fn, ds, global_batch, seq_len, rank, world, &dev, x, y);
    if (st) return st;
    int64_t step, need;  // tokens per global batch, and with its last target
    if (!torc__size_mul(global_batch, seq_len, &step) || !torc__size_add(step, 1, &need) || ds->numel < need)
        return torc__error(TORC_ERR_INVALID_ARG,
                           "%s: %s '%s' has %lld %s, too few for one batch of %lld x %lld plus a target", fn, noun(ds),
                           ds->path, (long long)ds->numel, elems(ds), (long long)global_batch, (long long)seq_len);
    // llm.c wraps when the batch would pass the end; a position set or left by other sizes, too.
    int64_t p = ds->position;
    if (p > ds->numel - need) p = 0;
    const int64_t rows = global_batch / world;
    const windows w = {.in_order = true, .base = p + (int64_t)rank * rows * seq_len};
    if ((st = gather(ds, &w, rows, seq_len, dev, x, y))) return st;
    p += step;
    ds->position = p > ds->numel - need ? 0 : p;
    return TORC_OK;
}

torc_status torc_next_batch(torc_dataset *ds, int64_t batch, int64_t seq_len, torc_device *dev, torc_tensor **x,
                            torc_tensor **y) {
    return torc_next_batch_shard(ds, batch, seq_len, 0, 1, dev, x, y);
}
