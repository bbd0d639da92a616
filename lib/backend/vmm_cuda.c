/* Device arrays whose memory can be given back and taken again in pieces (vmm_cuda.h), on
 * CUDA's virtual memory management: the address range is reserved once, and each granule
 * (2 MiB on current GPUs) is physical memory of its own (cuMemCreate), mapped into the range
 * while it is wanted. The driver's entry points come through the runtime
 * (cudaGetDriverEntryPointByVersion), so nothing links libcuda. */
#include "vmm_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "kernels/cuda/check.h"

enum { MAX_ARRAYS = 32 };

typedef struct vmm_array {
    CUdeviceptr base;
    size_t bytes, granules;
    CUmemGenericAllocationHandle *h; /* per granule; 0: not mapped */
} vmm_array;

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

/* Maps the granules of [g0, g1) that are not mapped, each zeroed on stream s; 0 when the
 * device is out of memory. */
static int map_granules(vmm_array *a, size_t g0, size_t g1, cudaStream_t s)
{
    for (size_t g = g0; g < g1; g++) {
        if (a->h[g]) continue;
        CUmemGenericAllocationHandle h;
        if (V.create(&h, V.gran, &V.prop, 0) != CUDA_SUCCESS) return 0;
        CUdeviceptr at = a->base + g * V.gran;
        ZT_CU_CHECK(V.map(at, V.gran, 0, h, 0));
        ZT_CU_CHECK(V.set_access(at, V.gran, &V.access, 1));
        a->h[g] = h;
        if (cudaMemsetAsync((void *)at, 0, V.gran, s) != cudaSuccess) return 0;
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
    *a = (vmm_array){base, granules * V.gran, granules, calloc(granules, sizeof *a->h)};
    if (!a->h || !map_granules(a, 0, granules, s)) {
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
    for (size_t g = 0; a->h && g < a->granules; g++)
        if (a->h[g]) {
            ZT_CU_CHECK(V.unmap(a->base + g * V.gran, V.gran));
            ZT_CU_CHECK(V.release(a->h[g]));
        }
    ZT_CU_CHECK(V.address_free(a->base, a->bytes));
    free(a->h);
    memset(a, 0, sizeof *a);
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

/* zeroes [lo, hi) (offsets in a) where its granule is mapped */
static void zero_mapped(vmm_array *a, size_t lo, size_t hi, cudaStream_t s)
{
    for (size_t at = lo; at < hi;) {
        size_t g = at / V.gran, end = (g + 1) * V.gran < hi ? (g + 1) * V.gran : hi;
        if (a->h[g]) ZT_CUDA_CHECK(cudaMemsetAsync((void *)(a->base + at), 0, end - at, s));
        at = end;
    }
}

void zt_vmm_release(void *p, size_t bytes, cudaStream_t s)
{
    vmm_array *a = find(p);
    size_t g0, g1, t0, t1, lo = (CUdeviceptr)p - a->base, hi = lo + bytes < a->bytes ? lo + bytes : a->bytes;
    granules_of(a, p, bytes, &g0, &g1, &t0, &t1);
    for (size_t g = g0; g < g1; g++)
        if (a->h[g]) {
            ZT_CU_CHECK(V.unmap(a->base + g * V.gran, V.gran));
            ZT_CU_CHECK(V.release(a->h[g]));
            a->h[g] = 0;
        }
    if (g0 >= g1) { /* no whole granule: the range lies in one or two */
        zero_mapped(a, lo, hi, s);
        return;
    }
    zero_mapped(a, lo, g0 * V.gran, s);
    zero_mapped(a, g1 * V.gran, hi, s);
}

int zt_vmm_populate(void *p, size_t bytes, cudaStream_t s)
{
    vmm_array *a = find(p);
    size_t g0, g1, t0, t1;
    granules_of(a, p, bytes, &g0, &g1, &t0, &t1);
    return map_granules(a, t0, t1, s);
}

