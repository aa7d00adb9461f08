// core/autograd-impl.h — the autograd graph shared by the engine (autograd.c) and the backward
// formulas (backward.c): nodes, their edges, saved tensors and the table of grad rules.
#ifndef TORC_AUTOGRAD_IMPL_H
#define TORC_AUTOGRAD_IMPL_H

#include "torc-impl.h"

// Node kinds beyond the opcode table. TORC__GRAD_CAT (torc-impl.h) is the first; views and
// copies recorded by torc__autograd_view / torc__autograd_unary follow.
typedef enum torc__grad_pseudo {
    TORC__GRAD_VIEW = TORC_OP_COUNT + 1, // view/reshape/squeeze/unsqueeze: reshape back
    TORC__GRAD_TRANSPOSE,                // args: d0, d1
    TORC__GRAD_PERMUTE,                  // args: dims...
    TORC__GRAD_SELECT,                   // args: dim, index
    TORC__GRAD_SLICE,                    // args: dim, start, end, step
    TORC__GRAD_EXPAND,                   // sum back to the base's shape
    TORC__GRAD_AS_STRIDED,               // scatter back through the storage geometry
    TORC__GRAD_COPY,                     // clone / to_dtype / to_device: identity
    TORC__GRAD_COPY_INTO,                // copy_(self, src): zero to self, src's gradient to src
    TORC__GRAD_OVERWRITE,                // fill_ / zero_ / uniform_ / normal_: zero to self
    TORC__GRAD_COPY_SLICES,              // in-place op on a view, recorded on its base (inner)
    TORC__GRAD_CODE_COUNT
} torc__grad_pseudo;

// Shape, strides and placement of a tensor as the node saw it when it was recorded.
typedef struct torc__meta {
    torc_dtype dtype;
    int ndim;
    int64_t shape[TORC_MAX_DIMS];
    int64_t stride[TORC_MAX_DIMS];
    int64_t offset;
    torc_device *device;
} torc__meta;

// Where the gradient of one input goes: the node that produced it, or the leaf itself (both
// owned references). Both NULL: the input does not require grad and gets no gradient.
typedef struct torc__edge {
    torc_node *fn;
    torc_tensor *leaf;
} torc__edge;

// What a saved input knows of the tensor it was saved from, for the version error: PyTorch
// names that tensor's grad_fn at the time of the error (an in-place op may have replaced it
// since). Holds no reference to the tensor, so saving makes no reference cycle.
typedef struct torc__ident {
    _Atomic int refcount;
    torc_tensor *tensor;   // weak: the tensor while it lives, NULL after
    const char *name;      // its grad_fn name when it died (NULL: none)
} torc__ident;

// A tensor a backward formula needs, held as a detached view (no grad_fn, so a node that
// saves its own output makes no reference cycle) with the storage version at save time.
typedef struct torc__saved {
    torc_tensor *t;        // owned, NULL when not saved or released after backward
    uint64_t version;
    const char *producer;  // a saved output: the node's own grad_fn name (for the error text)
    torc__ident *ident;    // owned, a saved input: the tensor it came from (for the error text)
} torc__saved;

#define TORC__NODE_INLINE 3   // inputs held without an extra allocation
#define TORC__SAVED_OUT 3     // saved[] slot of the output; slots 0..2 are inputs 0..2
#define TORC__SAVED_AUX 4     // slots 4, 5: further outputs of the op (native_layer_norm's mean, rstd)
#define TORC__SAVED_SLOTS 6

struct torc_node {
    _Atomic int refcount;
    int code;                 // torc_opcode or torc__grad_pseudo
    const char *name;         // "MulBackward0"
    uint64_t seq;             // creation order: later nodes run first, as in PyTorch
    int n_in;
    torc__edge *next;         // n_in entries
    torc__meta *in;           // n_in entries: the inputs as recorded
    torc__meta out;
    torc_op_params params;    // as the op sent them to the backend
    int nargs;
    int64_t args[TORC_MAX_DIMS + 2]; // view arguments (see torc__autograd_view)
    torc__saved saved[TORC__SAVED_SLOTS];
    bool has_saved;           // something was saved (a second backward needs it)
    bool released;            // saved tensors freed by a backward without retain_graph
    torc_node *inner;         // owned, CopySlices only: the in-place op as recorded on the view
                              // (its inputs, saved tensors; no edges: CopySlices holds them)
    torc_tensor *retained;    // weak: the non-leaf output that asked for retain_grad
    // engine scratch, valid during one run
    uint64_t run;
    int deps;
    bool needed;
    torc_tensor *grad;        // gradient of the output accumulated so far (owned)
    torc__edge next_inline[TORC__NODE_INLINE];
    torc__meta in_inline[TORC__NODE_INLINE];
};

// A backward formula: g is the gradient of the node's output (out's shape and dtype); for
// every input i with need[i] it stores gin[i], a gradient for that input (registered in the
// current scope). The engine then sums it to the input's shape (undoing broadcasting) and
// casts it to the input's dtype and device, so formulas may return broadcast shapes.
// Formulas run under no_grad, inside a scope, with the phase set to backward.
typedef torc_status (*torc__backward_fn)(const torc_node *n, const torc_tensor *g, const bool *need,
                                         torc_tensor **gin);

// What the engine needs to know about a node kind. fn NULL: not differentiable (no node is
// recorded). save: bit i saves input i (i < 3), bit TORC__SAVED_OUT saves the output.
typedef struct torc__grad_rule {
    const char *name;
    torc__backward_fn fn;
    unsigned save;
} torc__grad_rule;

#define TORC__SAVE_IN(i) (1u << (i))
#define TORC__SAVE_OUT (1u << TORC__SAVED_OUT)

// The rule of a node kind (backward.c). Written as a switch without a default over every
// opcode, so adding an opcode without a backward or a "not differentiable" entry fails to
// compile (-Wswitch -Werror).
const torc__grad_rule *torc__grad_rule_for(int code);
// The grad_fn name PyTorch prints for the same call (some depend on shapes and arguments).
const char *torc__grad_name(int code, int n_in, const torc_tensor *const *inputs, const torc_tensor *out,
                            const torc_op_params *params);

// Saved tensor i of n (TORC__SAVED_OUT for the output); never NULL for a slot the rule saves.
static inline torc_tensor *torc__saved_at(const torc_node *n, int i) { return n->saved[i].t; }

// A formula's gradient g for input i of n fitted to that input: broadcast dims summed away,
// cast to its dtype and device. Registered in the current scope; NULL with the error set.
torc_tensor *torc__fit_grad(const torc_node *n, int i, torc_tensor *g);

// Zeros of the given shape and dtype on dev, registered in the current scope.
torc_tensor *torc__zeros_on(torc_device *dev, torc_dtype dtype, int ndim, const int64_t *shape);
// g summed to (ndim, shape) (shape broadcastable to g's), registered in the current scope.
torc_tensor *torc__sum_to(const torc_tensor *g, int ndim, const int64_t *shape);

#endif
