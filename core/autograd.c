// core/autograd.c — grad mode, requires_grad/leaf bookkeeping and the hooks op frontends call.
// (The graph and backward engine are built on these hooks.)
#include "torc-impl.h"

static _Thread_local int tls_no_grad;

void torc_no_grad_begin(void) { tls_no_grad++; }
void torc_no_grad_end(void) {
    if (tls_no_grad > 0) tls_no_grad--;
}
bool torc_is_grad_enabled(void) { return tls_no_grad == 0; }

bool torc__any_requires_grad(int n, const torc_tensor *const *ts) {
    if (tls_no_grad) return false;
    for (int i = 0; i < n; i++)
        if (ts[i] && ts[i]->requires_grad) return true;
    return false;
}

torc_status torc_set_requires_grad(torc_tensor *t, bool requires_grad) {
    if (!t) return torc__error(TORC_ERR_INVALID_ARG, "tensor is NULL");
    if (requires_grad && !torc_dtype_is_floating(t->dtype))
        return torc__error(TORC_ERR_AUTOGRAD, "only Tensors of floating point dtype can require gradients");
    if (!requires_grad && t->grad_fn)
        return torc__error(TORC_ERR_AUTOGRAD, "you can only change requires_grad flags of leaf variables. If you want "
                                              "to use a computed variable in a subgraph that doesn't require "
                                              "differentiation use var_no_grad = var.detach().");
    t->requires_grad = requires_grad;
    return TORC_OK;
}

bool torc_requires_grad(const torc_tensor *t) { return t && t->requires_grad; }
bool torc_is_leaf(const torc_tensor *t) { return t && !t->grad_fn; }
const char *torc_grad_fn_name(const torc_tensor *t) { (void)t; return NULL; }

torc_tensor *torc_grad(const torc_tensor *t) {
    if (!t || !t->grad) return NULL;
    return torc__register(torc_retain(t->grad));
}

torc_status torc_set_grad(torc_tensor *t, torc_tensor *grad) {
    if (!t) return torc__error(TORC_ERR_INVALID_ARG, "tensor is NULL");
    if (grad) torc_retain(grad);
    torc_release(t->grad);
    t->grad = grad;
    return TORC_OK;
}

void torc__check_inplace(torc_tensor *t, torc_status *st) {
    if (torc_is_grad_enabled() && t->requires_grad && !t->grad_fn)
        *st = torc__error(TORC_ERR_AUTOGRAD,
                          "a leaf Variable that requires grad is being used in an in-place operation.");
}

void torc__autograd_release(torc_tensor *t) {
    torc_release(t->grad);
    t->grad = NULL;
}

torc_tensor *torc__autograd_record(torc_tensor *out, torc_opcode code, int n_in, const torc_tensor *const *inputs,
                                   const torc_op_params *params) {
    (void)code, (void)n_in, (void)inputs, (void)params;
    return out;
}

torc_tensor *torc__autograd_view(torc_tensor *view, torc_tensor *base, const char *name, int nargs,
                                 const int64_t *args) {
    (void)base, (void)name, (void)nargs, (void)args;
    return view;
}

torc_tensor *torc__autograd_unary(torc_tensor *out, const torc_tensor *in, const char *name) {
    (void)in, (void)name;
    return out;
}

torc_status torc_retain_grad(torc_tensor *t) {
    if (!t) return torc__error(TORC_ERR_INVALID_ARG, "tensor is NULL");
    t->retains_grad = true;
    return TORC_OK;
}

torc_status torc_backward(torc_tensor *t, const torc_tensor *gradient, bool retain_graph) {
    (void)t, (void)gradient, (void)retain_graph;
    return torc__error(TORC_ERR_NOT_SUPPORTED, "autograd engine not built yet");
}

torc_status torc_autograd_grad(int n_outputs, torc_tensor *const *outputs, torc_tensor *const *grad_outputs,
                               int n_inputs, torc_tensor *const *inputs, bool retain_graph, bool allow_unused,
                               torc_tensor **grads) {
    (void)n_outputs, (void)outputs, (void)grad_outputs, (void)n_inputs, (void)inputs, (void)retain_graph,
        (void)allow_unused, (void)grads;
    return torc__error(TORC_ERR_NOT_SUPPORTED, "autograd engine not built yet");
}
