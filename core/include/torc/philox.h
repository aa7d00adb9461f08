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

// Standard normal by Box-Muller on the same four words (u1 in (0, 1], u2 in [0, 1)).
TORC_HD static inline double torc_philox_normal(uint64_t seed, uint64_t offset, uint64_t index) {
    uint32_t w[4];
    torc_philox_words(seed, offset, index, w);
    const double u1 = (double)((((uint64_t)w[0] << 21) | (w[1] >> 11)) + 1) * 0x1.0p-53;
    const double u2 = (double)(((uint64_t)w[2] << 21) | (w[3] >> 11)) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}

#endif
