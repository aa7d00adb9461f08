// tools/torc-train.c — the course's training loop as a command: a Cruncher learns y = x @ w
// with w = 0..D-1 (mse_loss, backward, step, zero_grad), with checkpoints and an accounting summary.
//
// Shapes: B = batch, D = dim, L = layers. x (B, D) ~ randn, y (B) = x @ arange(D).
// The Cruncher is L Linear(D, D) without bias ("layers.i.weight", (D, D)) and a Linear(D, 1)
// ("final.weight", (D, 1)); its forward is x -> x @ W0 @ ... @ W(L-1) @ Wf, squeezed to (B).
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "torc/torc.h"

#include "train_args.h"

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "torc-train: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

// Exit-on-error checks: tools only, never the library.
#define CHECK(call) do { if ((call) != TORC_OK) die("%s", torc_last_error()); } while (0)
#define CHECK_PTR(p) do { if (!(p)) die("%s", torc_last_error()); } while (0)

// ---- output helpers ----
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *bytes_str(uint64_t b, char *buf, size_t n) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
    return buf;
}

static const char *si_str(double v, const char *unit, char *buf, size_t n) {
    const char *prefix[] = {"", "k", "M", "G", "T", "P", "E"};
    int p = 0;
    while (fabs(v) >= 1000 && p < 6) v /= 1000, p++;
    snprintf(buf, n, "%.3g %s%s", v, prefix[p], unit);
    return buf;
}

static void progress_bar(int64_t step, int64_t total, double loss, double rate) {
    const int width = 30;
    int filled = total ? (int)((double)step / (double)total * width) : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
    bar[width] = '\0';
    printf("\r[%s] step %lld/%lld  loss %-11.4e %8.1f steps/s", bar, (long long)step, (long long)total, loss, rate);
    fflush(stdout);
}

// ---- the data: the course's get_batch ----
// x (B, D) ~ randn from gen, y (B) = x @ w with w = arange(D) (B, D) @ (D) -> (B).
static void get_batch(int64_t B, int64_t D, const torc_tensor *w, torc_generator *gen, torc_tensor **x, torc_tensor **y) {
    *x = torc_randn(TORC_SHAPE(B, D), TORC_DTYPE_F32, gen);
    CHECK_PTR(*x);
    *y = torc_matmul(*x, w);
    CHECK_PTR(*y);
}

// With --autocast f16 a checkpoint also holds the GradScaler's scale (f32) and growth tracker
// (i64) as zero-dim tensors, so a resumed run scales its losses as the straight one does.
static const char *const scaler_names[2] = {"grad_scaler.scale", "grad_scaler._growth_tracker"};

static void scaler_tensors(const torc_grad_scaler *scaler, torc_tensor **t) {
    torc_grad_scaler_state st;
    CHECK(torc_grad_scaler_get_state(scaler, &st));
    t[0] = torc_scalar_tensor(st.scale, TORC_DTYPE_F32);
    t[1] = torc_scalar_tensor((double)st.growth_tracker, TORC_DTYPE_I64);
    CHECK_PTR(t[0]);
    CHECK_PTR(t[1]);
}

static void save(const char *path, torc_module *model, const torc_optimizer *opt, int64_t step, torc_generator *gen,
                 const torc_grad_scaler *scaler) {
    const int n = torc_module_param_count(model);
    if (n < 0) die("%s", torc_last_error());
    const char *names[258];
    torc_tensor *tensors[258];
    if (n > 256) die("model has more than 256 parameters");
    for (int i = 0; i < n; i++) {
        names[i] = torc_module_param_name(model, i);
        tensors[i] = torc_module_param(model, i);
    }
    torc_scope_push();
    if (scaler) scaler_tensors(scaler, tensors + n), names[n] = scaler_names[0], names[n + 1] = scaler_names[1];
    CHECK(torc_checkpoint_save(path, n + (scaler ? 2 : 0), names, tensors, opt, step, gen));
    torc_scope_pop();
}

int main(int argc, char **argv) {
    train_options o;
    char err[512];
    switch (train_args_parse(argc, argv, &o, err, sizeof err)) {
    case TRAIN_ARGS_HELP: train_args_usage(stdout); return 0;
    case TRAIN_ARGS_ERROR: die("%s", err); break;
    case TRAIN_ARGS_OK: break;
    }
    // ---- device, model, optimizer ----
    torc_device *dev = o.backend ? torc_device_get(o.backend) : torc_default_device();
    CHECK_PTR(dev);
    CHECK(torc_set_default_device(dev));
    torc_device_info info;
    CHECK(torc_device_info_get(dev, &info));
    torc_generator *gen = torc_generator_new(o.seed);
    CHECK_PTR(gen);
    torc_module *model = torc_cruncher_new(o.dim, o.layers, TORC_DTYPE_F32, gen);
    CHECK_PTR(model);
    const int n_params = torc_module_param_count(model);
    if (n_params < 0) die("%s", torc_last_error());  // out of memory listing them: not an empty list
    torc_tensor *params[258];
    if (n_params > 256) die("model has more than 256 parameters");
    for (int i = 0; i < n_params; i++) params[i] = torc_module_param(model, i);
    char settings[1200];
    snprintf(settings, sizeof settings, "lr=%.17g%s", o.lr, o.hparams);
    torc_optimizer *opt = torc_optimizer_new(o.optim, n_params, params, settings);
    CHECK_PTR(opt);
    torc_grad_scaler *scaler = NULL;  // f16 needs loss scaling; bf16 and fp8 do not
    torc_grad_scaler_options so = TORC_GRAD_SCALER_DEFAULTS;
    so.init_scale = o.loss_scale;
    if (o.autocast == TORC_DTYPE_F16) CHECK_PTR(scaler = torc_grad_scaler_new(&so));
    int64_t skipped = 0;  // steps the scaler skipped (inf/NaN gradients)
    torc_tensor *w = torc_arange(0, (double)o.dim, 1, TORC_DTYPE_F32);  // (D) the true weights
    CHECK_PTR(w);
    int64_t step = 0;
    if (o.resume) {
        const char *names[258];
        for (int i = 0; i < n_params; i++) names[i] = torc_module_param_name(model, i);
        torc_scope_push();
        if (scaler) scaler_tensors(scaler, params + n_params), names[n_params] = scaler_names[0],
                    names[n_params + 1] = scaler_names[1];
        if (torc_checkpoint_load(o.resume, n_params + (scaler ? 2 : 0), names, params, opt, &step, gen))
            die("%s (to start from weights alone, use --init-from)", torc_last_error());
        if (scaler) {
            torc_grad_scaler_state st;
            int64_t tracker;
            CHECK(torc_grad_scaler_get_state(scaler, &st));
            CHECK(torc_item(params[n_params], &st.scale));
            CHECK(torc_item_i64(params[n_params + 1], &tracker));
            st.growth_tracker = tracker;
            CHECK(torc_grad_scaler_set_state(scaler, &st));
        }
        torc_scope_pop();
    }
    if (o.init_from) {  // weights only: every model tensor must be there, with its shape and dtype
        const char *names[256];
        for (int i = 0; i < n_params; i++) names[i] = torc_module_param_name(model, i);
        CHECK(torc_checkpoint_load(o.init_from, n_params, names, params, NULL, NULL, NULL));
    }
    const bool tty = isatty(STDOUT_FILENO);
    const int64_t todo = o.steps > step ? o.steps - step : 0;
    const int64_t log_every = o.log_every ? o.log_every : (todo >= 10 ? todo / 10 : 1);
    printf("torc-train: Cruncher(dim=%lld, layers=%d), batch %lld, %s (%s) on %s (%s)\n", (long long)o.dim, o.layers,
           (long long)o.batch, torc_optimizer_name(opt), settings, torc_device_name(dev), info.name);
    if (o.autocast != TORC_DTYPE_F32)
        printf("  autocast %s, float32 master weights%s\n", o.autocast == TORC_DTYPE_F8_E4M3FN ? "fp8 (e4m3/e5m2)"
               : torc_dtype_name(o.autocast), scaler ? ", dynamic loss scaling" : "");
    if (o.resume) printf("  resumed from %s at step %lld\n", o.resume, (long long)step);
    if (o.init_from) printf("  weights from %s\n", o.init_from);

    // ---- the loop ----
    torc_flops_reset();
    torc_memory_reset_peak(dev);
    uint64_t model_fwd = 0, model_bwd = 0, optim_flops = 0;
    double first_loss = NAN, loss = NAN;
    const double t0 = now();
    double last_draw = -1;  // the bar is redrawn at most 20 times a second
    for (int64_t done = 0; step < o.steps; step++, done++) {
        torc_scope_push();
        torc_tensor *x, *y;
        get_batch(o.batch, o.dim, w, gen, &x, &y);
        const uint64_t f0 = torc_flops(TORC_PHASE_FORWARD, -1, -1), b0 = torc_flops(TORC_PHASE_BACKWARD, -1, -1);
        if (o.autocast != TORC_DTYPE_F32) CHECK(torc_autocast_begin(o.autocast));
        torc_tensor *pred = torc_module_forward(model, x);  // (B)
        CHECK_PTR(pred);
        torc_tensor *l = torc_mse_loss(pred, y);            // () f32, also under autocast
        CHECK_PTR(l);
        if (o.autocast != TORC_DTYPE_F32) CHECK(torc_autocast_end());
        torc_tensor *lb = scaler ? torc_grad_scaler_scale(scaler, l) : l;
        CHECK_PTR(lb);
        CHECK(torc_backward(lb, NULL, false));
        const uint64_t f1 = torc_flops(TORC_PHASE_FORWARD, -1, -1);
        model_fwd += f1 - f0;
        model_bwd += torc_flops(TORC_PHASE_BACKWARD, -1, -1) - b0;
        if (scaler) {  // skips the step when a gradient overflowed, then adjusts the scale
            bool stepped;
            CHECK(torc_grad_scaler_step(scaler, opt, &stepped));
            CHECK(torc_grad_scaler_update(scaler));
            skipped += !stepped;
        } else {
            CHECK(torc_optimizer_step(opt));
        }
        CHECK(torc_optimizer_zero_grad(opt, true));
        optim_flops += torc_flops(TORC_PHASE_FORWARD, -1, -1) - f1;
        CHECK(torc_item(l, &loss));
        torc_scope_pop();
        if (done == 0) first_loss = loss;
        if (!isfinite(loss)) {
            if (tty) printf("\n");
            die("the loss is %g at step %lld: diverged (lower --lr?)", loss, (long long)step + 1);
        }
        const double t = now(), rate = (double)(done + 1) / (t - t0);
        if (tty && (t - last_draw >= 0.05 || step + 1 == o.steps)) {
            progress_bar(step + 1, o.steps, loss, rate);
            last_draw = t;
        }
        else if ((done + 1) % log_every == 0 || step + 1 == o.steps)
            printf("step %lld/%lld  loss %.6e  %.1f steps/s\n", (long long)step + 1, (long long)o.steps, loss, rate);
        if (o.checkpoint && o.every && (step + 1) % o.every == 0) save(o.checkpoint, model, opt, step + 1, gen, scaler);
    }
    CHECK(torc_device_synchronize(dev));
    const double elapsed = now() - t0;
    if (tty && todo) printf("\n");
    if (o.checkpoint && !(o.every && step % o.every == 0 && todo)) save(o.checkpoint, model, opt, step, gen, scaler);

    // ---- summary ----
    char b1[32], b2[32], b3[32];
    const int64_t n = torc_module_num_parameters(model);
    printf("\nsummary\n");
    printf("  parameters        %lld (%s as float32)\n", (long long)n, bytes_str((uint64_t)n * 4, b1, sizeof b1));
    if (todo)
        printf("  loss              %.6e at the first step -> %.6e at step %lld\n", first_loss, loss, (long long)step);
    printf("  steps             %lld in %.3f s (%.1f steps/s)\n", (long long)todo, elapsed,
           elapsed > 0 ? (double)todo / elapsed : 0.0);
    if (scaler)
        printf("  grad scaler       scale %g at the end, %lld of %lld steps skipped (inf/NaN gradients)\n",
               torc_grad_scaler_get_scale(scaler), (long long)skipped, (long long)todo);
    torc_memory_stats ms;
    CHECK(torc_memory_stats_get(dev, &ms));
    static const struct { torc_mem_tag tag; const char *label; } cats[] = {
        {TORC_MEM_PARAMETER, "params"},
        {TORC_MEM_GRADIENT, "grads"},
        {TORC_MEM_OPTIMIZER_STATE, "optimizer state"},
        {TORC_MEM_ACTIVATION, "activations"},
    };
    printf("  memory on %s     now / peak\n", torc_device_name(dev));
    for (size_t i = 0; i < sizeof cats / sizeof cats[0]; i++)
        printf("    %-16s %10s / %s\n", cats[i].label, bytes_str(ms.in_use[cats[i].tag], b1, sizeof b1),
               bytes_str(ms.peak[cats[i].tag], b2, sizeof b2));
    printf("    %-16s %10s / %s\n", "total", bytes_str(ms.total_in_use, b1, sizeof b1),
           bytes_str(ms.total_peak, b2, sizeof b2));
    const double model_flops = (double)(model_fwd + model_bwd);
    printf("  FLOPs             forward %s, backward %s (model), optimizer %s\n", si_str((double)model_fwd, "", b1, sizeof b1),
           si_str((double)model_bwd, "", b2, sizeof b2), si_str((double)optim_flops, "", b3, sizeof b3));
    const double achieved = elapsed > 0 ? model_flops / elapsed : 0;
    printf("  achieved          %s (model forward + backward over the wall time)\n", si_str(achieved, "FLOP/s", b1, sizeof b1));
    const torc_dtype mm_dtype = o.autocast == TORC_DTYPE_F8_E4M3FN ? TORC_DTYPE_F8_E4M3FN : o.autocast;
    const double peak = info.peak_flops[mm_dtype];
    if (peak > 0)
        printf("  MFU               %.2f%% of %s promised for %s (%s)\n", 100.0 * achieved / peak,
               si_str(peak, "FLOP/s", b2, sizeof b2), torc_dtype_name(mm_dtype), info.peak_source);
    else
        printf("  MFU               unknown (%s: %s)\n", torc_device_name(dev),
               info.peak_source[0] ? info.peak_source : "no promised FLOP/s");
    if (o.checkpoint) printf("  checkpoint        %s (step %lld)\n", o.checkpoint, (long long)step);

    torc_release(w);
    torc_grad_scaler_free(scaler);
    torc_optimizer_free(opt);
    torc_module_free(model);
    torc_generator_free(gen);
    return 0;
}
