/* The disk-speed cache of zt_disk_bandwidth (placement.h): one line, "read R write W" in bytes/s. */
#include <math.h>
#include <stdio.h>

#include "placement.h"

int zt_disk_cache_parse(const char *text, double *rd, double *wr)
{
    double r, w;
    int end = -1;
    if (sscanf(text, "read %lf write %lf %n", &r, &w, &end) != 2 || end < 0 || text[end]) return 0;
    if (!isfinite(r) || !isfinite(w) || r <= 0 || w <= 0) return 0;
    *rd = r, *wr = w;
    return 1;
}

size_t zt_disk_cache_format(char *line, size_t size, double rd, double wr)
{
    int n = snprintf(line, size, "read %.0f write %.0f\n", rd, wr);
    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}
