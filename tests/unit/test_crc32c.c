/* CRC-32C: the check value of "123456789", and every length and alignment (the 8-byte
 * loop of the hardware path and its tail), whole or in two calls, against a bit-at-a-time
 * reference. */
#include <stdlib.h>

#include "lib/core/crc32c.h"
#include "test.h"

static uint32_t reference(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

static void test_check_value(void) { CHECK(zt_crc32c(0, "123456789", 9) == 0xE3069283u); }

static void test_lengths_and_alignments(void)
{
    unsigned char buf[300];
    srand(3);
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)rand();
    int bad = 0;
    for (size_t off = 0; off < 9; off++)
        for (size_t n = 0; n + off <= 280; n += 1 + n / 16) {
            uint32_t want = reference(buf + off, n);
            bad += zt_crc32c(0, buf + off, n) != want;
            bad += zt_crc32c(zt_crc32c(0, buf + off, n / 3), buf + off + n / 3, n - n / 3) != want;
        }
    CHECK(bad == 0);
}

int main(void)
{
    RUN(test_check_value);
    RUN(test_lengths_and_alignments);
    return test_summary();
}
