// backends/cpu_onednn/plan.c — plans: the primitives one op compiles to, their argument
// bindings, the workspace layout (temporaries + user scratchpad), and running them.
#include <omp.h>
#include <string.h>

#include "onednn-impl.h"

#define ONEDNN_ALIGN 64
static size_t align_up(size_t n) { return (n + ONEDNN_ALIGN - 1) / ONEDNN_ALIGN * ONEDNN_ALIGN; }

int onednn__attr(dnnl_primitive_attr_t *attr) {
    ONEDNN_CHECK(dnnl_primitive_attr_create(attr));
    dnnl_status_t s = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    if (s != dnnl_success) {
        dnnl_primitive_attr_destroy(*attr);
        *attr = NULL;
        return onednn__dnnl_error(s, "dnnl_primitive_attr_set_scratchpad_mode(");
    }
    return 0;
}

int onednn__plan_tmp(onednn_plan *p, size_t nbytes, int *buf) {
    if (p->n_tmps >= ONEDNN_MAX_TMPS)
        return onednn__error(TORC_ERR_BACKEND, "onednn: internal: too many temporaries in a plan");
    p->tmp_offset[p->n_tmps] = p->tmp_bytes;
    p->tmp_bytes += align_up(nbytes);
    *buf = ONEDNN_BUF_TMP0 + p->n_tmps++;
    return 0;
}

static void step_destroy(onednn_step *s) {
    for (int i = 0; i < s->n_args; i++)
        if (s->args[i].mem) dnnl_memory_destroy(s->args[i].mem);
    if (s->prim) dnnl_primitive_destroy(s->prim);
    onednn__pieces_destroy(s->pieces);
    memset(s, 0, sizeof *s);
}

int onednn__plan_add_pd(onednn_plan *p, dnnl_primitive_desc_t pd, int n, const onednn_bind *binds) {
    int st = 0;
    if (p->n_steps >= ONEDNN_MAX_STEPS || n > ONEDNN_MAX_ARGS) {
        dnnl_primitive_desc_destroy(pd);
        return onednn__error(TORC_ERR_BACKEND, "onednn: internal: plan step limit exceeded");
    }
    onednn_step s;
    memset(&s, 0, sizeof s);
    dnnl_status_t ds = dnnl_primitive_create(&s.prim, pd);
    if (ds != dnnl_success) {
        st = onednn__dnnl_error(ds, "dnnl_primitive_create(");
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md,
                                                                    binds[i].arg);
        if (!md) {
            st = onednn__error(TORC_ERR_BACKEND, "onednn: internal: the primitive has no argument %d",
                               binds[i].arg);
            goto fail;
        }
        onednn_arg *a = &s.args[s.n_args];
        a->arg = binds[i].arg;
        a->buf = binds[i].buf;
        a->cptr = binds[i].cptr;
        ds = dnnl_memory_create(&a->mem, md, onednn__engine(), DNNL_MEMORY_NONE);
        if (ds != dnnl_success) {
            st = onednn__dnnl_error(ds, "dnnl_memory_create(");
            goto fail;
        }
        s.n_args++;
    }
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t sbytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (sbytes > 0) {
        onednn_arg *a = &s.args[s.n_args];
        a->arg = DNNL_ARG_SCRATCHPAD;
        a->buf = ONEDNN_BUF_SCRATCH;
        ds = dnnl_memory_create(&a->mem, smd, onednn__engine(), DNNL_MEMORY_NONE);
        if (ds != dnnl_success) {
            st = onednn__dnnl_error(ds, "dnnl_memory_create(");
            goto fail;
        }
        s.n_args++;
        if (sbytes > p->scratch_bytes) p->scratch_bytes = sbytes;
    }
    dnnl_primitive_desc_destroy(pd);  // the primitive keeps what it needs
    p->steps[p->n_steps++] = s;
    return 0;
fail:
    step_destroy(&s);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

int onednn__plan_add(onednn_plan *p, const void *desc, const_dnnl_primitive_attr_t attr,
                     bool reject_ref, int n, const onednn_bind *binds) {
    dnnl_primitive_desc_t pd = NULL;
    ONEDNN_CHECK(dnnl_primitive_desc_create(&pd, desc, attr, onednn__engine(), NULL));
    if (reject_ref) {
        const char *impl = NULL;
        if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
            impl && strncmp(impl, "ref", 3) == 0) {
            dnnl_primitive_desc_destroy(pd);
            return onednn__error(TORC_ERR_NOT_SUPPORTED,
                                 "onednn: oneDNN has only its reference implementation (%s) for "
                                 "these strides; the reference backend runs it instead", impl);
        }
    }
    return onednn__plan_add_pd(p, pd, n, binds);
}

int onednn__plan_reorder(onednn_plan *p, const onednn_view *from, int from_buf,
                         const onednn_view *to, int to_buf) {
    dnnl_memory_desc_t mf, mt;
    int st;
    if ((st = onednn__view_md(from, &mf)) || (st = onednn__view_md(to, &mt))) return st;
    dnnl_primitive_attr_t attr;
    if ((st = onednn__attr(&attr))) return st;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, &mf, onednn__engine(), &mt,
                                                         onednn__engine(), attr);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return onednn__dnnl_error(s, "dnnl_reorder_primitive_desc_create(");
    onednn_bind b[2] = {{DNNL_ARG_FROM, from_buf, NULL}, {DNNL_ARG_TO, to_buf, NULL}};
    return onednn__plan_add_pd(p, pd, 2, b);
}

// A new zeroed host step of this kind at the end of the plan, or NULL with the error set.
static onednn_step *host_step(onednn_plan *p, onednn_step_kind kind) {
    if (p->n_steps >= ONEDNN_MAX_STEPS) {
        onednn__error(TORC_ERR_BACKEND, "onednn: internal: plan step limit exceeded");
        return NULL;
    }
    onednn_step *s = &p->steps[p->n_steps++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    return s;
}

int onednn__plan_convert(onednn_plan *p, const onednn_view *from, int from_buf,
                         const onednn_view *to, int to_buf, dnnl_data_type_t round) {
    onednn_step *s = host_step(p, ONEDNN_STEP_CONVERT);
    if (!s) return TORC_ERR_BACKEND;
    s->n_args = 2;
    s->args[0].buf = from_buf;
    s->args[1].buf = to_buf;
    s->from = *from;
    s->to = *to;
    s->round = round;
    return 0;
}

int onednn__plan_gemm(onednn_plan *p, const onednn_gemm *g, int a_buf, int b_buf, int c_buf) {
    onednn_step *s = host_step(p, ONEDNN_STEP_GEMM);
    if (!s) return TORC_ERR_BACKEND;
    s->n_args = 3;
    s->args[0].buf = a_buf;
    s->args[1].buf = b_buf;
    s->args[2].buf = c_buf;
    s->gemm = *g;
    return 0;
}

int onednn__plan_amx_matmul(onednn_plan *p, const torc_op *op) {
    const torc_operand *x = &op->in[0], *w = &op->in[1], *y = &op->out[0];
    const int nd = y->ndim;
    const int nthreads = omp_get_max_threads();  // the cache builds small ops for one thread
    int buf = 0, st;
    if ((st = onednn__plan_tmp(p, onednn__amx_scratch_bytes(y->shape[nd - 2], y->shape[nd - 1],
                                                             x->shape[nd - 1], nthreads), &buf)))
        return st;
    onednn_step *s = host_step(p, ONEDNN_STEP_AMX_MATMUL);
    if (!s) return TORC_ERR_BACKEND;
    s->n_args = 4;
    s->args[0].buf = ONEDNN_BUF_IN0;
    s->args[1].buf = ONEDNN_BUF_IN0 + 1;
    s->args[2].buf = ONEDNN_BUF_OUT;
    s->args[3].buf = buf;
    s->amx.nthreads = nthreads;
    onednn__view(&s->amx.a, x, dnnl_bf16);
    onednn__view(&s->amx.b, w, dnnl_bf16);
    onednn__view(&s->amx.c, y, onednn__dt(y->dtype));
    return 0;
}

int onednn__plan_fma_matmul(onednn_plan *p, const onednn_fma_gemm *g, const onednn_gemm *batch, int a_buf,
                            int b_buf, int c_buf) {
    const int nthreads = omp_get_max_threads();  // the cache builds small ops for one thread
    // A batch of small matrices runs one matrix per thread, each with a one-thread scratch.
    const size_t bytes = batch->batch_parallel ? (size_t)nthreads * onednn__fma_scratch_bytes(g->M, g->N, g->K, 1)
                                               : onednn__fma_scratch_bytes(g->M, g->N, g->K, nthreads);
    int buf = 0, st;
    if ((st = onednn__plan_tmp(p, bytes, &buf))) return st;
    onednn_step *s = host_step(p, ONEDNN_STEP_FMA_MATMUL);
    if (!s) return TORC_ERR_BACKEND;
    s->n_args = 4;
    s->args[0].buf = a_buf;
    s->args[1].buf = b_buf;
    s->args[2].buf = c_buf;
    s->args[3].buf = buf;
    s->fma = *g;
    s->gemm = *batch;
    s->fma_nthreads = nthreads;
    return 0;
}

void onednn__batch_offsets(int nbatch, const int64_t *dims, const int64_t *sa, const int64_t *sb,
                           const int64_t *sc, int64_t i, int64_t off[3]) {
    off[0] = off[1] = off[2] = 0;
    for (int d = nbatch - 1; d >= 0; d--) {
        const int64_t j = i % dims[d];
        i /= dims[d];
        off[0] += j * sa[d];
        off[1] += j * sb[d];
        off[2] += j * sc[d];
    }
}

// An AMX matmul step: the matrices of the batch one after another, each on every thread.
static void run_amx(const onednn_step *s, const void *a, const void *b, void *c, void *scratch) {
    const onednn_view *va = &s->amx.a, *vb = &s->amx.b, *vc = &s->amx.c;
    const int nd = vc->ndim, r = nd - 2, k = nd - 1;
    const bool f32 = vc->dt == dnnl_f32;
    int nthreads = omp_get_max_threads();
    if (nthreads > s->amx.nthreads) nthreads = s->amx.nthreads;
    onednn_amx_gemm g = {
        .M = vc->dims[r], .N = vc->dims[k], .K = va->dims[k],
        .a_rs = va->strides[r], .a_cs = va->strides[k],
        .b_rs = vb->strides[r], .b_cs = vb->strides[k],
        .c_rs = vc->strides[r], .c_cs = vc->strides[k], .c_f32 = f32,
    };
    int64_t batch = 1;
    for (int d = 0; d < r; d++) batch *= vc->dims[d];
    for (int64_t i = 0; i < batch; i++) {
        int64_t o[3];
        onednn__batch_offsets(r, vc->dims, va->strides, vb->strides, vc->strides, i, o);
        g.a = (const uint16_t *)a + o[0];
        g.b = (const uint16_t *)b + o[1];
        g.c = f32 ? (void *)((float *)c + o[2]) : (void *)((uint16_t *)c + o[2]);
        onednn__amx_gemm(&g, scratch, nthreads);
    }
}

static void *buf_ptr(const onednn_plan *p, const onednn_arg *a, const torc_op *op, char *work) {
    if (a->buf < TORC_OP_MAX_INPUTS) return op->in[a->buf].data;
    if (a->buf == ONEDNN_BUF_OUT) return op->out[0].data;
    if (a->buf < ONEDNN_BUF_CONST) return work + p->tmp_offset[a->buf - ONEDNN_BUF_TMP0];
    if (a->buf == ONEDNN_BUF_CONST) return a->cptr;
    return work + p->tmp_bytes;  // the scratchpad
}

int onednn__plan_run(const onednn_plan *p, const torc_op *op, void *workspace,
                     dnnl_stream_t stream) {
    char *work = workspace;
    for (int i = 0; i < p->n_steps; i++) {
        const onednn_step *s = &p->steps[i];
        if (s->kind != ONEDNN_STEP_PRIM) {  // on the host: the primitives before it must have finished
            if (i > 0) ONEDNN_CHECK(dnnl_stream_wait(stream));
            if (s->kind == ONEDNN_STEP_CONVERT) {
                onednn__convert(&s->from, buf_ptr(p, &s->args[0], op, work), &s->to,
                                buf_ptr(p, &s->args[1], op, work), s->round);
                continue;
            }
            if (s->kind == ONEDNN_STEP_FMA_MATMUL) {
                onednn__fma_matmul_run(s, buf_ptr(p, &s->args[0], op, work), buf_ptr(p, &s->args[1], op, work),
                                       buf_ptr(p, &s->args[2], op, work), buf_ptr(p, &s->args[3], op, work));
                continue;
            }
            if (s->kind == ONEDNN_STEP_PIECES) {
                const int st = onednn__pieces_run(s->pieces, buf_ptr(p, &s->args[0], op, work),
                                                  buf_ptr(p, &s->args[1], op, work), buf_ptr(p, &s->args[2], op, work),
                                                  work + p->tmp_bytes);
                if (st) return st;
                continue;
            }
            if (s->kind == ONEDNN_STEP_AMX_MATMUL) {
                run_amx(s, buf_ptr(p, &s->args[0], op, work), buf_ptr(p, &s->args[1], op, work),
                        buf_ptr(p, &s->args[2], op, work), buf_ptr(p, &s->args[3], op, work));
                continue;
            }
            int st = onednn__gemm_run(&s->gemm, buf_ptr(p, &s->args[0], op, work),
                                      buf_ptr(p, &s->args[1], op, work),
                                      buf_ptr(p, &s->args[2], op, work));
            if (st) return st;
            continue;
        }
        dnnl_exec_arg_t args[ONEDNN_MAX_ARGS + 1];
        for (int j = 0; j < s->n_args; j++) {
            const onednn_arg *a = &s->args[j];
            ONEDNN_CHECK(dnnl_memory_set_data_handle(a->mem, buf_ptr(p, a, op, work)));
            args[j].arg = a->arg;
            args[j].memory = a->mem;
        }
        ONEDNN_CHECK(dnnl_primitive_execute(s->prim, stream, s->n_args, args));
    }
    if (p->n_steps > 0) ONEDNN_CHECK(dnnl_stream_wait(stream));
    return 0;
}

void onednn__plan_destroy(onednn_plan *p) {
    for (int i = 0; i < p->n_steps; i++) step_destroy(&p->steps[i]);
    memset(p, 0, sizeof *p);
}

// A primitive never writes bf16 itself: oneDNN's f32 -> bf16 conversion flushes subnormal results
// (square, mul, exp, sums of tiny values), which c10 keeps. It writes a dense f32 temporary laid
// out in vd's dim order instead, and torc's conversion (convert.c, c10's rounding) writes out.
int onednn__plan_dst(onednn_plan *p, const onednn_view *vd, onednn_view *vt, int *buf) {
    *vt = *vd;
    *buf = ONEDNN_BUF_OUT;
    if (vd->dt != dnnl_bf16) return 0;
    vt->dt = dnnl_f32;
    dnnl_dim_t s = 1;
    for (int d = vt->ndim - 1; d >= 0; d--) {
        vt->strides[d] = s;
        s *= vt->dims[d];
    }
    return onednn__plan_tmp(p, (size_t)s * sizeof(float), buf);
}

int onednn__plan_dst_done(onednn_plan *p, const onednn_view *vd, const onednn_view *vt, int buf) {
    return buf == ONEDNN_BUF_OUT ? 0 : onednn__plan_convert(p, vt, buf, vd, ONEDNN_BUF_OUT, dnnl_data_type_undef);
}
