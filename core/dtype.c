// core/dtype.c — the dtype table (names, sizes, categories, limits) and PyTorch's type
// promotion: promote_types, result_type (tensors outrank zero-dim tensors outrank scalars).
#include <float.h>
#include <stdatomic.h>
#include <string.h>

#include "torc-impl.h"

// ---- the table ----
// name, size, category and c10 name come from TORC_DTYPE_LIST (types.h), the one description
// the backends share; the rest is the frontend's own, one EXTRA_<ID> per dtype.
typedef struct dtype_info {
    const char *name;        // PyTorch's: str(torch.float32) without "torch."
    const char *c10_name;    // c10::ScalarType's name, which PyTorch's error messages print
    size_t size;             // bytes per element
    torc_dtype_category category;
    const char *short_name;  // torc's short spelling
    const char *alias;       // PyTorch's other attribute name (torch.float, torch.long), or NULL
    // torch.finfo (min, max, eps, tiny = smallest normal) for floating dtypes;
    // torch.iinfo (imin, imax) for integers (int64's limits do not fit a double).
    double min, max, eps, tiny;
    int64_t imin, imax;
} dtype_info;

#define EXTRA_F64 "f64", "double", -DBL_MAX, DBL_MAX, DBL_EPSILON, DBL_MIN, 0, 0
#define EXTRA_F32 "f32", "float", -FLT_MAX, FLT_MAX, FLT_EPSILON, FLT_MIN, 0, 0
#define EXTRA_F16 "f16", "half", -65504.0, 65504.0, 0x1p-10, 0x1p-14, 0, 0
#define EXTRA_BF16 "bf16", NULL, -0x1.fep+127, 0x1.fep+127, 0x1p-7, 0x1p-126, 0, 0
#define EXTRA_F8_E4M3FN "f8_e4m3fn", NULL, -448.0, 448.0, 0x1p-3, 0x1p-6, 0, 0
#define EXTRA_F8_E5M2 "f8_e5m2", NULL, -57344.0, 57344.0, 0x1p-2, 0x1p-14, 0, 0
#define EXTRA_I64 "i64", "long", 0, 0, 0, 0, INT64_MIN, INT64_MAX
#define EXTRA_I32 "i32", "int", 0, 0, 0, 0, INT32_MIN, INT32_MAX
#define EXTRA_I16 "i16", "short", 0, 0, 0, 0, INT16_MIN, INT16_MAX
#define EXTRA_I8 "i8", NULL, 0, 0, 0, 0, INT8_MIN, INT8_MAX
#define EXTRA_U8 "u8", NULL, 0, 0, 0, 0, 0, UINT8_MAX
#define EXTRA_BOOL "bool", NULL, 0, 0, 0, 0, 0, 1
#define EXTRA_TEST_EXTRA "test_extra", NULL, -FLT_MAX, FLT_MAX, FLT_EPSILON, FLT_MIN, 0, 0  // tests/abi only

static const dtype_info dtype_table[] = {
#define ROW(ID, name, size, cat, c10, minor) [TORC_DTYPE_##ID] = {name, c10, size, cat, EXTRA_##ID},
    TORC_DTYPE_LIST(ROW)
#undef ROW
};
_Static_assert(sizeof dtype_table / sizeof dtype_table[0] == TORC_DTYPE_COUNT,
               "a dtype without its table entry");

// The backend ABI minor each dtype appeared in (dispatch.c's gate).
const uint8_t torc_backend_dtype_minor[TORC_DTYPE_COUNT] = {
#define MINOR(ID, name, size, cat, c10, minor) [TORC_DTYPE_##ID] = minor,
    TORC_DTYPE_LIST(MINOR)
#undef MINOR
};

bool torc__dtype_valid(torc_dtype d) { return (unsigned)d < TORC_DTYPE_COUNT; }

const char *torc__dtype_c10_name(torc_dtype d) {
    return torc__dtype_valid(d) ? dtype_table[d].c10_name : "Undefined";
}

const char *torc__dtype_typemeta_name(torc_dtype d) {
    static const char *const n[TORC_DTYPE_COUNT] = {"double", "float", "c10::Half", "c10::BFloat16",
                                                    "c10::Float8_e4m3fn", "c10::Float8_e5m2", "long int", "int",
                                                    "short int", "signed char", "unsigned char", "bool"};
    return torc__dtype_valid(d) ? n[d] : "unknown";
}

bool torc__check_int_scalar(torc_dtype dt, double v) {
    double lo, hi;
    const char *name;  // the C++ type c10's Scalar::to<T> names (AT_FORALL_SCALAR_TYPES: Int is "int")
    switch (dt) {
    // c10 compares with the limits converted to double: 2^63 passes for int64 (the kernels saturate)
    case TORC_DTYPE_I64: lo = -0x1p63, hi = 0x1p63, name = "int64_t"; break;
    case TORC_DTYPE_I32: lo = -0x1p31, hi = 0x1p31 - 1, name = "int"; break;
    case TORC_DTYPE_I16: lo = -32768, hi = 32767, name = "int16_t"; break;
    case TORC_DTYPE_I8: lo = -128, hi = 127, name = "int8_t"; break;
    case TORC_DTYPE_U8: lo = 0, hi = 255, name = "uint8_t"; break;
    default: return true;
    }
    if (v >= lo && v <= hi) return true;  // false for NaN too
    torc__error(TORC_ERR_INVALID_ARG, "value cannot be converted to type %s without overflow", name);
    return false;
}

static torc_status invalid_dtype(torc_dtype d) {
    return torc__error(TORC_ERR_INVALID_ARG, "invalid dtype %d (expected 0..%d)", (int)d,
                       TORC_DTYPE_COUNT - 1);
}

const char *torc_dtype_name(torc_dtype d) {
    if (!torc__dtype_valid(d)) {
        invalid_dtype(d);
        return "invalid";
    }
    return dtype_table[d].name;
}

const char *torc_dtype_short_name(torc_dtype d) {
    if (!torc__dtype_valid(d)) {
        invalid_dtype(d);
        return "invalid";
    }
    return dtype_table[d].short_name;
}

size_t torc_dtype_size(torc_dtype d) {
    if (!torc__dtype_valid(d)) {
        invalid_dtype(d);
        return 0;
    }
    return dtype_table[d].size;
}

bool torc_dtype_is_floating(torc_dtype d) {
    return torc__dtype_valid(d) && dtype_table[d].category == TORC_DTYPE_CAT_FLOATING;
}

bool torc_dtype_is_integral(torc_dtype d) {
    return torc__dtype_valid(d) && dtype_table[d].category != TORC_DTYPE_CAT_FLOATING;
}

bool torc_dtype_is_fp8(torc_dtype d) { return d == TORC_DTYPE_F8_E4M3FN || d == TORC_DTYPE_F8_E5M2; }

torc_status torc_dtype_from_name(const char *name, torc_dtype *out) {
    if (!name || !out)
        return torc__null_arg("dtype_from_name: name and out must not be NULL");
    const char *n = strncmp(name, "torch.", 6) == 0 ? name + 6 : name;
    for (int d = 0; d < TORC_DTYPE_COUNT; d++) {
        const dtype_info *e = &dtype_table[d];
        if (strcmp(n, e->name) == 0 || strcmp(n, e->short_name) == 0 ||
            (e->alias && strcmp(n, e->alias) == 0)) {
            *out = (torc_dtype)d;
            return TORC_OK;
        }
    }
    return torc__error(TORC_ERR_INVALID_ARG,
                       "unknown dtype name '%s' (expected float64, float32, float16, bfloat16, "
                       "float8_e4m3fn, float8_e5m2, int64, int32, int16, int8, uint8, bool or "
                       "f64, f32, f16, bf16, f8_e4m3fn, f8_e5m2, i64, i32, i16, i8, u8)",
                       name);
}

torc_status torc_finfo(torc_dtype d, double *min, double *max, double *eps, double *tiny) {
    if (!torc__dtype_valid(d)) return invalid_dtype(d);
    const dtype_info *e = &dtype_table[d];
    if (e->category != TORC_DTYPE_CAT_FLOATING)
        return torc__error(TORC_ERR_DTYPE, "torc_finfo() requires a floating point input type "
                           "(got %s). Use torc_iinfo to handle '%s'", e->name, e->name);
    if (min) *min = e->min;
    if (max) *max = e->max;
    if (eps) *eps = e->eps;
    if (tiny) *tiny = e->tiny;
    return TORC_OK;
}

torc_status torc_iinfo(torc_dtype d, int64_t *min, int64_t *max) {
    if (!torc__dtype_valid(d)) return invalid_dtype(d);
    const dtype_info *e = &dtype_table[d];
    if (e->category == TORC_DTYPE_CAT_BOOL)
        return torc__error(TORC_ERR_DTYPE, "bool is not supported by torc_iinfo");
    if (e->category != TORC_DTYPE_CAT_INTEGER)
        return torc__error(TORC_ERR_DTYPE, "torc_iinfo() requires an integer input type "
                           "(got %s). Use torc_finfo to handle '%s'", e->name, e->name);
    if (min) *min = e->imin;
    if (max) *max = e->imax;
    return TORC_OK;
}

// ---- default dtype (one per process, as torch.set_default_dtype) ----
static _Atomic int default_dtype = TORC_DTYPE_F32;

torc_dtype torc_get_default_dtype(void) { return (torc_dtype)atomic_load(&default_dtype); }

torc_status torc_set_default_dtype(torc_dtype d) {
    if (!torc__dtype_valid(d)) return invalid_dtype(d);
    if (!torc_dtype_is_floating(d))
        return torc__error(TORC_ERR_DTYPE, "only floating-point types are supported as the "
                           "default type (got %s)", dtype_table[d].name);
    // PyTorch refuses fp8 too (it has no fp8 storage type); float scalars would become fp8.
    if (torc_dtype_is_fp8(d))
        return torc__error(TORC_ERR_DTYPE, "%s cannot be the default type: float8 dtypes are "
                           "storage formats, cast to them explicitly", dtype_table[d].name);
    atomic_store(&default_dtype, (int)d);
    return TORC_OK;
}

// ---- promote_types ----
// Width order of the floating types that promote by width; f16 and bf16 share a rank and
// meet at f32 (neither holds the other: bf16 has the range, f16 the precision).
static int float_rank(torc_dtype d) {
    switch (d) {
    case TORC_DTYPE_F64: return 3;
    case TORC_DTYPE_F32: return 2;
    default: return 1;  // f16, bf16
    }
}

// Both valid, neither fp8 unless equal: c10's promoteTypes table, written as its rules.
static torc_dtype promote_valid(torc_dtype a, torc_dtype b) {
    if (a == b) return a;
    torc_dtype_category ca = dtype_table[a].category, cb = dtype_table[b].category;
    if (ca == TORC_DTYPE_CAT_BOOL) return b;  // bool is the lowest type
    if (cb == TORC_DTYPE_CAT_BOOL) return a;
    if (ca == TORC_DTYPE_CAT_FLOATING && cb != TORC_DTYPE_CAT_FLOATING) return a;  // a float holds any integer type
    if (cb == TORC_DTYPE_CAT_FLOATING && ca != TORC_DTYPE_CAT_FLOATING) return b;
    if (ca == TORC_DTYPE_CAT_FLOATING) {
        int ra = float_rank(a), rb = float_rank(b);
        if (ra == rb) return TORC_DTYPE_F32;  // f16 + bf16
        return ra > rb ? a : b;
    }
    // Two different integer types: the wider signed one; uint8 needs a signed type wider
    // than itself, so u8 + i8 -> i16.
    if (a == TORC_DTYPE_U8 || b == TORC_DTYPE_U8) {
        torc_dtype s = a == TORC_DTYPE_U8 ? b : a;
        return s == TORC_DTYPE_I8 ? TORC_DTYPE_I16 : s;
    }
    return dtype_table[a].size >= dtype_table[b].size ? a : b;
}

static torc_status fp8_promotion_error(torc_dtype a, torc_dtype b) {
    return torc__error(TORC_ERR_DTYPE,
                       "Promotion for Float8 Types is not supported, attempted to promote %s "
                       "and %s (cast explicitly with torc_to_dtype first)",
                       dtype_table[a].c10_name, dtype_table[b].c10_name);
}

torc_status torc_promote_types(torc_dtype a, torc_dtype b, torc_dtype *out) {
    if (!out) return torc__null_arg("promote_types: out must not be NULL");
    if (!torc__dtype_valid(a)) return invalid_dtype(a);
    if (!torc__dtype_valid(b)) return invalid_dtype(b);
    if (a != b && (torc_dtype_is_fp8(a) || torc_dtype_is_fp8(b))) return fp8_promotion_error(a, b);
    *out = promote_valid(a, b);
    return TORC_OK;
}

// ---- result_type (PyTorch's ResultTypeState, aten/src/ATen/native/TypeProperties.cpp) ----
#define UNDEFINED TORC_DTYPE_COUNT  // "no operand in this group yet"

static torc_status promote_skip_undefined(torc_dtype a, torc_dtype b, torc_dtype *out) {
    if (a == UNDEFINED) {
        *out = b;
        return TORC_OK;
    }
    if (b == UNDEFINED) {
        *out = a;
        return TORC_OK;
    }
    return torc_promote_types(a, b, out);
}

// The higher-priority group wins unless the lower one is of a higher category, and then
// the two promote: a scalar or zero-dim float lifts an integer tensor to a float type.
static torc_status combine_categories(torc_dtype higher, torc_dtype lower, torc_dtype *out) {
    if (torc_dtype_is_floating(higher)) {
        *out = higher;
        return TORC_OK;
    }
    if (higher == TORC_DTYPE_BOOL || torc_dtype_is_floating(lower))
        return promote_skip_undefined(higher, lower, out);
    *out = higher != UNDEFINED ? higher : lower;
    return TORC_OK;
}

torc_status torc_result_type(int n_tensors, const torc_tensor *const *tensors, int n_scalars,
                             const torc_scalar *scalars, torc_dtype *out) {
    if (!out) return torc__null_arg("result_type: out must not be NULL");
    if (n_tensors < 0 || n_scalars < 0 || (n_tensors > 0 && !tensors) ||
        (n_scalars > 0 && !scalars))
        return torc__error(TORC_ERR_INVALID_ARG,
                           "result_type: bad operand lists (%d tensors, %d scalars)", n_tensors,
                           n_scalars);
    if (n_tensors + n_scalars == 0)
        return torc__error(TORC_ERR_INVALID_ARG, "result_type: needs at least one operand");

    torc_dtype dim_result = UNDEFINED, zero_result = UNDEFINED, wrapped_result = UNDEFINED;
    torc_status st;
    for (int i = 0; i < n_tensors; i++) {
        if (!tensors[i])
            return torc__null_arg("result_type: tensor %d is NULL", i);
        torc_dtype d = torc_get_dtype(tensors[i]);
        torc_dtype *group = torc_ndim(tensors[i]) > 0 ? &dim_result : &zero_result;
        if ((st = promote_skip_undefined(*group, d, group)) != TORC_OK) return st;
    }
    for (int i = 0; i < n_scalars; i++) {
        torc_dtype d;
        switch (scalars[i].kind) {
        case TORC_DTYPE_F64: d = torc_get_default_dtype(); break;  // a Python float
        case TORC_DTYPE_I64: d = TORC_DTYPE_I64; break;
        case TORC_DTYPE_BOOL: d = TORC_DTYPE_BOOL; break;
        default:
            return torc__error(TORC_ERR_INVALID_ARG,
                               "result_type: scalar %d has kind %d (expected TORC_DTYPE_BOOL, "
                               "TORC_DTYPE_I64 or TORC_DTYPE_F64)", i, (int)scalars[i].kind);
        }
        if ((st = promote_skip_undefined(wrapped_result, d, &wrapped_result)) != TORC_OK) return st;
    }
    torc_dtype lower;
    if ((st = combine_categories(zero_result, wrapped_result, &lower)) != TORC_OK) return st;
    torc_dtype result;
    if ((st = combine_categories(dim_result, lower, &result)) != TORC_OK) return st;
    *out = result;
    return TORC_OK;
}
