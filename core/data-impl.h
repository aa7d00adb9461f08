// core/data-impl.h — what core/data.c (datasets, batches) and core/tokens.c (token files) share:
// the dataset struct, the element types, mapping a file and reading a .npy header.
#ifndef TORC_DATA_IMPL_H
#define TORC_DATA_IMPL_H

#include "torc-impl.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "torc's dataset reader assumes a little-endian host"
#endif

// The element types a dataset file may hold (NumPy's names and .npy descr codes).
typedef struct torc__elem_type {
    const char *name;   // "uint16"
    char kind;          // 'u', 'i', 'f'
    int size;           // bytes
    torc_dtype out;     // what a batch holds: int64 for integers, the float dtype itself
} torc__elem_type;

// A NumPy dtype name ("uint16") or descr ("<u2", "|u1", "u2"); NULL if unknown.
const torc__elem_type *torc__elem_type_find(const char *s);

struct torc_dataset {
    char *path;
    void *map;
    size_t map_len;
    const unsigned char *data;   // the first element, at byte offset data_off of the file
    size_t data_off;
    const torc__elem_type *type;
    int64_t numel;
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    // Token files (torc_tokens_open): every element a batch reads is checked to be >= 0 and,
    // when vocab > 0, below vocab; a bad one is an error naming the file and its byte offset.
    bool tokens;
    torc_token_format format;    // TORC_TOKENS_AUTO for torc_dataset_open's datasets
    int64_t vocab;
    int64_t position;            // where torc_next_batch's next global batch starts
    // Staging for devices that are not host memory: two buffers used in turn, pinned when the
    // backend offers it, so one batch can be copied while the next is gathered.
    torc_device *stage_dev;
    void *stage[2];
    bool pinned;
    size_t stage_cap;
    int next;
    bool in_flight[2];
};

// Sets the error (the message formatted before ds, whose path it may name, is closed) and
// returns NULL.
torc_dataset *torc__data_fail(torc_dataset *ds, torc_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
// Maps path read-only (a regular, non-empty file; no read-ahead): a dataset with path, map and
// map_len set and nothing read yet, or NULL with "cannot open <what> 'path': ...", "<what>
// 'path' is empty", ... (TORC_ERR_IO; TORC_ERR_OOM).
torc_dataset *torc__data_map(const char *path, const char *what);
// Reads the .npy header at the start of ds's mapping (magic checked by the caller): sets type,
// ndim, shape, numel, data and data_off, checking the data's size against the header. want
// (NULL: any) is the type the caller asked for. On error closes ds and returns NULL.
torc_dataset *torc__npy_read(torc_dataset *ds, const torc__elem_type *want);
// A token file's element i is v, negative or not below its vocab: the error (TORC_ERR_IO) names
// the file, the token's byte offset and index.
torc_status torc__data_bad_token(const torc_dataset *ds, int64_t i, int64_t v);

#endif
