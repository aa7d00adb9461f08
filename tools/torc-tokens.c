// tools/torc-tokens.c — turns text files and file trees into byte-level token files (vocab 256,
// one token per byte) with a train/val split, so a language model trains on nothing downloaded.
//
//   torc-tokens --out-dir DIR [--val-fraction 0.1] [--format llmc|bin] [--verbose] INPUT...
//
// Inputs are files or directories, walked recursively in byte order of their names (the same
// files in the same order on every machine), skipping .git, symbolic links to directories and
// binary files (any NUL byte: torc-tokens' own outputs among them, so a tree holding DIR is safe). Each file is a document: byte 0 (which no text
// file holds) before it, as llm.c puts <|endoftext|> before every document, then its bytes. Its
// last val-fraction, from the next line start on, goes to val.bin and the rest to train.bin, so
// both splits see every file. Output: DIR/train.bin and DIR/val.bin, llm.c shards (a 1024-byte
// header with the token count, then uint16 tokens) or raw uint16 (nanoGPT's .bin), each written
// to a temporary, checked by reading it back with torc_tokens_open and renamed into place only
// when both are complete: on any error nothing is written.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <torc/torc.h>

// ---- errors: one message, the temporaries removed, exit 1 (2 for usage) ----
static char g_tmp[2][4200];  // the temporaries, removed on any error
static char *g_made[64];      // the directories --out-dir made, removed on an error
static int g_n_made;

static void cleanup(void) {
    for (int i = 0; i < 2; i++)
        if (g_tmp[i][0]) unlink(g_tmp[i]);
    while (g_n_made > 0) rmdir(g_made[--g_n_made]);
}

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("torc-tokens: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    cleanup();
    exit(1);
}

static void usage(FILE *f) {
    fputs("usage: torc-tokens --out-dir DIR [--val-fraction F] [--format llmc|bin] [--verbose] INPUT...\n"
          "Turns text files and directories of them into byte-level token files (vocab 256, one token a byte)\n"
          "for training a language model: DIR/train.bin and DIR/val.bin.\n"
          "\n"
          "  --out-dir DIR       where train.bin and val.bin go (made if missing)\n"
          "  --val-fraction F    each file's last F (from the next line start on) goes to val.bin; 0 < F < 1\n"
          "                      (default 0.1)\n"
          "  --format FMT        llmc: llm.c shards (a 1024-byte header: magic 20240520, version 1, token\n"
          "                      count; then uint16 tokens), the default; bin: raw uint16 tokens (nanoGPT's .bin)\n"
          "  --verbose           list every file taken or skipped\n"
          "  --help              this text\n"
          "\n"
          "Directories are walked in byte order of names, skipping .git, symbolic links to directories and\n"
          "binary files (a NUL byte; token files among them). Byte 0 marks the start of every file's text in both splits. Nothing\n"
          "is written on an error. Exit status: 0 written, 1 an error, 2 a usage error.\n"
          "Read the files with torc_tokens_open(path, TORC_TOKENS_AUTO, 256).\n",
          f);
}

__attribute__((format(printf, 1, 2), noreturn)) static void usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("torc-tokens: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (torc-tokens --help)\n", stderr);
    va_end(ap);
    exit(2);
}

// ---- the files to read ----
typedef struct file_list {
    char **path;
    const char **skip;  // why an entry is not read (NULL: read it), listed in order under --verbose
    int n, cap;
    int binary, empty, other;  // skipped
} file_list;

static bool g_verbose;

static void add_file(file_list *fl, const char *path, const char *skip) {
    if (fl->n == fl->cap) {
        fl->cap = fl->cap ? 2 * fl->cap : 256;
        char **p = realloc(fl->path, sizeof *p * (size_t)fl->cap);
        if (p) fl->path = p;
        const char **q = p ? realloc(fl->skip, sizeof *q * (size_t)fl->cap) : NULL;
        if (!q) die("out of memory");
        fl->skip = q;
    }
    fl->skip[fl->n] = skip;
    if (!(fl->path[fl->n++] = strdup(path))) die("out of memory");
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void walk(file_list *fl, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) die("cannot read directory '%s': %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, ".git")) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **p = realloc(names, sizeof *p * (size_t)cap);
            if (!p) die("out of memory");
            names = p;
        }
        if (!(names[n++] = strdup(e->d_name))) die("out of memory");
    }
    if (errno) die("cannot read directory '%s': %s", dir, strerror(errno));
    closedir(d);
    if (n) qsort(names, (size_t)n, sizeof *names, by_name);  // (names is NULL in an empty directory)
    for (int i = 0; i < n; i++) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", names[i]) >= (int)sizeof path)
            die("path too long: '%s/%s'", dir, names[i]);
        free(names[i]);
        struct stat sb;
        if (lstat(path, &sb)) die("cannot read '%s': %s", path, strerror(errno));
        if (S_ISLNK(sb.st_mode) && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
            add_file(fl, path, "a link to a directory");  // which may lead back up the tree
        else if (S_ISDIR(sb.st_mode))
            walk(fl, path);
        else if (S_ISREG(sb.st_mode))
            add_file(fl, path, NULL);
        else
            add_file(fl, path, "not a regular file");  // a broken link, a socket, a device
    }
    free(names);
}

// ---- writing tokens ----
typedef struct out_file {
    FILE *f;
    int64_t count;
    uint16_t buf[1 << 15];
    int n;
} out_file;

static void put(out_file *o, const unsigned char *bytes, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        o->buf[o->n++] = bytes[i];
        if (o->n == (int)(sizeof o->buf / sizeof o->buf[0])) {
            if (fwrite(o->buf, sizeof o->buf[0], (size_t)o->n, o->f) != (size_t)o->n)
                die("cannot write %s: %s", what, strerror(errno));
            o->n = 0;
        }
    }
    o->count += (int64_t)n;
}

// Where file bytes m[0, n) split: the last `frac` of it, moved on to the next line's start, or
// back to the start of its line when the rest is one line (so a short file still gives val text).
static size_t split_at(const unsigned char *m, size_t n, double frac) {
    const size_t cut = n - (size_t)((double)n * frac);
    if (cut == 0 || cut >= n || m[cut - 1] == '\n') return cut;
    const unsigned char *nl = memchr(m + cut, '\n', n - cut);
    if (nl && nl + 1 < m + n) return (size_t)(nl - m) + 1;
    size_t back = cut;
    while (back > 0 && m[back - 1] != '\n') back--;
    return back ? back : cut;
}

static void open_tmp(int k, const char *dir, const char *name, out_file *o, bool llmc) {
    snprintf(g_tmp[k], sizeof g_tmp[k], "%s/%s.tmp.XXXXXX", dir, name);
    const int fd = mkstemp(g_tmp[k]);
    if (fd < 0) {
        const int e = errno;
        g_tmp[k][0] = '\0';
        die("cannot create a file in '%s': %s", dir, strerror(e));
    }
    const mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask)) die("cannot set the mode of '%s': %s", g_tmp[k], strerror(errno));
    if (!(o->f = fdopen(fd, "wb"))) die("cannot write '%s': %s", g_tmp[k], strerror(errno));
    static const int32_t zeros[256];
    if (llmc && fwrite(zeros, sizeof zeros, 1, o->f) != 1) die("cannot write '%s': %s", g_tmp[k], strerror(errno));
}

// Finishes a temporary: the header's count, flushed and synced to disk, then read back as torc
// will read it.
static void finish(int k, out_file *o, bool llmc) {
    if (o->n && fwrite(o->buf, sizeof o->buf[0], (size_t)o->n, o->f) != (size_t)o->n)
        die("cannot write '%s': %s", g_tmp[k], strerror(errno));
    if (llmc) {
        const int32_t head[3] = {20240520, 1, (int32_t)o->count};
        if (fflush(o->f) || fseek(o->f, 0, SEEK_SET) || fwrite(head, sizeof head, 1, o->f) != 1)
            die("cannot write '%s': %s", g_tmp[k], strerror(errno));
    }
    if (fflush(o->f) || fsync(fileno(o->f))) die("cannot write '%s': %s", g_tmp[k], strerror(errno));
    if (fclose(o->f)) die("cannot write '%s': %s", g_tmp[k], strerror(errno));
    o->f = NULL;
    torc_dataset *ds = torc_tokens_open(g_tmp[k], llmc ? TORC_TOKENS_LLMC : TORC_TOKENS_U16, 256);
    int64_t max_token = 0;
    if (!ds || torc_tokens_check(ds, &max_token)) die("reading back '%s' failed: %s", g_tmp[k], torc_last_error());
    if (torc_dataset_numel(ds) != o->count)
        die("reading back '%s' gave %" PRId64 " tokens, not the %" PRId64 " written", g_tmp[k], torc_dataset_numel(ds),
            o->count);
    torc_dataset_close(ds);
}

static void make_dirs(const char *dir) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) die("path too long: '%s'", dir);
    for (char *s = p + 1;; s++) {
        const bool end = *s == '\0';
        if (*s == '/' || end) {
            *s = '\0';
            if (!mkdir(p, 0777)) {
                if (g_n_made < 64 && !(g_made[g_n_made++] = strdup(p))) g_n_made--;
            } else if (errno != EEXIST) {
                die("cannot make directory '%s': %s", p, strerror(errno));
            }
            if (end) break;
            *s = '/';
        }
    }
    struct stat sb;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) die("'%s' is not a directory", dir);
}

static const char *human(double bytes, char *buf, size_t n) {
    const char *unit[] = {"B", "KB", "MB", "GB", "TB"};
    int u = 0;
    while (bytes >= 1000 && u < 4) bytes /= 1000, u++;
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
    return buf;
}

int main(int argc, char **argv) {
    const char *out_dir = NULL;
    double frac = 0.1;
    bool llmc = true, flags = true;
    char **inputs = calloc((size_t)argc, sizeof *inputs);
    int n_inputs = 0;
    if (!inputs) die("out of memory");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!flags || a[0] != '-' || !a[1]) {
            inputs[n_inputs++] = argv[i];
        } else if (!strcmp(a, "--")) {
            flags = false;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            free(inputs);
            return 0;
        } else if (!strcmp(a, "--verbose")) {
            g_verbose = true;
        } else if (!strcmp(a, "--out-dir") || !strcmp(a, "--val-fraction") || !strcmp(a, "--format")) {
            if (i + 1 >= argc) usage_error("%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--out-dir")) {
                if (!*v) usage_error("--out-dir is empty");
                out_dir = v;
            } else if (!strcmp(a, "--val-fraction")) {
                char *end;
                errno = 0;
                frac = strtod(v, &end);
                if (errno || end == v || *end || !(frac > 0 && frac < 1))
                    usage_error("--val-fraction '%s' is not a number between 0 and 1 (both excluded)", v);
            } else if (!strcmp(v, "llmc") || !strcmp(v, "bin")) {
                llmc = !strcmp(v, "llmc");
            } else {
                usage_error("--format '%s' is not llmc or bin", v);
            }
        } else {
            usage_error("unknown flag '%s'", a);
        }
    }
    if (!out_dir) usage_error("--out-dir DIR is required");
    if (!n_inputs) usage_error("no INPUT files or directories");

    // Every input is looked at before anything is made.
    for (int i = 0; i < n_inputs; i++) {
        struct stat sb;
        if (stat(inputs[i], &sb)) die("cannot read input '%s': %s", inputs[i], strerror(errno));
        if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode)) die("input '%s' is not a file or a directory", inputs[i]);
    }
    make_dirs(out_dir);
    file_list fl = {0};
    for (int i = 0; i < n_inputs; i++) {
        struct stat sb;
        if (stat(inputs[i], &sb)) die("cannot read input '%s': %s", inputs[i], strerror(errno));
        if (S_ISDIR(sb.st_mode)) walk(&fl, inputs[i]);
        else add_file(&fl, inputs[i], NULL);
    }

    static out_file train, val;
    open_tmp(0, out_dir, "train.bin", &train, llmc);
    open_tmp(1, out_dir, "val.bin", &val, llmc);
    int taken = 0;
    double bytes = 0;
    for (int i = 0; i < fl.n; i++) {
        const char *path = fl.path[i];
        if (fl.skip[i]) {
            fl.other++;
            if (g_verbose) printf("  skip  %s (%s)\n", path, fl.skip[i]);
            continue;
        }
        const int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb)) die("cannot read '%s': %s", path, strerror(errno));
        if (sb.st_size == 0) {
            close(fd);
            fl.empty++;
            if (g_verbose) printf("  skip  %s (empty)\n", path);
            continue;
        }
        const size_t n = (size_t)sb.st_size;
        const unsigned char *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (m == MAP_FAILED) die("cannot read '%s': %s", path, strerror(errno));
        madvise((void *)m, n, MADV_SEQUENTIAL);
        if (memchr(m, 0, n)) {
            fl.binary++;
            if (g_verbose) printf("  skip  %s (binary: a NUL byte)\n", path);
            munmap((void *)m, n);
            continue;
        }
        const size_t cut = split_at(m, n, frac);
        static const unsigned char start = 0;  // the document's start, as llm.c's <|endoftext|>
        put(&train, &start, 1, "train.bin");
        put(&train, m, cut, "train.bin");
        if (cut < n) {
            put(&val, &start, 1, "val.bin");
            put(&val, m + cut, n - cut, "val.bin");
        }
        if (g_verbose) printf("  take  %s (%zu bytes: %zu train, %zu val)\n", path, n, cut, n - cut);
        munmap((void *)m, n);
        taken++;
        bytes += (double)n;
        if (llmc && (train.count > INT32_MAX || val.count > INT32_MAX))
            die("more than 2^31 - 1 tokens, the most an llm.c shard's header counts: use --format bin");
        free(fl.path[i]);
        fl.path[i] = NULL;
    }
    if (!taken)
        die("no text files in the inputs (%d binary, %d empty, %d other skipped)", fl.binary, fl.empty, fl.other);
    if (!val.count)
        die("the val split is empty: the inputs are too short for --val-fraction %g (each file's last %g is under a byte)",
            frac, frac);
    finish(0, &train, llmc);
    finish(1, &val, llmc);
    char final[2][4200];
    snprintf(final[0], sizeof final[0], "%s/train.bin", out_dir);
    snprintf(final[1], sizeof final[1], "%s/val.bin", out_dir);
    for (int k = 0; k < 2; k++) {
        if (rename(g_tmp[k], final[k])) die("cannot rename '%s' to '%s': %s", g_tmp[k], final[k], strerror(errno));
        g_tmp[k][0] = '\0';
    }
    const int dfd = open(out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);  // the renames themselves
        close(dfd);
    }
    char hb[32];
    printf("torc-tokens: %d files, %s (skipped: %d binary, %d empty, %d other)\n", taken, human(bytes, hb, sizeof hb),
           fl.binary, fl.empty, fl.other);
    const char *fmt = llmc ? "llm.c shard" : "raw uint16";
    printf("%s: %" PRId64 " tokens (%s, vocab 256)\n", final[0], train.count, fmt);
    printf("%s: %" PRId64 " tokens (%s, vocab 256)\n", final[1], val.count, fmt);
    for (int i = 0; i < fl.n; i++) free(fl.path[i]);
    free(fl.path);
    free(fl.skip);
    free(inputs);
    return 0;
}
