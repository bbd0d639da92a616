#include "cpu.h"

#include <stdlib.h>
#include <string.h>

static int detected_level(void)
{
    static int level = -1;
    if (level >= 0) return level;
    __builtin_cpu_init();
    int hw = 0;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) hw = ZT_CPU_AVX2;
    if (hw && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        hw = ZT_CPU_AVX512;
    if (hw == ZT_CPU_AVX512 && __builtin_cpu_supports("avx512bf16")) hw = ZT_CPU_AVX512BF16;
    const char *cap = getenv("ZT_CPU");
    if (cap) {
        int c = !strcmp(cap, "scalar")   ? 0
                : !strcmp(cap, "avx2")   ? ZT_CPU_AVX2
                : !strcmp(cap, "avx512") ? ZT_CPU_AVX512
                                         : hw;
        if (c < hw) hw = c;
    }
    level = hw;
    return level;
}

int zt_cpu_has(zt_cpu_feature f) { return detected_level() >= (int)f; }

const char *zt_cpu_level_name(void)
{
    static const char *names[] = {"scalar", "avx2", "avx512", "avx512-bf16"};
    return names[detected_level()];
}
