// core/safetensors.c — torc_save / torc_load: state dicts as safetensors files (8-byte header
// size, JSON header, raw little-endian data), written atomically and checked fully on load.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "torc-impl.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "torc's safetensors I/O assumes a little-endian host (the format is little-endian)"
#endif

// safetensors' own limit on the JSON header.
#define MAX_HEADER (100u << 20)
// A CRC-32 of what the file means, stored in the metadata by torc_save and checked by
// torc_load (content_crc below): the metadata and every tensor's name, dtype, shape and data,
// each taken in sorted order, so a changed value anywhere is caught while a file that another
// tool re-saved unchanged (Python's safetensors reorders the header's keys and the tensors'
// data) still loads. Files without it are checked structurally only.
#define CRC_KEY "torc.content_crc32"

// ---- dtypes ----
static const char *const g_st_names[TORC_DTYPE_COUNT] = {
    [TORC_DTYPE_F64] = "F64",        [TORC_DTYPE_F32] = "F32",       [TORC_DTYPE_F16] = "F16",
    [TORC_DTYPE_BF16] = "BF16",      [TORC_DTYPE_F8_E4M3FN] = "F8_E4M3", [TORC_DTYPE_F8_E5M2] = "F8_E5M2",
    [TORC_DTYPE_I64] = "I64",        [TORC_DTYPE_I32] = "I32",       [TORC_DTYPE_I16] = "I16",
    [TORC_DTYPE_I8] = "I8",          [TORC_DTYPE_U8] = "U8",         [TORC_DTYPE_BOOL] = "BOOL",
};

// torc has no uint16/uint32/uint64 dtypes; files PyTorch (2.3+) writes with them load widened to
// the next signed dtype, which holds every value: U16 -> int32, U32 -> int64, and U64 -> int64
// when every value is at most INT64_MAX (a larger one is an error naming the tensor). Their
// values are unchanged; saving such a tensor again writes I32 / I64.
static const struct {
    const char *name;
    torc_dtype dtype;
    uint64_t file_size;  // bytes per element in the file
} g_st_widened[] = {{"U16", TORC_DTYPE_I32, 2}, {"U32", TORC_DTYPE_I64, 4}, {"U64", TORC_DTYPE_I64, 8}};

// The file's dtype name -> torc's dtype, its element size in the file, and the name (static).
static bool st_dtype(const char *name, torc_dtype *out, uint64_t *file_size, const char **st_name) {
    for (int d = 0; d < TORC_DTYPE_COUNT; d++)
        if (!strcmp(g_st_names[d], name))
            return *out = (torc_dtype)d, *file_size = torc_dtype_size(*out), *st_name = g_st_names[d], true;
    for (size_t i = 0; i < sizeof g_st_widened / sizeof g_st_widened[0]; i++)
        if (!strcmp(g_st_widened[i].name, name))
            return *out = g_st_widened[i].dtype, *file_size = g_st_widened[i].file_size, *st_name = g_st_widened[i].name, true;
    return false;
}

// Widens n elements of a U16 or U32 tensor at src into dst (int32 / int64). U64 -> int64 keeps
// its bytes (check_widening has made sure every value fits).
static void widen(void *dst, const unsigned char *src, uint64_t file_size, size_t n) {
    if (file_size == 2) {  // U16 -> int32
        for (size_t i = 0; i < n; i++) {
            uint16_t v;
            memcpy(&v, src + 2 * i, 2);
            ((int32_t *)dst)[i] = v;
        }
    } else {  // U32 -> int64
        for (size_t i = 0; i < n; i++) {
            uint32_t v;
            memcpy(&v, src + 4 * i, 4);
            ((int64_t *)dst)[i] = v;
        }
    }
}

// ---- CRC-32 (the zlib / PNG polynomial) ----
static uint32_t g_crc_table[256];
static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        g_crc_table[i] = c;
    }
}
static uint32_t crc_update(uint32_t crc, const void *data, size_t n) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, crc_init);
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = g_crc_table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

// ---- the content checksum ----
// CRC-32 over, in this order: the number of metadata entries (u64 little-endian), then each
// entry but CRC_KEY sorted by key as "key\0value\0"; the number of tensors (u64), then each
// tensor sorted by name as "name\0" "DTYPE\0", ndim (u64), its dims (u64 each) and the CRC-32
// of its data bytes (u32). Names are unique in a valid file, so the order is total.
typedef struct crc_meta {
    const char *key, *value;
} crc_meta;
typedef struct crc_tensor {
    const char *name;
    const char *dtype;  // the file's name: "F32", "U16"
    int ndim;
    const int64_t *shape;
    uint32_t data_crc;
} crc_tensor;

static int cmp_meta(const void *a, const void *b) {  // by key, then value (a malformed file may repeat a key)
    const crc_meta *x = a, *y = b;
    const int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->value, y->value);
}
static int cmp_tensor(const void *a, const void *b) {
    return strcmp(((const crc_tensor *)a)->name, ((const crc_tensor *)b)->name);
}
static uint32_t crc_u64(uint32_t crc, uint64_t v) { return crc_update(crc, &v, 8); }  // little-endian host

// Sorts both arrays in place; entries keyed CRC_KEY in meta are skipped.
static uint32_t content_crc(crc_meta *meta, int n_meta, crc_tensor *t, int n) {
    qsort(meta, (size_t)n_meta, sizeof *meta, cmp_meta);
    qsort(t, (size_t)n, sizeof *t, cmp_tensor);
    uint64_t counted = 0;
    for (int i = 0; i < n_meta; i++) counted += strcmp(meta[i].key, CRC_KEY) != 0;
    uint32_t crc = crc_u64(0, counted);
    for (int i = 0; i < n_meta; i++) {
        if (!strcmp(meta[i].key, CRC_KEY)) continue;
        crc = crc_update(crc, meta[i].key, strlen(meta[i].key) + 1);
        crc = crc_update(crc, meta[i].value, strlen(meta[i].value) + 1);
    }
    crc = crc_u64(crc, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        crc = crc_update(crc, t[i].name, strlen(t[i].name) + 1);
        crc = crc_update(crc, t[i].dtype, strlen(t[i].dtype) + 1);
        crc = crc_u64(crc, (uint64_t)t[i].ndim);
        for (int d = 0; d < t[i].ndim; d++) crc = crc_u64(crc, (uint64_t)t[i].shape[d]);
        crc = crc_update(crc, &t[i].data_crc, 4);
    }
    return crc;
}

// ---- a growable string ----
// Out of memory is sticky: every later put is a no-op, so n stops growing and the caller checks
// oom once at the end. No loop may wait on n to reach a value.
typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 1024;
        while (nc < b->n + n + 1) nc *= 2;
        char *ns = realloc(b->s, nc);
        if (!ns) {
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = nc;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}
static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }
static void sb_fmt(sbuf *b, const char *fmt, unsigned long long v) {
    char tmp[32];
    sb_put(b, tmp, (size_t)snprintf(tmp, sizeof tmp, fmt, v));
}
static void sb_json_string(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            sb_put(b, e, 2);
        } else if (*p < 0x20) {
            char e[8];
            sb_put(b, e, (size_t)snprintf(e, sizeof e, "\\u%04x", *p));
        } else {
            sb_put(b, (const char *)p, 1);
        }
    }
    sb_put(b, "\"", 1);
}

// ---- writing ----
static torc_status io_error(const char *path, const char *what) {
    return torc__error(TORC_ERR_IO, "%s '%s': %s", what, path, strerror(errno));
}

static bool write_all(int fd, const void *data, size_t n) {
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

// A save writes PATH.tmp.XXXXXX (six letters or digits) and renames it onto PATH. A save killed
// before the rename leaves that file behind; the next save to PATH removes every file of this
// pattern, so two processes saving to one path at the same time is not supported (one of them
// may lose its temporary and fail with an error; PATH itself always holds a whole file).
#define TMP_SUFFIX ".tmp."
#define TMP_SUFFIX_LEN (sizeof TMP_SUFFIX - 1 + 6)

static bool is_tmp_letter(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// Splits path into its directory (malloc'ed, "." when there is none) and its base name.
static char *dir_of(const char *path, const char **base) {
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static void remove_stale_temporaries(const char *path) {
    const char *base;
    char *dir = dir_of(path, &base);
    if (!dir) return;  // out of memory: the stale files stay until a later save
    const size_t blen = strlen(base);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d && dfd >= 0) close(dfd);
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *n = e->d_name;
        if (strlen(n) != blen + TMP_SUFFIX_LEN || strncmp(n, base, blen) ||
            strncmp(n + blen, TMP_SUFFIX, sizeof TMP_SUFFIX - 1))
            continue;
        bool ours = true;
        for (const char *c = n + blen + sizeof TMP_SUFFIX - 1; *c; c++) ours = ours && is_tmp_letter(*c);
        struct stat sb;
        if (ours && fstatat(dirfd(d), n, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode))
            unlinkat(dirfd(d), n, 0);
    }
    if (d) closedir(d);
    free(dir);
}

// Creates PATH.tmp.XXXXXX into tmp (room for strlen(path) + TMP_SUFFIX_LEN + 1) with mode 0666
// less the umask, as open(path, O_CREAT, 0666) would give PATH itself (mkstemp's is always 0600).
static int create_temporary(const char *path, char *tmp) {
    static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static _Atomic uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec;
    for (int attempt = 0; attempt < 100; attempt++) {
        x += 0x9E3779B97F4A7C15ull * (atomic_fetch_add(&counter, 1) + 1);  // splitmix64
        uint64_t r = x;
        r = (r ^ (r >> 30)) * 0xBF58476D1CE4E5B9ull;
        r = (r ^ (r >> 27)) * 0x94D049BB133111EBull;
        r ^= r >> 31;
        char suffix[7];
        for (int i = 0; i < 6; i++, r /= 62) suffix[i] = letters[r % 62];
        suffix[6] = '\0';
        sprintf(tmp, "%s" TMP_SUFFIX "%s", path, suffix);
        int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;  // errno is EEXIST
}

torc_status torc_save(const torc_state_dict *sd, const char *path) {
    if (!sd || !path || !*path) return torc__error(TORC_ERR_INVALID_ARG, "torc_save: NULL or empty argument");
    const int n = torc_state_dict_size(sd);
    // The header: metadata first (with a fixed-width checksum patched in after the data), then
    // the tensors in state-dict order, their data back to back.
    sbuf h = {0};
    sb_str(&h, "{\"__metadata__\":{");
    const int nm = torc_state_dict_meta_size(sd);
    for (int i = 0; i < nm; i++) {
        const char *k = torc_state_dict_meta_key(sd, i);
        if (!strcmp(k, CRC_KEY)) continue;
        sb_json_string(&h, k);
        sb_str(&h, ":");
        sb_json_string(&h, torc_state_dict_get_meta(sd, k));
        sb_str(&h, ",");
    }
    sb_str(&h, "\"" CRC_KEY "\":\"");
    const size_t crc_at = h.n;
    sb_str(&h, "00000000\"}");
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const char *name = torc_state_dict_name(sd, i);
        const torc_tensor *t = torc__state_dict_peek(sd, name);
        if (!strcmp(name, "__metadata__")) {
            free(h.s);
            return torc__error(TORC_ERR_INVALID_ARG, "torc_save: '__metadata__' cannot name a tensor");
        }
        sb_str(&h, ",");
        sb_json_string(&h, name);
        sb_str(&h, ":{\"dtype\":\"");
        sb_str(&h, g_st_names[t->dtype]);
        sb_str(&h, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) sb_fmt(&h, d ? ",%llu" : "%llu", (unsigned long long)t->shape[d]);
        const uint64_t nb = torc_nbytes(t);
        sb_fmt(&h, "],\"data_offsets\":[%llu,", offset);
        sb_fmt(&h, "%llu]}", offset + nb);
        offset += nb;
    }
    sb_str(&h, "}");
    sb_put(&h, "        ", (8 - h.n % 8) % 8);  // as the Python writer: data starts 8-byte aligned
    if (h.oom) {
        free(h.s);
        return torc__error(TORC_ERR_OOM, "out of memory writing the header of '%s'", path);
    }
    // Temporary file in the destination's directory, so the rename is atomic.
    char *tmp = malloc(strlen(path) + TMP_SUFFIX_LEN + 1);
    if (!tmp) {
        free(h.s);
        return torc__error(TORC_ERR_OOM, "out of memory");
    }
    remove_stale_temporaries(path);
    int fd = create_temporary(path, tmp);
    if (fd < 0) {
        torc_status st = io_error(path, "cannot create a temporary file next to");
        free(tmp);
        free(h.s);
        return st;
    }
    torc_status st = TORC_OK;
    uint64_t hsize = h.n;
    if (!write_all(fd, &hsize, 8) || !write_all(fd, h.s, h.n)) st = io_error(tmp, "cannot write");
    // What content_crc needs: the metadata as written and each tensor's data CRC.
    crc_meta *cm = malloc(sizeof *cm * (size_t)(nm + 1));
    crc_tensor *ct = malloc(sizeof *ct * (size_t)(n + 1));
    if (!st && (!cm || !ct)) st = torc__error(TORC_ERR_OOM, "out of memory writing '%s'", path);
    for (int i = 0; i < nm && !st; i++)
        cm[i].key = torc_state_dict_meta_key(sd, i), cm[i].value = torc_state_dict_get_meta(sd, cm[i].key);
    void *buf = NULL;
    size_t cap = 0;
    for (int i = 0; i < n && !st; i++) {
        const torc_tensor *t = torc__state_dict_peek(sd, torc_state_dict_name(sd, i));
        const size_t nb = torc_nbytes(t);
        if (nb > cap) {
            void *nbuf = realloc(buf, nb);
            if (!nbuf) {
                st = torc__error(TORC_ERR_OOM, "out of host memory staging %zu bytes for '%s'", nb, path);
                break;
            }
            buf = nbuf;
            cap = nb;
        }
        if (nb && (st = torc_copy_to_host(t, buf, nb))) break;
        ct[i] = (crc_tensor){torc_state_dict_name(sd, i), g_st_names[t->dtype], t->ndim, t->shape, crc_update(0, buf, nb)};
        if (!write_all(fd, buf, nb)) st = io_error(tmp, "cannot write");
    }
    free(buf);
    if (!st) {
        char hex[9];
        snprintf(hex, sizeof hex, "%08x", content_crc(cm, nm, ct, n));
        if (pwrite(fd, hex, 8, (off_t)(8 + crc_at)) != 8) st = io_error(tmp, "cannot write");
    }
    if (!st && fsync(fd) != 0) st = io_error(tmp, "cannot fsync");
    if (close(fd) != 0 && !st) st = io_error(tmp, "cannot close");
    if (!st && rename(tmp, path) != 0) st = io_error(path, "cannot rename the temporary file onto");
    if (st) {
        unlink(tmp);
    } else {
        // Make the rename itself durable: fsync the directory that holds path.
        const char *base;
        char *dir = dir_of(path, &base);
        if (dir) {
            int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (dfd >= 0) {
                fsync(dfd);
                close(dfd);
            }
            free(dir);
        }
    }
    free(cm);
    free(ct);
    free(tmp);
    free(h.s);
    return st;
}

// ---- a small strict JSON reader for the header ----
typedef struct jp {
    const char *s, *end;
    const char *err;  // what went wrong, NULL while fine
} jp;

static void ws(jp *p) {
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')) p->s++;
}
static bool expect(jp *p, char c) {
    ws(p);
    if (p->s < p->end && *p->s == c) {
        p->s++;
        return true;
    }
    if (!p->err) p->err = "malformed JSON header";
    return false;
}
static bool peek(jp *p, char c) {
    ws(p);
    return p->s < p->end && *p->s == c;
}
static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}
// A JSON string into a malloc'ed UTF-8 C string (NULL on error).
static char *jstring(jp *p) {
    if (!expect(p, '"')) return NULL;
    sbuf b = {0};
    sb_put(&b, "", 0);
    while (p->s < p->end && *p->s != '"') {
        char c = *p->s++;
        if ((unsigned char)c < 0x20) {
            p->err = "malformed JSON header (control character in a string)";
            break;
        }
        if (c != '\\') {
            sb_put(&b, &c, 1);
            continue;
        }
        if (p->s >= p->end) break;
        c = *p->s++;
        static const char escaped[] = "\"\\/bfnrt", meant[] = "\"\\/\b\f\n\r\t";
        const char *simple = c ? strchr(escaped, c) : NULL;
        if (simple) {
            sb_put(&b, &meant[simple - escaped], 1);
            continue;
        }
        if (c != 'u' || p->end - p->s < 4) {
            p->err = "malformed JSON header (bad escape)";
            break;
        }
        unsigned cp = 0;
        for (int i = 0; i < 4; i++) {
            int h = hexval(p->s[i]);
            if (h < 0) p->err = "malformed JSON header (bad \\u escape)";
            cp = cp << 4 | (unsigned)(h < 0 ? 0 : h);
        }
        p->s += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && p->end - p->s >= 6 && p->s[0] == '\\' && p->s[1] == 'u') {
            unsigned lo = 0;
            for (int i = 0; i < 4; i++) {
                int h = hexval(p->s[2 + i]);
                lo = lo << 4 | (unsigned)(h < 0 ? 0 : h);
            }
            if (lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p->s += 6;
            }
        }
        char u[4];
        size_t k;
        if (cp < 0x80) u[0] = (char)cp, k = 1;
        else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3F)), k = 2;
        else if (cp < 0x10000)
            u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[2] = (char)(0x80 | (cp & 0x3F)), k = 3;
        else
            u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
            u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), k = 4;
        sb_put(&b, u, k);
    }
    if (!p->err && !expect(p, '"')) p->err = "malformed JSON header (unterminated string)";
    if (p->err || b.oom) {
        if (!p->err) p->err = "out of memory";
        free(b.s);
        return NULL;
    }
    return b.s;
}
static bool juint(jp *p, uint64_t *out) {
    ws(p);
    if (p->s >= p->end || *p->s < '0' || *p->s > '9') {
        if (!p->err) p->err = "malformed JSON header (expected a non-negative integer)";
        return false;
    }
    uint64_t v = 0;
    while (p->s < p->end && *p->s >= '0' && *p->s <= '9') {
        if (v > (UINT64_MAX - 9) / 10) {
            p->err = "integer too large in the header";
            return false;
        }
        v = v * 10 + (uint64_t)(*p->s++ - '0');
    }
    *out = v;
    return true;
}

typedef struct st_entry {
    char *name;
    torc_dtype dtype;     // torc's
    const char *st_name;  // the file's ("U16" for a tensor loaded as int32)
    uint64_t file_size;   // bytes per element in the file
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    uint64_t begin, end;
} st_entry;

typedef struct st_header {
    st_entry *e;
    int n, cap;
    char **meta;  // key, value, key, value, ...
    int n_meta, cap_meta;
} st_header;

static void header_free(st_header *h) {
    for (int i = 0; i < h->n; i++) free(h->e[i].name);
    for (int i = 0; i < 2 * h->n_meta; i++) free(h->meta[i]);
    free(h->e);
    free(h->meta);
}

static void parse_metadata(jp *p, st_header *h) {
    if (!expect(p, '{')) return;
    if (peek(p, '}')) {
        p->s++;
        return;
    }
    do {
        char *k = jstring(p);
        char *v = k && expect(p, ':') ? jstring(p) : NULL;
        if (!v) {
            if (!p->err || !strncmp(p->err, "malformed JSON header", 21))
                p->err = "malformed __metadata__ (it must map strings to strings)";
            free(k);
            return;
        }
        if (h->n_meta == h->cap_meta) {
            int nc = h->cap_meta ? h->cap_meta * 2 : 16;
            char **nm = realloc(h->meta, sizeof *nm * 2 * (size_t)nc);
            if (!nm) {
                p->err = "out of memory";
                free(k);
                free(v);
                return;
            }
            h->meta = nm;
            h->cap_meta = nc;
        }
        h->meta[2 * h->n_meta] = k;
        h->meta[2 * h->n_meta + 1] = v;
        h->n_meta++;
    } while (peek(p, ',') && (p->s++, true));
    expect(p, '}');
}

static void parse_tensor(jp *p, st_entry *e) {
    if (!expect(p, '{')) return;
    bool has_dtype = false, has_shape = false, has_offsets = false;
    do {
        char *k = jstring(p);
        if (!k || !expect(p, ':')) {
            free(k);
            return;
        }
        if (!strcmp(k, "dtype")) {
            char *d = jstring(p);
            if (d && !st_dtype(d, &e->dtype, &e->file_size, &e->st_name)) {
                static _Thread_local char msg[96];
                snprintf(msg, sizeof msg, "unsupported dtype '%.40s'", d);
                p->err = msg;
            }
            has_dtype = d != NULL;
            free(d);
        } else if (!strcmp(k, "shape")) {
            expect(p, '[');
            e->ndim = 0;
            if (peek(p, ']')) p->s++;
            else {
                do {
                    uint64_t v;
                    if (e->ndim == TORC_MAX_DIMS) p->err = "a tensor has more dims than torc supports (8)";
                    if (p->err || !juint(p, &v)) break;
                    if (v > (uint64_t)INT64_MAX / 2) p->err = "a dim is too large";
                    e->shape[e->ndim++] = (int64_t)v;
                } while (peek(p, ',') && (p->s++, true));
                expect(p, ']');
            }
            has_shape = true;
        } else if (!strcmp(k, "data_offsets")) {
            expect(p, '[');
            juint(p, &e->begin);
            expect(p, ',');
            juint(p, &e->end);
            expect(p, ']');
            has_offsets = true;
        } else if (!p->err) {
            static _Thread_local char msg[96];
            snprintf(msg, sizeof msg, "unexpected field '%.40s' in a tensor entry", k);
            p->err = msg;
        }
        free(k);
        if (p->err) return;
    } while (peek(p, ',') && (p->s++, true));
    expect(p, '}');
    if (!p->err && !(has_dtype && has_shape && has_offsets)) p->err = "a tensor entry lacks dtype, shape or data_offsets";
}

static void parse_header(jp *p, st_header *h) {
    if (!expect(p, '{')) return;
    if (peek(p, '}')) {
        p->s++;
    } else {
        do {
            char *k = jstring(p);
            if (!k || !expect(p, ':')) {
                free(k);
                return;
            }
            if (!strcmp(k, "__metadata__")) {
                free(k);
                parse_metadata(p, h);
            } else {
                if (h->n == h->cap) {
                    int nc = h->cap ? h->cap * 2 : 16;
                    st_entry *ne = realloc(h->e, sizeof *ne * (size_t)nc);
                    if (!ne) {
                        p->err = "out of memory";
                        free(k);
                        return;
                    }
                    h->e = ne;
                    h->cap = nc;
                }
                st_entry *e = &h->e[h->n++];
                memset(e, 0, sizeof *e);
                e->name = k;
                parse_tensor(p, e);
            }
            if (p->err) return;
        } while (peek(p, ',') && (p->s++, true));
        if (!expect(p, '}')) return;
    }
    ws(p);
    if (p->s != p->end && !p->err) p->err = "malformed JSON header (trailing characters)";
}

static int cmp_begin(const void *a, const void *b) {
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const st_entry *const *)a)->name, (*(const st_entry *const *)b)->name);
}

// Structural checks of the entries against the data section (data_len bytes). Sorting keeps a
// header of millions of names at O(n log n) (a pairwise check took minutes at 100 000).
static const char *check_layout(st_header *h, uint64_t data_len, char *msg, size_t cap) {
    const st_entry **order = malloc(sizeof *order * (size_t)(h->n + 1));
    if (!order) return "out of memory";
    for (int i = 0; i < h->n; i++) order[i] = &h->e[i];
    qsort(order, (size_t)h->n, sizeof *order, cmp_name);
    for (int i = 1; i < h->n; i++)
        if (!strcmp(order[i]->name, order[i - 1]->name)) {
            snprintf(msg, cap, "tensor '%.80s' appears twice", order[i]->name);
            free(order);
            return msg;
        }
    qsort(order, (size_t)h->n, sizeof *order, cmp_begin);
    uint64_t at = 0;
    const char *err = NULL;
    for (int i = 0; i < h->n && !err; i++) {
        const st_entry *e = order[i];
        // The contiguous strides multiply every dim but the empty ones, so they must fit even
        // when a 0 dim makes the tensor empty: (0, 2^62, 2^62) is refused, not wrapped.
        int64_t numel, stride_span, nonzero[TORC_MAX_DIMS];
        for (int d = 0; d < e->ndim; d++) nonzero[d] = e->shape[d] ? e->shape[d] : 1;
        size_t nbytes = 0;
        const bool fits = torc__numel_checked(e->ndim, e->shape, &numel) &&
                          torc__numel_checked(e->ndim, nonzero, &stride_span) &&
                          torc__nbytes_checked(numel, (size_t)e->file_size, &nbytes);
        if (!fits) {
            char sh[TORC_SHAPE_STR_MAX];
            snprintf(msg, cap, "tensor '%.80s': Storage size calculation overflowed with sizes=%s", e->name,
                     torc__shape_str(e->ndim, e->shape, sh, sizeof sh));
            err = msg;
        } else if (e->end < e->begin || e->begin != at) {
            snprintf(msg, cap, "tensor '%.80s' has data_offsets [%llu, %llu] that overlap or leave a gap (expected to start at %llu)",
                     e->name, (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)at);
            err = msg;
        } else if ((uint64_t)nbytes != e->end - e->begin) {
            snprintf(msg, cap, "tensor '%.80s' has %llu data bytes but its shape and dtype need %llu", e->name,
                     (unsigned long long)(e->end - e->begin), (unsigned long long)nbytes);
            err = msg;
        } else if (e->end > data_len) {
            snprintf(msg, cap, "truncated: tensor '%.80s' ends at byte %llu of a %llu-byte data section", e->name,
                     (unsigned long long)e->end, (unsigned long long)data_len);
            err = msg;
        }
        at = e->end;
    }
    if (!err && at != data_len) {
        snprintf(msg, cap, "the data section has %llu bytes but the header accounts for %llu", (unsigned long long)data_len,
                 (unsigned long long)at);
        err = msg;
    }
    free(order);
    return err;
}

// Compares the file's content checksum, if it has one, with what it now holds.
static const char *check_content(const st_header *h, const unsigned char *data, char *msg, size_t cap) {
    const char *recorded = NULL;
    for (int i = 0; i < h->n_meta; i++)
        if (!strcmp(h->meta[2 * i], CRC_KEY)) recorded = h->meta[2 * i + 1];
    if (!recorded) return NULL;
    crc_meta *cm = malloc(sizeof *cm * (size_t)(h->n_meta + 1));
    crc_tensor *ct = malloc(sizeof *ct * (size_t)(h->n + 1));
    const char *err = NULL;
    if (!cm || !ct) {
        err = "out of memory";
    } else {
        for (int i = 0; i < h->n_meta; i++) cm[i] = (crc_meta){h->meta[2 * i], h->meta[2 * i + 1]};
        for (int i = 0; i < h->n; i++) {
            const st_entry *e = &h->e[i];
            ct[i] = (crc_tensor){e->name, e->st_name, e->ndim, e->shape, crc_update(0, data + e->begin, (size_t)(e->end - e->begin))};
        }
        char hex[9];
        snprintf(hex, sizeof hex, "%08x", content_crc(cm, h->n_meta, ct, h->n));
        if (strcmp(hex, recorded)) {
            snprintf(msg, cap,
                     "corrupted: its tensors or metadata are not what torc saved (checksum %s, recorded %.8s). If a tool "
                     "changed the file on purpose, remove the '" CRC_KEY "' entry from its metadata to load it unchecked",
                     hex, recorded);
            err = msg;
        }
    }
    free(cm);
    free(ct);
    return err;
}

// A U64 tensor loads as int64 only if every value fits; checked before anything loads.
static const char *check_widening(const st_header *h, const unsigned char *data, char *msg, size_t cap) {
    for (int i = 0; i < h->n; i++) {
        const st_entry *e = &h->e[i];
        if (strcmp(e->st_name, "U64")) continue;
        for (uint64_t at = e->begin; at < e->end; at += 8) {
            uint64_t v;
            memcpy(&v, data + at, 8);
            if (v > (uint64_t)INT64_MAX) {
                snprintf(msg, cap,
                         "tensor '%.80s' holds the uint64 value %llu (element %llu), which int64 cannot hold (torc has "
                         "no uint64 dtype and loads U64 tensors as int64)",
                         e->name, (unsigned long long)v, (unsigned long long)((at - e->begin) / 8));
                return msg;
            }
        }
    }
    return NULL;
}

torc_state_dict *torc_load(const char *path, torc_device *dev) {
    if (!path) return TORC_NULL_ARG_FAIL("torc_load: path is NULL");
    if (!dev && !(dev = torc_default_device())) return NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return io_error(path, "cannot open"), NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        io_error(path, "cannot stat");
        close(fd);
        return NULL;
    }
    const uint64_t size = (uint64_t)sb.st_size;
    if (size < 8) {
        close(fd);
        return TORC_FAIL_NULL(TORC_ERR_IO, "'%s' is not a safetensors file: truncated (%llu bytes, less than the 8-byte header size)",
                              path, (unsigned long long)size);
    }
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return io_error(path, "cannot map"), NULL;
    const unsigned char *base = map;
    uint64_t hsize;
    memcpy(&hsize, base, 8);
    st_header h = {0};
    torc_state_dict *sd = NULL;
    char msg[320];
    const char *err = NULL;
    if (hsize > MAX_HEADER) {
        snprintf(msg, sizeof msg, "header size %llu is larger than safetensors allows (corrupted?)", (unsigned long long)hsize);
        err = msg;
    } else if (hsize > size - 8) {
        snprintf(msg, sizeof msg, "truncated: the header needs %llu bytes but the file has %llu after the size field",
                 (unsigned long long)hsize, (unsigned long long)(size - 8));
        err = msg;
    } else if (hsize == 0 || base[8] != '{') {
        err = "the header does not start with '{' (not a safetensors file, or corrupted)";
    } else {
        jp p = {(const char *)base + 8, (const char *)base + 8 + hsize, NULL};
        parse_header(&p, &h);
        err = p.err ? p.err : check_layout(&h, size - 8 - hsize, msg, sizeof msg);
    }
    const unsigned char *data = base + 8 + (err ? 0 : hsize);
    if (!err) err = check_content(&h, data, msg, sizeof msg);
    if (!err) err = check_widening(&h, data, msg, sizeof msg);
    if (!err) {
        sd = torc_state_dict_new();
        torc_status st = sd ? TORC_OK : TORC_ERR_OOM;
        for (int i = 0; i < h.n_meta && !st; i++)
            if (strcmp(h.meta[2 * i], CRC_KEY)) st = torc_state_dict_set_meta(sd, h.meta[2 * i], h.meta[2 * i + 1]);
        for (int i = 0; i < h.n && !st; i++) {
            const st_entry *e = &h.e[i];
            torc_tensor *t = torc__new(dev, e->dtype, e->ndim, e->shape);
            if (!t) {
                st = torc_last_status();
                break;
            }
            const size_t nb = torc_nbytes(t);
            void *dst = (char *)t->storage->data;
            const unsigned char *src = data + e->begin;
            void *wide = NULL;  // U16 / U32 widened to torc's dtype
            if (nb && e->file_size != torc_dtype_size(e->dtype)) {
                if (!(wide = malloc(nb))) st = torc__error(TORC_ERR_OOM, "out of host memory widening '%s'", e->name);
                else widen(wide, src, e->file_size, nb / torc_dtype_size(e->dtype)), src = wide;
            }
            if (nb && !st) {
                if (dev->host_memory) memcpy(dst, src, nb);
                else st = torc__dev_copy(dev, dst, src, nb, TORC_COPY_HOST_TO_DEVICE);
            }
            free(wide);
            if (!st) st = torc_state_dict_set(sd, e->name, t);
            torc_release(t);
        }
        if (st) {
            char why[512];
            snprintf(why, sizeof why, "%s", torc_last_error());
            torc_state_dict_free(sd);
            sd = NULL;
            torc__error(st, "loading '%s': %s", path, why);
        }
    } else {
        torc__error(TORC_ERR_IO, "cannot load '%s': %s", path, err);
    }
    header_free(&h);
    munmap(map, (size_t)size);
    return sd;
}
