// torc/philox.h — the counter-based generator every backend uses for rand/randn/randint:
// Philox 4x32-10 keyed by the seed, counter = offset + element index, so a tensor's random
// numbers depend only on (seed, offset, index) and are the same on every backend.
// Constants are decimal, the shortest that reads back as the same double, so that the header
// compiles as C++11 (no hexadecimal floats before C++17).
#ifndef TORC_PHILOX_H
#define TORC_PHILOX_H

#include <math.h>
#include <stdint.h>
#include "convert.h"   // TORC_HD

TORC_HD static inline void torc_philox4x32_10(uint32_t ctr[4], uint32_t k0, uint32_t k1) {
    for (int r = 0; r < 10; r++) {
        const uint64_t p0 = (uint64_t)UINT32_C(0xD2511F53) * ctr[0];
        const uint64_t p1 = (uint64_t)UINT32_C(0xCD9E8D57) * ctr[2];
        const uint32_t c0 = (uint32_t)(p1 >> 32) ^ ctr[1] ^ k0;
        const uint32_t c2 = (uint32_t)(p0 >> 32) ^ ctr[3] ^ k1;
        ctr[1] = (uint32_t)p1;
        ctr[3] = (uint32_t)p0;
        ctr[0] = c0;
        ctr[2] = c2;
        k0 += UINT32_C(0x9E3779B9);
        k1 += UINT32_C(0xBB67AE85);
    }
}

// The four 32-bit words for element `index` of a draw that started at counter `offset`.
TORC_HD static inline void torc_philox_words(uint64_t seed, uint64_t offset, uint64_t index,
                                             uint32_t out[4]) {
    const uint64_t c = offset + index;
    out[0] = (uint32_t)c;
    out[1] = (uint32_t)(c >> 32);
    out[2] = 0;
    out[3] = 0;
    torc_philox4x32_10(out, (uint32_t)seed, (uint32_t)(seed >> 32));
}

// Uniform in [0, 1) with 53 random bits.
TORC_HD static inline double torc_philox_uniform(uint64_t seed, uint64_t offset, uint64_t index) {
    uint32_t w[4];
    torc_philox_words(seed, offset, index, w);
    const uint64_t u53 = ((uint64_t)w[0] << 21) | (w[1] >> 11);
    return (double)u53 * 1.1102230246251565e-16;
}

// ---- the normal transform, the same bits on every backend ----
// Box-Muller needs a log and a cosine. A math library's are not specified to the last bit (glibc
// and CUDA's libdevice differ by 1-2 ulp), so torc uses its own: argument reductions that are
// exact and fixed polynomials evaluated with IEEE +, -, *, / and fma only, each of which is
// correctly rounded on every CPU and GPU. Every multiply that feeds an addition is written as
// fma() so that no compiler's contraction (nvcc's --fmad, GCC's -ffp-contract=fast) can change
// a result. Accuracy: within a few ulp of the true values (the test checks against libm).

// log(u) for u in (0, 1]: u = m 2^e with m in [sqrt(1/2), sqrt(2)) (exact), log(m) = 2 atanh(s)
// with s = (m - 1) / (m + 1), |s| <= 0.172, as the series 2 (s + s^3/3 + ... + s^21/21).
TORC_HD static inline double torc_philox_log(double u) {
    int e;
    double m = frexp(u, &e);            // u = m 2^e, m in [1/2, 1): exact
    if (m < 0.7071067811865476) {       // below sqrt(1/2): into [sqrt(1/2), sqrt(2))
        m *= 2.0;
        e -= 1;
    }
    const double f = m - 1.0;           // exact (Sterbenz)
    const double s = f / (2.0 + f);
    const double z = s * s;
    double p = 0.047619047619047616;    // 1/21, then 1/19 ... 1/3
    p = fma(p, z, 0.05263157894736842);
    p = fma(p, z, 0.058823529411764705);
    p = fma(p, z, 0.06666666666666667);
    p = fma(p, z, 0.07692307692307693);
    p = fma(p, z, 0.09090909090909091);
    p = fma(p, z, 0.1111111111111111);
    p = fma(p, z, 0.14285714285714285);
    p = fma(p, z, 0.2);
    p = fma(p, z, 0.3333333333333333);
    const double log_m = fma(2.0 * s * z, p, 2.0 * s);
    // e log 2 with log 2 split in two: e * hi is exact (hi, 0x1.62e42fefa3800p-1, has 20 zero
    // low bits, |e| <= 1075)
    const double de = (double)e;
    return fma(de, 0.6931471805598903, fma(de, 5.497923018708371e-14, log_m));
}

// cos(2 pi v / 2^53) for an integer v < 2^53: the quadrant and the reflection about pi/4 come
// from v's bits exactly, leaving x in [0, pi/4] for Taylor series of sin and cos to degree 19
// and 18 (truncation below 2^-60).
TORC_HD static inline double torc_philox_cos2pi(uint64_t v) {
    const unsigned q = (unsigned)(v >> 51) & 3u;                // which quarter turn
    uint64_t r = v & ((UINT64_C(1) << 51) - 1);                  // position in it, of 2^51
    const int reflect = r > (UINT64_C(1) << 50);                 // past pi/4: use pi/2 - x
    if (reflect) r = (UINT64_C(1) << 51) - r;
    const double x = (double)r * 6.975736996017264e-16;          // r (pi/2) / 2^51
    const double z = x * x;
    double c = -1.5619206968586225e-16;  // (-1)^k / (2k)!, k = 9 down to 1
    c = fma(c, z, 4.779477332387385e-14);
    c = fma(c, z, -1.1470745597729725e-11);
    c = fma(c, z, 2.08767569878681e-09);
    c = fma(c, z, -2.755731922398589e-07);
    c = fma(c, z, 2.48015873015873e-05);
    c = fma(c, z, -0.001388888888888889);
    c = fma(c, z, 0.041666666666666664);
    c = fma(c, z, -0.5);
    const double cos_x = fma(c, z, 1.0);
    double t = -8.22063524662433e-18;  // (-1)^k / (2k+1)!, k = 9 down to 1
    t = fma(t, z, 2.8114572543455206e-15);
    t = fma(t, z, -7.647163731819816e-13);
    t = fma(t, z, 1.6059043836821613e-10);
    t = fma(t, z, -2.505210838544172e-08);
    t = fma(t, z, 2.7557319223985893e-06);
    t = fma(t, z, -0.0001984126984126984);
    t = fma(t, z, 0.008333333333333333);
    t = fma(t, z, -0.16666666666666666);
    const double sin_x = fma(x * z, t, x);
    // angle = q pi/2 + phi, phi = x (or pi/2 - x when reflected)
    const double cos_phi = reflect ? sin_x : cos_x, sin_phi = reflect ? cos_x : sin_x;
    switch (q) {
    case 0: return cos_phi;
    case 1: return -sin_phi;
    case 2: return -cos_phi;
    default: return sin_phi;
    }
}

// Standard normal by Box-Muller on the same four words: sqrt(-2 log u1) cos(2 pi u2), u1 in
// (0, 1], u2 in [0, 1), both from 53 random bits.
TORC_HD static inline double torc_philox_normal(uint64_t seed, uint64_t offset, uint64_t index) {
    uint32_t w[4];
    torc_philox_words(seed, offset, index, w);
    const double u1 = (double)((((uint64_t)w[0] << 21) | (w[1] >> 11)) + 1) * 1.1102230246251565e-16;
    const uint64_t v2 = ((uint64_t)w[2] << 21) | (w[3] >> 11);
    return sqrt(-2.0 * torc_philox_log(u1)) * torc_philox_cos2pi(v2);
}

#endif
