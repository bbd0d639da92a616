/* A training step's time (steptime.h). */
#include "steptime.h"

#include <string.h>

#include "lib/backend/backend.h"
#include "lib/core/arena.h"
#include "lib/core/log.h"
#include "lib/model/qbase.h"

/* GFLOP/s of the M × N × K product y = x·Wᵀ as the CPU backend runs it for a layer (bf16
 * weights and inputs, or fp32): the best of the repetitions after a warm-up, for a quarter of a
 * second at least (a few milliseconds' products time the threads' and the clock's warm-up). */
static double gemm_rate(int M, int N, int K, int bf16)
{
    zt_backend *be = zt_backend_cpu();
    size_t in = (size_t)M * K, w = (size_t)N * K;
    float *y = zt_calloc_aligned((size_t)M * N * sizeof(float));
    void *a = zt_calloc_aligned(in * (bf16 ? 2 : sizeof(zt_real))),
         *b = zt_calloc_aligned(w * (bf16 ? 2 : sizeof(zt_real)));
    double best = 0;
    double start = zt_now_s();
    for (int i = 0; a && b && y && (i < 4 || zt_now_s() - start < 0.25); i++) {
        double t0 = zt_now_s();
        if (bf16) be->gemm_bf16(be, 0, 1, M, N, K, 1, a, K, b, K, 0, y, N);
        else be->gemm(be, 0, 1, M, N, K, 1, a, K, b, K, 0, (zt_real *)y, N);
        double s = zt_now_s() - t0;
        if (i > 0 && (best == 0 || s < best)) best = s;
    }
    zt_free(y), zt_free(a), zt_free(b);
    return best > 0 ? 2.0 * M * N * K / best * 1e-9 : 0;
}

zt_status zt_step_time_estimate(const zt_mem_estimate *e, double rd, double wr, zt_step_time *t)
{
    memset(t, 0, sizeof *t);
    if (!(rd > 0) || !(wr > 0)) return zt_fail(ZT_EUSER, "no disk speed to estimate a step with");
    t->gflops = gemm_rate(e->gemm_m, e->gemm_n, e->gemm_k, e->bf16);
    if (!(t->gflops > 0)) return zt_fail(ZT_ENOMEM, "out of memory timing a matrix product");
    t->compute_s = (e->flops - e->flops_quantized) / (t->gflops * 1e9);
    if (e->flops_quantized > 0) { /* a quantized base's products: dequantizing tiles, then fp32 GEMMs */
        t->qbase_gflops = zt_qbase_gflops(e->qbase_kind, e->qbase_double_quant, e->gemm_m, e->gemm_k);
        if (!(t->qbase_gflops > 0)) return zt_fail(ZT_ENOMEM, "out of memory timing a quantized product");
        t->compute_s += (e->flops_quantized - e->flops_quantized_experts) / (t->qbase_gflops * 1e9);
    }
    if (e->flops_quantized_experts > 0) { /* a few rows an expert: its dequantization dominates */
        t->qbase_experts_gflops = zt_qbase_gflops(e->qbase_kind, e->qbase_double_quant, e->gemm_m_experts, e->gemm_k);
        if (!(t->qbase_experts_gflops > 0)) return zt_fail(ZT_ENOMEM, "out of memory timing a quantized product");
        t->compute_s += e->flops_quantized_experts / (t->qbase_experts_gflops * 1e9);
    }
    t->passes_io_s = (double)(e->io_read - e->io_step_read) / rd + (double)(e->io_write - e->io_step_write) / wr;
    t->step_io_s = (double)e->io_step_read / rd + (double)e->io_step_write / wr;
    t->exposed_s = t->passes_io_s > t->compute_s ? t->passes_io_s - t->compute_s : 0;
    t->total_s = t->compute_s + t->exposed_s + t->step_io_s;
    return ZT_OK;
}
