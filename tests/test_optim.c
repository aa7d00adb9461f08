// tests/test_optim.c — optimizer plugins: 50-step trajectories of every plugin against
// torch.optim goldens, the loader (names, paths, ABI refusals), hyperparameters, parameter
// groups, zero_grad, memory accounting of state, and state_dict / load_state_dict.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

// ---- the golden model: y = X @ W.T + b, loss mean((y - T)^2), gradients in closed form ----
typedef struct golden {
    char *text;  // the whole file (lines are cut in place)
    float X[8 * 4], T[8 * 3], W0[3 * 4], b0[3];
} golden;

static int read_floats(const char *s, float *out, int max) {
    int n = 0;
    char *end;
    for (double v = strtod(s, &end); end != s && n < max; v = strtod(s, &end)) {
        out[n++] = (float)v;
        s = end;
    }
    return n;
}

static golden *golden_load(void) {
    FILE *f = tu_open_golden("optim_trajectories.txt", "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    golden *g = calloc(1, sizeof *g);
    g->text = malloc((size_t)size + 1);
    ck_assert_int_eq(fread(g->text, 1, (size_t)size, f), (size_t)size);
    g->text[size] = '\0';
    fclose(f);
    struct { const char *name; float *dst; int n; } data[] = {
        {"data X 8 4 : ", g->X, 32}, {"data T 8 3 : ", g->T, 24}, {"data W0 3 4 : ", g->W0, 12}, {"data b0 3 : ", g->b0, 3}};
    for (size_t i = 0; i < sizeof data / sizeof data[0]; i++) {
        const char *at = strstr(g->text, data[i].name);
        ck_assert_msg(at != NULL, "golden lacks '%s'", data[i].name);
        ck_assert_int_eq(read_floats(at + strlen(data[i].name), data[i].dst, data[i].n), data[i].n);
    }
    return g;
}

static void golden_free(golden *g) {
    free(g->text);
    free(g);
}

typedef struct model {
    torc_tensor *X, *T, *W, *b, *ones;
} model;

static model model_new(const golden *g) {
    model m;
    m.X = torc_tensor_from(g->X, TORC_SHAPE(8, 4), TORC_DTYPE_F32);
    m.T = torc_tensor_from(g->T, TORC_SHAPE(8, 3), TORC_DTYPE_F32);
    m.W = torc_tensor_from(g->W0, TORC_SHAPE(3, 4), TORC_DTYPE_F32);
    m.b = torc_tensor_from(g->b0, TORC_SHAPE(3), TORC_DTYPE_F32);
    m.ones = torc_ones(TORC_SHAPE(1, 8), TORC_DTYPE_F32);
    ck_assert(m.X && m.T && m.W && m.b && m.ones);
    ck_assert_int_eq(torc_set_requires_grad(m.W, true), TORC_OK);
    ck_assert_int_eq(torc_set_requires_grad(m.b, true), TORC_OK);
    return m;
}

static void model_free(model *m) {
    torc_release(m->X);
    torc_release(m->T);
    torc_release(m->W);
    torc_release(m->b);
    torc_release(m->ones);
}

// Sets W.grad and b.grad to the loss gradient (the formula gen_optim_golden.py uses).
static void model_grads(model *m) {
    torc_scope_push();
    torc_no_grad_begin();
    torc_tensor *R = torc_sub(torc_add(torc_matmul(m->X, torc_transpose(m->W, 0, 1)), m->b), m->T);
    ck_assert_msg(R != NULL, "%s", torc_last_error());
    torc_tensor *G = torc_mul_scalar(R, torc_s(2.0 / 24.0));
    torc_tensor *dW = torc_matmul(torc_transpose(G, 0, 1), m->X);
    torc_tensor *db = torc_reshape(torc_matmul(m->ones, G), TORC_SHAPE(3));
    ck_assert_msg(dW && db, "%s", torc_last_error());
    ck_assert_int_eq(torc_set_grad(m->W, dW), TORC_OK);
    ck_assert_int_eq(torc_set_grad(m->b, db), TORC_OK);
    torc_no_grad_end();
    torc_scope_pop();
}

static torc_optimizer *make_opt(model *m, const char *name, const char *settings, const char *groups) {
    torc_optimizer *opt;
    if (!groups || !strcmp(groups, "-")) {
        opt = torc_optimizer_new(name, 2, (torc_tensor *[]){m->W, m->b}, settings);
    } else {
        // "W:SETTINGS/b:SETTINGS"
        char buf[256];
        snprintf(buf, sizeof buf, "%s", groups);
        char *slash = strchr(buf, '/');
        ck_assert(slash != NULL);
        *slash = '\0';
        opt = torc_optimizer_new(name, 1, &m->W, settings);
        ck_assert_msg(opt != NULL, "%s", torc_last_error());
        ck_assert_int_eq(torc_optimizer_set_hparams(opt, 0, buf + 2), TORC_OK);
        ck_assert_int_eq(torc_optimizer_add_param_group(opt, 1, &m->b, slash + 3), 1);
    }
    ck_assert_msg(opt != NULL, "%s: %s", name, torc_last_error());
    return opt;
}

static void train_steps(model *m, torc_optimizer *opt, int n) {
    for (int s = 0; s < n; s++) {
        model_grads(m);
        ck_assert_msg(torc_optimizer_step(opt) == TORC_OK, "step: %s", torc_last_error());
        ck_assert_int_eq(torc_optimizer_zero_grad(opt, true), TORC_OK);
    }
}

// Largest difference in units of float32 ulps (of the golden value), over a tensor.
static double max_ulps(torc_tensor *t, const float *expect, int n) {
    double *v = tu_values(t);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double ulp = nextafterf(fabsf(expect[i]), INFINITY) - fabsf(expect[i]);
        double d = fabs(v[i] - expect[i]) / ulp;
        if (d > worst) worst = d;
    }
    free(v);
    return worst;
}

// Runs every golden case of optimizer `which` and checks each recorded step. On the reference
// backend the trajectories equal torch.optim's with a correctly rounded sqrt (the goldens'; stock
// PyTorch's CPU sqrt is not, see README.md) bit for bit (measured: 0 ulps in every case; one
// ulp is allowed for a double rounding in the emulated fused multiply-adds). On another backend
// (TORC_TEST_OPTIM_DEVICE) the gradients' matmuls round differently, so only closeness is asked.
static void run_golden(const char *which) {
    const char *devname = getenv("TORC_TEST_OPTIM_DEVICE");
    torc_device *dev = torc_device_get(devname ? devname : "reference");
    ck_assert_msg(dev != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_set_default_device(dev), TORC_OK);
    const double MAX_ULPS = devname ? 1e4 : 1.0;
    golden *g = golden_load();
    int cases = 0;
    double worst = 0;
    for (char *line = strtok(g->text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "case ", 5)) continue;
        char name[64], opt_name[32], settings[160] = "", groups[160] = "", schedule[32] = "";
        ck_assert_int_eq(sscanf(line, "case %63s %31s |", name, opt_name), 2);
        char *f1 = strchr(line, '|'), *f2 = strchr(f1 + 1, '|'), *f3 = strchr(f2 + 1, '|');
        snprintf(settings, sizeof settings, "%.*s", (int)(f2 - f1 - 3 > 0 ? f2 - f1 - 3 : 0), f1 + 2);
        snprintf(groups, sizeof groups, "%.*s", (int)(f3 - f2 - 3), f2 + 2);
        snprintf(schedule, sizeof schedule, "%s", f3 + 2);
        if (which && strcmp(opt_name, which)) continue;
        int sched_step = -1;
        double sched_lr = 0;
        if (strcmp(schedule, "-")) ck_assert_int_eq(sscanf(schedule, "%d:%lf", &sched_step, &sched_lr), 2);
        model m = model_new(g);
        torc_optimizer *opt = make_opt(&m, opt_name, settings, groups);
        int step = 0;
        for (char *at = strtok(NULL, "\n"); at && strcmp(at, "end"); at = strtok(NULL, "\n")) {
            int target;
            ck_assert_int_eq(sscanf(at, "at %d", &target), 1);
            while (step < target) {
                if (step + 1 == sched_step) ck_assert_int_eq(torc_optimizer_set_lr(opt, sched_lr), TORC_OK);
                train_steps(&m, opt, 1);
                step++;
            }
            float W[12], b[3];
            ck_assert_int_eq(read_floats(strstr(at, "W : ") + 4, W, 12), 12);
            ck_assert_int_eq(read_floats(strstr(at, "b : ") + 4, b, 3), 3);
            double u = fmax(max_ulps(m.W, W, 12), max_ulps(m.b, b, 3));
            ck_assert_msg(u <= MAX_ULPS, "%s: step %d differs from torch.optim by %.1f float32 ulps", name, step, u);
            if (u > worst) worst = u;
            if (getenv("TORC_TEST_VERBOSE")) printf("  %s step %d: %.1f ulps\n", name, step, u);
        }
        torc_optimizer_free(opt);
        model_free(&m);
        cases++;
    }
    ck_assert_msg(cases > 0, "no golden case for %s", which);
    printf("golden %-8s %d case(s) on %s, worst difference from torch.optim %.1f float32 ulps\n", which, cases,
           torc_device_name(dev), worst);
    torc_set_default_device(NULL);
    golden_free(g);
}

START_TEST(golden_sgd) { run_golden("sgd"); }
END_TEST
START_TEST(golden_adagrad) { run_golden("adagrad"); }
END_TEST
START_TEST(golden_rmsprop) { run_golden("rmsprop"); }
END_TEST
START_TEST(golden_adam) { run_golden("adam"); }
END_TEST
START_TEST(golden_adamw) { run_golden("adamw"); }
END_TEST

// ---- loader ----
START_TEST(load_by_name_and_path) {
    const torc_optim_vtable *vt = torc_optim_load("adam");
    ck_assert_msg(vt != NULL, "%s", torc_last_error());
    ck_assert_str_eq(vt->name, "adam");
    ck_assert_uint_eq(vt->abi_version >> 16, TORC_OPTIM_ABI_MAJOR);
    ck_assert_int_eq(vt->n_states, 3);
    ck_assert_str_eq(vt->state_names[1], "exp_avg_sq");
    ck_assert_ptr_eq(torc_optim_load("adam"), vt);  // loaded once
    char path[1024];
    snprintf(path, sizeof path, "%s/lib/torc/libtorc_optim_sgd.so", getenv("TORC_BUILD_DIR"));
    const torc_optim_vtable *sgd = torc_optim_load(path);
    ck_assert_msg(sgd != NULL, "%s", torc_last_error());
    ck_assert_str_eq(sgd->name, "sgd");
    ck_assert_ptr_eq(torc_optim_load("sgd"), sgd);  // the same file by name
}
END_TEST

START_TEST(load_unknown_lists_available) {
    ck_assert_ptr_null(torc_optim_load("nosuch"));
    tu_assert_error(TORC_ERR_BACKEND, "optimizer 'nosuch' could not be loaded; tried:");
    tu_assert_error(TORC_ERR_BACKEND, "libtorc_optim_nosuch.so");
    tu_assert_error(TORC_ERR_BACKEND, "available optimizers: ");
    tu_assert_error(TORC_ERR_BACKEND, "adamw");
    ck_assert_ptr_null(torc_optim_load("Bad Name"));
    tu_assert_error(TORC_ERR_INVALID_ARG, "invalid optimizer name 'Bad Name'");
    ck_assert_ptr_null(torc_optim_load("/no/such/dir/libtorc_optim_x.so"));
    tu_assert_error(TORC_ERR_BACKEND, "optimizer plugin '/no/such/dir/libtorc_optim_x.so' could not be loaded");
    ck_assert_ptr_null(torc_optimizer_new("nosuch", 0, NULL, NULL));
    tu_assert_error(TORC_ERR_BACKEND, "could not be loaded");
}
END_TEST

START_TEST(load_refuses_abi_mismatch) {
    const char *dir = getenv("TORC_TEST_PLUGIN_DIR");
    ck_assert_ptr_nonnull(dir);
    setenv("TORC_PLUGIN_PATH", dir, 1);
    ck_assert_ptr_null(torc_optim_load("badmajor"));
    tu_assert_error(TORC_ERR_BACKEND, "libtorc_optim_badmajor.so: plugin built for optimizer ABI 99.3, but this torc speaks optimizer ABI 1.3 (a different major");
    ck_assert_ptr_null(torc_optim_load("badsize"));
    tu_assert_error(TORC_ERR_BACKEND, "plugin vtable is 24 bytes (optimizer ABI 1.7), smaller than the 64 bytes optimizer ABI 1.0 requires");
    char path[1024];
    snprintf(path, sizeof path, "%s/libtorc_optim_badrefuse.so", dir);
    ck_assert_ptr_null(torc_optim_load(path));
    tu_assert_error(TORC_ERR_BACKEND, "the plugin refused torc's optimizer ABI 1.3");
    // A vtable named unlike its file is refused by name and by path.
    ck_assert_ptr_null(torc_optim_load("badname"));
    tu_assert_error(TORC_ERR_BACKEND, "file is named for optimizer 'badname' but its vtable says 'othername'");
    snprintf(path, sizeof path, "%s/libtorc_optim_badname.so", dir);
    ck_assert_ptr_null(torc_optim_load(path));
    tu_assert_error(TORC_ERR_BACKEND, "file is named for optimizer 'badname' but its vtable says 'othername'");
    // A malformed hyperparameter declaration names the field.
    ck_assert_ptr_null(torc_optim_load("badhparam"));
    tu_assert_error(TORC_ERR_BACKEND, "optimizer 'badhparam': hyperparameter 'lr' has .n_values = 0 (expected 1 to 4)");
    // A backend plugin is not an optimizer.
    snprintf(path, sizeof path, "%s/lib/torc/libtorc_reference.so", getenv("TORC_BUILD_DIR"));
    ck_assert_ptr_null(torc_optim_load(path));
    tu_assert_error(TORC_ERR_BACKEND, "no symbol torc_optim_entry (not a torc optimizer plugin)");
    unsetenv("TORC_PLUGIN_PATH");
}
END_TEST

// ---- hyperparameters ----
static torc_tensor *param(int64_t n, double v) {
    torc_tensor *p = torc_full(TORC_SHAPE(n), v, TORC_DTYPE_F32);
    ck_assert_int_eq(torc_set_requires_grad(p, true), TORC_OK);
    return p;
}

START_TEST(hparam_defaults_match_torch) {
    torc_tensor *p = param(2, 1.0);
    struct { const char *opt, *name; double v0, v1; } cases[] = {
        {"sgd", "lr", 1e-3, 0}, {"sgd", "momentum", 0, 0}, {"sgd", "nesterov", 0, 0},
        {"adagrad", "lr", 1e-2, 0}, {"adagrad", "eps", 1e-10, 0}, {"adagrad", "initial_accumulator_value", 0, 0},
        {"rmsprop", "lr", 1e-2, 0}, {"rmsprop", "alpha", 0.99, 0}, {"rmsprop", "eps", 1e-8, 0},
        {"adam", "lr", 1e-3, 0}, {"adam", "betas", 0.9, 0.999}, {"adam", "eps", 1e-8, 0},
        {"adam", "weight_decay", 0, 0}, {"adamw", "weight_decay", 1e-2, 0}, {"adamw", "betas", 0.9, 0.999},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        torc_optimizer *opt = torc_optimizer_new(cases[i].opt, 1, &p, NULL);
        ck_assert_msg(opt != NULL, "%s", torc_last_error());
        double v[TORC_OPTIM_HP_MAX_VALUES] = {0};
        ck_assert_int_eq(torc_optimizer_get_hparam(opt, 0, cases[i].name, v), TORC_OK);
        ck_assert_msg(v[0] == cases[i].v0 && v[1] == cases[i].v1, "%s.%s = %g,%g", cases[i].opt, cases[i].name, v[0], v[1]);
        torc_optimizer_free(opt);
    }
    torc_release(p);
}
END_TEST

START_TEST(hparam_errors_as_torch) {
    torc_tensor *p = param(2, 1.0);
    struct { const char *opt, *settings, *msg; } cases[] = {
        {"sgd", "lr=-1", "Invalid learning rate: -1.0"},
        {"sgd", "momentum=-0.5", "Invalid momentum value: -0.5"},
        {"sgd", "weight_decay=-1e-05", "Invalid weight_decay value: -1e-05"},
        {"sgd", "nesterov=true", "Nesterov momentum requires a momentum and zero dampening"},
        {"sgd", "nesterov=true momentum=0.9 dampening=0.1", "Nesterov momentum requires a momentum and zero dampening"},
        {"adam", "betas=1.0,0.9", "Invalid beta parameter at index 0: 1.0"},
        {"adam", "betas=0.9,-0.1", "Invalid beta parameter at index 1: -0.1"},
        {"adam", "eps=-1", "Invalid epsilon value: -1.0"},
        {"adagrad", "lr_decay=-1", "Invalid lr_decay value: -1.0"},
        {"adagrad", "initial_accumulator_value=-2", "Invalid initial_accumulator_value value: -2.0"},
        {"rmsprop", "alpha=-0.1", "Invalid alpha value: -0.1"},
        {"adam", "foo=1", "adam: unknown hyperparameter 'foo' (it takes: lr, betas, eps, weight_decay, amsgrad, maximize)"},
        {"adam", "lr=abc", "adam: hyperparameter 'lr' expects a number, got 'abc'"},
        {"adam", "amsgrad=maybe", "adam: hyperparameter 'amsgrad' expects a boolean (true/false), got 'maybe'"},
        {"adam", "betas=0.9", "adam: hyperparameter 'betas' expects 2 comma-separated values, got '0.9'"},
        {"adam", "betas=0.9,0.99,0.5", "expects 2 comma-separated values"},
        {"adam", "lr", "adam: hyperparameter setting 'lr' is not name=value"},
        {"adam", "lr=", "expects a number, got ''"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_ptr_null(torc_optimizer_new(cases[i].opt, 1, &p, cases[i].settings));
        tu_assert_error(TORC_ERR_INVALID_ARG, cases[i].msg);
    }
    torc_release(p);
}
END_TEST

START_TEST(hparam_set_between_steps) {
    torc_tensor *p = param(2, 1.0);
    torc_optimizer *opt = torc_optimizer_new("sgd", 1, &p, "lr=0.5; momentum=0.9");
    ck_assert_msg(opt != NULL, "%s", torc_last_error());
    double v[TORC_OPTIM_HP_MAX_VALUES];
    ck_assert_int_eq(torc_optimizer_get_hparam(opt, 0, "lr", v), TORC_OK);
    ck_assert(v[0] == 0.5);
    ck_assert_int_eq(torc_optimizer_set_lr(opt, 0.25), TORC_OK);
    ck_assert_int_eq(torc_optimizer_get_hparam(opt, 0, "lr", v), TORC_OK);
    ck_assert(v[0] == 0.25);
    ck_assert_int_eq(torc_optimizer_set_hparam(opt, 0, "nesterov", 1.0), TORC_OK);
    // All or nothing: a bad entry leaves the good one before it unapplied.
    ck_assert_int_ne(torc_optimizer_set_hparams(opt, -1, "lr=0.1 momentum=-1"), TORC_OK);
    tu_assert_error(TORC_ERR_INVALID_ARG, "Invalid momentum value: -1.0");
    ck_assert_int_eq(torc_optimizer_get_hparam(opt, 0, "lr", v), TORC_OK);
    ck_assert(v[0] == 0.25);
    // Cross-hyperparameter rule checked on change too.
    ck_assert_int_ne(torc_optimizer_set_hparam(opt, 0, "momentum", 0.0), TORC_OK);
    tu_assert_error(TORC_ERR_INVALID_ARG, "Nesterov momentum requires a momentum and zero dampening");
    ck_assert_int_ne(torc_optimizer_set_hparam(opt, 0, "lr", NAN), TORC_OK);
    tu_assert_error(TORC_ERR_INVALID_ARG, "Invalid learning rate: nan");
    ck_assert_int_ne(torc_optimizer_set_hparam(opt, 3, "lr", 0.1), TORC_OK);
    tu_assert_error(TORC_ERR_INVALID_ARG, "parameter group 3 out of range (the optimizer has 1)");
    ck_assert_int_ne(torc_optimizer_get_hparam(opt, 0, "betas", v), TORC_OK);
    tu_assert_error(TORC_ERR_INVALID_ARG, "sgd: unknown hyperparameter 'betas'");
    // The new lr takes effect at the next step: p -= 0.25 * g (first momentum step is g).
    torc_tensor *g = torc_full(TORC_SHAPE(2), 2.0, TORC_DTYPE_F32);
    ck_assert_int_eq(torc_set_grad(p, g), TORC_OK);
    ck_assert_int_eq(torc_optimizer_set_hparam(opt, 0, "nesterov", 0.0), TORC_OK);
    ck_assert_int_eq(torc_optimizer_step(opt), TORC_OK);
    tu_assert_values(p, TU_ARR(0.5, 0.5), 0.0);
    torc_release(g);
    torc_optimizer_free(opt);
    torc_release(p);
}
END_TEST

// ---- parameters, groups, zero_grad ----
START_TEST(param_errors) {
    torc_tensor *p = param(2, 1.0);
    torc_tensor *q = param(3, 1.0);
    torc_tensor *ints = torc_zeros(TORC_SHAPE(2), TORC_DTYPE_I64);
    ck_assert_ptr_null(torc_optimizer_new("sgd", 0, NULL, NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "optimizer got an empty parameter list");
    ck_assert_ptr_null(torc_optimizer_new("sgd", 2, (torc_tensor *[]){p, p}, NULL));
    tu_assert_error(TORC_ERR_INVALID_ARG, "optimizer contains a parameter group with duplicate parameters");
    ck_assert_ptr_null(torc_optimizer_new("sgd", 1, &ints, NULL));
    tu_assert_error(TORC_ERR_DTYPE, "optimizer can only optimize floating-point Tensors");
    torc_optimizer *opt = torc_optimizer_new("sgd", 1, &p, NULL);
    ck_assert_int_eq(torc_optimizer_add_param_group(opt, 1, &p, NULL), -1);
    tu_assert_error(TORC_ERR_INVALID_ARG, "some parameters appear in more than one parameter group");
    ck_assert_int_eq(torc_optimizer_add_param_group(opt, 1, &q, "lr=-3"), -1);
    tu_assert_error(TORC_ERR_INVALID_ARG, "Invalid learning rate: -3.0");
    ck_assert_int_eq(torc_optimizer_num_groups(opt), 1);
    ck_assert_int_eq(torc_optimizer_add_param_group(opt, 1, &q, "lr=3"), 1);
    ck_assert_int_eq(torc_optimizer_num_params(opt), 2);
    // A wrongly shaped gradient cannot even be set (the optimizer checks again before a step).
    torc_tensor *g = torc_ones(TORC_SHAPE(4), TORC_DTYPE_F32);
    ck_assert_int_ne(torc_set_grad(q, g), TORC_OK);
    torc_release(g);
    torc_optimizer_free(opt);
    torc_release(p);
    torc_release(q);
    torc_release(ints);
}
END_TEST

START_TEST(groups_and_skipped_params) {
    // Two groups with their own lr; a parameter without a gradient is skipped and keeps its
    // step count (PyTorch's rule), so Adam's bias correction is per parameter.
    torc_tensor *p = param(2, 1.0), *q = param(2, 1.0);
    torc_optimizer *opt = torc_optimizer_new("sgd", 1, &p, "lr=0.1");
    ck_assert_int_eq(torc_optimizer_add_param_group(opt, 1, &q, "lr=0.5"), 1);
    torc_tensor *g = torc_ones(TORC_SHAPE(2), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_set_grad(p, g), TORC_OK);
    ck_assert_int_eq(torc_set_grad(q, g), TORC_OK);
    ck_assert_int_eq(torc_optimizer_step(opt), TORC_OK);
    tu_assert_values(p, TU_ARR(0.9, 0.9), 1e-7);
    tu_assert_values(q, TU_ARR(0.5, 0.5), 0.0);
    ck_assert_int_eq(torc_optimizer_zero_grad(opt, true), TORC_OK);
    ck_assert_ptr_null(torc_grad(p));
    ck_assert_ptr_null(torc_grad(q));
    ck_assert_int_eq(torc_set_grad(q, g), TORC_OK);
    ck_assert_int_eq(torc_optimizer_step(opt), TORC_OK);
    tu_assert_values(p, TU_ARR(0.9, 0.9), 1e-7);
    tu_assert_values(q, TU_ARR(0.0, 0.0), 0.0);
    ck_assert_int_eq(torc_optimizer_param_step_count(opt, 0), 1);
    ck_assert_int_eq(torc_optimizer_param_step_count(opt, 1), 2);
    ck_assert_int_eq(torc_optimizer_param_step_count(opt, 2), -1);
    // zero_grad(set_to_none=false) keeps the tensor and zeroes it.
    ck_assert_int_eq(torc_optimizer_zero_grad(opt, false), TORC_OK);
    torc_tensor *qg = torc_grad(q);
    ck_assert_ptr_nonnull(qg);
    tu_assert_values(qg, TU_ARR(0.0, 0.0), 0.0);
    tu_assert_values(g, TU_ARR(0.0, 0.0), 0.0);  // the same tensor, zeroed in place
    torc_release(qg);
    torc_release(g);
    torc_optimizer_free(opt);
    torc_release(p);
    torc_release(q);
}
END_TEST

START_TEST(state_is_tagged_and_freed) {
    torc_device *dev = torc_default_device();
    torc_memory_stats before, after, freed;
    torc_tensor *p = param(1000, 1.0);
    torc_tensor *g = torc_ones(TORC_SHAPE(1000), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_set_grad(p, g), TORC_OK);
    ck_assert_int_eq(torc_memory_stats_get(dev, &before), TORC_OK);
    torc_optimizer *opt = torc_optimizer_new("adam", 1, &p, "amsgrad=true");
    ck_assert_int_eq(torc_optimizer_step(opt), TORC_OK);
    ck_assert_int_eq(torc_memory_stats_get(dev, &after), TORC_OK);
    // exp_avg, exp_avg_sq and max_exp_avg_sq: 3 x 1000 floats, and no other memory kept.
    ck_assert_uint_eq(after.in_use[TORC_MEM_OPTIMIZER_STATE] - before.in_use[TORC_MEM_OPTIMIZER_STATE], 3 * 4000);
    ck_assert_uint_eq(after.total_in_use - before.total_in_use, 3 * 4000);
    torc_tensor *m = torc_optimizer_state(opt, 0, "exp_avg");
    ck_assert_ptr_nonnull(m);
    torc_tensor *first = torc_narrow(m, 0, 0, 2);
    tu_assert_values(first, TU_ARR(0.1, 0.1), 1e-7);
    torc_release(first);
    torc_release(m);
    ck_assert_ptr_null(torc_optimizer_state(opt, 0, "nosuch"));
    tu_assert_error(TORC_ERR_INVALID_ARG, "optimizer 'adam' has no state buffer 'nosuch'");
    torc_optimizer_free(opt);
    ck_assert_int_eq(torc_memory_stats_get(dev, &freed), TORC_OK);
    ck_assert_uint_eq(freed.in_use[TORC_MEM_OPTIMIZER_STATE], before.in_use[TORC_MEM_OPTIMIZER_STATE]);
    torc_release(g);
    torc_release(p);
}
END_TEST

// Memory of one optimizer step over the given parameters (1 MiB each, gradients of ones): the
// activation peak above what was in use before, and the state bytes made and their peak.
typedef struct step_mem {
    uint64_t act_peak, state_made, state_peak, state_now;
} step_mem;

static step_mem step_memory(torc_optimizer *opt) {
    torc_device *dev = torc_default_device();
    torc_memory_stats before, after;
    torc_memory_reset_peak(dev);
    ck_assert_int_eq(torc_memory_stats_get(dev, &before), TORC_OK);
    ck_assert_msg(torc_optimizer_step(opt) == TORC_OK, "%s", torc_last_error());
    ck_assert_int_eq(torc_memory_stats_get(dev, &after), TORC_OK);
    return (step_mem){after.peak[TORC_MEM_ACTIVATION] - before.in_use[TORC_MEM_ACTIVATION],
                      after.in_use[TORC_MEM_OPTIMIZER_STATE] - before.in_use[TORC_MEM_OPTIMIZER_STATE],
                      after.peak[TORC_MEM_OPTIMIZER_STATE], after.in_use[TORC_MEM_OPTIMIZER_STATE]};
}

// State counts as state from its creation (not as activations until step() returns), and each
// parameter's temporaries are freed before the next parameter's are made, as PyTorch's loop.
// rmsprop makes a temporary (its denominator) per parameter and one state buffer; adam, one
// fused update (TORC_OP_ADAM_STEP), makes no temporary and two state buffers.
static const struct { const char *name; uint64_t buffers; bool temporaries; } step_memory_cases[] = {
    {"rmsprop", 1, true},
    {"adam", 2, false},
};

START_TEST(state_counted_from_creation_temporaries_per_param) {
    const char *name = step_memory_cases[_i].name;
    const uint64_t buffers = step_memory_cases[_i].buffers;
    const int64_t n = 262144;  // 1 MiB of float32
    torc_tensor *p[2] = {param(n, 1.0), param(n, 2.0)};
    torc_tensor *g = torc_ones(TORC_SHAPE(n), TORC_DTYPE_F32);
    for (int i = 0; i < 2; i++) ck_assert_int_eq(torc_set_grad(p[i], g), TORC_OK);
    torc_release(g);
    torc_optimizer *one = torc_optimizer_new(name, 1, p, NULL), *two = torc_optimizer_new(name, 2, p, NULL);
    const step_mem one1 = step_memory(one), one2 = step_memory(one);
    const step_mem two1 = step_memory(two), two2 = step_memory(two);
    // the state buffers of each parameter, made on the first step, at their peak right away
    ck_assert_uint_eq(one1.state_made, buffers << 20);
    ck_assert_uint_eq(two1.state_made, 2 * buffers << 20);
    ck_assert_uint_eq(one2.state_made, 0);
    ck_assert_uint_eq(one1.state_peak, one1.state_now);
    ck_assert_uint_eq(two1.state_peak, two1.state_now);
    ck_assert_uint_eq(two2.state_peak, two2.state_now);
    // The first step's activations are the later steps' (state not counted in them), and two
    // parameters need no more than one: temporaries are freed parameter by parameter.
    if (step_memory_cases[_i].temporaries) ck_assert_uint_gt(one2.act_peak, 0);
    else ck_assert_uint_eq(one2.act_peak, 0);
    ck_assert_uint_eq(one1.act_peak, one2.act_peak);
    ck_assert_uint_eq(two1.act_peak, one2.act_peak);
    ck_assert_uint_eq(two2.act_peak, one2.act_peak);
    torc_optimizer_free(one);
    torc_optimizer_free(two);
    torc_release(p[0]);
    torc_release(p[1]);
}
END_TEST

// A state buffer unlike its parameter is refused when the plugin stores it, naming the plugin;
// the slot stays empty, the other parameters' buffers are kept.
START_TEST(state_of_wrong_shape_refused) {
    torc_tensor *p0 = param(3, 1.0), *p1 = torc_zeros(TORC_SHAPE(2, 2), TORC_DTYPE_F32);
    torc_set_requires_grad(p1, true);
    torc_tensor *g0 = torc_ones_like(p0), *g1 = torc_ones_like(p1);
    torc_set_grad(p0, g0);
    torc_set_grad(p1, g1);
    char path[1024];
    snprintf(path, sizeof path, "%s/libtorc_optim_badstate.so", getenv("TORC_TEST_PLUGIN_DIR"));
    torc_optimizer *opt = torc_optimizer_new(path, 2, (torc_tensor *[]){p0, p1}, NULL);
    ck_assert_msg(opt != NULL, "%s", torc_last_error());
    ck_assert_int_eq(torc_optimizer_step(opt), TORC_ERR_SHAPE);
    tu_assert_error(TORC_ERR_SHAPE, "optimizer 'badstate' stored state buffer 'buf' of parameter 1 as float32 [3] on ");
    tu_assert_error(TORC_ERR_SHAPE, "but a state buffer must match its parameter: float32 [2, 2] on ");
    torc_tensor *kept = torc_optimizer_state(opt, 0, "buf");
    ck_assert_ptr_nonnull(kept);
    ck_assert_ptr_null(torc_optimizer_state(opt, 1, "buf"));
    ck_assert_int_eq(torc_optimizer_param_step_count(opt, 0), 1);
    ck_assert_int_eq(torc_optimizer_param_step_count(opt, 1), 0);
    torc_release(kept);
    torc_optimizer_free(opt);
    torc_release(g0);
    torc_release(g1);
    torc_release(p0);
    torc_release(p1);
}
END_TEST

// ---- the v1.1 host members ----
static torc_optimizer *test_plugin(const char *name, torc_tensor *p, const char *settings) {
    char path[1024];
    snprintf(path, sizeof path, "%s/libtorc_optim_%s.so", getenv("TORC_TEST_PLUGIN_DIR"), name);
    torc_optimizer *opt = torc_optimizer_new(path, 1, &p, settings);
    ck_assert_msg(opt != NULL, "%s", torc_last_error());
    return opt;
}

// Lion written with sign(): two steps against the update rule computed here.
START_TEST(lion_with_sign) {
    torc_tensor *p = torc_tensor_from((float[]){1.0f, -2.0f, 0.5f, 3.0f}, TORC_SHAPE(4), TORC_DTYPE_F32);
    torc_set_requires_grad(p, true);
    torc_optimizer *opt = test_plugin("lion", p, "lr=0.125 betas=0.5,0.75");
    const float g1[4] = {0.25f, -1.0f, 0.0f, 2.0f}, g2[4] = {-0.03125f, -1.0f, 0.5f, -4.0f};
    float want[4] = {1.0f, -2.0f, 0.5f, 3.0f}, m[4] = {0};
    for (int step = 0; step < 2; step++) {
        const float *g = step ? g2 : g1;
        torc_tensor *gt = torc_tensor_from(g, TORC_SHAPE(4), TORC_DTYPE_F32);
        torc_set_grad(p, gt);
        torc_release(gt);
        ck_assert_msg(torc_optimizer_step(opt) == TORC_OK, "%s", torc_last_error());
        for (int i = 0; i < 4; i++) {
            const float c = 0.5f * m[i] + 0.5f * g[i];  // exact in float for these values
            want[i] -= 0.125f * (float)((c > 0) - (c < 0));
            m[i] = 0.75f * m[i] + 0.25f * g[i];
        }
    }
    tu_assert_values(p, TU_ARR(want[0], want[1], want[2], want[3]), 0.0);
    // Step 2 of element 0: m = 0.0625, g = -0.03125, c = 0.015625: the sign follows c, not g.
    ck_assert_float_eq(want[0], 1.0f - 0.125f - 0.125f);
    torc_optimizer_free(opt);
    torc_release(p);
}
END_TEST

// sign, abs, clamp, the comparisons and where, as PyTorch gives them for g against p.
START_TEST(host_v1_1_members) {
    torc_tensor *p = torc_tensor_from((float[]){0.5f, -1.0f, 2.0f, 0.0f, 1.0f}, TORC_SHAPE(5), TORC_DTYPE_F32);
    torc_set_requires_grad(p, true);
    torc_tensor *g = torc_tensor_from((float[]){0.5f, -3.0f, 1.5f, -0.0f, NAN}, TORC_SHAPE(5), TORC_DTYPE_F32);
    torc_set_grad(p, g);
    torc_optimizer *opt = test_plugin("host_ops", p, NULL);
    ck_assert_msg(torc_optimizer_step(opt) == TORC_OK, "%s", torc_last_error());
    struct { const char *buf; double v[5]; } want[] = {
        {"sign", {1, -1, 1, 0, 0}},         {"abs", {0.5, 3, 1.5, 0, NAN}},  {"clamp", {0.5, -0.5, 1, 0, NAN}},
        {"clamp_lo", {0.5, 0, 1.5, 0, NAN}}, {"eq", {1, 0, 0, 1, 0}},         {"ne", {0, 1, 1, 0, 1}},
        {"lt", {0, 1, 1, 0, 0}},            {"le", {1, 1, 1, 1, 0}},         {"gt", {0, 0, 0, 0, 0}},
        {"ge", {1, 0, 0, 1, 0}},
    };
    // p = 0.5, -1, 2, 0, 1 and g = 0.5, -3, 1.5, -0, nan: g < p at -3 < -1 and 1.5 < 2; sign(nan)
    // is 0 in PyTorch (its kernel is (0 < x) - (x < 0)).
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        torc_tensor *s = torc_optimizer_state(opt, 0, want[k].buf);
        ck_assert_msg(s != NULL, "%s: %s", want[k].buf, torc_last_error());
        float got[5];
        ck_assert_int_eq(torc_copy_to_host(s, got, sizeof got), TORC_OK);
        for (int i = 0; i < 5; i++)
            ck_assert_msg(isnan(want[k].v[i]) ? isnan(got[i]) : got[i] == (float)want[k].v[i], "%s[%d] = %g, expected %g",
                          want[k].buf, i, (double)got[i], want[k].v[i]);
        torc_release(s);
    }
    torc_optimizer_free(opt);
    torc_release(g);
    torc_release(p);
}
END_TEST

// ---- state dicts ----
static void assert_same_bits(torc_tensor *a, torc_tensor *b) {
    ck_assert_int_eq(torc_numel(a), torc_numel(b));
    size_t n = torc_nbytes(a);
    void *x = malloc(n), *y = malloc(n);
    ck_assert_int_eq(torc_copy_to_host(a, x, n), TORC_OK);
    ck_assert_int_eq(torc_copy_to_host(b, y, n), TORC_OK);
    ck_assert_msg(memcmp(x, y, n) == 0, "tensors differ");
    free(x);
    free(y);
}

START_TEST(state_dict_round_trip) {
    // 4 steps, state_dict, load into a fresh optimizer over copies, 4 more steps each: equal bits.
    static const char *const names[] = {"sgd", "adagrad", "rmsprop", "adam", "adamw"};
    static const char *const settings[] = {"lr=0.05 momentum=0.9", "lr=0.1", "momentum=0.5 centered=true",
                                           "amsgrad=true lr=0.01", "lr=0.01"};
    golden *gd = golden_load();
    for (int k = 0; k < 5; k++) {
        model a = model_new(gd), b = model_new(gd);
        torc_optimizer *oa = make_opt(&a, names[k], settings[k], NULL);
        train_steps(&a, oa, 4);
        torc_state_dict *sd = torc_state_dict_new();
        ck_assert_int_eq(torc_optimizer_state_dict(oa, sd, NULL), TORC_OK);
        ck_assert_str_eq(torc_state_dict_get_meta(sd, "optimizer.name"), names[k]);
        ck_assert_str_eq(torc_state_dict_get_meta(sd, "optimizer.state.1.step"), "4");
        ck_assert_str_eq(torc_state_dict_get_meta(sd, "optimizer.param_groups.0.params"), "0,1");
        torc_no_grad_begin();
        ck_assert_int_eq(torc_copy_(b.W, a.W), TORC_OK);
        ck_assert_int_eq(torc_copy_(b.b, a.b), TORC_OK);
        torc_no_grad_end();
        torc_optimizer *ob = make_opt(&b, names[k], "lr=0.5", NULL);  // hyperparameters come from sd
        ck_assert_msg(torc_optimizer_load_state_dict(ob, sd, NULL) == TORC_OK, "%s", torc_last_error());
        torc_state_dict_free(sd);
        train_steps(&a, oa, 4);
        train_steps(&b, ob, 4);
        assert_same_bits(a.W, b.W);
        assert_same_bits(a.b, b.b);
        ck_assert_int_eq(torc_optimizer_param_step_count(ob, 0), 8);
        torc_optimizer_free(oa);
        torc_optimizer_free(ob);
        model_free(&a);
        model_free(&b);
    }
    golden_free(gd);
}
END_TEST

START_TEST(load_state_dict_refuses_and_keeps_state) {
    golden *gd = golden_load();
    model a = model_new(gd);
    torc_optimizer *adam = make_opt(&a, "adam", "lr=0.01", NULL);
    train_steps(&a, adam, 2);
    torc_optimizer *sgd = make_opt(&a, "sgd", "lr=0.1", NULL);
    torc_state_dict *sd = torc_state_dict_new();
    ck_assert_int_eq(torc_optimizer_state_dict(adam, sd, NULL), TORC_OK);
    ck_assert_int_ne(torc_optimizer_load_state_dict(sgd, sd, NULL), TORC_OK);
    tu_assert_error(TORC_ERR_INVALID_ARG, "state dict is for optimizer 'adam', not 'sgd'");
    // A state tensor of the wrong shape: refused, and the target keeps its own state and lr.
    model c = model_new(gd);
    torc_optimizer *other = make_opt(&c, "adam", "lr=0.5", NULL);
    train_steps(&c, other, 1);
    torc_scope_push();
    torc_tensor *before = torc_keep(torc_clone(torc_optimizer_state(other, 0, "exp_avg")));
    torc_scope_pop();
    torc_tensor *bad = torc_zeros(TORC_SHAPE(4, 3), TORC_DTYPE_F32);
    ck_assert_int_eq(torc_state_dict_set(sd, "optimizer.state.0.exp_avg", bad), TORC_OK);
    ck_assert_int_ne(torc_optimizer_load_state_dict(other, sd, NULL), TORC_OK);
    tu_assert_error(TORC_ERR_SHAPE, "state dict entry 'optimizer.state.0.exp_avg' has shape [4, 3] but parameter 0 has shape [3, 4]");
    double lr[TORC_OPTIM_HP_MAX_VALUES];
    ck_assert_int_eq(torc_optimizer_get_hparam(other, 0, "lr", lr), TORC_OK);
    ck_assert(lr[0] == 0.5);
    ck_assert_int_eq(torc_optimizer_param_step_count(other, 0), 1);
    torc_scope_push();
    assert_same_bits(before, torc_optimizer_state(other, 0, "exp_avg"));
    // Other refusals.
    ck_assert_int_eq(torc_state_dict_set(sd, "optimizer.state.0.exp_avg", torc_optimizer_state(adam, 0, "exp_avg")), TORC_OK);
    torc_scope_pop();
    ck_assert_int_eq(torc_state_dict_set(sd, "optimizer.state.0.bogus", bad), TORC_OK);
    ck_assert_int_ne(torc_optimizer_load_state_dict(other, sd, NULL), TORC_OK);
    tu_assert_error(TORC_ERR_INVALID_ARG, "state dict entry 'optimizer.state.0.bogus' is not a state buffer of this 'adam' optimizer");
    torc_state_dict *sd2 = torc_state_dict_new();
    ck_assert_int_eq(torc_optimizer_state_dict(adam, sd2, NULL), TORC_OK);
    ck_assert_int_eq(torc_state_dict_set_meta(sd2, "optimizer.param_groups.0.betas", "0.9,1.5"), TORC_OK);
    ck_assert_int_ne(torc_optimizer_load_state_dict(other, sd2, NULL), TORC_OK);
    tu_assert_error(TORC_ERR_INVALID_ARG, "Invalid beta parameter at index 1: 1.5");
    ck_assert_int_eq(torc_state_dict_set_meta(sd2, "optimizer.param_groups", "2"), TORC_OK);
    ck_assert_int_ne(torc_optimizer_load_state_dict(other, sd2, NULL), TORC_OK);
    tu_assert_error(TORC_ERR_INVALID_ARG, "loaded state dict has a different number of parameter groups");
    ck_assert_int_ne(torc_optimizer_load_state_dict(other, sd2, "nothere."), TORC_OK);
    tu_assert_error(TORC_ERR_INVALID_ARG, "state dict has no optimizer (no 'nothere.name' entry)");
    torc_state_dict_free(sd);
    torc_state_dict_free(sd2);
    torc_release(bad);
    torc_release(before);
    torc_optimizer_free(adam);
    torc_optimizer_free(sgd);
    torc_optimizer_free(other);
    model_free(&a);
    model_free(&c);
    golden_free(gd);
}
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("optim");
    TCase *golden = tcase_create("golden");
    tcase_set_timeout(golden, 120);
    tcase_add_test(golden, golden_sgd);
    tcase_add_test(golden, golden_adagrad);
    tcase_add_test(golden, golden_rmsprop);
    tcase_add_test(golden, golden_adam);
    tcase_add_test(golden, golden_adamw);
    suite_add_tcase(s, golden);
    TCase *loader = tcase_create("loader");
    tcase_add_test(loader, load_by_name_and_path);
    tcase_add_test(loader, load_unknown_lists_available);
    tcase_add_test(loader, load_refuses_abi_mismatch);
    suite_add_tcase(s, loader);
    TCase *hp = tcase_create("hparams");
    tcase_add_test(hp, hparam_defaults_match_torch);
    tcase_add_test(hp, hparam_errors_as_torch);
    tcase_add_test(hp, hparam_set_between_steps);
    suite_add_tcase(s, hp);
    TCase *frontend = tcase_create("frontend");
    tcase_add_test(frontend, param_errors);
    tcase_add_test(frontend, groups_and_skipped_params);
    tcase_add_test(frontend, state_is_tagged_and_freed);
    tcase_add_loop_test(frontend, state_counted_from_creation_temporaries_per_param, 0,
                        (int)(sizeof step_memory_cases / sizeof step_memory_cases[0]));
    tcase_add_test(frontend, state_of_wrong_shape_refused);
    tcase_add_test(frontend, lion_with_sign);
    tcase_add_test(frontend, host_v1_1_members);
    tcase_add_test(frontend, state_dict_round_trip);
    tcase_add_test(frontend, load_state_dict_refuses_and_keeps_state);
    suite_add_tcase(s, frontend);
    return s;
}

int main(void) { return tu_run(make_suite()); }
