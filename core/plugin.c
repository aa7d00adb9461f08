// core/plugin.c — where torc looks for its dlopen'ed plugins (backends and optimizers alike):
// the directories of TORC_PLUGIN_PATH in order, then <directory of libtorc.so>/torc.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc-impl.h"

// The directory holding libtorc.so, + "/torc": the install tree and the build tree agree, so an
// installed torc finds its plugins without any environment variable.
static void own_plugin_dir(char *buf, size_t n) {
    Dl_info info;
    buf[0] = '\0';
    if (dladdr((void *)own_plugin_dir, &info) && info.dli_fname) {
        snprintf(buf, n, "%s", info.dli_fname);
        char *slash = strrchr(buf, '/');
        if (slash) snprintf(slash, n - (size_t)(slash - buf), "/torc");
        else snprintf(buf, n, "torc");
    }
}

bool torc__plugin_dirs_each(bool (*fn)(const char *dir, void *ctx), void *ctx) {
    const char *env = getenv("TORC_PLUGIN_PATH");
    if (env && *env) {
        char *copy = strdup(env);
        if (copy) {
            char *save = NULL;
            for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save))
                if (fn(d, ctx)) {
                    free(copy);
                    return true;
                }
            free(copy);
        }
    }
    char own[512];
    own_plugin_dir(own, sizeof own);
    return own[0] && fn(own, ctx);
}

void torc__tried_append(char *tried, size_t cap, const char *path, const char *why) {
    size_t used = strlen(tried);
    if (used < cap) snprintf(tried + used, cap - used, "\n  %s: %s", path, why);
}
