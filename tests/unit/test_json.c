/* core/json: numbers come back as the source wrote them unless changed, strings that
 * look like numbers do not disturb the order, raw nodes a caller made stay raw, and
 * floats zt adds itself read as floats. */
#include <stdlib.h>
#include <string.h>

#include "lib/core/json.h"
#include "test.h"

static const char source[] = "{\"s\": \"1.0 \\\"2.0\\\"\", \"a\": 8.0, \"big\": 1000000000000000019884624838656,"
                             " \"list\": [1e-06, -0.50, 2], \"o\": {\"x\": 3.10}}";

static int has(const char *text, const char *want) { return strstr(text, want) != NULL; }

static void test_unchanged_numbers_keep_their_text(void)
{
    cJSON *o = zt_json_parse(source, strlen(source));
    CHECK(o != NULL);
    char *text = zt_json_print(o);
    CHECK(has(text, "8.0,") && has(text, "1000000000000000019884624838656,") && has(text, "[1e-06, -0.50, 2]"));
    CHECK(has(text, "3.10") && has(text, "\"1.0 \\\"2.0\\\"\""));
    free(text);
    /* printing leaves the tree as it was: numbers are numbers again */
    CHECK(cJSON_IsNumber(cJSON_GetObjectItem(o, "a")) && cJSON_GetObjectItem(o, "a")->valuedouble == 8.0);
    cJSON_Delete(o);
}

static void test_changed_numbers_print_their_value(void)
{
    cJSON *o = zt_json_parse(source, strlen(source));
    cJSON_SetNumberValue(cJSON_GetObjectItem(o, "a"), 9);
    cJSON_AddItemToObject(o, "copy", cJSON_Duplicate(cJSON_GetObjectItem(o, "o"), 1));
    char *text = zt_json_print(o);
    CHECK(has(text, "\"a\":\t9,") && !has(text, "8.0"));
    CHECK(has(text, "\"copy\":\t{\n\t\t\"x\":\t3.10"));
    free(text);
    cJSON_Delete(o);
}

static void test_raw_nodes_of_the_caller_stay_raw(void)
{
    cJSON *o = zt_json_parse(source, strlen(source));
    cJSON_AddRawToObject(o, "r", "[7]");
    char *text = zt_json_print(o);
    CHECK(has(text, "\"r\":\t[7]"));
    free(text);
    CHECK(cJSON_IsRaw(cJSON_GetObjectItem(o, "r")));
    cJSON_Delete(o);
}

static void test_added_floats(void)
{
    cJSON *o = cJSON_CreateObject();
    zt_json_add_float(o, "f", 8);
    zt_json_add_float(o, "eps", 1e-6);
    zt_json_add_float(o, "tenth", 0.1);
    zt_json_add_float(o, "theta", 500000);
    char *text = zt_json_print(o);
    CHECK(has(text, "\"f\":\t8.0,") && has(text, "\"eps\":\t1e-06,") && has(text, "\"tenth\":\t0.1,"));
    CHECK(has(text, "\"theta\":\t500000.0"));
    free(text);
    cJSON_Delete(o);
}

static void test_not_json(void) { CHECK(zt_json_parse("{\"a\": ", 6) == NULL); }

int main(void)
{
    RUN(test_unchanged_numbers_keep_their_text);
    RUN(test_changed_numbers_print_their_value);
    RUN(test_raw_nodes_of_the_caller_stay_raw);
    RUN(test_added_floats);
    RUN(test_not_json);
    return test_summary();
}
