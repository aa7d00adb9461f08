// backends/cuda/reduce_body.h — reduction accumulators written once, included three times by
// reduce_ops.h (TCU_T = float, double, int64_t; TCU_F(x) names; TCU_M(fn)/TCU_MT the math
// functions and their argument type; TCU_LO/TCU_HI the extremes; TCU_ISNAN(x)).
// No include guard on purpose. Integer instances are only used for sum/prod/max/min/arg*.

typedef struct TCU_F(tcu_acc) {
    TCU_T a, b;   // sum | prod | extreme | Welford mean | logsumexp max ; Welford M2 | lse sum
    int64_t n;    // Welford count | arg index (-1: empty)
} TCU_F(tcu_acc);

TORC_HD static inline TCU_F(tcu_acc) TCU_F(tcu_acc_init)(int op, double p) {
    TCU_F(tcu_acc) s;
    s.a = 0;
    s.b = 0;
    s.n = 0;
    switch (op) {
    case TORC_OP_PROD: s.a = 1; break;
    case TORC_OP_MAX: s.a = TCU_LO; break;
    case TORC_OP_MIN: s.a = TCU_HI; break;
    case TORC_OP_ARGMAX: s.a = TCU_LO; s.n = -1; break;
    case TORC_OP_ARGMIN: s.a = TCU_HI; s.n = -1; break;
    case TORC_OP_LOGSUMEXP: s.a = TCU_LO; break;
    case TORC_OP_NORM: if (p == -INFINITY) s.a = TCU_HI; break;
    default: break;
    }
    return s;
}

// true when (x, i) beats (a, j) for argmax (want_max) / argmin: NaN is the extreme, ties and
// NaN-vs-NaN go to the lower index, an empty state (j < 0) loses to anything.
TORC_HD static inline bool TCU_F(tcu_arg_better)(bool want_max, TCU_T x, int64_t i, TCU_T a, int64_t j) {
    if (j < 0) return true;
    if (TCU_ISNAN(a)) return TCU_ISNAN(x) && i < j;
    if (TCU_ISNAN(x)) return true;
    if (x == a) return i < j;
    return want_max ? x > a : x < a;
}

TORC_HD static inline void TCU_F(tcu_acc_push)(int op, double p, TCU_F(tcu_acc) *s, TCU_T x, int64_t i) {
    switch (op) {
    case TORC_OP_SUM: case TORC_OP_MEAN: s->a += x; break;
    case TORC_OP_PROD: s->a *= x; break;
    case TORC_OP_MAX: if (!TCU_ISNAN(s->a) && (TCU_ISNAN(x) || x > s->a)) s->a = x; break;
    case TORC_OP_MIN: if (!TCU_ISNAN(s->a) && (TCU_ISNAN(x) || x < s->a)) s->a = x; break;
    case TORC_OP_ARGMAX: case TORC_OP_ARGMIN:
        if (TCU_F(tcu_arg_better)(op == TORC_OP_ARGMAX, x, i, s->a, s->n)) { s->a = x; s->n = i; }
        break;
    case TORC_OP_VAR: case TORC_OP_STD: {   // Welford
        s->n += 1;
        const TCU_T d = x - s->a;
        s->a += d / (TCU_T)s->n;
        s->b += d * (x - s->a);
        break;
    }
    case TORC_OP_NORM: {
        const TCU_T ax = x < 0 ? -x : x;
        if (p == 0) s->a += (TCU_T)(x != 0);
        else if (p == 1) s->a += ax;
        else if (p == 2) s->a += ax * ax;
        else if (p == INFINITY) { if (!TCU_ISNAN(s->a) && (TCU_ISNAN(ax) || ax > s->a)) s->a = ax; }
        else if (p == -INFINITY) { if (!TCU_ISNAN(s->a) && (TCU_ISNAN(ax) || ax < s->a)) s->a = ax; }
        else s->a += (TCU_T)TCU_M(pow)((TCU_MT)ax, (TCU_MT)p);
        break;
    }
    case TORC_OP_LOGSUMEXP:   // online max/sum; -inf contributes nothing, NaN sticks in a
        if (TCU_ISNAN(x)) s->a = x;
        else if (x == TCU_LO) break;
        else if (x > s->a) { s->b = s->b * (TCU_T)TCU_M(exp)((TCU_MT)(s->a - x)) + 1; s->a = x; }
        else s->b += (TCU_T)TCU_M(exp)((TCU_MT)(x - s->a));
        break;
    default: break;
    }
}

// Merges o into s; the result does not depend on which one came first.
TORC_HD static inline void TCU_F(tcu_acc_combine)(int op, double p, TCU_F(tcu_acc) *s, const TCU_F(tcu_acc) *o) {
    switch (op) {
    case TORC_OP_SUM: case TORC_OP_MEAN: s->a += o->a; break;
    case TORC_OP_PROD: s->a *= o->a; break;
    case TORC_OP_MAX: case TORC_OP_MIN:
        TCU_F(tcu_acc_push)(op, p, s, o->a, 0);
        break;
    case TORC_OP_ARGMAX: case TORC_OP_ARGMIN:
        if (o->n >= 0 && TCU_F(tcu_arg_better)(op == TORC_OP_ARGMAX, o->a, o->n, s->a, s->n)) *s = *o;
        break;
    case TORC_OP_VAR: case TORC_OP_STD: {   // Chan et al.
        if (o->n == 0) break;
        if (s->n == 0) { *s = *o; break; }
        const int64_t n = s->n + o->n;
        const TCU_T d = o->a - s->a;
        s->a += d * ((TCU_T)o->n / (TCU_T)n);
        s->b += o->b + d * d * ((TCU_T)s->n * (TCU_T)o->n / (TCU_T)n);
        s->n = n;
        break;
    }
    case TORC_OP_NORM:
        if (p == INFINITY || p == -INFINITY) {   // o->a is already an |x|: keep the extreme
            if (!TCU_ISNAN(s->a) && (TCU_ISNAN(o->a) || (p > 0 ? o->a > s->a : o->a < s->a))) s->a = o->a;
        } else {
            s->a += o->a;
        }
        break;
    case TORC_OP_LOGSUMEXP:
        if (TCU_ISNAN(s->a)) break;
        if (TCU_ISNAN(o->a)) { s->a = o->a; break; }
        if (o->a == TCU_LO) break;
        if (s->a == TCU_LO) { *s = *o; break; }
        if (s->a >= o->a) s->b += o->b * (TCU_T)TCU_M(exp)((TCU_MT)(o->a - s->a));
        else { s->b = s->b * (TCU_T)TCU_M(exp)((TCU_MT)(s->a - o->a)) + o->b; s->a = o->a; }
        break;
    default: break;
    }
}

// The reduced value (arg ops: use s.n instead). n_red: the number of reduced elements.
TORC_HD static inline TCU_T TCU_F(tcu_acc_final)(int op, double p, double correction,
                                                 const TCU_F(tcu_acc) *s, int64_t n_red) {
    switch (op) {
    case TORC_OP_MEAN: return s->a / (TCU_T)n_red;
    case TORC_OP_VAR: case TORC_OP_STD: {
        double den = (double)s->n - correction;   // PyTorch: max(0, N - correction)
        if (den < 0) den = 0;
        const TCU_T v = s->b / (TCU_T)den;
        return op == TORC_OP_STD ? (TCU_T)TCU_M(sqrt)((TCU_MT)v) : v;
    }
    case TORC_OP_NORM:
        if (p == 2) return (TCU_T)TCU_M(sqrt)((TCU_MT)s->a);
        if (p == 0 || p == 1 || p == INFINITY || p == -INFINITY) return s->a;
        // (sum |x|^p)^(1/p) as exp(log(.)/p): pow() is an out-of-line call that costs the
        // second pass a register spill, and the sum is >= 0 so the two agree.
        return (TCU_T)TCU_M(exp)(TCU_M(log)((TCU_MT)s->a) / (TCU_MT)p);
    case TORC_OP_LOGSUMEXP:
        if (TCU_ISNAN(s->a) || s->a == TCU_LO || s->a == TCU_HI) return s->a;
        return s->a + (TCU_T)TCU_M(log)((TCU_MT)s->b);
    default: return s->a;
    }
}
