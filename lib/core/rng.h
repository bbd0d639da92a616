/* core/rng: a small deterministic random number generator (xoshiro256**, seeded
 * through splitmix64). Every random choice in zt (data order, model init) comes
 * from here, so a seed reproduces a run bit for bit on the same machine.
 *
 *     zt_rng r;
 *     zt_rng_seed(&r, seed, epoch);      // independent stream per (seed, stream)
 *     uint64_t j = zt_rng_below(&r, n);  // uniform in [0, n)
 *     double w = 0.02 * zt_rng_normal(&r);
 */
#ifndef ZT_CORE_RNG_H
#define ZT_CORE_RNG_H

#include <stdint.h>

typedef struct zt_rng {
    uint64_t s[4];
} zt_rng;

/* Different (seed, stream) pairs give unrelated sequences: stream numbers an
 * epoch, a rank or a tensor without touching the user's seed. */
void zt_rng_seed(zt_rng *r, uint64_t seed, uint64_t stream);
uint64_t zt_rng_next_u64(zt_rng *r);
/* Uniform in [0, n), unbiased; n > 0. */
uint64_t zt_rng_below(zt_rng *r, uint64_t n);
/* Uniform in [0, 1) with 53 random bits. */
double zt_rng_uniform(zt_rng *r);
/* Standard normal (Box-Muller; consumes two uniforms per sample). */
double zt_rng_normal(zt_rng *r);
/* Standard normal by the ziggurat method: the same distribution, other values, about 8 times
 * faster (one draw, a multiply and a compare for 99% of the samples). */
double zt_rng_normal_ziggurat(zt_rng *r);
/* Permutes a[n] in place (Fisher-Yates) with the stream (seed, stream). */
void zt_rng_shuffle(int64_t *a, int64_t n, uint64_t seed, uint64_t stream);

/* Counter-based draws, for random values that are a function of an element's index (dropout
 * masks, noise) and so come out the same on any thread count, backend or recomputation. */

/* splitmix64's output function: a bijection that scrambles every bit */
static inline uint64_t zt_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1) on the grid of 2^-23 (24 random bits, exact in a float): counter k's draw. */
static inline float zt_hash_uniform_pm1(uint64_t k) { return (float)(zt_mix64(k) >> 40) * 0x1p-23f - 1.0f; }

#endif
