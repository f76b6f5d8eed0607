/* JSON: round trip of the writer through the parser, escapes, and malformed inputs. */
#include "test.h"
#include "util/error.h"
#include "util/json.h"

#include <stdlib.h>

TEST(json_round_trip_with_escapes) {
    ftl_strbuf b = {0};
    ftl_strbuf_printf(&b, "{\"name\": ");
    ftl_json_append_string(&b, "ants \"and\" bees\\\n\x01");
    ftl_strbuf_printf(&b, ", \"x\": ");
    ftl_json_append_number(&b, 0.1);
    ftl_strbuf_printf(&b, ", \"list\": [1, 2.5e3, true, null, \"\\u00e9\\ud83d\\ude00\"]}");
    ftl_json *v;
    REQUIRE_OK(ftl_json_parse(b.data, b.len, &v));
    CHECK_STR_EQ(ftl_json_get_string(v, "name"), "ants \"and\" bees\\\n\x01");
    double x;
    CHECK(ftl_json_get_number(v, "x", &x) && x == 0.1);
    const ftl_json *list = ftl_json_get(v, "list");
    REQUIRE(list && list->type == FTL_JSON_ARRAY && list->count == 5);
    CHECK(list->items[1].number == 2500.0);
    CHECK(list->items[2].type == FTL_JSON_BOOL && list->items[2].boolean);
    CHECK(list->items[3].type == FTL_JSON_NULL);
    CHECK_STR_EQ(list->items[4].string, "\xc3\xa9\xf0\x9f\x98\x80");
    ftl_json_free(v);
    ftl_strbuf_free(&b);
}

TEST(json_rejects_malformed_input) {
    const char *bad[] = {"", "{", "[1,]", "{\"a\" 1}", "\"abc", "[1 2]", "{\"a\":1}x", "\"\\x\"",
                         "\"\\ud800\"", "-", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ftl_json *v = NULL;
        ftl_status st = ftl_json_parse(bad[i], strlen(bad[i]), &v);
        if (st != FTL_E_FORMAT) ftl_test_fail(__FILE__, __LINE__, "accepted malformed JSON #%zu: %s", i, bad[i]);
        CHECK(v == NULL);
        CHECK_CONTAINS(ftl_last_error(), "invalid JSON at byte");
    }
    /* Not NUL-terminated: the parser must stop at size. */
    char buf[3] = {'[', '1', ']'};
    ftl_json *v;
    CHECK_OK(ftl_json_parse(buf, 3, &v));
    ftl_json_free(v);
}

/* Bytes that are not UTF-8 (a Latin-1 file name, an overlong form, a surrogate, a truncated
 * sequence) become U+FFFD, one per byte; well-formed characters of 2-4 bytes pass unchanged. */
TEST(json_strings_are_valid_utf8) {
    struct { const char *in, *out; } cases[] = {
        {"caf\xc3\xa9", "\"caf\xc3\xa9\""},                 /* é */
        {"\xf0\x9f\x90\x9d bee", "\"\xf0\x9f\x90\x9d bee\""}, /* U+1F41D */
        {"caf\xe9.jpg", "\"caf\\ufffd.jpg\""},              /* Latin-1 é */
        {"\xc0\xaf", "\"\\ufffd\\ufffd\""},                 /* overlong '/' */
        {"\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""},       /* a UTF-16 surrogate */
        {"\xe2\x82", "\"\\ufffd\\ufffd\""},                 /* truncated euro sign */
        {"\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""}, /* above U+10FFFF */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ftl_strbuf b = {0};
        ftl_json_append_string(&b, cases[i].in);
        CHECK_STR_EQ(b.data, cases[i].out);
        ftl_json *v = NULL;
        CHECK_OK(ftl_json_parse(b.data, b.len, &v)); /* and our own parser reads it back */
        ftl_json_free(v);
        ftl_strbuf_free(&b);
    }
    CHECK_EQ_INT(ftl_utf8_char_length("\xc3\xa9"), 2);
    CHECK_EQ_INT(ftl_utf8_char_length("\xe2\x82\xac"), 3);
    CHECK_EQ_INT(ftl_utf8_char_length("\x80"), 0);
    CHECK_EQ_INT(ftl_utf8_char_length(""), 0);
}
