/* libFuzzer harness for config.json: the input, up to its first NUL byte, is read
 * as a model's config.json; what follows is `zt init` style key=value lines
 * applied to the defaults, as zt init does. A config that loads (or is made) is
 * saved, read back and saved again: both files must be the same. Every failure is ZT_EUSER naming the file (or the key);
 * never a crash, leak or sanitizer report.
 *
 *   make fuzz-llama_config FUZZ_SECONDS=600
 */
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/model/llama.h"
#include "tests/fuzz/fuzz_util.h"

/* key=value lines through zt_llama_config_set, as `zt init` gives them */
static zt_status apply_settings(zt_llama_config *c, char *lines)
{
    zt_status st = ZT_OK;
    for (char *line = strtok(lines, "\n"); line && !st; line = strtok(NULL, "\n")) {
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = 0;
        st = zt_llama_config_set(c, line, eq + 1);
        if (st) fuzz_check_failure(st, ZT_EUSER, "config key");
    }
    return st ? st : zt_llama_config_check(c, "settings");
}

static char *saved_text(const zt_llama_config *c, const char *path)
{
    char *text;
    size_t len;
    if (zt_llama_config_save(c, path, "bfloat16") || zt_read_file(path, &text, &len)) abort();
    return text;
}

static void check_round_trip(const zt_llama_config *c)
{
    const char *again = fuzz_write("saved.json", "", 0);
    char *first = saved_text(c, again);
    zt_llama_config back;
    if (zt_llama_config_load(&back, again)) {
        fprintf(stderr, "a saved config does not load: %s\n%s\n", zt_errmsg(), first);
        abort();
    }
    char *second = saved_text(&back, again);
    if (strcmp(first, second)) {
        fprintf(stderr, "a config changed on the way back:\n%s\n%s\n", first, second);
        abort();
    }
    free(first);
    free(second);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *buf;
    const char *part[2];
    fuzz_split(data, size, &buf, part, 2);
    const char *path = fuzz_write("config.json", part[0], strlen(part[0]));
    zt_llama_config c;
    zt_status st = zt_llama_config_load(&c, path);
    if (st) fuzz_check_failure(st, ZT_EUSER, path);
    else check_round_trip(&c);
    zt_llama_config_default(&c);
    if (!apply_settings(&c, (char *)part[1])) check_round_trip(&c);
    free(buf);
    return 0;
}
