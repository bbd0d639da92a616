/* optim/adamw8bit: AdamW whose moments are kept in 8 bits, as bitsandbytes' blockwise AdamW8bit
 * (Hugging Face's optim = "adamw_8bit"): a tensor's moments are cut into blocks of 256 elements
 * from its start; each block stores one fp32 absmax per moment and one byte per element, the
 * index of the code nearest to x / absmax in a 256-entry map (kernels/cpu/dyn8.h: the signed
 * dynamic code for m, the unsigned one for v, bitsandbytes' create_dynamic_map; a tie to the
 * lower). A step dequantizes a block
 * (code * absmax), runs the fp32 AdamW update on it (optim/adamw.h, the same kernels), takes
 * the block's new absmax (max |x|) and quantizes it again. Tensors of fewer than 4096 elements
 * keep fp32 moments, as bitsandbytes' min_8bit_size. The nearest code is the one the CUDA
 * kernels of bitsandbytes choose (the CPU path of bitsandbytes 0.50 looks codes up in a coarser table).
 *
 *     float m[256], v[256];
 *     zt_adamw8_update(&c, kernel, param, grad, q1, q2, a1, a2, n, NULL, m, v);   // fp32 states
 *     a1 = zt_adamw8_absmax(m, n), a2 = zt_adamw8_absmax(v, n);                       // or the whole block's
 *     zt_adamw8_quantize(zt_adamw8_map(0), m, n, a1, q1);
 *     zt_adamw8_quantize(zt_adamw8_map(1), v, n, a2, q2);
 */
#ifndef ZT_OPTIM_ADAMW8BIT_H
#define ZT_OPTIM_ADAMW8BIT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/dyn8.h"
#include "lib/optim/adamw_kernels.h"

enum { ZT_ADAMW8_BLOCK = 256, ZT_ADAMW8_MIN_NUMEL = 4096 };

/* The code maps, sorted ascending: 0 the signed (m), 1 the unsigned (v). */
const zt_dyn8 *zt_adamw8_map(int unsigned_map);
/* max |x[i]| over n elements. */
float zt_adamw8_absmax(const float *x, size_t n);
/* Quantizes n ≤ 256 elements of x with that absmax into q (absmax 0: all zeros). */
void zt_adamw8_quantize(const zt_dyn8 *map, const float *x, size_t n, float absmax, uint8_t *q);
/* x[i] = map->code[q[i]] * absmax. */
void zt_adamw8_dequantize(const zt_dyn8 *map, const uint8_t *q, size_t n, float absmax, float *x);
/* The inverse of zt_adamw8_dequantize for a whole block's n values x: their codes into q, and
 * the absmax returned. A block of values that no absmax reproduces exactly (fp32 moments of
 * another optimizer) is quantized as a step would, with absmax max |x|. */
float zt_adamw8_recover(const zt_dyn8 *map, const float *x, size_t n, uint8_t *q);
/* A tensor's part here, with this step's constants (lib/zero/optstate8.h lays them out); its
 * blocks count from the tensor's start, so the first may begin on the rank before. The same bytes
 * on the host and on a device. */
typedef struct zt_adamw8_piece {
    uint64_t local;  /* its first element here: in the weights, the gradient and the codes */
    uint64_t flat;   /* the same element in the flat array: in the bf16 copy */
    uint64_t n;      /* its elements here */
    uint32_t lead;   /* its first block's elements before it: (flat - the tensor's first) % 256 */
    uint32_t absmax; /* its first block's absmax values, an index */
    zt_adamw_consts c;
} zt_adamw8_piece;

/* Block j of a piece, all of it here. */
typedef struct zt_adamw8_block {
    uint32_t piece, j;
} zt_adamw8_block;

/* Block j of a piece, cut by a rank boundary: its part's fp32 moments wait at held index k (its
 * place in the table: 2 · 256 floats, m's then v's) for the whole block's absmax, its part's
 * maxima go to the first slot of the boundary before this rank and after it (m's; v's the next
 * one), -1 where none cuts it. */
typedef struct zt_adamw8_cut {
    uint32_t piece, j;
    int32_t slot[2];
} zt_adamw8_cut;

#ifdef __CUDACC__
#define ZT_ADAMW8_HD __host__ __device__
#else
#define ZT_ADAMW8_HD
#endif

/* Block j of piece p: its first element's offset in the piece, and *n its elements here. */
static inline ZT_ADAMW8_HD uint64_t zt_adamw8_block_at(const zt_adamw8_piece *p, uint32_t j, uint32_t *n)
{
    uint64_t lo = (uint64_t)j * ZT_ADAMW8_BLOCK, hi = lo + ZT_ADAMW8_BLOCK - p->lead;
    lo = lo > p->lead ? lo - p->lead : 0;
    hi = hi < p->n ? hi : p->n;
    *n = (uint32_t)(hi - lo);
    return lo;
}

/* A held block finished: its absmax the largest of the nslots slots first, first + 2, ... (m's; v's
 * from first + 1), and its moments quantized with it. */
typedef struct zt_adamw8_release {
    uint64_t local;
    uint32_t n, absmax;
    int32_t held;
    uint32_t first, nslots;
} zt_adamw8_release;

/* The blocks' step on host memory (OpenMP over the blocks): the CUDA kernels' twin. param16 may
 * be NULL; held and slots are written for the cut blocks only. */
void zt_adamw8_step(const zt_adamw8_piece *pieces, const zt_adamw8_block *blocks, size_t nb, const zt_adamw8_cut *cut,
                    size_t nc, float *param, const float *grad, uint8_t *q1, uint8_t *q2, float *a1, float *a2,
                    uint16_t *param16, float *held, float *slots);
/* The held blocks finished, with the slots summed over the ranks. */
void zt_adamw8_finish(const zt_adamw8_release *r, size_t nr, uint8_t *q1, uint8_t *q2, float *a1, float *a2,
                      const float *held, const float *slots);
/* One block's step, up to its fp32 moments: dequantizes the n ≤ 256 states (q1, a1 and q2,
 * a2) into m and v, and runs the AdamW kernel on param with them. */
void zt_adamw8_update(const zt_adamw_consts *c, zt_adamw_kernel *kernel, float *param, const float *grad,
                      const uint8_t *q1, const uint8_t *q2, float a1, float a2, size_t n, uint16_t *param_bf16,
                      float *m, float *v);
#endif
