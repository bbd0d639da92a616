/* Sampling: greedy is argmax; top-k and top-p never pick outside their set;
 * frequencies follow the softmax at temperature 1; the same seed repeats. */
#include <math.h>
#include <stdlib.h>

#include "lib/model/sample.h"
#include "test.h"

enum { V = 6 };
static const float logits[V] = {1.0f, 3.0f, 2.0f, -1.0f, 2.5f, 0.0f};

static void test_greedy(void)
{
    zt_sampler s = {.temperature = 0};
    char scratch[V * 8];
    CHECK(zt_sample(&s, logits, V, scratch) == 1);
}

static void test_frequencies(void)
{
    zt_sampler s = {.temperature = 1, .top_p = 1};
    zt_rng_seed(&s.rng, 1, 0);
    char scratch[V * 8];
    int count[V] = {0}, n = 200000;
    for (int i = 0; i < n; i++) count[zt_sample(&s, logits, V, scratch)]++;
    double z = 0;
    for (int v = 0; v < V; v++) z += exp(logits[v]);
    /* a fixed seed, so the same counts on every CPU (to libm's last bit); 0.01 is 9 standard errors of a frequency
     * (at most 0.5/sqrt(n) = 1.1e-3) */
    for (int v = 0; v < V; v++) CHECK_NEAR(count[v] / (double)n, exp(logits[v]) / z, 0.01);
}

static void test_top_k_top_p(void)
{
    zt_sampler s = {.temperature = 1, .top_k = 2, .top_p = 1};
    zt_rng_seed(&s.rng, 2, 0);
    char scratch[V * 8];
    for (int i = 0; i < 2000; i++) {
        int t = zt_sample(&s, logits, V, scratch);
        CHECK(t == 1 || t == 4);
    }
    /* p(1) ≈ 0.48, p(4) ≈ 0.29: top_p 0.6 keeps both, 0.4 only the first */
    s.top_k = 0, s.top_p = 0.4;
    for (int i = 0; i < 2000; i++) CHECK(zt_sample(&s, logits, V, scratch) == 1);
}

static void test_seeded(void)
{
    zt_sampler a = {.temperature = 0.8, .top_p = 0.95}, b = a;
    zt_rng_seed(&a.rng, 9, 0);
    zt_rng_seed(&b.rng, 9, 0);
    char s1[V * 8], s2[V * 8];
    for (int i = 0; i < 100; i++) CHECK(zt_sample(&a, logits, V, s1) == zt_sample(&b, logits, V, s2));
}

int main(void)
{
    RUN(test_greedy);
    RUN(test_frequencies);
    RUN(test_top_k_top_p);
    RUN(test_seeded);
    return test_summary();
}
