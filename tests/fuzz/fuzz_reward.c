/* libFuzzer harness for the answers of a reward program (rlhf.reward_command):
 * the input is what the program printed; each of its lines (up to a newline, as
 * the reader hands them over) goes through zt_reward_parse_answer. A line is a
 * finite number or a ZT_EUSER message about that line; never a crash or a read
 * past the line.
 *
 *   make fuzz-reward FUZZ_SECONDS=600
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/train/rlhf/reward_program.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *at = (const char *)data, *end = at + size, *nl;
    for (long line = 1; (nl = memchr(at, '\n', (size_t)(end - at))); line++, at = nl + 1) {
        size_t len = (size_t)(nl - at);
        char *copy = malloc(len + 1); /* the line and its newline alone: nothing after it to read */
        if (!copy) abort();
        memcpy(copy, at, len + 1);
        double v;
        zt_status st = zt_reward_parse_answer(copy, len, line, &v);
        char want[64];
        snprintf(want, sizeof want, "answer to line %ld is '", line);
        if (st) fuzz_check_failure(st, ZT_EUSER, want);
        else if (!isfinite(v)) abort();
        free(copy);
    }
    return 0;
}
