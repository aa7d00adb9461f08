// torc/plugin_error.h — the per-thread error text behind a plugin's last_error(), for backends
// (and any other plugin kind) to include: setting and reading it never allocates, so it can report
// running out of memory. Header only; plain C11 or C++11 with GCC or Clang, and pthreads.
//
// Use: in exactly one source file of the plugin,
//     TORC_PLUGIN_ERROR_DEFINE(mine)
// defines, with hidden visibility,
//     int mine_error(int status, const char *fmt, ...);  // sets this thread's text, returns status
//     const char *mine_last_error(void *ctx);            // this thread's text ("" if none): the
//                                                        // vtable's last_error, ctx unused
// and other files of the same plugin declare them with TORC_PLUGIN_ERROR_DECLARE(mine).
//     if (!p) return mine_error(TORC_ERR_OOM, "mine: cannot allocate %zu bytes", n);
//
// Why not a _Thread_local buffer: glibc gives a dlopen'ed library's thread-locals memory from
// malloc on each thread's first access and aborts the process when that fails ("cannot allocate
// memory for thread-local data"). Here the texts live in a static pool of TORC_PLUGIN_ERROR_SLOTS
// slots of TORC_PLUGIN_ERROR_LEN bytes (defaults 256 and 1024: 256 KiB of zero pages) and each
// thread keeps only a pointer to its slot, in initial-exec TLS, which sits in the static block
// every thread is created with (if none is left, dlopen fails cleanly instead). A thread takes a
// slot at its first message and gives it back when it exits; a thread that finds every slot
// taken shares one last slot with any others that did, where one may overwrite another's text.
// A text is formatted on the stack with vsnprintf (glibc's needs no memory for the usual
// conversions), truncated to fit, so a message may quote the thread's previous one:
//     return mine_error(st, "init: %s", mine_last_error(NULL));
#ifndef TORC_PLUGIN_ERROR_H
#define TORC_PLUGIN_ERROR_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifndef TORC_PLUGIN_ERROR_SLOTS
#define TORC_PLUGIN_ERROR_SLOTS 256  // a multiple of 64: threads with a text of their own at once
#endif
#ifndef TORC_PLUGIN_ERROR_LEN
#define TORC_PLUGIN_ERROR_LEN 1024  // bytes of one text, its terminating NUL included
#endif
#if TORC_PLUGIN_ERROR_SLOTS % 64 != 0 || TORC_PLUGIN_ERROR_SLOTS < 64
#error "TORC_PLUGIN_ERROR_SLOTS must be a positive multiple of 64"
#endif

#ifdef __cplusplus
#define TORC__PE_LINKAGE extern "C" __attribute__((visibility("hidden")))
#else
#define TORC__PE_LINKAGE __attribute__((visibility("hidden")))
#endif

struct torc_plugin_errors;
typedef struct torc_plugin_error_slot {
    struct torc_plugin_errors *owner;
    unsigned index;
    char text[TORC_PLUGIN_ERROR_LEN];
} torc_plugin_error_slot;

// One plugin's pool (zero-initialised static storage is its initial state).
typedef struct torc_plugin_errors {
    torc_plugin_error_slot slot[TORC_PLUGIN_ERROR_SLOTS + 1];  // the last: shared by the overflow
    uint64_t used[TORC_PLUGIN_ERROR_SLOTS / 64];               // bit i: slot i has a thread
    pthread_key_t key;  // its destructor returns an exiting thread's slot
    int key_state;      // 0 not made, 1 being made, 2 made, 3 failed (slots are then never returned)
} torc_plugin_errors;

// A thread's slot goes back to the pool when the thread exits; the next owner starts empty.
static inline void torc__plugin_error_release(void *v) {
    torc_plugin_error_slot *s = (torc_plugin_error_slot *)v;
    s->text[0] = '\0';
    __atomic_fetch_and(&s->owner->used[s->index / 64], ~(UINT64_C(1) << (s->index % 64)), __ATOMIC_RELEASE);
}

// This thread's text buffer: its slot, taking one at the first call; the shared last slot, for
// the rest of the thread's life, when every slot is taken.
static inline char *torc_plugin_error_buffer(torc_plugin_errors *p, torc_plugin_error_slot **mine) {
    if (*mine) return (*mine)->text;
    int state = __atomic_load_n(&p->key_state, __ATOMIC_ACQUIRE), zero = 0;
    if (state == 0 && __atomic_compare_exchange_n(&p->key_state, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        state = pthread_key_create(&p->key, torc__plugin_error_release) == 0 ? 2 : 3;
        __atomic_store_n(&p->key_state, state, __ATOMIC_RELEASE);
    }
    while (state < 2) state = __atomic_load_n(&p->key_state, __ATOMIC_ACQUIRE);  // another thread makes it
    for (unsigned w = 0; w < TORC_PLUGIN_ERROR_SLOTS / 64 && !*mine; w++) {
        uint64_t used = __atomic_load_n(&p->used[w], __ATOMIC_ACQUIRE);
        while (~used && !*mine) {
            const unsigned bit = (unsigned)__builtin_ctzll(~used);
            if (__atomic_compare_exchange_n(&p->used[w], &used, used | UINT64_C(1) << bit, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                torc_plugin_error_slot *s = &p->slot[w * 64 + bit];
                s->owner = p;
                s->index = w * 64 + bit;
                *mine = s;
                // Without the key (or if setspecific cannot allocate) the slot is never returned.
                if (state == 2) pthread_setspecific(p->key, s);
            }
        }
    }
    if (!*mine) *mine = &p->slot[TORC_PLUGIN_ERROR_SLOTS];  // never returned: it has no owner
    return (*mine)->text;
}

static inline void torc_plugin_error_vset(torc_plugin_errors *p, torc_plugin_error_slot **mine, const char *fmt,
                                          va_list ap) {
    char buf[TORC_PLUGIN_ERROR_LEN];  // first here: the arguments may quote the current text
    vsnprintf(buf, sizeof buf, fmt, ap);
    memcpy(torc_plugin_error_buffer(p, mine), buf, sizeof buf);
}

// Declares (DECLARE) or defines (DEFINE, in one file) prefix_error and prefix_last_error.
#define TORC_PLUGIN_ERROR_DECLARE(prefix)                                                                \
    TORC__PE_LINKAGE int prefix##_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3))); \
    TORC__PE_LINKAGE const char *prefix##_last_error(void *ctx);

#define TORC_PLUGIN_ERROR_DEFINE(prefix)                                                                 \
    TORC_PLUGIN_ERROR_DECLARE(prefix)                                                                    \
    static torc_plugin_errors prefix##_errors_;                                                          \
    static __thread torc_plugin_error_slot *prefix##_error_slot_ __attribute__((tls_model("initial-exec"))); \
    TORC__PE_LINKAGE int prefix##_error(int status, const char *fmt, ...) {                              \
        va_list ap;                                                                                      \
        va_start(ap, fmt);                                                                               \
        torc_plugin_error_vset(&prefix##_errors_, &prefix##_error_slot_, fmt, ap);                       \
        va_end(ap);                                                                                      \
        return status;                                                                                   \
    }                                                                                                    \
    TORC__PE_LINKAGE const char *prefix##_last_error(void *ctx) {                                        \
        (void)ctx;                                                                                       \
        return prefix##_error_slot_ ? prefix##_error_slot_->text : "";                                   \
    }

#endif
