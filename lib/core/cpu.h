/* core/cpu: runtime CPU feature checks for kernel dispatch.
 *
 *     if (zt_cpu_has(ZT_CPU_AVX512BF16)) gemm_bf16_avx512(...); else gemm_bf16_scalar(...);
 *
 * ZT_CPU=scalar|avx2|avx512 caps what dispatch may use (tests run every path).
 */
#ifndef ZT_CORE_CPU_H
#define ZT_CORE_CPU_H

typedef enum { ZT_CPU_AVX2 = 1, ZT_CPU_AVX512 = 2, ZT_CPU_AVX512BF16 = 3 } zt_cpu_feature;

int zt_cpu_has(zt_cpu_feature f);
const char *zt_cpu_level_name(void); /* "avx512-bf16", "avx512", "avx2" or "scalar" */

#endif
