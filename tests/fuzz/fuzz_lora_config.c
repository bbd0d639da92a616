/* libFuzzer harness for a PEFT adapter's adapter_config.json (lib/model/lora_config.c): the input
 * is the file. It reads as an adapter zt trains exactly (r, alpha, dropout and the method in
 * range; targets in layer 0 for a target_modules pattern, the same in all of 40 layers or
 * refused), or fails with ZT_EUSER naming the file; never a crash, a hang (a pattern that
 * backtracks without end meets the match limit), leak or sanitizer report.
 *
 *   make fuzz-lora_config FUZZ_SECONDS=600
 */
#include <stdlib.h>

#include "lib/model/lora.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    fuzz_write("adapter_config.json", data, size);
    zt_lora_config c;
    zt_status st = zt_lora_read_config(fuzz_dir(), &c);
    if (st) {
        fuzz_check_failure(st, ZT_EUSER, "adapter_config.json");
        return 0;
    }
    if (c.r < 1 || !(c.alpha > 0) || !(c.dropout >= 0 && c.dropout < 1) || !c.targets) abort();
    if (c.target_pattern[0]) {
        unsigned every;
        st = zt_lora_pattern_targets("fuzz", c.target_pattern, NULL, 40, &every);
        if (st) fuzz_check_failure(st, ZT_EUSER, "target_modules");
        else if (every != c.targets) abort();
    }
    char base[256];
    st = zt_lora_read_base(fuzz_dir(), base, sizeof base);
    if (st) fuzz_check_failure(st, ZT_EUSER, "base_model_name_or_path");
    return 0;
}
