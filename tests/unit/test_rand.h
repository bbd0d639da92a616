/* Deterministic random numbers for tests (xorshift64: the same sequence everywhere), and a
 * float's bits.
 *
 *     float x = rnd();              // uniform in [-1, 1)
 *     int k = rnd_int(1, 300);      // uniform in [1, 300]
 */
#ifndef ZT_TEST_RAND_H
#define ZT_TEST_RAND_H

#include <stdint.h>
#include <string.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd_u64(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* uniform in [-1, 1) */
static inline float rnd(void) { return (float)((double)(rnd_u64() >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

/* uniform integer in [lo, hi] */
static inline int rnd_int(int lo, int hi) { return lo + (int)(rnd_u64() % (uint64_t)(hi - lo + 1)); }

static inline uint32_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

#endif
