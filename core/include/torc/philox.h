// torc/philox.h — the counter-based generator every backend uses for rand/randn/randint:
// Philox 4x32-10 keyed by the seed, counter = offset + element index, so a tensor's random
// numbers depend only on (seed, offset, index) and are the same on every backend.
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
    return (double)u53 * 0x1.0p-53;
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
    if (m < 0x1.6a09e667f3bcdp-1) {     // below sqrt(1/2): into [sqrt(1/2), sqrt(2))
        m *= 2.0;
        e -= 1;
    }
    const double f = m - 1.0;           // exact (Sterbenz)
    const double s = f / (2.0 + f);
    const double z = s * s;
    double p = 0x1.8618618618618p-5;    // 1/21, then 1/19 ... 1/3
    p = fma(p, z, 0x1.af286bca1af28p-5);
    p = fma(p, z, 0x1.e1e1e1e1e1e1ep-5);
    p = fma(p, z, 0x1.1111111111111p-4);
    p = fma(p, z, 0x1.3b13b13b13b14p-4);
    p = fma(p, z, 0x1.745d1745d1746p-4);
    p = fma(p, z, 0x1.c71c71c71c71cp-4);
    p = fma(p, z, 0x1.2492492492492p-3);
    p = fma(p, z, 0x1.999999999999ap-3);
    p = fma(p, z, 0x1.5555555555555p-2);
    const double log_m = fma(2.0 * s * z, p, 2.0 * s);
    // e log 2 with log 2 split in two: e * hi is exact (hi has 20 zero low bits, |e| <= 1075)
    const double de = (double)e;
    return fma(de, 0x1.62e42fefa3800p-1, fma(de, 0x1.ef35793c76730p-45, log_m));
}

// cos(2 pi v / 2^53) for an integer v < 2^53: the quadrant and the reflection about pi/4 come
// from v's bits exactly, leaving x in [0, pi/4] for Taylor series of sin and cos to degree 19
// and 18 (truncation below 2^-60).
TORC_HD static inline double torc_philox_cos2pi(uint64_t v) {
    const unsigned q = (unsigned)(v >> 51) & 3u;                // which quarter turn
    uint64_t r = v & ((UINT64_C(1) << 51) - 1);                  // position in it, of 2^51
    const int reflect = r > (UINT64_C(1) << 50);                 // past pi/4: use pi/2 - x
    if (reflect) r = (UINT64_C(1) << 51) - r;
    const double x = (double)r * 0x1.921fb54442d18p-51;          // r (pi/2) / 2^51
    const double z = x * x;
    double c = -0x1.6827863b97d97p-53;  // (-1)^k / (2k)!, k = 9 down to 1
    c = fma(c, z, 0x1.ae7f3e733b81fp-45);
    c = fma(c, z, -0x1.93974a8c07c9dp-37);
    c = fma(c, z, 0x1.1eed8eff8d898p-29);
    c = fma(c, z, -0x1.27e4fb7789f5cp-22);
    c = fma(c, z, 0x1.a01a01a01a01ap-16);
    c = fma(c, z, -0x1.6c16c16c16c17p-10);
    c = fma(c, z, 0x1.5555555555555p-5);
    c = fma(c, z, -0.5);
    const double cos_x = fma(c, z, 1.0);
    double t = -0x1.2f49b46814157p-57;  // (-1)^k / (2k+1)!, k = 9 down to 1
    t = fma(t, z, 0x1.952c77030ad4ap-49);
    t = fma(t, z, -0x1.ae7f3e733b81fp-41);
    t = fma(t, z, 0x1.6124613a86d09p-33);
    t = fma(t, z, -0x1.ae64567f544e4p-26);
    t = fma(t, z, 0x1.71de3a556c734p-19);
    t = fma(t, z, -0x1.a01a01a01a01ap-13);
    t = fma(t, z, 0x1.1111111111111p-7);
    t = fma(t, z, -0x1.5555555555555p-3);
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
    const double u1 = (double)((((uint64_t)w[0] << 21) | (w[1] >> 11)) + 1) * 0x1.0p-53;
    const uint64_t v2 = ((uint64_t)w[2] << 21) | (w[3] >> 11);
    return sqrt(-2.0 * torc_philox_log(u1)) * torc_philox_cos2pi(v2);
}

#endif
