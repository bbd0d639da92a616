#include "rng.h"

#include <math.h>

#define GOLDEN 0x9e3779b97f4a7c15ULL

/* splitmix64's output function: a bijective 64-bit mixer */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void zt_rng_seed(zt_rng *r, uint64_t seed, uint64_t stream)
{
    /* Mixing the stream before combining keeps (seed, stream) and
     * (seed', stream + 1) from landing on shifted copies of one splitmix walk. */
    uint64_t x = mix64(seed) ^ mix64(mix64(stream) + GOLDEN);
    /* Four consecutive splitmix64 outputs: never all zero, since mix64 is a bijection. */
    for (int i = 0; i < 4; i++) {
        x += GOLDEN;
        r->s[i] = mix64(x);
    }
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t zt_rng_next_u64(zt_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

uint64_t zt_rng_below(zt_rng *r, uint64_t n)
{
    /* Reject the low values that would make the modulo uneven: 2^64 mod n of them. */
    uint64_t threshold = -n % n;
    for (;;) {
        uint64_t x = zt_rng_next_u64(r);
        if (x >= threshold) return x % n;
    }
}

double zt_rng_uniform(zt_rng *r) { return (double)(zt_rng_next_u64(r) >> 11) * 0x1.0p-53; }

double zt_rng_normal(zt_rng *r)
{
    double u1 = 1.0 - zt_rng_uniform(r); /* (0, 1]: log stays finite */
    double u2 = zt_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

void zt_rng_shuffle(int64_t *a, int64_t n, uint64_t seed, uint64_t stream)
{
    zt_rng r;
    zt_rng_seed(&r, seed, stream);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)zt_rng_below(&r, (uint64_t)i + 1);
        int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}
