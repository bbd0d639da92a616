/* TOML 1.0 parser: a corpus of valid documents (checked against a canonical
 * dump of the parsed tree) and invalid ones (checked for line:column and the
 * message), section by section of the spec, plus positions, date-time parts,
 * lookups and string writing. */
#include "lib/toml/toml.h"

#include <stdlib.h>
#include <string.h>

#include "tests/unit/test.h"

/* ---- canonical dump: {k=v,...} [v,...] "str" 12 f:1.5 true odt:.. ldt:.. ld:.. lt:.. ---- */

static void dump_str(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void dump(FILE *f, const zt_toml *v)
{
    switch (v->kind) {
    case ZT_TOML_TABLE:
    case ZT_TOML_ARRAY:
        fputc(v->kind == ZT_TOML_TABLE ? '{' : '[', f);
        for (int i = 0; i < v->n; i++) {
            if (i) fputc(',', f);
            if (v->kind == ZT_TOML_TABLE) {
                const zt_toml_item *it = &v->items[i];
                bool bare = it->keylen > 0;
                for (size_t j = 0; j < it->keylen; j++)
                    bare = bare &&
                           (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", it->key[j]) &&
                            it->key[j]);
                if (bare) fputs(it->key, f);
                else dump_str(f, it->key, it->keylen);
                fputc('=', f);
            }
            dump(f, v->items[i].value);
        }
        fputc(v->kind == ZT_TOML_TABLE ? '}' : ']', f);
        break;
    case ZT_TOML_STRING: dump_str(f, v->str, v->len); break;
    case ZT_TOML_INT: fprintf(f, "%lld", (long long)v->i); break;
    case ZT_TOML_FLOAT:
        if (isnan(v->f)) fputs(signbit(v->f) ? "f:-nan" : "f:nan", f);
        else if (isinf(v->f)) fputs(v->f < 0 ? "f:-inf" : "f:inf", f);
        else {
            char b[64];
            for (int prec = 1; prec <= 17; prec++) {
                snprintf(b, sizeof b, "%.*g", prec, v->f);
                if (strtod(b, NULL) == v->f) break;
            }
            fprintf(f, "f:%s", b);
        }
        break;
    case ZT_TOML_BOOL: fputs(v->b ? "true" : "false", f); break;
    case ZT_TOML_DATETIME: fprintf(f, "odt:%s", v->str); break;
    case ZT_TOML_LOCAL_DATETIME: fprintf(f, "ldt:%s", v->str); break;
    case ZT_TOML_LOCAL_DATE: fprintf(f, "ld:%s", v->str); break;
    case ZT_TOML_LOCAL_TIME: fprintf(f, "lt:%s", v->str); break;
    }
}

static char *dump_text(const zt_toml *v)
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    dump(f, v);
    fclose(f);
    return s;
}

/* Parses from an exact-size copy without a terminating NUL, so that reading past the end shows under ASan. */
static zt_toml *parse(const char *doc, size_t n, char *err, size_t errlen)
{
    char *copy = malloc(n ? n : 1);
    memcpy(copy, doc, n);
    zt_toml *t = zt_toml_parse(copy, n, err, errlen);
    free(copy);
    return t;
}

static int ncases;

#define V(doc, want) valid_case(__LINE__, doc, sizeof(doc) - 1, want)
#define E(doc, at, msg) invalid_case(__LINE__, doc, sizeof(doc) - 1, at, msg)

static void valid_case(int line, const char *doc, size_t n, const char *want)
{
    char err[256];
    ncases++;
    zt_toml *t = parse(doc, n, err, sizeof err);
    CHECK_MSG(t != NULL, "line %d: %s", line, err);
    if (!t) return;
    char *got = dump_text(t);
    CHECK_MSG(!strcmp(got, want), "line %d:\n    got  %s\n    want %s", line, got, want);
    free(got);
    zt_toml_free(t);
}

static void invalid_case(int line, const char *doc, size_t n, const char *at, const char *msg)
{
    char err[256], prefix[32];
    ncases++;
    zt_toml *t = parse(doc, n, err, sizeof err);
    CHECK_MSG(t == NULL, "line %d: parsed an invalid document", line);
    if (t) {
        zt_toml_free(t);
        return;
    }
    snprintf(prefix, sizeof prefix, "%s: ", at);
    CHECK_MSG(!strncmp(err, prefix, strlen(prefix)) && strstr(err, msg), "line %d: got '%s', want '%s' containing '%s'",
              line, err, at, msg);
}

static void test_comments_and_layout(void)
{
    V("", "{}");
    V("\n\n   \n# only comments\n", "{}");
    V("# full line\nkey = \"value\"  # end of line\nanother = \"# not a comment\"",
      "{key=\"value\",another=\"# not a comment\"}");
    V("a=1#c", "{a=1}");
    V("a = 1\t# tab\tin a comment\t\n", "{a=1}");
    V("a = 1\r\nb = 2\r\n# c\r\n", "{a=1,b=2}");
    V("\ta\t=\t1\t", "{a=1}");
    V("  [a]  \n  b = 1", "{a={b=1}}");
    V("\xEF\xBB\xBF"
      "a = 1",
      "{a=1}");
    E("a = 1 # \x01 ctrl\n", "1:9", "control character U+0001 in a comment");
    E("# \x7f\n", "1:3", "U+007F");
    E("a = 1 # x\rb = 2", "1:10", "U+000D");
    E("a = 1\rb = 2", "1:6", "expected the end of the line after the value, found U+000D");
    E("a = 1\n\x00", "2:1", "expected a key, found U+0000");
}

static void test_keyvals(void)
{
    V("key=1", "{key=1}");
    V("a=\"x\"\nb= 'y'", "{a=\"x\",b=\"y\"}");
    E("key = # no value\n", "1:7", "expected a value, found '#'");
    E("key =", "1:6", "expected a value, found the end of the file");
    E("key\n= 1", "1:4", "expected '=' after the key, found a newline");
    E("a = 1 b = 2", "1:7", "expected the end of the line after the value, found 'b'");
    E("= 1", "1:1", "expected a key, found '='");
    E("a = 1\n= 2", "2:1", "expected a key");
    E("a b = 1", "1:3", "expected '=' after the key, found 'b'");
    E("a = \"x\" \"y\"", "1:9", "expected the end of the line");
}

static void test_keys(void)
{
    V("bare_key = 1\nbare-key = 2\n1234 = 3\nABC = 4", "{bare_key=1,bare-key=2,1234=3,ABC=4}");
    V("\"127.0.0.1\" = 1\n\"character encoding\" = 2\n\"ʎǝʞ\" = 3\n'key2' = 4\n'quoted \"value\"' = 5",
      "{\"127.0.0.1\"=1,\"character encoding\"=2,\"ʎǝʞ\"=3,key2=4,\"quoted \\\"value\\\"\"=5}");
    V("\"\" = 1", "{\"\"=1}");
    V("'' = 1", "{\"\"=1}");
    V("name.first = 1\nname.last = 2", "{name={first=1,last=2}}");
    V("site.\"google.com\" = true", "{site={\"google.com\"=true}}");
    V("fruit . color = 1\nfruit.\tflavor = 2", "{fruit={color=1,flavor=2}}");
    V("fruit.apple.smooth = true\nfruit.orange = 2", "{fruit={apple={smooth=true},orange=2}}");
    V("apple.type = 'fruit'\norange.type = 'fruit'\napple.skin = 'thin'",
      "{apple={type=\"fruit\",skin=\"thin\"},orange={type=\"fruit\"}}");
    V("3.14159 = 'pi'", "{3={14159=\"pi\"}}");
    V("a.\"\".b = 1", "{a={\"\"={b=1}}}");
    V("\"\\u00e4\" = 1", "{\"ä\"=1}");
    V("'a.b' = 1", "{\"a.b\"=1}");
    V("\"a\\u0000b\" = 1\n\"a\\u0000c\" = 2", "{\"a\\x00b\"=1,\"a\\x00c\"=2}");
    E("name = 1\nname = 2", "2:1", "duplicate key 'name' (first defined at line 1)");
    E("spelling = 1\n\"spelling\" = 2", "2:1", "duplicate key 'spelling'");
    E("\"a\\u0000b\" = 1\n\"a\\u0000b\" = 2", "2:1", "duplicate key");
    E("a = 1\n'a' = 2", "2:1", "duplicate key 'a'");
    E("fruit.apple = 1\nfruit.apple.smooth = true", "2:7", "key 'fruit.apple' already holds a value");
    E("a.b = 1\na.b = 2", "2:3", "duplicate key 'a.b'");
    E(" = 1", "1:2", "expected a key");
    E("\"\"\"key\"\"\" = 1", "1:1", "a multi-line string cannot be a key");
    E("'''key''' = 1", "1:1", "a multi-line string cannot be a key");
    E("a. = 1", "1:4", "expected a key, found '='");
    E(".a = 1", "1:1", "expected a key, found '.'");
    E("a..b = 1", "1:3", "expected a key, found '.'");
    E("\"a\nb\" = 1", "1:1", "unterminated string");
    E("ä = 1", "1:1", "expected a key, found 'ä'");
    E("a\"b\" = 1", "1:2", "expected '=' after the key, found '\"'");
}

static void test_basic_strings(void)
{
    V("str = \"I'm a string. \\\"You can quote me\\\". Name\\tJos\\u00E9\\nLocation\\tSF.\"",
      "{str=\"I'm a string. \\\"You can quote me\\\". Name\\tJosé\\nLocation\\tSF.\"}");
    V("s = \"\\b\\t\\n\\f\\r\\\"\\\\\"", "{s=\"\\x08\\t\\n\\x0c\\r\\\"\\\\\"}");
    V("s = \"\\U0001F600 \\u00e9 \\u20AC\"", "{s=\"😀 é €\"}");
    V("s = \"\\u0000\"", "{s=\"\\x00\"}");
    V("s = \"\\U0010FFFF\"", "{s=\"\xF4\x8F\xBF\xBF\"}");
    V("s = \"tab\there\"", "{s=\"tab\\there\"}");
    V("s = \"é ʎ 😀\"", "{s=\"é ʎ 😀\"}");
    V("s = \"\"", "{s=\"\"}");
    V("s = \"# not a comment\" # a comment", "{s=\"# not a comment\"}");
    E("s = \"\\q\"", "1:6", "invalid escape '\\q'");
    E("s = \"\\x41\"", "1:6", "invalid escape '\\x'");
    E("s = \"\\e\"", "1:6", "invalid escape '\\e'");
    E("s = \"\\ \"", "1:6", "invalid escape");
    E("s = \"\\uD800\"", "1:6", "invalid unicode escape '\\uD800' (not a unicode scalar value)");
    E("s = \"\\uDFFF\"", "1:6", "not a unicode scalar value");
    E("s = \"\\U00110000\"", "1:6", "not a unicode scalar value");
    E("s = \"\\u12\"", "1:6", "'\\u' needs 4 hex digits");
    E("s = \"\\U1234567\"", "1:6", "'\\U' needs 8 hex digits");
    E("s = \"\\u", "1:6", "needs 4 hex digits");
    E("s = \"\\", "1:6", "unterminated string");
    E("s = \"abc", "1:5", "unterminated string");
    E("s = \"abc\nd\"", "1:5", "unterminated string (a newline before the closing quote)");
    E("s = \"a\x01"
      "b\"",
      "1:7", "control character U+0001 in a string (escape it)");
    E("s = \"a\x7f"
      "b\"",
      "1:7", "control character U+007F");
    E("s = \"a\rb\"", "1:7", "control character U+000D");
}

static void test_multiline_basic_strings(void)
{
    V("s = \"\"\"\nRoses are red\nViolets are blue\"\"\"", "{s=\"Roses are red\\nViolets are blue\"}");
    V("s = \"\"\"\r\nOne\r\nTwo\"\"\"", "{s=\"One\\nTwo\"}");
    V("s = \"\"\"\n\nx\"\"\"", "{s=\"\\nx\"}");
    V("s = \"\"\"\nThe quick brown \\\n\n\n  fox jumps over \\\n    the lazy dog.\"\"\"",
      "{s=\"The quick brown fox jumps over the lazy dog.\"}");
    V("s = \"\"\"\\\n       The quick brown \\\n       fox jumps over \\\n       the lazy dog.\\\n       \"\"\"",
      "{s=\"The quick brown fox jumps over the lazy dog.\"}");
    V("s = \"\"\"a \\   \n  b\"\"\"", "{s=\"a b\"}");
    V("s = \"\"\"a \\\r\n  \r\n  b\"\"\"", "{s=\"a b\"}");
    V("s = \"\"\"Here are two quotation marks: \"\". Simple enough.\"\"\"",
      "{s=\"Here are two quotation marks: \\\"\\\". Simple enough.\"}");
    V("s = \"\"\"Here are three quotation marks: \"\"\\\".\"\"\"",
      "{s=\"Here are three quotation marks: \\\"\\\"\\\".\"}");
    V("s = \"\"\"\"This,\" she said, \"is just a pointless statement.\"\"\"\"",
      "{s=\"\\\"This,\\\" she said, \\\"is just a pointless statement.\\\"\"}");
    V("s = \"\"\"\"\"\"\"\"", "{s=\"\\\"\\\"\"}");
    V("s = \"\"\"\"\"\"", "{s=\"\"}");
    V("s = \"\"\"a\tb\\tc\"\"\"", "{s=\"a\\tb\\tc\"}");
    V("s = \"\"\"x\"\"\" # comment", "{s=\"x\"}");
    E("s = \"\"\"a\"\"\"\"\"\"", "1:9", "too many quotes");
    E("s = \"\"\"a \\  b\"\"\"", "1:10", "a line-ending backslash must be last on its line");
    E("s = \"\"\"abc", "1:5", "unterminated string");
    E("s = \"\"\"abc\n\"\"", "1:5", "unterminated string");
    E("s = \"\"\"a\rb\"\"\"", "1:9", "control character U+000D");
    E("s = \"\"\"a\x08"
      "b\"\"\"",
      "1:9", "control character U+0008");
    E("s = \"\"\"\\q\"\"\"", "1:8", "invalid escape '\\q'");
    E("s = \"\"\"\n\\uD800\"\"\"", "2:1", "not a unicode scalar value");
}

static void test_literal_strings(void)
{
    V("winpath = 'C:\\Users\\nodejs\\templates'", "{winpath=\"C:\\\\Users\\\\nodejs\\\\templates\"}");
    V("quoted = 'Tom \"Dubs\" Preston-Werner'", "{quoted=\"Tom \\\"Dubs\\\" Preston-Werner\"}");
    V("regex = '<\\i\\c*\\s*>'", "{regex=\"<\\\\i\\\\c*\\\\s*>\"}");
    V("s = ''", "{s=\"\"}");
    V("s = 'a\tb'", "{s=\"a\\tb\"}");
    V("regex2 = '''I [dw]on't need \\d{2} apples'''", "{regex2=\"I [dw]on't need \\\\d{2} apples\"}");
    V("lines = '''\nThe first newline is\ntrimmed in raw strings.\n   All other whitespace\n   is preserved.\n'''",
      "{lines=\"The first newline is\\ntrimmed in raw strings.\\n   All other whitespace\\n   is preserved.\\n\"}");
    V("quot15 = '''Here are fifteen quotation marks: \"\"\"\"\"\"\"\"\"\"\"\"\"\"\"'''",
      "{quot15=\"Here are fifteen quotation marks: "
      "\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\"}");
    V("apos15 = \"Here are fifteen apostrophes: '''''''''''''''\"",
      "{apos15=\"Here are fifteen apostrophes: '''''''''''''''\"}");
    V("str = ''''That,' she said, 'is still pointless.''''", "{str=\"'That,' she said, 'is still pointless.'\"}");
    V("s = '''a\r\nb'''", "{s=\"a\\nb\"}");
    V("s = '''a\\\nb'''", "{s=\"a\\\\\\nb\"}");
    E("apos15 = '''Here are fifteen apostrophes: ''''''''''''''''''", "1:43", "too many quotes");
    E("s = 'a\nb'", "1:5", "unterminated string");
    E("s = 'abc", "1:5", "unterminated string");
    E("s = 'a\x01'", "1:7", "control character U+0001 in a string");
    E("s = '''abc", "1:5", "unterminated string");
    E("s = '''a\x7f'''", "1:9", "control character U+007F");
    E("s = 'a' 'b'", "1:9", "expected the end of the line");
}

static void test_integers(void)
{
    V("int1 = +99\nint2 = 42\nint3 = 0\nint4 = -17", "{int1=99,int2=42,int3=0,int4=-17}");
    V("int5 = 1_000\nint6 = 5_349_221\nint7 = 53_49_221\nint8 = 1_2_3_4_5",
      "{int5=1000,int6=5349221,int7=5349221,int8=12345}");
    V("a = +0\nb = -0", "{a=0,b=0}");
    V("hex1 = 0xDEADBEEF\nhex2 = 0xdeadbeef\nhex3 = 0xdead_beef", "{hex1=3735928559,hex2=3735928559,hex3=3735928559}");
    V("oct1 = 0o01234567\noct2 = 0o755", "{oct1=342391,oct2=493}");
    V("bin1 = 0b11010110\nbin2 = 0b0", "{bin1=214,bin2=0}");
    V("max = 9223372036854775807\nmin = -9223372036854775808", "{max=9223372036854775807,min=-9223372036854775808}");
    V("h = 0x7FFFFFFFFFFFFFFF\no = 0o777777777777777777777", "{h=9223372036854775807,o=9223372036854775807}");
    V("a = 0x00ff", "{a=255}");
    V("a = [1,-1,+1]", "{a=[1,-1,1]}");
    E("a = 9223372036854775808", "1:5", "invalid number '9223372036854775808': integer out of range");
    E("a = -9223372036854775809", "1:5", "integer out of range");
    E("a = 0x8000000000000000", "1:5", "integer out of range");
    E("a = 0b11111111111111111111111111111111111111111111111111111111111111111", "1:5", "integer out of range");
    E("a = 012", "1:5", "leading zeros are not allowed");
    E("a = 0_1", "1:5", "leading zeros are not allowed");
    E("a = -012", "1:5", "leading zeros");
    E("a = 1__2", "1:5", "'_' must sit between digits");
    E("a = _1", "1:5", "'_' must sit between digits");
    E("a = 1_", "1:5", "'_' must sit between digits");
    E("a = +0x1", "1:5", "a sign is not allowed");
    E("a = -0b1", "1:5", "a sign is not allowed");
    E("a = 0X1", "1:5", "not a number");
    E("a = 0xg", "1:5", "invalid digit");
    E("a = 0x", "1:5", "invalid digit");
    E("a = 0o8", "1:5", "invalid digit");
    E("a = 0b2", "1:5", "invalid digit");
    E("a = 0x_1", "1:5", "'_' must sit between digits");
    E("a = 0x1__2", "1:5", "'_' must sit between digits");
    E("a = --1", "1:5", "not a number");
    E("a = 1x", "1:5", "not a number");
    E("a = +", "1:5", "not a number");
    E("a = 1 2", "1:7", "expected the end of the line");
}

static void test_floats(void)
{
    V("flt1 = +1.0\nflt2 = 3.1415\nflt3 = -0.01", "{flt1=f:1,flt2=f:3.1415,flt3=f:-0.01}");
    V("flt4 = 5e+22\nflt5 = 1e06\nflt6 = -2E-2", "{flt4=f:5e+22,flt5=f:1e+06,flt6=f:-0.02}");
    V("flt7 = 6.626e-34", "{flt7=f:6.626e-34}");
    V("flt8 = 224_617.445_991_228", "{flt8=f:224617.445991228}");
    V("flt9 = 1e1_0", "{flt9=f:1e+10}");
    V("sf1 = inf\nsf2 = +inf\nsf3 = -inf", "{sf1=f:inf,sf2=f:inf,sf3=f:-inf}");
    V("sf4 = nan\nsf5 = +nan\nsf6 = -nan", "{sf4=f:nan,sf5=f:nan,sf6=f:-nan}");
    V("a = -0.0\nb = +0.0\nc = 0e0\nd = 0.0e-0", "{a=f:-0,b=f:0,c=f:0,d=f:0}");
    V("a = 1e-400", "{a=f:0}");
    V("a = 2e-5", "{a=f:2e-05}");
    E("invalid_float_1 = .7", "1:19", "invalid number '.7': not a number");
    E("invalid_float_2 = 7.", "1:19", "expected digits after '.'");
    E("invalid_float_3 = 3.e+20", "1:19", "expected digits after '.'");
    E("a = 1e", "1:5", "expected digits in the exponent");
    E("a = 1e+", "1:5", "expected digits in the exponent");
    E("a = 1e_2", "1:5", "'_' must sit between digits");
    E("a = 1.5_", "1:5", "'_' must sit between digits");
    E("a = 1_.5", "1:5", "'_' must sit between digits");
    E("a = 1._5", "1:5", "'_' must sit between digits");
    E("a = 01.5", "1:5", "leading zeros are not allowed");
    E("a = 1e400", "1:5", "float out of range");
    E("a = 1.2.3", "1:5", "not a number");
    E("a = Inf", "1:5", "invalid value 'Inf' (strings must be quoted)");
    E("a = NaN", "1:5", "strings must be quoted");
    E("a = infinity", "1:5", "strings must be quoted");
    E("a = inf1", "1:5", "strings must be quoted");
}

static void test_booleans(void)
{
    V("bool1 = true\nbool2 = false", "{bool1=true,bool2=false}");
    V("a = [true,false]", "{a=[true,false]}");
    E("a = True", "1:5", "invalid value 'True' (strings must be quoted)");
    E("a = truex", "1:5", "strings must be quoted");
    E("a = tru", "1:5", "strings must be quoted");
    E("a = hello world", "1:5", "invalid value 'hello'");
}

static void test_datetimes(void)
{
    V("odt1 = 1979-05-27T07:32:00Z\nodt2 = 1979-05-27T00:32:00-07:00\nodt3 = 1979-05-27T00:32:00.999999-07:00\n"
      "odt4 = 1979-05-27 07:32:00Z",
      "{odt1=odt:1979-05-27T07:32:00Z,odt2=odt:1979-05-27T00:32:00-07:00,odt3=odt:1979-05-27T00:32:00.999999-07:00,"
      "odt4=odt:1979-05-27 07:32:00Z}");
    V("ldt1 = 1979-05-27T07:32:00\nldt2 = 1979-05-27T00:32:00.999999",
      "{ldt1=ldt:1979-05-27T07:32:00,ldt2=ldt:1979-05-27T00:32:00.999999}");
    V("ld1 = 1979-05-27", "{ld1=ld:1979-05-27}");
    V("lt1 = 07:32:00\nlt2 = 00:32:00.999999", "{lt1=lt:07:32:00,lt2=lt:00:32:00.999999}");
    V("a = 1979-05-27t07:32:00z", "{a=odt:1979-05-27t07:32:00z}");
    V("a = 2000-02-29\nb = 2024-02-29", "{a=ld:2000-02-29,b=ld:2024-02-29}");
    V("a = [1979-05-27, 07:32:00, 1979-05-27 07:32:00]", "{a=[ld:1979-05-27,lt:07:32:00,ldt:1979-05-27 07:32:00]}");
    V("a = 1979-05-27 # comment", "{a=ld:1979-05-27}");
    V("a = 1979-05-27T23:59:59+23:59", "{a=odt:1979-05-27T23:59:59+23:59}");
    E("a = 1979-02-30", "1:5", "invalid date-time '1979-02-30': day out of range");
    E("a = 1900-02-29", "1:5", "day out of range");
    E("a = 1979-04-31", "1:5", "day out of range");
    E("a = 1979-13-01", "1:5", "month out of range");
    E("a = 1979-00-01", "1:5", "month out of range");
    E("a = 1979-05-00", "1:5", "day out of range");
    E("a = 1979-05-27T24:00:00", "1:5", "time out of range");
    E("a = 1979-05-27T07:60:00", "1:5", "time out of range");
    E("a = 07:32:60", "1:5", "time out of range");
    E("a = 07:32", "1:5", "expected HH:MM:SS");
    E("a = 1979-05-27T07:32", "1:5", "expected HH:MM:SS");
    E("a = 1979-05-27T", "1:5", "expected HH:MM:SS");
    E("a = 1979-5-27", "1:5", "expected YYYY-MM-DD");
    E("a = 79-05-27", "1:5", "not a number");
    E("a = 1979-05-27T07:32:00+7:00", "1:5", "expected an offset +HH:MM");
    E("a = 1979-05-27T07:32:00+24:00", "1:5", "offset out of range");
    E("a = 1979-05-27T07:32:00+07:00x", "1:5", "unexpected text after the offset");
    E("a = 1979-05-27T07:32:00X", "1:5", "unexpected text after the time");
    E("a = 1979-05-27X07:32:00", "1:5", "unexpected text after the date");
    E("a = 07:32:00Z", "1:5", "a local time cannot have an offset");
    E("a = 1979-05-27T07:32:00.", "1:5", "expected digits after '.'");
    E("a = 1979-05-27 07:32:00 Z", "1:25", "expected the end of the line after the value, found 'Z'");
}

static void test_arrays(void)
{
    V("integers = [ 1, 2, 3 ]\ncolors = [ \"red\", \"yellow\", \"green\" ]\nnested_arrays_of_ints = [ [ 1, 2 ], [3, 4, "
      "5] ]\n"
      "nested_mixed_array = [ [ 1, 2 ], [\"a\", \"b\", \"c\"] ]\n"
      "string_array = [ \"all\", 'strings', \"\"\"are the same\"\"\", '''type''' ]",
      "{integers=[1,2,3],colors=[\"red\",\"yellow\",\"green\"],nested_arrays_of_ints=[[1,2],[3,4,5]],"
      "nested_mixed_array=[[1,2],[\"a\",\"b\",\"c\"]],string_array=[\"all\",\"strings\",\"are the same\",\"type\"]}");
    V("numbers = [ 0.1, 0.2, 0.5, 1, 2, 5 ]\ncontributors = [\n  \"Foo Bar <foo@example.com>\",\n"
      "  { name = \"Baz Qux\", email = \"bazqux@example.com\", url = \"https://example.com/bazqux\" }\n]",
      "{numbers=[f:0.1,f:0.2,f:0.5,1,2,5],contributors=[\"Foo Bar <foo@example.com>\","
      "{name=\"Baz Qux\",email=\"bazqux@example.com\",url=\"https://example.com/bazqux\"}]}");
    V("integers2 = [\n  1, 2, 3\n]\nintegers3 = [\n  1,\n  2, # this is ok\n]", "{integers2=[1,2,3],integers3=[1,2]}");
    V("a = []\nb = [[]]\nc = [ ]\nd = [\n]", "{a=[],b=[[]],c=[],d=[]}");
    V("a = [ # comment\n 1 # c\n , # c\n 2 ]", "{a=[1,2]}");
    V("a = [1,2,]", "{a=[1,2]}");
    V("a = [\r\n1,\r\n2\r\n]", "{a=[1,2]}");
    V("a = [[[[1]]]]", "{a=[[[[1]]]]}");
    E("a = [1,,2]", "1:8", "expected a value, found ','");
    E("a = [,]", "1:6", "expected a value, found ','");
    E("a = [1 2]", "1:8", "expected ',' or ']' in the array, found '2'");
    E("a = [1, 2", "1:10", "expected ',' or ']' in the array, found the end of the file");
    E("a = [1,\n", "2:1", "expected a value, found the end of the file");
    E("a = [\x01]", "1:6", "expected a value, found U+0001");
    E("a = [1] [2]", "1:9", "expected the end of the line");
    E("a = [ 1 # comment ]", "1:20", "expected ',' or ']'");
    E("a = [1}", "1:7", "expected ',' or ']' in the array, found '}'");
}

static void test_inline_tables(void)
{
    V("name = { first = \"Tom\", last = \"Preston-Werner\" }\npoint = { x = 1, y = 2 }\nanimal = { type.name = \"pug\" "
      "}",
      "{name={first=\"Tom\",last=\"Preston-Werner\"},point={x=1,y=2},animal={type={name=\"pug\"}}}");
    V("a = {}\nb = { }", "{a={},b={}}");
    V("a = { b = { c = { d = 1 } } }", "{a={b={c={d=1}}}}");
    V("a = {b.c = 1, b.d = 2}", "{a={b={c=1,d=2}}}");
    V("a = {b = [1, {c = 2}], d = 'x'}", "{a={b=[1,{c=2}],d=\"x\"}}");
    V("a = {\"q k\" = 1,'l' = 2}", "{a={\"q k\"=1,l=2}}");
    E("a = {b = 1,}", "1:12", "trailing comma in an inline table");
    E("a = {b = 1\n}", "1:11", "newline in an inline table");
    E("a = {\nb = 1}", "1:6", "expected a key, found a newline");
    E("a = {b = 1, b = 2}", "1:13", "duplicate key 'b'");
    E("a = {b = 1 c = 2}", "1:12", "expected ',' or '}' in the inline table, found 'c'");
    E("a = {b = {c = 1}, b.d = 2}", "1:19", "key 'b' is an inline table, which cannot be extended");
    E("[product]\ntype = { name = \"Nail\" }\ntype.edible = false", "3:1", "key 'type' is an inline table");
    E("[product]\ntype.name = \"Nail\"\ntype = { edible = false }", "3:1", "duplicate key 'type'");
    E("a = {b = 1}\n[a]", "2:1", "table [a] defined twice");
    E("a = {b = 1}\n[a.c]", "2:2", "key 'a' is an inline table");
    E("a = {b = 1}\n[[a]]", "2:1", "cannot define [[a]]");
    E("a = {,}", "1:6", "expected a key, found ','");
    E("a = {b = 1", "1:11", "expected ',' or '}' in the inline table, found the end of the file");
    E("a = {b}", "1:7", "expected '=' after the key, found '}'");
    E("a = {b = 1 # c\n}", "1:12", "expected ',' or '}'");
}

static void test_tables(void)
{
    V("[table]", "{table={}}");
    V("[table-1]\nkey1 = \"some string\"\nkey2 = 123\n\n[table-2]\nkey1 = \"another string\"\nkey2 = 456",
      "{table-1={key1=\"some string\",key2=123},table-2={key1=\"another string\",key2=456}}");
    V("[dog.\"tater.man\"]\ntype.name = \"pug\"", "{dog={\"tater.man\"={type={name=\"pug\"}}}}");
    V("[a.b.c]\n[ d.e.f ]\n[ g .  h  . i ]\n[ j . \"ʞ\" . 'l' ]",
      "{a={b={c={}}},d={e={f={}}},g={h={i={}}},j={\"ʞ\"={l={}}}}");
    V("# [x] you\n# [x.y] don't\n# [x.y.z] need these\n[x.y.z.w] # for this to work\n[x] # defining a super-table "
      "afterward is ok",
      "{x={y={z={w={}}}}}");
    V("[fruit.apple]\n[animal]\n[fruit.orange]", "{fruit={apple={},orange={}},animal={}}");
    V("[fruit]\napple.color = \"red\"\napple.taste.sweet = true\n\n[fruit.apple.texture]\nsmooth = true",
      "{fruit={apple={color=\"red\",taste={sweet=true},texture={smooth=true}}}}");
    V("name = \"Fido\"\nbreed = \"pug\"\n\n[owner]\nname = \"Regina Dogman\"\nmember_since = 1999-08-04",
      "{name=\"Fido\",breed=\"pug\",owner={name=\"Regina Dogman\",member_since=ld:1999-08-04}}");
    V("fruit.apple.color = \"red\"\nfruit.apple.taste.sweet = true\n[fruit.apple.texture]\nsmooth = true",
      "{fruit={apple={color=\"red\",taste={sweet=true},texture={smooth=true}}}}");
    V("[a.b.c]\nz = 9\n[a]\nb.d = 1", "{a={b={c={z=9},d=1}}}");
    V("[a]\n[a.b]\n[a.b.c]\n[a.d]", "{a={b={c={}},d={}}}");
    V("[ a ]\nx = 1", "{a={x=1}}");
    V("a = 1\n[b]\nc = 2", "{a=1,b={c=2}}");
    V("[a]\nb.c = 1\nb.d = 2", "{a={b={c=1,d=2}}}");
    E("[fruit]\napple = \"red\"\n\n[fruit]\norange = \"orange\"", "4:1",
      "table [fruit] defined twice (first at line 1)");
    E("[fruit]\napple = \"red\"\n\n[fruit.apple]\ntexture = \"smooth\"", "4:1",
      "key 'fruit.apple' already holds a value");
    E("[fruit]\napple.color = \"red\"\napple.taste.sweet = true\n[fruit.apple]", "4:1",
      "table [fruit.apple] already defined by dotted keys");
    E("[fruit]\napple.color = \"red\"\napple.taste.sweet = true\n[fruit.apple.taste]", "4:1",
      "already defined by dotted keys");
    E("[a.b.c]\nz = 9\n[a]\nb.c.t = 1", "4:3", "key 'b.c' is a table defined elsewhere; dotted keys cannot extend it");
    E("[a.b.c]\n[a]\nb.d = 1\n[a.b]", "4:1", "table [a.b] already defined by dotted keys");
    E("[a]\nb.c = 1\n[x]\n[a]\nb.d = 2", "4:1", "table [a] defined twice");
    E("a.b = 1\n[a]", "2:1", "table [a] already defined by dotted keys");
    E("[a]\nb = 1\n[a.b]", "3:1", "already holds a value");
    E("[a]\n[a]", "2:1", "table [a] defined twice");
    E("[\"a\"]\n[a]", "2:1", "table [a] defined twice");
    E("[a.b]\n[a]\n[a]", "3:1", "table [a] defined twice (first at line 2)");
    E("[]", "1:2", "expected a key, found ']'");
    E("[a", "1:3", "expected ']' after the table name, found the end of the file");
    E("[a.]", "1:4", "expected a key");
    E("[a b]", "1:4", "expected ']' after the table name, found 'b'");
    E("[a] b = 1", "1:5", "expected the end of the line after the table header, found 'b'");
    E("[a]]", "1:4", "expected the end of the line after the table header, found ']'");
    E("[a\n]", "1:3", "expected ']' after the table name, found a newline");
    E("[\"\"\"a\"\"\"]", "1:2", "a multi-line string cannot be a key");
}

static void test_arrays_of_tables(void)
{
    V("[[products]]\nname = \"Hammer\"\nsku = 738594937\n\n[[products]]  # empty table within the array\n\n"
      "[[products]]\nname = \"Nail\"\nsku = 284758393\n\ncolor = \"gray\"",
      "{products=[{name=\"Hammer\",sku=738594937},{},{name=\"Nail\",sku=284758393,color=\"gray\"}]}");
    V("[[fruits]]\nname = \"apple\"\n\n[fruits.physical]  # subtable\ncolor = \"red\"\nshape = \"round\"\n\n"
      "[[fruits.varieties]]  # nested array of tables\nname = \"red delicious\"\n\n[[fruits.varieties]]\n"
      "name = \"granny smith\"\n\n\n[[fruits]]\nname = \"banana\"\n\n[[fruits.varieties]]\nname = \"plantain\"",
      "{fruits=[{name=\"apple\",physical={color=\"red\",shape=\"round\"},varieties=[{name=\"red delicious\"},"
      "{name=\"granny smith\"}]},{name=\"banana\",varieties=[{name=\"plantain\"}]}]}");
    V("points = [ { x = 1, y = 2, z = 3 },\n           { x = 7, y = 8, z = 9 },\n           { x = 2, y = 4, z = 8 } ]",
      "{points=[{x=1,y=2,z=3},{x=7,y=8,z=9},{x=2,y=4,z=8}]}");
    V("[[a]]\nb.c = 1\n[[a]]\nb.c = 2", "{a=[{b={c=1}},{b={c=2}}]}");
    V("[[a.b]]\nx=1\n[[a.b]]\nx=2", "{a={b=[{x=1},{x=2}]}}");
    V("[[a]]\nx = 1\na.y = 2", "{a=[{x=1,a={y=2}}]}");
    V("[[ a ]]\n[[a]]", "{a=[{},{}]}");
    V("[[a]]\n[a.b]\n[[a]]\n[a.b]", "{a=[{b={}},{b={}}]}");
    E("[fruit.physical]\ncolor = \"red\"\n[[fruit]]\nname = \"apple\"", "3:1",
      "cannot define [[fruit]]: key 'fruit' already holds a table");
    E("fruits = []\n[[fruits]]", "2:1", "already holds a static array");
    E("[[fruits]]\nname = \"apple\"\n[[fruits.varieties]]\nname = \"red delicious\"\n[fruits.varieties]\nname = "
      "\"granny smith\"",
      "5:1", "table [fruits.varieties] already defined as an array of tables");
    E("[[fruits]]\n[fruits.physical]\ncolor = \"red\"\n[[fruits.physical]]", "4:1",
      "cannot define [[fruits.physical]]");
    E("a = [{b = 1}]\n[a.c]", "2:2", "key 'a' is a static array, which cannot be extended");
    E("[[a]]\n[a]", "2:1", "table [a] already defined as an array of tables");
    E("[a]\n[[a]]", "2:1", "cannot define [[a]]");
    E("[[x.a]]\n[x]\na.b = 1", "3:1", "key 'a' is an array of tables");
    E("[[a]\n", "1:4", "expected ']]' after the table name, found ']'");
    E("[ [a]]", "1:3", "expected a key, found '['");
    E("[[a]]\nb = 1\nb = 2", "3:1", "duplicate key 'b'");
}

static void test_encoding(void)
{
    E("a = \"\xff\"", "1:6", "invalid UTF-8 (byte 0xFF)");
    E("a = \"\xc0\xaf\"", "1:6", "invalid UTF-8");
    E("a = \"\xed\xa0\x80\"", "1:6", "invalid UTF-8");
    E("a = \"\xf4\x90\x80\x80\"", "1:6", "invalid UTF-8");
    E("a = \"\xe2\x82\"", "1:6", "invalid UTF-8");
    E("a = 1\n# \xff", "2:3", "invalid UTF-8");
    E("a = \"é\xe2\"", "1:7", "invalid UTF-8");
    E("s = \"éé\" x", "1:10", "expected the end of the line");
    E("s = 'ʎ\x01'", "1:7", "control character");
}

static void test_depth(void)
{
    char doc[1024];
    int n = 0;
    n += snprintf(doc, sizeof doc, "a = ");
    for (int i = 0; i < ZT_TOML_MAX_DEPTH - 1; i++) doc[n++] = '[';
    for (int i = 0; i < ZT_TOML_MAX_DEPTH - 1; i++) doc[n++] = ']';
    char err[128];
    zt_toml *t = parse(doc, (size_t)n, err, sizeof err);
    CHECK_MSG(t != NULL, "%s", err);
    zt_toml_free(t);
    n = snprintf(doc, sizeof doc, "a = ");
    for (int i = 0; i < 600; i++) doc[n++] = '[';
    t = parse(doc, (size_t)n, err, sizeof err);
    CHECK(t == NULL && strstr(err, "nesting deeper than 256 levels"));
    n = snprintf(doc, sizeof doc, "a = ");
    for (int i = 0; i < 300; i++) n += snprintf(doc + n, sizeof doc - (size_t)n, "{b=");
    t = parse(doc, (size_t)n, err, sizeof err);
    CHECK(t == NULL && strstr(err, "nesting deeper"));
    n = 0;
    doc[n++] = '[';
    for (int i = 0; i < 300; i++) n += snprintf(doc + n, sizeof doc - (size_t)n, "a.");
    n += snprintf(doc + n, sizeof doc - (size_t)n, "a]");
    t = parse(doc, (size_t)n, err, sizeof err);
    CHECK(t == NULL && strstr(err, "nesting deeper"));
}

static void test_positions(void)
{
    const char *doc = "a = 1\n[t]\n  key = \"v\"\n  sub.x = [1,\n    2]\n[[arr]]\n\"é\" = 1979-05-27\n";
    char err[128];
    zt_toml *root = zt_toml_parse(doc, strlen(doc), err, sizeof err);
    CHECK_MSG(root != NULL, "%s", err);
    if (!root) return;
    const zt_toml *a = zt_toml_get(root, "a"), *t = zt_toml_get(root, "t");
    CHECK(a && a->line == 1 && a->col == 5);
    CHECK(root->items[0].line == 1 && root->items[0].col == 1);
    CHECK(t && t->kind == ZT_TOML_TABLE && t->line == 2 && t->col == 1);
    CHECK(root->items[1].line == 2 && root->items[1].col == 2);
    const zt_toml *key = zt_toml_path(root, "t.key");
    CHECK(key && key->line == 3 && key->col == 9 && !strcmp(key->str, "v"));
    CHECK(t->items[0].line == 3 && t->items[0].col == 3);
    const zt_toml *sub = zt_toml_get(t, "sub"), *x = zt_toml_path(root, "t.sub.x");
    CHECK(sub && sub->line == 4 && sub->col == 3);
    CHECK(x && x->kind == ZT_TOML_ARRAY && x->n == 2 && x->line == 4 && x->col == 11);
    CHECK(x->items[1].value->line == 5 && x->items[1].value->col == 5 && x->items[1].value->i == 2);
    CHECK(sub->items[0].line == 4 && sub->items[0].col == 7);
    const zt_toml *arr = zt_toml_get(root, "arr");
    CHECK(arr && arr->kind == ZT_TOML_ARRAY && arr->n == 1);
    const zt_toml *el = arr->items[0].value;
    CHECK(el->line == 6 && el->col == 1);
    CHECK(el->items[0].line == 7 && el->items[0].col == 1 && el->items[0].value->col == 7);
    /* an implicit table takes the position of the header that defines it */
    zt_toml_free(root);
    doc = "[x.y]\n[x]\n";
    root = zt_toml_parse(doc, strlen(doc), err, sizeof err);
    CHECK(root && zt_toml_get(root, "x")->line == 2);
    zt_toml_free(root);
}

static void test_datetime_parts(void)
{
    const char *doc =
        "a = 1979-05-27T00:32:00.999999-07:30\nb = 2024-02-29\nc = 23:59:58.5\nd = 1979-05-27 07:32:01.1234567891\n";
    zt_toml *root = zt_toml_parse(doc, strlen(doc), NULL, 0);
    CHECK(root != NULL);
    if (!root) return;
    const zt_toml *a = zt_toml_get(root, "a"), *b = zt_toml_get(root, "b"), *c = zt_toml_get(root, "c"),
                  *d = zt_toml_get(root, "d");
    CHECK(a->kind == ZT_TOML_DATETIME && a->dt.year == 1979 && a->dt.month == 5 && a->dt.day == 27);
    CHECK(a->dt.hour == 0 && a->dt.minute == 32 && a->dt.second == 0 && a->dt.nanosecond == 999999000);
    CHECK(a->dt.offset_minutes == -(7 * 60 + 30));
    CHECK(b->kind == ZT_TOML_LOCAL_DATE && b->dt.year == 2024 && b->dt.month == 2 && b->dt.day == 29 &&
          b->dt.hour == 0);
    CHECK(c->kind == ZT_TOML_LOCAL_TIME && c->dt.hour == 23 && c->dt.second == 58 && c->dt.nanosecond == 500000000);
    CHECK(d->kind == ZT_TOML_LOCAL_DATETIME && d->dt.second == 1 && d->dt.nanosecond == 123456789);
    CHECK(!strcmp(d->str, "1979-05-27 07:32:01.1234567891") && d->len == strlen(d->str));
    zt_toml_free(root);
}

static void test_lookups(void)
{
    const char *doc = "[offload]\noptimizer = \"cpu\"\n[offload.aio]\nblock_size = 4096\n[\"a.b\"]\nc = 1\n";
    zt_toml *root = zt_toml_parse(doc, strlen(doc), NULL, 0);
    CHECK(root != NULL);
    if (!root) return;
    const zt_toml *bs = zt_toml_path(root, "offload.aio.block_size");
    CHECK(bs && bs->kind == ZT_TOML_INT && bs->i == 4096);
    CHECK(zt_toml_path(root, "offload.aio.nope") == NULL);
    CHECK(zt_toml_path(root, "offload.optimizer.x") == NULL);
    CHECK(zt_toml_get(zt_toml_get(root, "offload"), "optimizer") != NULL);
    CHECK(zt_toml_get(bs, "x") == NULL);
    CHECK(zt_toml_get(NULL, "x") == NULL);
    CHECK(zt_toml_get(zt_toml_get(root, "a.b"), "c") != NULL); /* a key with a dot: only through zt_toml_get */
    CHECK(!strcmp(root->items[0].key, "offload") && !strcmp(root->items[1].key, "a.b"));
    CHECK(!strcmp(zt_toml_kind_name(ZT_TOML_FLOAT), "a float") &&
          !strcmp(zt_toml_kind_name(ZT_TOML_INT), "an integer"));
    zt_toml_free(root);
}

static void test_errors_buffer(void)
{
    char small[8];
    CHECK(zt_toml_parse("a = ", 4, small, sizeof small) == NULL && !strcmp(small, "1:5: ex"));
    CHECK(zt_toml_parse("a = ", 4, NULL, 0) == NULL);
    char err[64] = "junk";
    zt_toml *t = zt_toml_parse("a = 1", 5, err, sizeof err);
    CHECK(t && err[0] == 0);
    zt_toml_free(t);
    /* a length shorter than the text: only that much is read */
    t = zt_toml_parse("a = 12 junk", 6, err, sizeof err);
    CHECK(t && zt_toml_get(t, "a")->i == 12);
    zt_toml_free(t);
    zt_toml_free(NULL);
}

static void test_utf8_prefix(void)
{
    CHECK(zt_toml_utf8_prefix("abc", 3) == 3);
    CHECK(zt_toml_utf8_prefix("a\xc3\xa9z", 4) == 4);
    CHECK(zt_toml_utf8_prefix("a\xc3", 2) == 1);
    CHECK(zt_toml_utf8_prefix("ab\xe0\x80\x80", 5) == 2); /* overlong */
    CHECK(zt_toml_utf8_prefix("\xf0\x9f\x98\x80!", 5) == 5);
    CHECK(zt_toml_utf8_prefix("\x80", 1) == 0);
}

static void test_write_string(void)
{
    char raw[160];
    size_t n = 0;
    for (int c = 1; c < 128; c++) raw[n++] = (char)c;
    memcpy(raw + n, "\0é😀", 8);
    n += 8;
    char *text = NULL;
    size_t tn = 0;
    FILE *f = open_memstream(&text, &tn);
    fputs("s = ", f);
    zt_toml_write_string(f, raw, n);
    fclose(f);
    char err[128];
    zt_toml *t = zt_toml_parse(text, tn, err, sizeof err);
    CHECK_MSG(t != NULL, "%s in %s", err, text);
    const zt_toml *s = zt_toml_get(t, "s");
    CHECK(s && s->len == n && !memcmp(s->str, raw, n));
    zt_toml_free(t);
    free(text);
}

int main(void)
{
    RUN(test_comments_and_layout);
    RUN(test_keyvals);
    RUN(test_keys);
    RUN(test_basic_strings);
    RUN(test_multiline_basic_strings);
    RUN(test_literal_strings);
    RUN(test_integers);
    RUN(test_floats);
    RUN(test_booleans);
    RUN(test_datetimes);
    RUN(test_arrays);
    RUN(test_inline_tables);
    RUN(test_tables);
    RUN(test_arrays_of_tables);
    RUN(test_encoding);
    RUN(test_depth);
    RUN(test_positions);
    RUN(test_datetime_parts);
    RUN(test_lookups);
    RUN(test_errors_buffer);
    RUN(test_utf8_prefix);
    RUN(test_write_string);
    fprintf(stderr, "%d corpus documents\n", ncases);
    return test_summary();
}
