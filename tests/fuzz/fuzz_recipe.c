/* libFuzzer harness for recipe overrides (`section.key=value` on the command
 * line): the input, split at NUL bytes like an argv, is the overrides of a
 * recipe loaded without a file. A recipe that loads is checked against a world
 * of 1 and 8 ranks, and written resolved; that file must load again and write
 * itself back byte for byte (the keys,
 * not the header comment naming the file it came from). A failure is ZT_EUSER naming the override (or the
 * key); never a crash, leak or sanitizer report.
 *
 *   make fuzz-recipe FUZZ_SECONDS=600
 */
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/recipe/recipe.h"
#include "tests/fuzz/fuzz_util.h"

enum { MAX_OVERRIDES = 16 };

static char *resolved_text(const zt_recipe *r, const char *path)
{
    char *text;
    size_t len;
    if (zt_recipe_write_resolved(r, path) || zt_read_file(path, &text, &len)) abort();
    return text;
}

static void check_round_trip(const zt_recipe *r)
{
    const char *path = fuzz_write("recipe.resolved.toml", "", 0);
    char *first = resolved_text(r, path);
    zt_recipe back;
    if (zt_recipe_load(&back, path, 0, NULL)) {
        fprintf(stderr, "a resolved recipe does not load: %s\n%s", zt_errmsg(), first);
        abort();
    }
    char *second = resolved_text(&back, path);
    const char *keys1 = strstr(first, "\n["), *keys2 = strstr(second, "\n["); /* past the header, which names the file */
    if (!keys1 || !keys2 || strcmp(keys1, keys2)) {
        fprintf(stderr, "a resolved recipe changed on the way back:\n%s\n---\n%s", first, second);
        abort();
    }
    free(first);
    free(second);
    zt_recipe_free(&back);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *buf, *overrides[MAX_OVERRIDES];
    const char *part[MAX_OVERRIDES];
    fuzz_split(data, size, &buf, part, MAX_OVERRIDES);
    int n = 0;
    while (n < MAX_OVERRIDES && part[n][0]) overrides[n] = (char *)part[n], n++;
    zt_recipe r;
    zt_status st = zt_recipe_load(&r, NULL, n, overrides);
    if (st) {
        fuzz_check_failure(st, ZT_EUSER, NULL);
    } else {
        for (int world = 1; world <= 8; world *= 8)
            if ((st = zt_recipe_check_world(&r, world, world))) fuzz_check_failure(st, ZT_EUSER, NULL);
        check_round_trip(&r);
        zt_recipe_free(&r);
    }
    free(buf);
    return 0;
}
