// core/state_dict.c — torc_state_dict: an ordered map of named tensors plus a string metadata
// map, the in-memory shape of a safetensors file (model weights, optimizer state, checkpoints).
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "torc-impl.h"

typedef struct sd_entry {
    char *name;
    torc_tensor *t;   // retained
} sd_entry;

typedef struct sd_meta {
    char *key, *value;
} sd_meta;

// ---- name lookup ----
// An open-addressing hash index beside each array, so that loading a file of n names costs O(n)
// string compares, not O(n^2): a hostile 100 MB safetensors header holds millions of names.
typedef struct name_index {
    int *slot;   // entry + 1; 0 = empty
    size_t cap;  // a power of 2, at least twice the entries
} name_index;

// The key of entry i of an array whose elements start with their char * key.
#define KEY(base, stride, i) (*(char *const *)((const char *)(base) + (size_t)(i) * (stride)))

static uint64_t hash_name(const char *s) {  // FNV-1a
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int index_find(const name_index *ix, const void *base, size_t stride, const char *name) {
    if (!ix->cap) return -1;
    for (size_t i = hash_name(name) & (ix->cap - 1);; i = (i + 1) & (ix->cap - 1)) {
        if (!ix->slot[i]) return -1;
        if (!strcmp(KEY(base, stride, ix->slot[i] - 1), name)) return ix->slot[i] - 1;
    }
}

static void index_put(name_index *ix, const void *base, size_t stride, int e) {
    size_t i = hash_name(KEY(base, stride, e)) & (ix->cap - 1);
    while (ix->slot[i]) i = (i + 1) & (ix->cap - 1);
    ix->slot[i] = e + 1;
}

// Room for one more than the n entries indexed now; false (index unchanged) when out of memory.
static bool index_reserve(name_index *ix, const void *base, size_t stride, int n) {
    if ((size_t)(n + 1) * 2 <= ix->cap) return true;
    size_t cap = ix->cap ? ix->cap * 2 : 32;
    while ((size_t)(n + 1) * 2 > cap) cap *= 2;
    int *slot = calloc(cap, sizeof *slot);
    if (!slot) return false;
    free(ix->slot);
    ix->slot = slot;
    ix->cap = cap;
    for (int e = 0; e < n; e++) index_put(ix, base, stride, e);
    return true;
}

struct torc_state_dict {
    sd_entry *e;
    int n, cap;
    name_index e_index;
    sd_meta *m;
    int n_meta, cap_meta;
    name_index m_index;
};

torc_state_dict *torc_state_dict_new(void) {
    torc_state_dict *sd = calloc(1, sizeof *sd);
    if (!sd) torc__error(TORC_ERR_OOM, "out of memory for a state dict");
    return sd;
}

void torc_state_dict_free(torc_state_dict *sd) {
    if (!sd) return;
    for (int i = 0; i < sd->n; i++) {
        free(sd->e[i].name);
        torc_release(sd->e[i].t);
    }
    for (int i = 0; i < sd->n_meta; i++) {
        free(sd->m[i].key);
        free(sd->m[i].value);
    }
    free(sd->e);
    free(sd->m);
    free(sd->e_index.slot);
    free(sd->m_index.slot);
    free(sd);
}

static int find(const torc_state_dict *sd, const char *name) {
    return index_find(&sd->e_index, sd->e, sizeof *sd->e, name);
}

static int find_meta(const torc_state_dict *sd, const char *key) {
    return index_find(&sd->m_index, sd->m, sizeof *sd->m, key);
}

torc_status torc_state_dict_set(torc_state_dict *sd, const char *name, torc_tensor *t) {
    if (!sd || !name || !*name || !t) return torc__error(TORC_ERR_INVALID_ARG, "torc_state_dict_set: NULL or empty argument");
    int i = find(sd, name);
    if (i >= 0) {
        torc_retain(t);
        torc_release(sd->e[i].t);
        sd->e[i].t = t;
        return TORC_OK;
    }
    if (!index_reserve(&sd->e_index, sd->e, sizeof *sd->e, sd->n)) return torc__error(TORC_ERR_OOM, "out of memory");
    if (sd->n == sd->cap) {
        int nc = sd->cap ? sd->cap * 2 : 16;
        sd_entry *ne = realloc(sd->e, sizeof *ne * (size_t)nc);
        if (!ne) return torc__error(TORC_ERR_OOM, "out of memory");
        sd->e = ne;
        sd->cap = nc;
    }
    char *copy = strdup(name);
    if (!copy) return torc__error(TORC_ERR_OOM, "out of memory");
    sd->e[sd->n] = (sd_entry){copy, torc_retain(t)};
    index_put(&sd->e_index, sd->e, sizeof *sd->e, sd->n++);
    return TORC_OK;
}

torc_tensor *torc__state_dict_peek(const torc_state_dict *sd, const char *name) {
    if (!sd || !name) return NULL;
    int i = find(sd, name);
    return i < 0 ? NULL : sd->e[i].t;
}

torc_tensor *torc_state_dict_get(const torc_state_dict *sd, const char *name) {
    if (!sd || !name) return TORC_FAIL_NULL(TORC_ERR_INVALID_ARG, "torc_state_dict_get: NULL argument");
    torc_tensor *t = torc__state_dict_peek(sd, name);
    if (!t) return TORC_FAIL_NULL(TORC_ERR_INDEX, "state dict has no tensor '%s'", name);
    return torc__register(torc_retain(t));
}

bool torc_state_dict_contains(const torc_state_dict *sd, const char *name) {
    return torc__state_dict_peek(sd, name) != NULL;
}

int torc_state_dict_size(const torc_state_dict *sd) { return sd ? sd->n : 0; }

const char *torc_state_dict_name(const torc_state_dict *sd, int i) {
    return sd && i >= 0 && i < sd->n ? sd->e[i].name : NULL;
}

torc_status torc_state_dict_set_meta(torc_state_dict *sd, const char *key, const char *value) {
    if (!sd || !key || !*key || !value)
        return torc__error(TORC_ERR_INVALID_ARG, "torc_state_dict_set_meta: NULL or empty argument");
    char *v = strdup(value);
    if (!v) return torc__error(TORC_ERR_OOM, "out of memory");
    int i = find_meta(sd, key);
    if (i >= 0) {
        free(sd->m[i].value);
        sd->m[i].value = v;
        return TORC_OK;
    }
    if (!index_reserve(&sd->m_index, sd->m, sizeof *sd->m, sd->n_meta)) {
        free(v);
        return torc__error(TORC_ERR_OOM, "out of memory");
    }
    if (sd->n_meta == sd->cap_meta) {
        int nc = sd->cap_meta ? sd->cap_meta * 2 : 16;
        sd_meta *nm = realloc(sd->m, sizeof *nm * (size_t)nc);
        if (!nm) {
            free(v);
            return torc__error(TORC_ERR_OOM, "out of memory");
        }
        sd->m = nm;
        sd->cap_meta = nc;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return torc__error(TORC_ERR_OOM, "out of memory");
    }
    sd->m[sd->n_meta] = (sd_meta){k, v};
    index_put(&sd->m_index, sd->m, sizeof *sd->m, sd->n_meta++);
    return TORC_OK;
}

const char *torc_state_dict_get_meta(const torc_state_dict *sd, const char *key) {
    if (!sd || !key) return NULL;
    int i = find_meta(sd, key);
    return i < 0 ? NULL : sd->m[i].value;
}

int torc_state_dict_meta_size(const torc_state_dict *sd) { return sd ? sd->n_meta : 0; }

const char *torc_state_dict_meta_key(const torc_state_dict *sd, int i) {
    return sd && i >= 0 && i < sd->n_meta ? sd->m[i].key : NULL;
}
