// core/data.c — datasets on disk: a raw binary or .npy array memory-mapped read-only (the
// course's np.memmap), and get_batch's random (B, L) windows with their shifted targets.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "torc-impl.h"
#include "torc/philox.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "torc's dataset reader assumes a little-endian host"
#endif

// The element types a dataset file may hold (NumPy's names and .npy descr codes).
typedef struct elem_type {
    const char *name;   // "uint16"
    char kind;          // 'u', 'i', 'f'
    int size;           // bytes
    torc_dtype out;     // what get_batch returns: int64 for integers, the float dtype itself
} elem_type;

static const elem_type g_types[] = {
    {"uint8", 'u', 1, TORC_DTYPE_I64},   {"int8", 'i', 1, TORC_DTYPE_I64},   {"uint16", 'u', 2, TORC_DTYPE_I64},
    {"int16", 'i', 2, TORC_DTYPE_I64},   {"uint32", 'u', 4, TORC_DTYPE_I64}, {"int32", 'i', 4, TORC_DTYPE_I64},
    {"int64", 'i', 8, TORC_DTYPE_I64},   {"float16", 'f', 2, TORC_DTYPE_F16}, {"float32", 'f', 4, TORC_DTYPE_F32},
    {"float64", 'f', 8, TORC_DTYPE_F64},
};
#define N_TYPES (int)(sizeof g_types / sizeof g_types[0])

// A NumPy dtype name ("uint16") or descr ("<u2", "|u1", "u2"); NULL if unknown.
static const elem_type *find_type(const char *s) {
    for (int i = 0; i < N_TYPES; i++)
        if (!strcmp(g_types[i].name, s)) return &g_types[i];
    const char *c = s;
    if (*c == '<' || *c == '|' || *c == '=') c++;
    if (strlen(c) != 2) return NULL;
    for (int i = 0; i < N_TYPES; i++)
        if (c[0] == g_types[i].kind && c[1] - '0' == g_types[i].size) return &g_types[i];
    return NULL;
}

struct torc_dataset {
    char *path;
    void *map;
    size_t map_len;
    const unsigned char *data;   // the first element
    const elem_type *type;
    int64_t numel;
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    // Staging for devices that are not host memory: two buffers used in turn, pinned when the
    // backend offers it, so one batch can be copied while the next is gathered.
    torc_device *stage_dev;
    void *stage[2];
    bool pinned;
    size_t stage_cap;
    int next;
    bool in_flight[2];
};

static torc_dataset *fail(torc_dataset *ds, torc_status st, const char *fmt, const char *a, const char *b) {
    if (ds) {
        char path[512];
        snprintf(path, sizeof path, "%s", ds->path ? ds->path : "?");
        torc_dataset_close(ds);
        if (a && b) torc__error(st, fmt, path, a, b);
        else if (a) torc__error(st, fmt, path, a);
        else torc__error(st, fmt, path);
    }
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

torc_dataset *torc_dataset_open(const char *path, const char *dtype) {
    if (!path) return TORC_NULL_ARG_FAIL("torc_dataset_open: path is NULL");
    const elem_type *want = NULL;
    if (dtype && !(want = find_type(dtype)))
        return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG,
                              "unknown dataset dtype '%s' (uint8, int8, uint16, int16, uint32, int32, int64, float16, "
                              "float32, float64)",
                              dtype);
    torc_dataset *ds = calloc(1, sizeof *ds);
    if (!ds || !(ds->path = strdup(path))) {
        free(ds);
        return TORC_FAIL_NULL(TORC_ERR_OOM, "out of memory");
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(ds, TORC_ERR_IO, "cannot open dataset '%s': %s", strerror(errno), NULL);
    struct stat sb;
    const bool stat_ok = fstat(fd, &sb) == 0;
    if (!stat_ok || !S_ISREG(sb.st_mode)) {
        const char *why = stat_ok ? "not a regular file" : strerror(errno);  // (sb is unset when fstat failed)
        close(fd);
        return fail(ds, TORC_ERR_IO, "cannot open dataset '%s': %s", why, NULL);
    }
    if (sb.st_size == 0) {
        close(fd);
        return fail(ds, TORC_ERR_IO, "dataset '%s' is empty", NULL, NULL);
    }
    ds->map_len = (size_t)sb.st_size;
    ds->map = mmap(NULL, ds->map_len, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (ds->map == MAP_FAILED) {
        ds->map = NULL;
        return fail(ds, TORC_ERR_IO, "cannot map dataset '%s': %s", strerror(errno), NULL);
    }
    madvise(ds->map, ds->map_len, MADV_RANDOM);  // batches touch scattered windows; no read-ahead
    const unsigned char *m = ds->map;
    size_t data_off = 0;
    if (ds->map_len >= 6 && !memcmp(m, "\x93NUMPY", 6)) {
        // .npy: magic, version, header length (u16 for v1, u32 for v2/v3), the header dict.
        if (ds->map_len < 10) return fail(ds, TORC_ERR_IO, "'%s' is a truncated .npy file", NULL, NULL);
        const int major = m[6];
        size_t hlen, hstart;
        if (major == 1) {
            hlen = (size_t)m[8] | (size_t)m[9] << 8;
            hstart = 10;
        } else if (major == 2 || major == 3) {
            if (ds->map_len < 12) return fail(ds, TORC_ERR_IO, "'%s' is a truncated .npy file", NULL, NULL);
            hlen = (size_t)m[8] | (size_t)m[9] << 8 | (size_t)m[10] << 16 | (size_t)m[11] << 24;
            hstart = 12;
        } else {
            return fail(ds, TORC_ERR_IO, "'%s' is a .npy file of an unknown format version", NULL, NULL);
        }
        if (hstart + hlen > ds->map_len)
            return fail(ds, TORC_ERR_IO, "'%s' is a truncated .npy file (its header runs past the end)", NULL, NULL);
        char descr[32];
        bool fortran = false;
        const char *err = parse_npy_dict((const char *)m + hstart, hlen, descr, sizeof descr, &fortran, &ds->ndim, ds->shape);
        if (err) return fail(ds, TORC_ERR_IO, ".npy file '%s': %s", err, NULL);
        if (descr[0] == '>' && strcmp(descr + 1, "u1") && strcmp(descr + 1, "i1"))
            return fail(ds, TORC_ERR_IO, ".npy file '%s' holds big-endian data (%s); save it little-endian", descr, NULL);
        const elem_type *have = find_type(descr[0] == '>' ? descr + 1 : descr);
        if (!have) return fail(ds, TORC_ERR_IO, ".npy file '%s' holds dtype '%s', which torc cannot read", descr, NULL);
        if (want && want != have)
            return fail(ds, TORC_ERR_IO, ".npy file '%s' holds %s data, not %s", have->name, want->name);
        if (fortran && ds->ndim > 1) return fail(ds, TORC_ERR_IO, ".npy file '%s' is Fortran-ordered; save it C-ordered", NULL, NULL);
        ds->type = have;
        data_off = hstart + hlen;
        size_t need;
        if (!torc__numel_checked(ds->ndim, ds->shape, &ds->numel) ||
            !torc__nbytes_checked(ds->numel, (size_t)have->size, &need)) {
            char sh[TORC_SHAPE_STR_MAX];
            return fail(ds, TORC_ERR_IO, ".npy file '%s': its shape %s holds more bytes than fit in memory",
                        torc__shape_str(ds->ndim, ds->shape, sh, sizeof sh), NULL);
        }
        const size_t got = ds->map_len - data_off;
        if (need != got) {
            char a[64], b[64];
            snprintf(a, sizeof a, "%zu", got);
            snprintf(b, sizeof b, "%zu", need);
            return fail(ds, TORC_ERR_IO,
                        need > got ? ".npy file '%s' is truncated: it holds %s data bytes but its header promises %s"
                                   : ".npy file '%s' holds %s data bytes but its header describes %s (corrupted?)",
                        a, b);
        }
    } else {
        if (!want)
            return fail(ds, TORC_ERR_INVALID_ARG, "'%s' is a raw file (no .npy header): say its dtype", NULL, NULL);
        if (ds->map_len % (size_t)want->size) {
            char a[64], b[64];
            snprintf(a, sizeof a, "%zu", ds->map_len);
            snprintf(b, sizeof b, "%d-byte %s", want->size, want->name);
            return fail(ds, TORC_ERR_IO, "raw dataset '%s' is %s bytes, not a whole number of %s elements (truncated?)", a, b);
        }
        ds->type = want;
        ds->ndim = 1;
        ds->numel = ds->shape[0] = (int64_t)(ds->map_len / (size_t)want->size);
    }
    ds->data = m + data_off;
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

// Element i converted to the output dtype, written at out.
static void load_elem(const torc_dataset *ds, int64_t i, void *out) {
    const unsigned char *p = ds->data + (size_t)i * (size_t)ds->type->size;
    if (ds->type->kind == 'f') {
        memcpy(out, p, (size_t)ds->type->size);
        return;
    }
    int64_t v = 0;
    switch (ds->type->size * (ds->type->kind == 'u' ? 1 : -1)) {
    case 1: v = *p; break;
    case -1: v = (int8_t)*p; break;
    case 2: { uint16_t x; memcpy(&x, p, 2); v = x; } break;
    case -2: { int16_t x; memcpy(&x, p, 2); v = x; } break;
    case 4: { uint32_t x; memcpy(&x, p, 4); v = x; } break;
    case -4: { int32_t x; memcpy(&x, p, 4); v = x; } break;
    default: memcpy(&v, p, 8); break;
    }
    memcpy(out, &v, 8);
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

// Rows [row0, row0 + rows) of the batch torc_get_batch(ds, batch, ...) would draw: the generator
// advances by `batch` counters whatever the rows, so every rank's stream stays aligned.
static torc_status get_batch_rows(torc_dataset *ds, int64_t batch, int64_t row0, int64_t rows, int64_t seq_len,
                                  torc_device *dev, torc_generator *gen, torc_tensor **x, torc_tensor **y);

torc_status torc_get_batch(torc_dataset *ds, int64_t batch, int64_t seq_len, torc_device *dev, torc_generator *gen,
                           torc_tensor **x, torc_tensor **y) {
    return get_batch_rows(ds, batch, 0, batch, seq_len, dev, gen, x, y);
}

torc_status torc_get_batch_shard(torc_dataset *ds, int64_t global_batch, int64_t seq_len, int rank, int world,
                                 torc_device *dev, torc_generator *gen, torc_tensor **x, torc_tensor **y) {
    if (world < 1 || rank < 0 || rank >= world)
        return torc__error(TORC_ERR_INVALID_ARG, "get_batch_shard: rank %d is out of range for world size %d", rank, world);
    if (global_batch < 1 || global_batch % world)
        return torc__error(TORC_ERR_INVALID_ARG, "get_batch_shard: global batch %lld is not divisible by world size %d",
                           (long long)global_batch, world);
    const int64_t rows = global_batch / world;
    return get_batch_rows(ds, global_batch, (int64_t)rank * rows, rows, seq_len, dev, gen, x, y);
}

static torc_status get_batch_rows(torc_dataset *ds, int64_t batch, int64_t row0, int64_t rows, int64_t seq_len,
                                  torc_device *dev, torc_generator *gen, torc_tensor **x, torc_tensor **y) {
    if (!ds || !x) return torc__null_arg("torc_get_batch: NULL argument");
    *x = NULL;
    if (y) *y = NULL;
    if (batch < 1 || seq_len < 1)
        return torc__error(TORC_ERR_INVALID_ARG, "get_batch: batch and seq_len must be at least 1 (got %lld, %lld)",
                           (long long)batch, (long long)seq_len);
    if (ds->numel <= seq_len)
        return torc__error(TORC_ERR_INVALID_ARG,
                           "get_batch: dataset '%s' has %lld elements, too few for windows of %lld plus a target",
                           ds->path, (long long)ds->numel, (long long)seq_len);
    if (!dev && !(dev = torc_default_device())) return torc_last_status();
    const torc_dtype out = ds->type->out;
    const size_t esize = torc_dtype_size(out);
    size_t per, both;  // the bytes of this call's (rows, L) batch, and of x and y together
    if (!torc__nbytes_err(2, (int64_t[]){rows, seq_len}, esize, &per) ||
        !torc__nbytes_err(3, (int64_t[]){2, rows, seq_len}, esize, &both))
        return torc_last_status();
    // Random starts in [0, numel - seq_len), as torc_randint draws them (one counter each).
    uint64_t seed;
    const uint64_t first = torc__generator_reserve(gen, (uint64_t)batch, &seed);
    const int64_t range = ds->numel - seq_len;
    const int n_out = y ? 2 : 1;
    torc_tensor *t[2] = {NULL, NULL};
    for (int k = 0; k < n_out; k++)
        if (!(t[k] = torc__new(dev, out, 2, (int64_t[]){rows, seq_len}))) {
            torc_release(t[0]);
            return torc_last_status();
        }
    int which = 0;
    unsigned char *host = dev->host_memory ? NULL : staging(ds, dev, n_out == 2 ? both : per, &which);
    if (!dev->host_memory && !host) {
        torc_release(t[0]);
        torc_release(t[1]);
        return torc_last_status();
    }
    unsigned char *dst[2];
    for (int k = 0; k < n_out; k++) dst[k] = host ? host + per * (size_t)k : (unsigned char *)t[k]->storage->data;
    for (int64_t b = 0; b < rows; b++) {
        const int64_t s = (int64_t)(torc_philox_uniform(seed, first, (uint64_t)(row0 + b)) * (double)range);
        for (int k = 0; k < n_out; k++)
            for (int64_t l = 0; l < seq_len; l++)
                load_elem(ds, s + k + l, dst[k] + (size_t)(b * seq_len + l) * esize);
    }
    torc_status st = TORC_OK;
    for (int k = 0; k < n_out && host && !st; k++)
        st = ds->pinned ? torc__dev_copy_async(dev, t[k]->storage->data, dst[k], per, TORC_COPY_HOST_TO_DEVICE)
                        : torc__dev_copy(dev, t[k]->storage->data, dst[k], per, TORC_COPY_HOST_TO_DEVICE);
    if (host && ds->pinned) ds->in_flight[which] = true;
    if (st) {
        torc_release(t[0]);
        torc_release(t[1]);
        return st;
    }
    *x = torc__register(t[0]);
    if (y) *y = torc__register(t[1]);
    return TORC_OK;
}
