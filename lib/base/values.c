/*
 * values.c - parsers for typed argument values (values.h): integers,
 * booleans, durations, data sizes, ISO-8601 date-times, IP addresses and
 * CIDR blocks, HTTP statuses and method tokens. Pure functions: no
 * allocation, no locale, no global state.
 */
#include "base/values.h"

#include <arpa/inet.h>

static bool set_why(const char **why, const char *msg) {
    if (why)
        *why = msg;
    return false;
}

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

static char to_lower(char c) {
    return (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
}

static char to_upper(char c) {
    return (c >= 'a' && c <= 'z') ? (char)(c - 32) : c;
}

static bool ieq(const char *a, size_t alen, const char *b) {
    size_t blen = strlen(b);
    if (alen != blen)
        return false;
    for (size_t i = 0; i < alen; i++)
        if (to_lower(a[i]) != to_lower(b[i]))
            return false;
    return true;
}

/* Parse [+-]digits at s; *end gets the first byte after. Saturates
 * detection: returns false on overflow of int64. */
static bool parse_digits(const char *s, const char **end, int64_t *out) {
    bool neg = false;
    if (*s == '+' || *s == '-') {
        neg = *s == '-';
        s++;
    }
    if (!is_digit(*s))
        return false;
    uint64_t v = 0;
    const uint64_t lim = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    while (is_digit(*s)) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (lim - d) / 10u)
            return false;
        v = v * 10u + d;
        s++;
    }
    *end = s;
    if (neg)
        *out = v == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)v;
    else
        *out = (int64_t)v;
    return true;
}

bool sy__value_int64(const char *s, int64_t min, int64_t max, int64_t *out,
                     const char **why) {
    const char *end;
    int64_t v;
    if (!s || !parse_digits(s, &end, &v)) {
        if (s && (is_digit(*s) || ((*s == '-' || *s == '+') && is_digit(s[1]))))
            return set_why(why, "integer out of range");
        return set_why(why, "expected an integer");
    }
    if (*end)
        return set_why(why, "expected an integer");
    if (v < min || v > max)
        return set_why(why, "integer out of range");
    if (out)
        *out = v;
    return true;
}

bool sy__value_bool(const char *s, bool *out, const char **why) {
    if (!s || (to_lower(*s) != 't' && to_lower(*s) != 'f'))
        return set_why(why, "expected true or false"); /* most texts */
    /* the lower-case spellings (defaults, canonical forms: a compile
     * reads one a route or more) byte by byte, without strlen */
    bool t = s[0] == 't';
    const char *lit = t ? "true" : "false";
    size_t i = 0;
    while (lit[i] && s[i] == lit[i])
        i++;
    if (!lit[i] && !s[i]) {
        if (out)
            *out = t;
        return true;
    }
    size_t n = strlen(s);
    if (ieq(s, n, "true")) {
        if (out)
            *out = true;
        return true;
    }
    if (ieq(s, n, "false")) {
        if (out)
            *out = false;
        return true;
    }
    return set_why(why, "expected true or false");
}

/* ---- durations and sizes ---- */

static bool mul_add(int64_t *acc, int64_t v, int64_t mul) {
    if (v > INT64_MAX / mul)
        return false;
    v *= mul;
    if (*acc > INT64_MAX - v)
        return false;
    *acc += v;
    return true;
}

/* ISO-8601 duration: P[nD]T[nH][nM][n[.f]S] (days, hours, minutes,
 * seconds with an optional fraction), as java.time.Duration.parse; a
 * fraction finer than a millisecond sets *sub_ms and fails. */
static bool iso_duration_ms(const char *s, int64_t *out, bool *sub_ms) {
    const char *p = s;
    if (to_upper(*p) != 'P')
        return false;
    p++;
    int64_t total = 0;
    bool any = false, in_time = false;
    while (*p) {
        if (to_upper(*p) == 'T') {
            if (in_time)
                return false;
            in_time = true;
            p++;
            if (!*p)
                return false;
            continue;
        }
        const char *end;
        int64_t v;
        if (*p == '-' || *p == '+' || !parse_digits(p, &end, &v))
            return false;
        p = end;
        int64_t frac_ms = 0;
        if (*p == '.' || *p == ',') {
            p++;
            if (!is_digit(*p))
                return false;
            int64_t scale = 100;
            while (is_digit(*p)) {
                if (!scale && *p != '0') {
                    *sub_ms = true;
                    return false;
                }
                frac_ms += (*p - '0') * scale;
                scale /= 10;
                p++;
            }
            if (to_upper(*p) != 'S' || !in_time)
                return false;
        }
        char u = to_upper(*p);
        int64_t mul;
        if (!in_time && u == 'D')
            mul = 86400000;
        else if (in_time && u == 'H')
            mul = 3600000;
        else if (in_time && u == 'M')
            mul = 60000;
        else if (in_time && u == 'S')
            mul = 1000;
        else
            return false;
        if (!mul_add(&total, v, mul) || !mul_add(&total, frac_ms, 1))
            return false;
        any = true;
        p++;
    }
    if (!any)
        return false;
    *out = total;
    return true;
}

/* Durations are kept in whole milliseconds: a finer one (500us,
 * PT0.0005S) is refused, not cut (a 500us firstBackoff ran as 0, every
 * retry at once, where SCG waits 0.5, 1, 2 ms). */
static const char *const sub_ms_msg =
    "durations are kept in whole milliseconds; this one is not";

bool sy__value_duration_ms(const char *s, int64_t *out, const char **why) {
    static const char *msg = "expected a duration such as 10ms, 5s, 1m";
    if (!s || !*s)
        return set_why(why, msg);
    if (to_upper(*s) == 'P') {
        int64_t v;
        bool sub_ms = false;
        if (!iso_duration_ms(s, &v, &sub_ms))
            return set_why(why, sub_ms ? sub_ms_msg : msg);
        if (out)
            *out = v;
        return true;
    }
    const char *end;
    int64_t v;
    if (!parse_digits(s, &end, &v))
        return set_why(why, msg);
    if (v < 0)
        return set_why(why, "a duration cannot be negative");
    size_t ul = strlen(end);
    int64_t r;
    if (ul == 0 || ieq(end, ul, "ms"))
        r = v;
    else if (ieq(end, ul, "ns") || ieq(end, ul, "us")) {
        int64_t per_ms = to_lower(*end) == 'n' ? 1000000 : 1000;
        if (v % per_ms)
            return set_why(why, sub_ms_msg);
        r = v / per_ms;
    } else if (ieq(end, ul, "s") || ieq(end, ul, "m") || ieq(end, ul, "h") ||
               ieq(end, ul, "d")) {
        int64_t mul = 1000;
        switch (to_lower(*end)) {
        case 'm': mul = 60000; break;
        case 'h': mul = 3600000; break;
        case 'd': mul = 86400000; break;
        default: break;
        }
        r = 0;
        if (!mul_add(&r, v, mul))
            return set_why(why, "duration out of range");
    } else {
        return set_why(why, msg);
    }
    if (out)
        *out = r;
    return true;
}

bool sy__value_size(const char *s, int64_t *out, const char **why) {
    static const char *msg = "expected a data size such as 16000B, 64KB, 5MB";
    const char *end;
    int64_t v;
    if (!s || !parse_digits(s, &end, &v))
        return set_why(why, msg);
    if (v < 0)
        return set_why(why, "a data size cannot be negative");
    size_t ul = strlen(end);
    int64_t mul;
    if (ul == 0 || ieq(end, ul, "B"))
        mul = 1;
    else if (ieq(end, ul, "KB"))
        mul = 1024;
    else if (ieq(end, ul, "MB"))
        mul = 1024 * 1024;
    else if (ieq(end, ul, "GB"))
        mul = 1024 * 1024 * 1024;
    else if (ieq(end, ul, "TB"))
        mul = (int64_t)1024 * 1024 * 1024 * 1024;
    else
        return set_why(why, msg);
    int64_t r = 0;
    if (!mul_add(&r, v, mul))
        return set_why(why, "data size out of range");
    if (out)
        *out = r;
    return true;
}

/* ---- date-times ---- */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static bool is_leap(int64_t y) {
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Exactly n digits at *p; advances. */
static bool fixed_digits(const char **p, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit((*p)[i]))
            return false;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return true;
}

static bool iso_datetime_ms(const char *s, int64_t *out) {
    const char *p = s;
    int year, mon, day, hh, mm, ss = 0;
    int64_t ms = 0;
    if (!fixed_digits(&p, 4, &year) || *p++ != '-' ||
        !fixed_digits(&p, 2, &mon) || *p++ != '-' ||
        !fixed_digits(&p, 2, &day) || (*p != 'T' && *p != 't'))
        return false;
    p++;
    if (!fixed_digits(&p, 2, &hh) || *p++ != ':' || !fixed_digits(&p, 2, &mm))
        return false;
    if (*p == ':') {
        p++;
        if (!fixed_digits(&p, 2, &ss))
            return false;
        if (*p == '.') {
            p++;
            if (!is_digit(*p))
                return false;
            int n = 0, scale = 100;
            while (is_digit(*p)) {
                if (++n > 9)
                    return false;
                ms += (*p - '0') * scale;
                scale /= 10;
                p++;
            }
        }
    }
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mon < 1 || mon > 12 || day < 1 || hh > 23 || mm > 59 || ss > 59)
        return false;
    int dim = mdays[mon - 1] + (mon == 2 && is_leap(year));
    if (day > dim)
        return false;
    int64_t off_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1, oh, om, os = 0;
        p++;
        if (!fixed_digits(&p, 2, &oh) || *p++ != ':' ||
            !fixed_digits(&p, 2, &om))
            return false;
        if (*p == ':') {
            p++;
            if (!fixed_digits(&p, 2, &os))
                return false;
        }
        if (om > 59 || os > 59 || oh * 3600 + om * 60 + os > 18 * 3600)
            return false;
        off_s = sign * (int64_t)(oh * 3600 + om * 60 + os);
    } else {
        return false; /* an offset or Z is required */
    }
    if (*p == '[') {
        /* a region id such as [America/Denver]: informative only */
        p++;
        const char *start = p;
        while (*p && *p != ']') {
            char c = *p;
            if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                  is_digit(c) || c == '/' || c == '_' || c == '-' || c == '+' ||
                  c == ':' || c == '.'))
                return false;
            p++;
        }
        if (*p != ']' || p == start)
            return false;
        p++;
    }
    if (*p)
        return false;
    int64_t days = days_from_civil(year, mon, day);
    int64_t secs = days * 86400 + hh * 3600 + mm * 60 + ss - off_s;
    *out = secs * 1000 + ms;
    return true;
}

bool sy__value_datetime_ms(const char *s, int64_t *out, const char **why) {
    static const char *msg = "expected an ISO-8601 date-time with offset "
                             "(2017-01-20T17:42:47.789-07:00) or epoch "
                             "milliseconds";
    if (!s || !*s)
        return set_why(why, msg);
    int64_t v;
    const char *end;
    if ((is_digit(*s) || *s == '-') && parse_digits(s, &end, &v) && !*end) {
        if (out)
            *out = v;
        return true;
    }
    if (!iso_datetime_ms(s, &v))
        return set_why(why, msg);
    if (out)
        *out = v;
    return true;
}

/* ---- addresses ---- */

/* The bytes of a host name, ASCII letters, digits, '-', '.', '_', as a
 * bitmap (no locale; a test per byte, the check runs per instance at
 * every publish of a list). */
static const uint64_t host_lo = 0x03ff600000000000ull; /* - . 0-9 */
static const uint64_t host_hi = 0x07fffffe87fffffeull; /* A-Z _ a-z */

static bool host_char(unsigned char c) {
    return c < 64 ? (host_lo >> c) & 1 : c < 128 && (host_hi >> (c - 64)) & 1;
}

/* Whether s[0..n) is an IPv6 address (inet_pton's form, no %zone). */
static bool host_ipv6(const char *s, size_t n) {
    char buf[64];
    unsigned char a6[16];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return inet_pton(AF_INET6, buf, a6) == 1;
}

bool sy__value_host(const char *s, const char **why) {
    size_t n = 0;
    while (host_char((unsigned char)s[n])) /* a name: one pass */
        n++;
    if (s[n] == '\0')
        return n == 0    ? set_why(why, "the host is empty")
               : n > 253 ? set_why(why, "a host name is at most 253 bytes")
                         : true;
    n += strlen(s + n);
    if (s[0] == '[') /* "[::1]": the address in brackets, alone */
        return (n > 2 && s[n - 1] == ']' && host_ipv6(s + 1, n - 2)) ||
               set_why(why, "brackets hold an IPv6 address and nothing "
                            "else: [::1] (the port goes in port)");
    if (memchr(s, ':', n)) /* no %zone: nginx parses none */
        return host_ipv6(s, n) ||
               set_why(why, "a host with ':' must be an IPv6 address, "
                            "without a %zone (the port goes in port, no "
                            "scheme)");
    return set_why(why, "a host is a DNS name or an IP address: letters, "
                        "digits, '-', '.', '_' (no scheme, path or spaces)");
}

/* Parse a bare address of up to n bytes; family 0 when invalid. */
static bool parse_addr(const char *s, size_t n, sy__cidr *out) {
    char buf[64];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    memset(out, 0, sizeof *out);
    if (memchr(buf, ':', n)) {
        if (inet_pton(AF_INET6, buf, out->addr) != 1)
            return false;
        out->family = 6;
        out->prefix = 128;
        return true;
    }
    /* strict dotted quad: four decimal parts, no leading zeros */
    const char *p = buf;
    for (int i = 0; i < 4; i++) {
        if (!is_digit(*p))
            return false;
        int v = 0, nd = 0;
        const char *start = p;
        while (is_digit(*p)) {
            v = v * 10 + (*p - '0');
            if (++nd > 3)
                return false;
            p++;
        }
        if (v > 255 || (nd > 1 && *start == '0'))
            return false;
        out->addr[i] = (uint8_t)v;
        if (i < 3 && *p++ != '.')
            return false;
    }
    if (*p)
        return false;
    out->family = 4;
    out->prefix = 32;
    return true;
}

bool sy__value_ip(sy_str s, sy__cidr *out) {
    const char *p = s.ptr;
    size_t n = s.len;
    memset(out, 0, sizeof *out);
    if (!p)
        return false;
    if (n >= 2 && p[0] == '[' && p[n - 1] == ']') {
        p++;
        n -= 2;
    }
    const char *pct = memchr(p, '%', n); /* drop an IPv6 zone id */
    if (pct && memchr(p, ':', n))
        n = (size_t)(pct - p);
    if (!parse_addr(p, n, out)) {
        memset(out, 0, sizeof *out);
        return false;
    }
    /* IPv4-mapped IPv6 addresses are IPv4 addresses (as Java sees them) */
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
                                       0, 0, 0, 0, 0xff, 0xff};
    if (out->family == 6 && memcmp(out->addr, mapped, 12) == 0) {
        memmove(out->addr, out->addr + 12, 4);
        memset(out->addr + 4, 0, 12);
        out->family = 4;
        out->prefix = 32;
    }
    return true;
}

bool sy__value_cidr(const char *s, sy__cidr *out, const char **why) {
    static const char *msg = "expected an IPv4 or IPv6 address with an "
                             "optional /prefix, such as 10.0.0.0/8";
    if (!s)
        return set_why(why, msg);
    const char *slash = strchr(s, '/');
    size_t alen = slash ? (size_t)(slash - s) : strlen(s);
    sy__cidr c;
    if (!parse_addr(s, alen, &c))
        return set_why(why, msg);
    if (slash) {
        const char *p = slash + 1;
        int v = 0, nd = 0;
        while (is_digit(*p)) {
            v = v * 10 + (*p - '0');
            if (++nd > 3)
                return set_why(why, "prefix length out of range");
            p++;
        }
        if (nd == 0 || *p)
            return set_why(why, msg);
        if (v > (c.family == 4 ? 32 : 128))
            return set_why(why, "prefix length out of range");
        c.prefix = (uint8_t)v;
    }
    if (out)
        *out = c;
    return true;
}

bool sy__cidr_contains(const sy__cidr *net, const sy__cidr *ip) {
    if (!net || !ip || net->family == 0 || net->family != ip->family)
        return false;
    unsigned bits = net->prefix, full = bits / 8, rest = bits % 8;
    if (full && memcmp(net->addr, ip->addr, full) != 0)
        return false;
    if (rest) {
        uint8_t mask = (uint8_t)(0xffu << (8 - rest));
        if ((net->addr[full] & mask) != (ip->addr[full] & mask))
            return false;
    }
    return true;
}

/* ---- statuses and methods ---- */

typedef struct status_name {
    const char *name;
    int code;
} status_name;

/* Spring's HttpStatus constants. */
static const status_name status_names[] = {
    {"CONTINUE", 100},
    {"SWITCHING_PROTOCOLS", 101},
    {"PROCESSING", 102},
    {"EARLY_HINTS", 103},
    {"CHECKPOINT", 103},
    {"OK", 200},
    {"CREATED", 201},
    {"ACCEPTED", 202},
    {"NON_AUTHORITATIVE_INFORMATION", 203},
    {"NO_CONTENT", 204},
    {"RESET_CONTENT", 205},
    {"PARTIAL_CONTENT", 206},
    {"MULTI_STATUS", 207},
    {"ALREADY_REPORTED", 208},
    {"IM_USED", 226},
    {"MULTIPLE_CHOICES", 300},
    {"MOVED_PERMANENTLY", 301},
    {"FOUND", 302},
    {"MOVED_TEMPORARILY", 302},
    {"SEE_OTHER", 303},
    {"NOT_MODIFIED", 304},
    {"USE_PROXY", 305},
    {"TEMPORARY_REDIRECT", 307},
    {"PERMANENT_REDIRECT", 308},
    {"BAD_REQUEST", 400},
    {"UNAUTHORIZED", 401},
    {"PAYMENT_REQUIRED", 402},
    {"FORBIDDEN", 403},
    {"NOT_FOUND", 404},
    {"METHOD_NOT_ALLOWED", 405},
    {"NOT_ACCEPTABLE", 406},
    {"PROXY_AUTHENTICATION_REQUIRED", 407},
    {"REQUEST_TIMEOUT", 408},
    {"CONFLICT", 409},
    {"GONE", 410},
    {"LENGTH_REQUIRED", 411},
    {"PRECONDITION_FAILED", 412},
    {"PAYLOAD_TOO_LARGE", 413},
    {"CONTENT_TOO_LARGE", 413},
    {"REQUEST_ENTITY_TOO_LARGE", 413},
    {"URI_TOO_LONG", 414},
    {"REQUEST_URI_TOO_LONG", 414},
    {"UNSUPPORTED_MEDIA_TYPE", 415},
    {"REQUESTED_RANGE_NOT_SATISFIABLE", 416},
    {"EXPECTATION_FAILED", 417},
    {"I_AM_A_TEAPOT", 418},
    {"UNPROCESSABLE_ENTITY", 422},
    {"UNPROCESSABLE_CONTENT", 422},
    {"LOCKED", 423},
    {"FAILED_DEPENDENCY", 424},
    {"TOO_EARLY", 425},
    {"UPGRADE_REQUIRED", 426},
    {"PRECONDITION_REQUIRED", 428},
    {"TOO_MANY_REQUESTS", 429},
    {"REQUEST_HEADER_FIELDS_TOO_LARGE", 431},
    {"UNAVAILABLE_FOR_LEGAL_REASONS", 451},
    {"INTERNAL_SERVER_ERROR", 500},
    {"NOT_IMPLEMENTED", 501},
    {"BAD_GATEWAY", 502},
    {"SERVICE_UNAVAILABLE", 503},
    {"GATEWAY_TIMEOUT", 504},
    {"HTTP_VERSION_NOT_SUPPORTED", 505},
    {"VARIANT_ALSO_NEGOTIATES", 506},
    {"INSUFFICIENT_STORAGE", 507},
    {"LOOP_DETECTED", 508},
    {"BANDWIDTH_LIMIT_EXCEEDED", 509},
    {"NOT_EXTENDED", 510},
    {"NETWORK_AUTHENTICATION_REQUIRED", 511},
};

static bool is_alnum(char c) {
    return is_digit(c) || (to_lower(c) >= 'a' && to_lower(c) <= 'z');
}

/* Letters and digits compared without case, everything else skipped:
 * Spring Boot's lenient enum conversion ("bad-gateway" = BAD_GATEWAY). */
static bool lenient_eq(const char *a, const char *b) {
    for (;; a++, b++) {
        while (*a && !is_alnum(*a))
            a++;
        while (*b && !is_alnum(*b))
            b++;
        if (!*a || !*b)
            return !*a && !*b;
        if (to_lower(*a) != to_lower(*b))
            return false;
    }
}

static bool value_status(const char *s, bool lenient, int *out,
                         const char **why) {
    if (!s || !*s)
        return set_why(why, "expected an HTTP status (100..599 or a name "
                            "such as NOT_FOUND)");
    if (is_digit(*s)) {
        int64_t v;
        const char *end;
        if (!parse_digits(s, &end, &v) || *end)
            return set_why(why, "expected an HTTP status (100..599 or a name "
                                "such as NOT_FOUND)");
        if (v < 100 || v > 599)
            return set_why(why, "HTTP status out of range 100..599");
        if (out)
            *out = (int)v;
        return true;
    }
    /* Spring Cloud Gateway upper-cases a name before its HttpStatus lookup
     * (ServerWebExchangeUtils.parse): "bad_gateway" is BAD_GATEWAY. */
    size_t n = strlen(s);
    for (size_t i = 0; i < SY_ARRAY_LEN(status_names); i++)
        if (lenient ? lenient_eq(s, status_names[i].name)
                    : ieq(s, n, status_names[i].name)) {
            if (out)
                *out = status_names[i].code;
            return true;
        }
    return set_why(why, "unknown HTTP status name");
}

bool sy__value_status(const char *s, int *out, const char **why) {
    return value_status(s, false, out, why);
}

bool sy__value_status_enum(const char *s, int *out, const char **why) {
    return value_status(s, true, out, why);
}

/* RFC 7230 tchar: letters, digits and !#$%&'*+-.^_`|~ (a table: every
 * method and header name of a document is checked here). */
static const unsigned char tchar[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1,
    ['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1,
    ['`'] = 1, ['|'] = 1, ['~'] = 1, ['0'] = 1, ['1'] = 1, ['2'] = 1,
    ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1,
    ['9'] = 1, ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1,
    ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1,
    ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1,
    ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1,
    ['X'] = 1, ['Y'] = 1, ['Z'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1,
    ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1,
    ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1,
    ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1,
    ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1};

static bool is_tchar(unsigned char c) {
    return tchar[c] != 0;
}

bool sy__value_token(const char *s, const char **why) {
    if (!s || !*s)
        return set_why(why, "expected a token (RFC 7230)");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (!is_tchar(*p))
            return set_why(why, "invalid character in a header or method "
                                "name (RFC 7230 token)");
    return true;
}

bool sy__value_method(const char *s, char *upper, const char **why) {
    if (!sy__value_token(s, why))
        return false;
    if (upper) {
        size_t i = 0;
        for (; s[i]; i++)
            upper[i] = to_upper(s[i]);
        upper[i] = '\0';
    }
    return true;
}

static bool ascii_alnum(unsigned char b, bool hex) {
    unsigned char l = (unsigned char)(b | 32);
    return (b >= '0' && b <= '9') || (l >= 'a' && l <= (hex ? 'f' : 'z'));
}

bool sy__value_forward_path(const char *s, bool vars, const char **why) {
    const char *w = NULL;
    if (s[0] != '/' || s[1] == '/')
        w = "needs a path starting with one '/' (forward:/path)";
    for (const char *c = s; !w && *c; c++) {
        unsigned char b = (unsigned char)*c;
        if (b == '?' || b == '#')
            w = "a query or fragment is not forwarded (the request goes to "
                "the path with its own query)";
        else if (b == '%' && !(ascii_alnum((unsigned char)c[1], true) &&
                               ascii_alnum((unsigned char)c[2], true)))
            w = "'%' not followed by two hex digits";
        else if (!ascii_alnum(b, false) && !strchr("-._~!$&'()*+,;=:@/%", b) &&
                 !(vars && (b == '{' || b == '}')))
            w = "a space, control, non-ASCII or other byte a path cannot "
                "carry as it is: percent-encode it (%20, %C3%A9)";
    }
    if (w && why)
        *why = w;
    return !w;
}
