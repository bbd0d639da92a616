/* model.device: which backend computes. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "lib/core/log.h"

static zt_backend *cpu(void)
{
    const char *test = getenv("ZT_CPU_AS_DEVICE");
    return test && !strcmp(test, "1") ? zt_backend_cpu_as_device() : zt_backend_cpu();
}

zt_status zt_backend_open(zt_device device, zt_backend **be)
{
    *be = cpu();
    if (device == ZT_DEVICE_CPU) return ZT_OK;
    if (device == ZT_DEVICE_AUTO && access("/dev/nvidiactl", F_OK)) return ZT_OK; /* no NVIDIA driver: no GPU */
    zt_status st = zt_backend_cuda(be);
    if (!st || device != ZT_DEVICE_AUTO) return st;
    zt_log_info("model.device = \"auto\": no GPU (%s), computing on the CPU", zt_errmsg());
    *be = cpu();
    return ZT_OK;
}
