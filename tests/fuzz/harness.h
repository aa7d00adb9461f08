// tests/fuzz/harness.h — what every harness shares.
// Fuzzer side: ASan's defaults. An input may ask torc for any amount of memory ("c=99999999" to
// torc_repeat); a request past max_allocation_size_mb gets NULL, as from a full machine, which
// torc must report as TORC_ERR_OOM. That is the behaviour under test; actually allocating it
// would only exhaust the machine.
// Seed side: built with -DTORC_FUZZ_SEEDS (the fuzz_<name>_seeds program, run by ctest before
// the smoke), a harness writes its starting corpus into argv[1] with fuzz_seed() from its
// fuzz_write_seeds().
#ifndef TORC_FUZZ_HARNESS_H
#define TORC_FUZZ_HARNESS_H

const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1:max_allocation_size_mb=256"; }

#ifdef TORC_FUZZ_SEEDS
#include <stdio.h>
#include <stdlib.h>

static const char *fuzz_seed_dir;
static int fuzz_seed_count;

// Writes one seed file (seed_<n>) into the corpus directory; exits on an I/O error.
static void fuzz_seed(const void *data, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/seed_%03d", fuzz_seed_dir, fuzz_seed_count++);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

static void fuzz_write_seeds(void);  // each harness defines it

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    fuzz_seed_dir = argv[1];
    setenv("TORC_BACKEND", "reference", 0);  // the seeds are files: any backend writes the same
    fuzz_write_seeds();
    printf("%d seeds in %s\n", fuzz_seed_count, fuzz_seed_dir);
    return 0;
}
#endif

#endif
