/* kernels/cpu/levels: a loop compiled once for each CPU kernel level, and the choice
 * among them by zt_cpu_has (so ZT_CPU caps these loops like every other kernel).
 * From an always_inline function NAME_body,
 *
 *     ZT_LEVEL_BODY void swiglu_row_body(zt_real *h, const zt_real *g, const zt_real *u, int F) { ... }
 *     ZT_LEVELS(void, swiglu_row, (h, g, u, F), zt_real *h, const zt_real *g, const zt_real *u, int F)
 *     ...
 *     swiglu_row_fn *row = swiglu_row_for_cpu();   // once, before the loop over rows
 *
 * defines NAME_avx512, NAME_avx2 and NAME_scalar, the body compiled for exactly the
 * features lib/core/cpu.c checks for that level (so a level never runs an instruction its
 * check has not seen), the type NAME_fn and NAME_for_cpu(), the variant this run's level
 * allows. The compiler vectorises each variant for its features (and contracts a·b + c
 * into FMA where the level has it), so the levels' results may differ in rounding. */
#ifndef ZT_KERNELS_CPU_LEVELS_H
#define ZT_KERNELS_CPU_LEVELS_H

#include "lib/core/cpu.h"

#define ZT_LEVEL_BODY static inline __attribute__((always_inline))
#define ZT_TARGET_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512dq")))
#define ZT_TARGET_AVX2 __attribute__((target("avx2,fma")))

/* (return of a void call in a void function: GNU C, like the attributes) */
#define ZT_LEVELS(ret, name, args, ...)                                                                                \
    typedef ret name##_fn(__VA_ARGS__);                                                                                \
    ZT_TARGET_AVX512 static ret name##_avx512(__VA_ARGS__) { return name##_body args; }                                \
    ZT_TARGET_AVX2 static ret name##_avx2(__VA_ARGS__) { return name##_body args; }                                    \
    static ret name##_scalar(__VA_ARGS__) { return name##_body args; }                                                 \
    static name##_fn *name##_for_cpu(void)                                                                             \
    {                                                                                                                  \
        return zt_cpu_has(ZT_CPU_AVX512) ? name##_avx512 : zt_cpu_has(ZT_CPU_AVX2) ? name##_avx2 : name##_scalar;      \
    }

#endif
