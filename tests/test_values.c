/* test_values.c - tables for every typed value parser of values.h. */
#include "base/values.h"
#include "testutil.h"

typedef struct i64_case {
    const char *in;
    bool ok;
    int64_t want;
} i64_case;

START_TEST(int64_accepts_plain_integers_in_range) {
    static const i64_case cases[] = {
        {"0", true, 0},    {"42", true, 42},   {"-7", true, -7},
        {"+5", true, 5},   {"007", true, 7},   {"100", true, 100},
        {"101", false, 0}, {"-101", false, 0}, {"", false, 0},
        {"1.5", false, 0}, {"12a", false, 0},  {" 1", false, 0},
        {"-", false, 0},   {"1e3", false, 0},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(cases); i++) {
        int64_t v = -1;
        const char *why = NULL;
        bool ok = sy__value_int64(cases[i].in, -100, 100, &v, &why);
        ck_assert_msg(ok == cases[i].ok, "case '%s'", cases[i].in);
        if (ok)
            ck_assert_int_eq(v, cases[i].want);
        else
            ck_assert_ptr_nonnull(why);
    }
}
END_TEST

/* Retry's statuses bind as an enum field: Spring Boot's lenient conversion
 * also takes dashes and camel case; a misspelt name stays an error. */
START_TEST(status_enum_reads_lenient_names) {
    static const struct {
        const char *in;
        int want; /* 0: refused */
    } cases[] = {{"bad-gateway", 502}, {"BadGateway", 502},
                 {"BAD_GATEWAY", 502}, {"503", 503},
                 {"bad-gatewy", 0},    {"--", 0}};
    for (size_t i = 0; i < SY_ARRAY_LEN(cases); i++) {
        int v = -1;
        const char *why = NULL;
        bool ok = sy__value_status_enum(cases[i].in, &v, &why);
        ck_assert_msg(ok == (cases[i].want != 0), "case '%s'", cases[i].in);
        if (ok)
            ck_assert_int_eq(v, cases[i].want);
        else
            ck_assert_ptr_nonnull(why);
    }
}
END_TEST

START_TEST(int64_detects_overflow) {
    int64_t v;
    const char *why = NULL;
    ck_assert(
        sy__value_int64("9223372036854775807", INT64_MIN, INT64_MAX, &v, NULL));
    ck_assert_int_eq(v, INT64_MAX);
    ck_assert(sy__value_int64("-9223372036854775808", INT64_MIN, INT64_MAX, &v,
                              NULL));
    ck_assert_int_eq(v, INT64_MIN);
    ck_assert(!sy__value_int64("9223372036854775808", INT64_MIN, INT64_MAX, &v,
                               &why));
    ck_assert_str_eq(why, "integer out of range");
}
END_TEST

START_TEST(bool_accepts_true_false_in_any_case) {
    static const struct {
        const char *in;
        bool ok, want;
    } cases[] = {{"true", true, true},   {"TRUE", true, true},
                 {"False", true, false}, {"false", true, false},
                 {"yes", false, false},  {"1", false, false},
                 {"", false, false},     {"truee", false, false}};
    for (size_t i = 0; i < SY_ARRAY_LEN(cases); i++) {
        bool v = !cases[i].want;
        bool ok = sy__value_bool(cases[i].in, &v, NULL);
        ck_assert_msg(ok == cases[i].ok, "case '%s'", cases[i].in);
        if (ok)
            ck_assert(v == cases[i].want);
    }
}
END_TEST

START_TEST(duration_units_and_iso_forms) {
    static const i64_case cases[] = {
        {"10ms", true, 10},
        {"250", true, 250},
        {"5s", true, 5000},
        {"5S", true, 5000},
        {"1m", true, 60000},
        {"2h", true, 7200000},
        {"1d", true, 86400000},
        {"2000us", true, 2},
        {"3000000ns", true, 3},
        {"1500us", false, 0}, /* whole milliseconds only, never cut */
        {"2500000ns", false, 0},
        {"999us", false, 0},
        {"PT0.0005S", false, 0},
        {"PT1.2340S", true, 1234},
        {"PT5S", true, 5000},
        {"PT1M30S", true, 90000},
        {"PT0.25S", true, 250},
        {"P1DT1H", true, 90000000},
        {"pt2m", true, 120000},
        {"", false, 0},
        {"5x", false, 0},
        {"-5s", false, 0},
        {"s", false, 0},
        {"PT", false, 0},
        {"P", false, 0},
        {"PT5", false, 0},
        {"P1H", false, 0},
        {"1.5s", false, 0},
        {"99999999999999999d", false, 0},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(cases); i++) {
        int64_t v = -1;
        const char *why = NULL;
        bool ok = sy__value_duration_ms(cases[i].in, &v, &why);
        ck_assert_msg(ok == cases[i].ok, "case '%s'", cases[i].in);
        if (ok)
            ck_assert_msg(v == cases[i].want, "case '%s' gave %lld",
                          cases[i].in, (long long)v);
        else
            ck_assert_ptr_nonnull(why);
    }
}
END_TEST

START_TEST(size_units_are_1024_based) {
    static const i64_case cases[] = {
        {"16000B", true, 16000},
        {"16000", true, 16000},
        {"1KB", true, 1024},
        {"5MB", true, 5 * 1024 * 1024},
        {"5mb", true, 5 * 1024 * 1024},
        {"2GB", true, 2LL * 1024 * 1024 * 1024},
        {"1TB", true, 1024LL * 1024 * 1024 * 1024},
        {"0", true, 0},
        {"", false, 0},
        {"MB", false, 0},
        {"5 MB", false, 0},
        {"-1KB", false, 0},
        {"5PB", false, 0},
        {"1.5MB", false, 0},
        {"99999999999TB", false, 0},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(cases); i++) {
        int64_t v = -1;
        bool ok = sy__value_size(cases[i].in, &v, NULL);
        ck_assert_msg(ok == cases[i].ok, "case '%s'", cases[i].in);
        if (ok)
            ck_assert_int_eq(v, cases[i].want);
    }
}
END_TEST

START_TEST(datetime_iso_with_offset_zone_or_epoch_millis) {
    static const i64_case cases[] = {
        {"2017-01-20T17:42:47.789-07:00[America/Denver]", true,
         1484959367789LL},
        {"2017-01-20T17:42:47.789-07:00", true, 1484959367789LL},
        {"2017-01-21T00:42:47.789Z", true, 1484959367789LL},
        {"2017-01-21T00:42:47.789123456Z", true, 1484959367789LL},
        {"2017-01-21T00:42:47Z", true, 1484959367000LL},
        {"2017-01-21T00:42Z", true, 1484959320000LL},
        {"2017-01-21T01:42:47.789+01:00", true, 1484959367789LL},
        {"1970-01-01T00:00:00Z", true, 0},
        {"1969-12-31T23:59:59.999Z", true, -1},
        {"2000-02-29T00:00:00Z", true, 951782400000LL},
        {"1484959367789", true, 1484959367789LL},
        {"-1000", true, -1000},
        {"0", true, 0},
        {"2017-01-20T17:42:47.789", false, 0},
        {"2017-01-20", false, 0},
        {"2017-13-01T00:00:00Z", false, 0},
        {"2017-02-29T00:00:00Z", false, 0},
        {"2017-01-20T24:00:00Z", false, 0},
        {"2017-01-20T17:42:47.789+19:00", false, 0},
        {"2017-01-20T17:42:47.789-07:00[", false, 0},
        {"2017-01-20T17:42:47.789-07:00[]", false, 0},
        {"2017-01-20T17:42:47.789-07:00 ", false, 0},
        {"yesterday", false, 0},
        {"", false, 0},
        {"12.5", false, 0},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(cases); i++) {
        int64_t v = -1;
        const char *why = NULL;
        bool ok = sy__value_datetime_ms(cases[i].in, &v, &why);
        ck_assert_msg(ok == cases[i].ok, "case '%s'", cases[i].in);
        if (ok)
            ck_assert_msg(v == cases[i].want, "case '%s' gave %lld",
                          cases[i].in, (long long)v);
        else
            ck_assert_ptr_nonnull(why);
    }
}
END_TEST

START_TEST(cidr_parses_v4_v6_and_checks_prefix) {
    static const struct {
        const char *in;
        bool ok;
        int family, prefix;
    } cases[] = {
        {"10.0.0.0/8", true, 4, 8},
        {"192.168.1.1", true, 4, 32},
        {"192.168.1.1/24", true, 4, 24}, /* host bits allowed */
        {"0.0.0.0/0", true, 4, 0},
        {"::1", true, 6, 128},
        {"2001:db8::/32", true, 6, 32},
        {"::ffff:10.0.0.1/128", true, 6, 128},
        {"10.0.0.0/33", false, 0, 0},
        {"::/129", false, 0, 0},
        {"10.0.0/8", false, 0, 0},
        {"10.0.0.256", false, 0, 0},
        {"010.0.0.1", false, 0, 0},
        {"10.0.0.1/", false, 0, 0},
        {"10.0.0.1/x", false, 0, 0},
        {"example.com", false, 0, 0},
        {"", false, 0, 0},
        {"2001:db8::g/32", false, 0, 0},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(cases); i++) {
        sy__cidr c;
        const char *why = NULL;
        bool ok = sy__value_cidr(cases[i].in, &c, &why);
        ck_assert_msg(ok == cases[i].ok, "case '%s'", cases[i].in);
        if (ok) {
            ck_assert_int_eq(c.family, cases[i].family);
            ck_assert_int_eq(c.prefix, cases[i].prefix);
        } else {
            ck_assert_ptr_nonnull(why);
        }
    }
}
END_TEST

static bool contains(const char *net, const char *ip) {
    sy__cidr n, a;
    ck_assert(sy__value_cidr(net, &n, NULL));
    sy_str s = {ip, strlen(ip)};
    if (!sy__value_ip(s, &a))
        return false;
    return sy__cidr_contains(&n, &a);
}

START_TEST(cidr_contains_respects_prefix_and_family) {
    ck_assert(contains("10.0.0.0/8", "10.1.2.3"));
    ck_assert(!contains("10.0.0.0/8", "11.0.0.1"));
    ck_assert(contains("192.168.1.77/24", "192.168.1.3"));
    ck_assert(!contains("192.168.1.0/25", "192.168.1.200"));
    ck_assert(contains("192.168.1.1", "192.168.1.1"));
    ck_assert(!contains("192.168.1.1", "192.168.1.2"));
    ck_assert(contains("0.0.0.0/0", "8.8.8.8"));
    ck_assert(!contains("0.0.0.0/0", "::1"));
    ck_assert(contains("2001:db8::/32", "2001:db8:1::5"));
    ck_assert(!contains("2001:db8::/32", "2001:db9::5"));
    ck_assert(contains("::1", "::1"));
    ck_assert(contains("10.0.0.0/8", "::ffff:10.0.0.9"));
    ck_assert(contains("::1", "[::1]"));
    ck_assert(contains("fe80::/10", "fe80::1%eth0"));
}
END_TEST

START_TEST(ip_rejects_non_addresses) {
    sy__cidr c;
    const char *bad[] = {"",          "localhost", "1.2.3",
                         "1.2.3.4/8", "::g",       "1.2.3.4.5"};
    for (size_t i = 0; i < SY_ARRAY_LEN(bad); i++) {
        sy_str s = {bad[i], strlen(bad[i])};
        ck_assert_msg(!sy__value_ip(s, &c), "case '%s'", bad[i]);
        ck_assert_int_eq(c.family, 0);
    }
    sy_str s = {"10.0.0.1xyz", 8};
    ck_assert(sy__value_ip(s, &c));
    ck_assert_int_eq(c.family, 4);
    ck_assert_int_eq(c.addr[3], 1);
}
END_TEST

START_TEST(status_accepts_codes_and_spring_names) {
    static const struct {
        const char *in;
        bool ok;
        int want;
    } cases[] = {
        {"404", true, 404},
        {"100", true, 100},
        {"599", true, 599},
        {"NOT_FOUND", true, 404},
        {"FOUND", true, 302},
        {"MOVED_PERMANENTLY", true, 301},
        {"BAD_REQUEST", true, 400},
        {"TEMPORARY_REDIRECT", true, 307},
        {"PERMANENT_REDIRECT", true, 308},
        {"SEE_OTHER", true, 303},
        {"UNAUTHORIZED", true, 401},
        {"FORBIDDEN", true, 403},
        {"TOO_MANY_REQUESTS", true, 429},
        {"INTERNAL_SERVER_ERROR", true, 500},
        {"SERVICE_UNAVAILABLE", true, 503},
        {"OK", true, 200},
        {"99", false, 0},
        {"600", false, 0},
        {"not_found", true, 404},
        {"Bad_Gateway", true, 502},
        {"not-found", false, 0},
        {"NOT_FOUNDX", false, 0},
        {"BAD_GATEWY", false, 0},
        {"NOPE", false, 0},
        {"", false, 0},
        {"40x", false, 0},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(cases); i++) {
        int v = -1;
        const char *why = NULL;
        bool ok = sy__value_status(cases[i].in, &v, &why);
        ck_assert_msg(ok == cases[i].ok, "case '%s'", cases[i].in);
        if (ok)
            ck_assert_int_eq(v, cases[i].want);
        else
            ck_assert_ptr_nonnull(why);
    }
}
END_TEST

START_TEST(method_is_a_token_and_upper_cased) {
    char up[32];
    ck_assert(sy__value_method("get", up, NULL));
    ck_assert_str_eq(up, "GET");
    ck_assert(sy__value_method("Propfind", up, NULL));
    ck_assert_str_eq(up, "PROPFIND");
    ck_assert(sy__value_method("M-SEARCH", up, NULL));
    ck_assert_str_eq(up, "M-SEARCH");
    ck_assert(!sy__value_method("", up, NULL));
    ck_assert(!sy__value_method("GE T", up, NULL));
    ck_assert(!sy__value_method("GET/", up, NULL));
}
END_TEST

START_TEST(token_rejects_separators) {
    ck_assert(sy__value_token("X-Request-Id", NULL));
    ck_assert(sy__value_token("a!#$%&'*+-.^_`|~9", NULL));
    ck_assert(!sy__value_token("X Request", NULL));
    ck_assert(!sy__value_token("X:Y", NULL));
    ck_assert(!sy__value_token("", NULL));
    /* every byte, alone and after a letter: RFC 7230's tchar and no other */
    for (int c = 1; c < 256; c++) {
        bool want = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') ||
                    (c < 128 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
        char one[2] = {(char)c, 0}, two[3] = {'a', (char)c, 0};
        ck_assert_msg(sy__value_token(one, NULL) == want, "byte %d", c);
        ck_assert_msg(sy__value_token(two, NULL) == want, "byte %d", c);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("values");
    TCase *tc = tcase_create("values");
    tcase_add_test(tc, int64_accepts_plain_integers_in_range);
    tcase_add_test(tc, int64_detects_overflow);
    tcase_add_test(tc, bool_accepts_true_false_in_any_case);
    tcase_add_test(tc, duration_units_and_iso_forms);
    tcase_add_test(tc, size_units_are_1024_based);
    tcase_add_test(tc, datetime_iso_with_offset_zone_or_epoch_millis);
    tcase_add_test(tc, cidr_parses_v4_v6_and_checks_prefix);
    tcase_add_test(tc, cidr_contains_respects_prefix_and_family);
    tcase_add_test(tc, ip_rejects_non_addresses);
    tcase_add_test(tc, status_accepts_codes_and_spring_names);
    tcase_add_test(tc, status_enum_reads_lenient_names);
    tcase_add_test(tc, method_is_a_token_and_upper_cased);
    tcase_add_test(tc, token_rejects_separators);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
