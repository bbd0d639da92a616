/* Device arrays whose memory can be given back and taken again in pieces (vmm_cuda.h), on
 * CUDA's virtual memory management: the address range is reserved once, and each granule
 * (2 MiB on current GPUs) is physical memory of its own (cuMemCreate), mapped into the range
 * while it is wanted. The driver's entry points come through the runtime
 * (cudaGetDriverEntryPointByVersion), so nothing links libcuda. */
#include "vmm_cuda.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "kernels/cuda/check.h"

enum { MAX_ARRAYS = 32, MAX_BATCHES = 1024 };

typedef struct vmm_array {
    CUdeviceptr base;
    size_t bytes, granules;
    CUmemGenericAllocationHandle *h; /* per granule; 0: not mapped */
    uint64_t *batch;                 /* per granule: the release batch (+ 1) it waits in; 0: in use */
} vmm_array;

/* Granules released together: unmapped once the work queued before the release is done. */
typedef struct batch {
    cudaEvent_t done;
    int array;
    size_t g0, g1;
} batch;

static struct {
    int ready;
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    size_t gran;
    PFN_cuMemAddressReserve_v10020 reserve;
    PFN_cuMemAddressFree_v10020 address_free;
    PFN_cuMemCreate_v10020 create;
    PFN_cuMemRelease_v10020 release;
    PFN_cuMemMap_v10020 map;
    PFN_cuMemUnmap_v10020 unmap;
    PFN_cuMemSetAccess_v10020 set_access;
    PFN_cuMemGetAllocationGranularity_v10020 granularity;
    vmm_array a[MAX_ARRAYS];
    /* unmapped granules kept for the next populate: creating and releasing physical memory
     * costs far more than mapping it */
    CUmemGenericAllocationHandle *pool;
    size_t npool, pool_cap;
    batch batches[MAX_BATCHES]; /* a ring: batch k at k % MAX_BATCHES, [oldest, newest) pending */
    uint64_t oldest, newest;
} V;

static int entry(const char *name, void **fn)
{
    enum cudaDriverEntryPointQueryResult q;
    return cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
           q == cudaDriverEntryPointSuccess;
}

int zt_vmm_init(int device)
{
    int ok = entry("cuMemAddressReserve", (void **)&V.reserve) && entry("cuMemAddressFree", (void **)&V.address_free) &&
             entry("cuMemCreate", (void **)&V.create) && entry("cuMemRelease", (void **)&V.release) &&
             entry("cuMemMap", (void **)&V.map) && entry("cuMemUnmap", (void **)&V.unmap) &&
             entry("cuMemSetAccess", (void **)&V.set_access) &&
             entry("cuMemGetAllocationGranularity", (void **)&V.granularity);
    PFN_cuDeviceGetAttribute_v2000 attribute;
    int supported = 0;
    if (!ok || !entry("cuDeviceGetAttribute", (void **)&attribute) ||
        attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device) != CUDA_SUCCESS ||
        !supported)
        return 0;
    V.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    V.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    V.prop.location.id = device;
    V.access.location = V.prop.location;
    V.access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (V.granularity(&V.gran, &V.prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS || !V.gran) return 0;
    V.ready = 1;
    return 1;
}

static vmm_array *find(const void *p)
{
    CUdeviceptr d = (CUdeviceptr)p;
    for (int i = 0; i < MAX_ARRAYS; i++)
        if (V.a[i].base && d >= V.a[i].base && d < V.a[i].base + V.a[i].bytes) return &V.a[i];
    return NULL;
}

/* Granule g of a goes back to the pool (its mapping gone). */
static void unmap_to_pool(vmm_array *a, size_t g)
{
    ZT_CU_CHECK(V.unmap(a->base + g * V.gran, V.gran));
    if (V.npool == V.pool_cap) {
        size_t cap = V.pool_cap ? 2 * V.pool_cap : 256;
        CUmemGenericAllocationHandle *p = realloc(V.pool, cap * sizeof *p);
        if (!p) { /* no room to keep it: the GPU has it back */
            ZT_CU_CHECK(V.release(a->h[g]));
            a->h[g] = 0, a->batch[g] = 0;
            return;
        }
        V.pool = p, V.pool_cap = cap;
    }
    V.pool[V.npool++] = a->h[g];
    a->h[g] = 0, a->batch[g] = 0;
}

/* Unmaps the granules of every released batch whose work is done (all of them when wait),
 * oldest first. */
static void reap(int wait)
{
    for (; V.oldest != V.newest; V.oldest++) {
        batch *b = &V.batches[V.oldest % MAX_BATCHES];
        if (!wait && cudaEventQuery(b->done) == cudaErrorNotReady) {
            cudaGetLastError();
            return;
        }
        ZT_CUDA_CHECK(cudaEventSynchronize(b->done));
        vmm_array *a = &V.a[b->array];
        for (size_t g = b->g0; g < b->g1; g++)
            if (a->h[g] && a->batch[g] == V.oldest + 1) unmap_to_pool(a, g); /* not taken back since */
    }
}

/* The pool's granules go back to the GPU. */
static void drain_pool(void)
{
    while (V.npool) ZT_CU_CHECK(V.release(V.pool[--V.npool]));
}

/* A granule of physical memory: from the pool, else new; 0 when the device has none left. */
static CUmemGenericAllocationHandle take_granule(void)
{
    CUmemGenericAllocationHandle h;
    reap(0);
    if (V.npool) return V.pool[--V.npool];
    if (V.create(&h, V.gran, &V.prop, 0) == CUDA_SUCCESS) return h;
    reap(1); /* what released ranges still hold once their work ends */
    if (V.npool) return V.pool[--V.npool];
    return V.create(&h, V.gran, &V.prop, 0) == CUDA_SUCCESS ? h : 0;
}

/* Maps the granules of [g0, g1) that are not mapped, and zeroes them on stream s, as it zeroes
 * those a release had given up but whose memory is still mapped (after that release's work);
 * 0 when the device is out of memory. */
static int map_granules(vmm_array *a, size_t g0, size_t g1, cudaStream_t s)
{
    for (size_t g = g0; g < g1;) {
        if (a->h[g] && !a->batch[g]) {
            g++;
            continue;
        }
        size_t run = g; /* [g, run): granules to map or to take back, done as one range */
        for (; run < g1 && (!a->h[run] || a->batch[run]); run++) {
            if (a->batch[run]) { /* released, not yet unmapped: its readers must finish before the zeros */
                ZT_CUDA_CHECK(cudaStreamWaitEvent(s, V.batches[(a->batch[run] - 1) % MAX_BATCHES].done, 0));
                a->batch[run] = 0;
                continue;
            }
            CUmemGenericAllocationHandle h = take_granule();
            if (!h) { /* what this run mapped is zeroed still: a later populate takes it as it is */
                if (run > g) cudaMemsetAsync((void *)(a->base + g * V.gran), 0, (run - g) * V.gran, s);
                return 0;
            }
            ZT_CU_CHECK(V.map(a->base + run * V.gran, V.gran, 0, h, 0));
            ZT_CU_CHECK(V.set_access(a->base + run * V.gran, V.gran, &V.access, 1));
            a->h[run] = h;
        }
        if (cudaMemsetAsync((void *)(a->base + g * V.gran), 0, (run - g) * V.gran, s) != cudaSuccess) return 0;
        g = run;
    }
    return 1;
}

void *zt_vmm_alloc(size_t bytes, cudaStream_t s)
{
    vmm_array *a = NULL;
    for (int i = 0; i < MAX_ARRAYS && !a; i++)
        if (!V.a[i].base) a = &V.a[i];
    if (!V.ready || !a) return NULL;
    size_t granules = (bytes + V.gran - 1) / V.gran;
    CUdeviceptr base;
    if (V.reserve(&base, granules * V.gran, V.gran, 0, 0) != CUDA_SUCCESS) return NULL;
    *a = (vmm_array){base, granules * V.gran, granules, calloc(granules, sizeof *a->h),
                     calloc(granules, sizeof *a->batch)};
    if (!a->h || !a->batch || !map_granules(a, 0, granules, s)) {
        zt_vmm_free((void *)base);
        return NULL;
    }
    return (void *)base;
}

int zt_vmm_owns(const void *p) { return find(p) != NULL; }

void zt_vmm_free(void *p)
{
    vmm_array *a = find(p);
    if (!a) return;
    reap(1);
    for (size_t g = 0; a->h && g < a->granules; g++)
        if (a->h[g]) unmap_to_pool(a, g);
    drain_pool();
    ZT_CU_CHECK(V.address_free(a->base, a->bytes));
    free(a->h);
    free(a->batch);
    memset(a, 0, sizeof *a);
}

void zt_vmm_trim(void)
{
    reap(1);
    drain_pool();
}

/* The granules wholly inside [p, p + bytes), as [*g0, *g1), and those it touches, [*t0, *t1). */
static void granules_of(const vmm_array *a, const void *p, size_t bytes, size_t *g0, size_t *g1, size_t *t0,
                        size_t *t1)
{
    size_t lo = (CUdeviceptr)p - a->base, hi = lo + bytes;
    if (hi > a->bytes) hi = a->bytes;
    *g0 = (lo + V.gran - 1) / V.gran, *g1 = hi / V.gran;
    *t0 = lo / V.gran, *t1 = (hi + V.gran - 1) / V.gran;
}

/* zeroes [lo, hi) (offsets in a) where its granule is mapped and not released */
static void zero_mapped(vmm_array *a, size_t lo, size_t hi, cudaStream_t s)
{
    for (size_t at = lo; at < hi;) {
        size_t g = at / V.gran, end = (g + 1) * V.gran < hi ? (g + 1) * V.gran : hi;
        if (a->h[g] && !a->batch[g]) ZT_CUDA_CHECK(cudaMemsetAsync((void *)(a->base + at), 0, end - at, s));
        at = end;
    }
}

void zt_vmm_release(void *p, size_t bytes, cudaStream_t s, cudaStream_t done)
{
    vmm_array *a = find(p);
    size_t g0, g1, t0, t1, lo = (CUdeviceptr)p - a->base, hi = lo + bytes < a->bytes ? lo + bytes : a->bytes;
    granules_of(a, p, bytes, &g0, &g1, &t0, &t1);
    if (g0 >= g1) { /* no whole granule: the range lies in one or two */
        zero_mapped(a, lo, hi, s);
        return;
    }
    zero_mapped(a, lo, g0 * V.gran, s);
    zero_mapped(a, g1 * V.gran, hi, s);
    if (V.newest - V.oldest == MAX_BATCHES) reap(1); /* every batch in flight: the oldest must end */
    batch *b = &V.batches[V.newest % MAX_BATCHES];
    if (!b->done) ZT_CUDA_CHECK(cudaEventCreateWithFlags(&b->done, cudaEventDisableTiming));
    ZT_CUDA_CHECK(cudaEventRecord(b->done, done));
    b->array = (int)(a - V.a), b->g0 = g0, b->g1 = g1;
    V.newest++;
    for (size_t g = g0; g < g1; g++)
        if (a->h[g] && !a->batch[g]) a->batch[g] = V.newest; /* batch number + 1: 0 means none */
}

int zt_vmm_populate(void *p, size_t bytes, cudaStream_t s)
{
    vmm_array *a = find(p);
    size_t g0, g1, t0, t1;
    granules_of(a, p, bytes, &g0, &g1, &t0, &t1);
    return map_granules(a, t0, t1, s);
}
