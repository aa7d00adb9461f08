// tests/fault/kill_save.c — the kill test: a child process saves checkpoints back to back (every
// weight of save k equals k, and its step is k) and is killed with SIGKILL at a random moment,
// ROUNDS times. After each kill the checkpoint must load, hold one whole save (step s, every
// weight s, s no older than the last save the child reported done), and at most one temporary
// (the killed save's) may be next to it; the next save removes it. Finally one save runs to the
// end and no temporary is left. Usage: kill_save DIR [ROUNDS] (TORC_KILL_SEED=n replays a run).
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <torc/torc.h>

enum { N_TENSORS = 4, NUMEL = 1 << 20 };  // 16 MiB per save: long enough to be killed inside
static const char *const g_names[N_TENSORS] = {"a", "b", "c", "d"};

// ---- the child: save k = start, start + 1, ... (or only start with once) ----
static int child(const char *path, long start, bool once) {
    torc_tensor *t[N_TENSORS];
    for (int i = 0; i < N_TENSORS; i++)
        if (!(t[i] = torc_zeros(TORC_SHAPE(NUMEL), TORC_DTYPE_F32))) return fprintf(stderr, "%s\n", torc_last_error()), 1;
    for (long k = start;; k++) {
        for (int i = 0; i < N_TENSORS; i++)
            if (torc_fill_(t[i], torc_s((double)k))) return fprintf(stderr, "%s\n", torc_last_error()), 1;
        if (torc_checkpoint_save(path, N_TENSORS, g_names, t, NULL, k, NULL))
            return fprintf(stderr, "save %ld: %s\n", k, torc_last_error()), 1;
        printf("%ld\n", k);
        fflush(stdout);
        if (once) break;
    }
    for (int i = 0; i < N_TENSORS; i++) torc_release(t[i]);
    return 0;
}

// ---- the parent ----
static int temporaries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

// Loads the checkpoint: its step, and whether every weight equals it.
static int verify(const char *path, long *step) {
    torc_tensor *t[N_TENSORS];
    for (int i = 0; i < N_TENSORS; i++) t[i] = torc_zeros(TORC_SHAPE(NUMEL), TORC_DTYPE_F32);
    int64_t s = -1;
    int bad = 0;
    if (torc_checkpoint_load(path, N_TENSORS, g_names, t, NULL, &s, NULL)) {
        fprintf(stderr, "FAIL: the checkpoint does not load: %s\n", torc_last_error());
        bad = 1;
    }
    for (int i = 0; i < N_TENSORS && !bad; i++) {
        torc_scope_push();
        double lo = NAN, hi = NAN;
        if (torc_item(torc_amin(t[i], 0, NULL, false), &lo) || torc_item(torc_amax(t[i], 0, NULL, false), &hi) ||
            lo != (double)s || hi != (double)s) {
            fprintf(stderr, "FAIL: step %lld but tensor %s holds [%g, %g]\n", (long long)s, g_names[i], lo, hi);
            bad = 1;
        }
        torc_scope_pop();
    }
    for (int i = 0; i < N_TENSORS; i++) torc_release(t[i]);
    *step = (long)s;
    return bad;
}

// Starts the child; returns its pid and the read end of its stdout.
static pid_t spawn(const char *self, const char *path, long start, bool once, int *out) {
    int fds[2];
    if (pipe(fds)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        char s[32];
        snprintf(s, sizeof s, "%ld", start);
        execl(self, self, "--child", path, s, once ? "once" : "loop", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    *out = fds[0];
    return pid;
}

// Reads the saves the child reported within ms milliseconds; returns the last one (or last).
static long read_saves(int fd, int ms, long last) {
    char buf[256];
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        const long left = ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) return last;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        if (n <= 0) return last;
        buf[n] = '\0';
        for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) last = atol(line);
    }
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--child")) return child(argv[2], atol(argv[3]), !strcmp(argv[4], "once"));
    if (argc < 2) {
        fprintf(stderr, "usage: kill_save DIR [ROUNDS]\n");
        return 2;
    }
    const char *dir = argv[1];
    const int rounds = argc > 2 ? atoi(argv[2]) : 25;
    const char *env_seed = getenv("TORC_KILL_SEED");
    const unsigned seed = env_seed ? (unsigned)atol(env_seed) : (unsigned)time(NULL);
    srand(seed);
    char path[1024];
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    printf("kill_save: seed %u, %d rounds, %s\n", seed, rounds, path);

    int fd, status, bad = 0;
    // The first save runs to the end: from then on there is always a previous checkpoint.
    pid_t pid = spawn(argv[0], path, 1, true, &fd);
    long last = read_saves(fd, 60000, 0);
    close(fd);
    waitpid(pid, &status, 0);
    if (last != 1 || !WIFEXITED(status) || WEXITSTATUS(status)) return fprintf(stderr, "FAIL: the first save\n"), 1;
    int mid_save = 0;
    for (int r = 0; r < rounds && !bad; r++) {
        pid = spawn(argv[0], path, last + 1, false, &fd);
        // A random moment within about the first few saves, the child's start included.
        last = read_saves(fd, 20 + rand() % 400, last);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        last = read_saves(fd, 0, last);  // what it reported before dying
        close(fd);
        long step;
        bad |= verify(path, &step);
        const int tmps = temporaries(dir);
        mid_save += tmps;
        if (!bad && (step < last || step > last + 1)) {
            fprintf(stderr, "FAIL: round %d: the checkpoint holds step %ld, the last reported save was %ld\n", r, step, last);
            bad = 1;
        }
        if (tmps > 1) {
            fprintf(stderr, "FAIL: round %d: %d temporary files next to the checkpoint\n", r, tmps);
            bad = 1;
        }
        last = step;
    }
    // One save to the end: no temporary survives it.
    pid = spawn(argv[0], path, last + 1, true, &fd);
    read_saves(fd, 60000, last);
    close(fd);
    waitpid(pid, &status, 0);
    if (!bad && temporaries(dir) != 0) {
        fprintf(stderr, "FAIL: a temporary file survived the last save\n");
        bad = 1;
    }
    printf("kill_save: %d kills, %d of them inside a save (a temporary left), %s\n", rounds, mid_save,
           bad ? "FAILED" : "every checkpoint resumed");
    return bad;
}
