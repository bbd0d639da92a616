/* libFuzzer harness for the disk-speed cache (~/.cache/zt/disk2-<dev>.txt): the
 * input is the file's text. What zt_disk_cache_parse accepts is two finite,
 * positive speeds; written back by zt_disk_cache_format (when it fits) and read
 * again it gives them rounded to whole bytes/s
 * (to even, as printf rounds). Never a crash or sanitizer report.
 *
 *   make fuzz-disk_cache FUZZ_SECONDS=600
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/plan/placement.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *text = malloc(size + 1); /* as zt_read_file gives it: NUL-terminated */
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = 0;
    double rd = -1, wr = -1;
    if (zt_disk_cache_parse(text, &rd, &wr)) {
        if (!isfinite(rd) || !isfinite(wr) || rd <= 0 || wr <= 0) abort();
        char line[128];
        double r2, w2;
        int whole = rint(rd) > 0 && rint(wr) > 0;
        if (zt_disk_cache_format(line, sizeof line, rd, wr) && whole &&
            (!zt_disk_cache_parse(line, &r2, &w2) || r2 != rint(rd) || w2 != rint(wr))) {
            fprintf(stderr, "'%s' read back as %.17g %.17g\n", line, r2, w2);
            abort();
        }
    } else if (rd != -1 || wr != -1) {
        abort(); /* a refused cache leaves the speeds alone */
    }
    free(text);
    return 0;
}
