#include "rng.h"

#include <math.h>
#include <pthread.h>

#define GOLDEN 0x9e3779b97f4a7c15ULL

void zt_rng_seed(zt_rng *r, uint64_t seed, uint64_t stream)
{
    /* Mixing the stream before combining keeps (seed, stream) and
     * (seed', stream + 1) from landing on shifted copies of one splitmix walk. */
    uint64_t x = zt_mix64(seed) ^ zt_mix64(zt_mix64(stream) + GOLDEN);
    /* Four consecutive splitmix64 outputs: never all zero, since mix64 is a bijection. */
    for (int i = 0; i < 4; i++) {
        x += GOLDEN;
        r->s[i] = zt_mix64(x);
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

/* The ziggurat of the normal density in ZIG layers of equal area (Marsaglia and Tsang, 2000; the
 * form of Doornik, 2005: doubles, no integer table): x[i] the layers' right edges, x[ZIG] = 0. */
enum { ZIG = 128 };
#define ZIG_R 3.442619855899      /* x[1]: where the tail starts */
#define ZIG_V 9.91256303526217e-3 /* each layer's area */
static double zig_x[ZIG + 1], zig_ratio[ZIG];
static pthread_once_t zig_once = PTHREAD_ONCE_INIT;

static void zig_tables(void)
{
    double f = exp(-0.5 * ZIG_R * ZIG_R);
    zig_x[0] = ZIG_V / f, zig_x[1] = ZIG_R, zig_x[ZIG] = 0;
    for (int i = 2; i < ZIG; i++) {
        zig_x[i] = sqrt(-2.0 * log(ZIG_V / zig_x[i - 1] + f));
        f = exp(-0.5 * zig_x[i] * zig_x[i]);
    }
    for (int i = 0; i < ZIG; i++) zig_ratio[i] = zig_x[i + 1] / zig_x[i];
}

double zt_rng_normal_ziggurat(zt_rng *r)
{
    pthread_once(&zig_once, zig_tables);
    for (;;) {
        uint64_t b = zt_rng_next_u64(r);
        int i = (int)(b & (ZIG - 1));
        double u = 2.0 * (double)(b >> 11) * 0x1.0p-53 - 1.0; /* [-1, 1) from the other 53 bits */
        if (fabs(u) < zig_ratio[i]) return u * zig_x[i];      /* inside the layer's rectangle */
        if (i == 0) {                                         /* the tail beyond ZIG_R (Marsaglia's method) */
            double x, y;
            do {
                x = log(1.0 - zt_rng_uniform(r)) / ZIG_R;
                y = log(1.0 - zt_rng_uniform(r));
            } while (-2.0 * y < x * x);
            return u < 0 ? x - ZIG_R : ZIG_R - x;
        }
        double x = u * zig_x[i], f0 = exp(-0.5 * (zig_x[i] * zig_x[i] - x * x)),
               f1 = exp(-0.5 * (zig_x[i + 1] * zig_x[i + 1] - x * x));
        if (f1 + zt_rng_uniform(r) * (f0 - f1) < 1.0) return x; /* under the density's curve */
    }
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
