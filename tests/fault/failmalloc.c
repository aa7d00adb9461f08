// tests/fault/failmalloc.c — an LD_PRELOAD shim that makes allocations fail on demand, for the
// allocation-failure sweep: after the program calls failmalloc_start(), allocation number
// FAILMALLOC_NTH (1-based, counted over every thread) fails, and with FAILMALLOC_STICKY=1 so does
// every later one. malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign and valloc
// are interposed; glibc's __libc_* entry points do the real work (no dlsym, which allocates).
//
// FAILMALLOC_SPARE="libdnnl.so:libgomp.so:ld-linux" never fails (but counts) an allocation
// called directly from a library whose path contains one of those names: for third-party code
// that cannot survive a failed allocation, which torc cannot change (see the README's "Out of
// memory"). Allocations such a library makes through operator new are called from libstdc++,
// so they still fail, and what they throw must be caught by torc.
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>
#include <string.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

#define EXPORT __attribute__((visibility("default")))

static _Atomic bool g_counting;
static _Atomic long g_count, g_failed;
static long g_nth;
static bool g_sticky;

static long env_long(const char *name) {
    const char *s = getenv(name);  // getenv allocates nothing
    long v = 0;
    for (; s && *s >= '0' && *s <= '9'; s++) v = v * 10 + (*s - '0');
    return v;
}

// The code ranges of the spared libraries, found when counting starts.
#define MAX_SPARED 16
static struct { uintptr_t lo, hi; } g_spared[MAX_SPARED];
static int g_n_spared;
static bool spared(uintptr_t pc);

static int find_spared(struct dl_phdr_info *info, size_t size, void *names) {
    (void)size;
    if (!info->dlpi_name || !*info->dlpi_name) return 0;
    for (const char *n = names; *n && g_n_spared < MAX_SPARED;) {
        const char *end = strchr(n, ':');
        const size_t len = end ? (size_t)(end - n) : strlen(n);
        bool match = false;
        for (const char *p = info->dlpi_name; *p && !match; p++) match = len && !strncmp(p, n, len);
        if (match)
            for (int i = 0; i < info->dlpi_phnum && g_n_spared < MAX_SPARED; i++)
                if (info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X)) {
                    g_spared[g_n_spared].lo = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
                    g_spared[g_n_spared].hi = g_spared[g_n_spared].lo + info->dlpi_phdr[i].p_memsz;
                    g_n_spared++;
                }
        n += len + (end != NULL);
    }
    return 0;
}

// A segfault whose faulting instruction is inside a spared library, after an allocation was
// made to fail, is that library not checking the allocation: say so on stderr (sweep.sh counts
// those apart), then let the signal end the process as it would have.
static void on_segv(int sig, siginfo_t *info, void *ctx) {
    (void)sig, (void)info;
    const uintptr_t pc = (uintptr_t)((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP];
    static const char msg[] = "failmalloc: SIGSEGV inside a spared library after an injected failure\n";
    if (atomic_load(&g_failed) > 0 && spared(pc)) {
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
    }
}

// Starts counting allocations (FAILMALLOC_NTH = 0: count only, fail nothing).
EXPORT void failmalloc_start(void) {
    g_nth = env_long("FAILMALLOC_NTH");
    g_sticky = env_long("FAILMALLOC_STICKY") != 0;
    const char *spare = getenv("FAILMALLOC_SPARE");
    g_n_spared = 0;
    if (spare && *spare) dl_iterate_phdr(find_spared, (void *)spare);
    struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_RESETHAND};
    sigaction(SIGSEGV, &sa, NULL);  // after the handler returns, the fault repeats and kills
    atomic_store(&g_count, 0);
    atomic_store(&g_failed, 0);
    atomic_store(&g_counting, true);
}
// Stops; returns the number of allocations counted since the start.
EXPORT long failmalloc_stop(void) {
    atomic_store(&g_counting, false);
    return atomic_load(&g_count);
}
EXPORT long failmalloc_failed(void) { return atomic_load(&g_failed); }

static bool spared(uintptr_t pc) {
    for (int i = 0; i < g_n_spared; i++)
        if (pc >= g_spared[i].lo && pc < g_spared[i].hi) return true;
    return false;
}

// caller: the return address of the interposed function, i.e. the code that asked for memory.
static bool fail_now(void *caller) {
    if (!atomic_load_explicit(&g_counting, memory_order_relaxed)) return false;
    const long k = atomic_fetch_add(&g_count, 1) + 1;
    if (g_nth <= 0 || k < g_nth || (k > g_nth && !g_sticky)) return false;
    if (spared((uintptr_t)caller)) return false;
    atomic_fetch_add(&g_failed, 1);
    errno = ENOMEM;
    return true;
}

EXPORT void *malloc(size_t n) { return fail_now(__builtin_return_address(0)) ? NULL : __libc_malloc(n); }
EXPORT void *calloc(size_t a, size_t b) { return fail_now(__builtin_return_address(0)) ? NULL : __libc_calloc(a, b); }
EXPORT void *realloc(void *p, size_t n) { return fail_now(__builtin_return_address(0)) ? NULL : __libc_realloc(p, n); }
EXPORT void *memalign(size_t al, size_t n) { return fail_now(__builtin_return_address(0)) ? NULL : __libc_memalign(al, n); }
EXPORT void *aligned_alloc(size_t al, size_t n) { return fail_now(__builtin_return_address(0)) ? NULL : __libc_memalign(al, n); }
EXPORT void *valloc(size_t n) { return fail_now(__builtin_return_address(0)) ? NULL : __libc_memalign(4096, n); }
EXPORT int posix_memalign(void **out, size_t al, size_t n) {
    if (al < sizeof(void *) || (al & (al - 1))) return EINVAL;
    if (fail_now(__builtin_return_address(0))) return ENOMEM;
    void *p = __libc_memalign(al, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
