// tools/torc-generate.c — text from a GPT checkpoint (torc-train --model gpt's, a Hugging Face
// model.safetensors of GPT2LMHeadModel, or llm.c's gpt2_124M.bin): the prompt, then --tokens
// sampled tokens with torc_gpt_generate (a KV cache: each new token costs O(T)). Byte-level models
// (vocab 256) read and print text; others read and print token ids.
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "torc/gpt.h"
#include "torc/torc.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: torc-generate --checkpoint PATH [options]\n"
            "Samples text from a GPT: torc-train --model gpt's checkpoint, a Hugging Face\n"
            "GPT2LMHeadModel model.safetensors (give --n-head) or an llm.c model file (.bin, version 3).\n"
            "  --checkpoint PATH   the weights (required)\n"
            "  --prompt TEXT       what the text starts with: bytes for a byte-level model (vocab 256),\n"
            "                      token ids separated by spaces or commas otherwise (default: the start\n"
            "                      of a document, token 0, or 50256 for GPT-2's vocabulary)\n"
            "  --tokens N          tokens to sample (default 256)\n"
            "  --temperature X     divides the logits; 0 takes the most likely token (default 0.8)\n"
            "  --top-k K           sample among the K most likely tokens; 0: all (default 40)\n"
            "  --seed S            the sampling generator's seed (default 1337)\n"
            "  --n-head N          heads, for a Hugging Face file (its config.json has them, the weights not)\n"
            "  --backend NAME      device: reference, onednn, cuda, cpu (default: torc's best)\n"
            "  --stats             print the model and the tokens per second to stderr\n"
            "  -h, --help          this text\n"
            "Exit status: 0 done, 1 an error, 2 usage.\n");
}

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "torc-generate: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (try --help)\n");
    return 2;
}

static int fail(const char *what) {
    fprintf(stderr, "torc-generate: %s%s%s\n", what ? what : "", what ? ": " : "", torc_last_error());
    return 1;
}

static bool parse_i64(const char *s, int64_t min, int64_t max, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || end == s || *end || errno || v < min || v > max) return false;
    *out = v;
    return true;
}

// Whether path starts with llm.c's model magic (20240326, little-endian int32).
static bool is_llmc(const char *path) {
    FILE *f = fopen(path, "rb");
    int32_t magic = 0;
    const bool yes = f && fread(&magic, 4, 1, f) == 1 && magic == 20240326;
    if (f) fclose(f);
    return yes;
}

int main(int argc, char **argv) {
    const char *ckpt = NULL, *prompt = NULL, *backend = NULL;
    int64_t tokens = 256, top_k = 40, seed = 1337, n_head = 0;
    double temperature = 0.8;
    bool stats = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), 0;
        if (!strcmp(a, "--stats")) {
            stats = true;
            continue;
        }
        if (!v) return usage_error("%s needs a value", a);
        i++;
        if (!strcmp(a, "--checkpoint")) ckpt = v;
        else if (!strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "--backend")) backend = v;
        else if (!strcmp(a, "--tokens")) {
            if (!parse_i64(v, 0, 1 << 24, &tokens)) return usage_error("--tokens expects an integer from 0 to 16777216, got '%s'", v);
        } else if (!strcmp(a, "--top-k")) {
            if (!parse_i64(v, 0, INT32_MAX, &top_k)) return usage_error("--top-k expects an integer >= 0, got '%s'", v);
        } else if (!strcmp(a, "--seed")) {
            if (!parse_i64(v, 0, INT64_MAX, &seed)) return usage_error("--seed expects an integer >= 0, got '%s'", v);
        } else if (!strcmp(a, "--n-head")) {
            if (!parse_i64(v, 1, 65536, &n_head)) return usage_error("--n-head expects an integer from 1 to 65536, got '%s'", v);
        } else if (!strcmp(a, "--temperature")) {
            char *end = NULL;
            temperature = strtod(v, &end);
            if (end == v || *end || !(temperature >= 0) || temperature == INFINITY)
                return usage_error("--temperature expects a number >= 0, got '%s'", v);
        } else return usage_error("unknown option '%s'", a);
    }
    if (!ckpt) return usage_error("%s", "--checkpoint PATH is required");
    if (backend) {
        torc_device *dev = torc_device_get(backend);
        if (!dev || torc_set_default_device(dev)) return fail(NULL);
    }
    torc_gpt *m = is_llmc(ckpt) ? torc_gpt_from_llmc(ckpt) : torc_gpt_from_file(ckpt, n_head);
    if (!m) return fail(NULL);
    const torc_gpt_config *c = torc_gpt_get_config(m);
    const bool bytes = c->vocab_size == 256;  // byte-level (torc-tokens): text in, text out
    // The prompt as token ids.
    const size_t cap = prompt ? strlen(prompt) + 1 : 1;
    int64_t *ids = malloc(sizeof *ids * cap), n = 0;
    if (!ids) return fprintf(stderr, "torc-generate: out of memory\n"), 1;
    if (!prompt || !*prompt) ids[n++] = c->vocab_size == 50257 ? 50256 : 0;
    else if (bytes) {
        for (const unsigned char *p = (const unsigned char *)prompt; *p; p++) {
            if (*p >= c->vocab_size) {
                fprintf(stderr, "torc-generate: the prompt's byte %u is not in the model's vocabulary of %lld\n", *p,
                        (long long)c->vocab_size);
                return 1;
            }
            ids[n++] = *p;
        }
    } else {
        for (const char *p = prompt; *p;) {
            while (*p == ' ' || *p == ',') p++;
            if (!*p) break;
            char *end = NULL;
            errno = 0;
            long long v = strtoll(p, &end, 10);
            if (end == p || errno || v < 0 || v >= c->vocab_size) {
                fprintf(stderr, "torc-generate: --prompt: '%s' is not a token id below %lld (this model reads ids, not text)\n",
                        p, (long long)c->vocab_size);
                return 1;
            }
            ids[n++] = v, p = end;
        }
    }
    torc_generator *g = torc_generator_new((uint64_t)seed);
    torc_tensor *idx = torc_tensor_from(ids, TORC_SHAPE(1, n), TORC_DTYPE_I64);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    torc_tensor *out = idx && g ? torc_gpt_generate(m, idx, tokens, temperature, top_k, g) : NULL;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!out) return fail(NULL);
    int64_t *all = malloc(sizeof *all * (size_t)(n + tokens));
    if (!all || torc_copy_to_host(out, all, sizeof *all * (size_t)(n + tokens))) return fail(NULL);
    const bool from_start = !prompt || !*prompt;  // the start token is not part of the text
    for (int64_t i = from_start ? 1 : 0; i < n + tokens; i++) {
        if (bytes) putchar((int)all[i]);
        else printf("%lld%c", (long long)all[i], i + 1 < n + tokens ? ' ' : '\n');
    }
    if (bytes) putchar('\n');
    if (stats) {
        const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        fprintf(stderr, "torc-generate: %lld layers, n_embd %lld, vocab %lld: %lld tokens in %.3f s, %.1f tokens/s (KV cache)\n",
                (long long)c->n_layer, (long long)c->n_embd, (long long)c->vocab_size, (long long)tokens, s,
                s > 0 ? (double)tokens / s : 0.0);
    }
    free(all);
    free(ids);
    torc_release(out);
    torc_release(idx);
    torc_generator_free(g);
    torc_gpt_free(m);
    return 0;
}
