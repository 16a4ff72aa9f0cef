/*
 * cli_route.c - the `match`, `explain` and `diff` subcommands of the
 * switchyard tool. Everything goes through the public API: files become
 * sources of a router, the URL becomes an sy_request, and the result is
 * printed as text or as one JSON object.
 */
#define _DEFAULT_SOURCE /* timegm */
#include "cli.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_HEADERS 64
#define MAX_FILES 64

typedef struct request_args {
    bool json;
    bool strict; /* any invalid route fails the load (default: skip it) */
    const char *files[MAX_FILES];
    size_t file_count;
    sy_header headers[MAX_HEADERS];
    size_t header_count;
    const char *remote_addr;
    const char *now;
    const char *instances;
    uint64_t seed;
    const char *method;
    const char *url;
} request_args;

static const char request_synopsis[] =
    "usage: switchyard %s [--json] [--strict] [-H 'Name: value']... "
    "[--remote-addr IP] [--now ISO8601|EPOCH_MS] [--seed N] "
    "[--instances FILE] FILE... METHOD URL\n";

static int usage_error(const char *cmd, const char *msg) {
    fprintf(stderr, "switchyard %s: %s\n", cmd, msg);
    fprintf(stderr, request_synopsis, cmd);
    return 2;
}

/* `match --help` and `explain --help`: options and an example. */
static int request_help(const char *cmd) {
    bool match = strcmp(cmd, "match") == 0;
    printf(request_synopsis, cmd);
    printf("%s",
           match ? "Find the route a request takes, the instance an lb:// "
                   "route sends it to,\nand the upstream request after "
                   "filters.\n"
                 : "List every route in rank order: whether it matches the "
                   "request and, if\nnot, the first predicate that does not "
                   "hold.\n");
    printf("\n"
           "options:\n"
           "  --json               print one JSON object instead of text\n"
           "  --strict             fail (exit 2) on any invalid route; by "
           "default invalid\n"
           "                       routes are reported on stderr, as check "
           "lists them,\n"
           "                       and skipped\n"
           "  -H 'Name: value'     a request header (repeatable); Host "
           "defaults to the\n"
           "                       URL's authority\n"
           "  --remote-addr IP     client address for RemoteAddr (default "
           "127.0.0.1)\n"
           "  --now TIME           ISO-8601 (2024-01-02T03:04:05Z) or epoch "
           "milliseconds,\n"
           "                       for After, Before and Between\n"
           "  --seed N             seed for Weight draws and random "
           "balancing\n"
           "  --instances FILE     service instances for lb:// routes "
           "(format:\n"
           "                       docs/route-definitions.md, \"Instances "
           "documents\")\n"
           "  -h, --help           show this help\n"
           "An option that takes a value, other than -H, is given at most "
           "once.\n"
           "FILE... are route documents, one source each, in precedence "
           "order.\n"
           "METHOD is an HTTP method token, case-sensitive (GET, POST, ...;\n"
           "not get); URL is "
           "http://host[:port]/path[?query] or /path[?query], "
           "percent-encoded.\n"
           "\n");
    if (match)
        printf("exit status: 0 a route matches (and, for an lb:// route, "
               "an instance\ncan be chosen), 1 no route matches or no "
               "instance can be chosen (the\ngateway answers 404 or 503), "
               "2 usage errors, unreadable or invalid\ninput.\n"
               "\n"
               "examples:\n"
               "  switchyard match routes.json GET "
               "'http://shop.example.com/api/orders/42?x=1'\n"
               "  switchyard match --json -H 'version: 2.0' --instances "
               "instances.json \\\n"
               "      routes.json GET http://shop.example.com/api/orders/42\n");
    else
        printf("exit status: 0 a route matches, 1 none does, 2 usage "
               "errors, unreadable\nor invalid input.\n"
               "\n"
               "example:\n"
               "  switchyard explain -H 'Authorization: Bearer x' "
               "routes.json POST /api/orders/42\n");
    return 0;
}

static sy_str cs(const char *s) {
    return (sy_str){s, s ? strlen(s) : 0};
}

/* RFC 9110 tchar: the characters of a method token. */
static bool is_tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool valid_method(const char *m, char *why, size_t size) {
    const char *p = m;
    while (is_tchar((unsigned char)*p))
        p++;
    if (!*m || *p) {
        snprintf(why, size,
                 "method '%s' is not an HTTP method token (letters, digits "
                 "and !#$%%&'*+-.^_`|~, e.g. GET)",
                 m);
        return false;
    }
    /* methods are case-sensitive (RFC 9110 9.1; SCG's Method predicate
     * compares exactly): 'get' is a method no route's Method=GET takes,
     * and one the gateway answers 400 (http-parser reads capitals only)
     * and its /explain refuses; an answer for it is for no request sent */
    if (!strpbrk(m, "abcdefghijklmnopqrstuvwxyz"))
        return true;
    int n = snprintf(why, size,
                     "METHOD '%s' has lower-case letters: HTTP methods are "
                     "case-sensitive (RFC 9110 9.1), '%s' is not '",
                     m, m);
    for (p = m; n >= 0 && (size_t)n + 1 < size && *p; p++)
        why[n++] = *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
    if (n >= 0 && (size_t)n < size)
        snprintf(why + n, size - (size_t)n, "' (the gateway answers it 400)");
    return false;
}

/* "/path[?query]" or "scheme://host[:port][/path][?query]": no spaces,
 * control bytes or fragment; a scheme of letters, digits, + - .; a
 * non-empty host; a port of 1 to 5 digits up to 65535. */
static bool valid_url(const char *url, char *why, size_t size) {
    for (const unsigned char *p = (const unsigned char *)url; *p; p++)
        if (*p <= ' ' || *p == 0x7f) {
            snprintf(why, size,
                     "URL '%s' has a space or control character at offset "
                     "%zu (percent-encode it)",
                     url, (size_t)(p - (const unsigned char *)url));
            return false;
        }
    if (strchr(url, '#')) {
        snprintf(why, size,
                 "URL '%s' has a fragment ('#'), which is never sent to a "
                 "server",
                 url);
        return false;
    }
    if (url[0] == '/')
        return true;
    const char *sep = strstr(url, "://");
    size_t slen = sep ? (size_t)(sep - url) : 0;
    bool scheme_ok = slen > 0 && ((url[0] >= 'a' && url[0] <= 'z') ||
                                  (url[0] >= 'A' && url[0] <= 'Z'));
    for (size_t i = 1; scheme_ok && i < slen; i++)
        scheme_ok = isalnum((unsigned char)url[i]) || url[i] == '+' ||
                    url[i] == '-' || url[i] == '.';
    if (!scheme_ok) {
        snprintf(why, size,
                 "URL '%s' is neither /path[?query] nor "
                 "scheme://host[:port]/path[?query]",
                 url);
        return false;
    }
    const char *host = sep + 3;
    size_t hlen = strcspn(host, "/?");
    const char *colon = NULL;
    if (hlen && host[0] == '[') { /* IPv6 literal */
        const char *close = memchr(host, ']', hlen);
        if (!close || close == host + 1) {
            snprintf(why, size, "URL '%s' has an unclosed IPv6 address", url);
            return false;
        }
        if (close + 1 < host + hlen) {
            if (close[1] != ':') {
                snprintf(why, size, "URL '%s': unexpected text after ']'", url);
                return false;
            }
            colon = close + 1;
        }
    } else {
        colon = memchr(host, ':', hlen);
    }
    if (hlen == 0 || colon == host) {
        snprintf(why, size, "URL '%s' has no host after '://'", url);
        return false;
    }
    if (colon) {
        size_t plen = (size_t)(host + hlen - colon - 1);
        unsigned long port = 0;
        bool digits = plen >= 1 && plen <= 5;
        for (size_t i = 1; digits && i <= plen; i++) {
            digits = colon[i] >= '0' && colon[i] <= '9';
            port = port * 10 + (unsigned long)(colon[i] - '0');
        }
        if (!digits || port == 0 || port > 65535) {
            snprintf(why, size, "URL '%s' has a bad port '%.*s' (1 to 65535)",
                     url, (int)plen, colon + 1);
            return false;
        }
    }
    return true;
}

/* FLAG is s and was given before (set non-NULL). */
static bool once(const char *s, const char *flag, const char *set) {
    return set && strcmp(s, flag) == 0;
}

/* What the RemoteAddr predicate reads as a client: an IPv4 or IPv6
 * address, with a port after it (10.0.0.1:5000, [::1]:5000) or not.
 * Anything else matched no RemoteAddr, as if the address were outside. */
static bool valid_client_addr(const char *s) {
    unsigned char buf[sizeof(struct in6_addr)];
    char ip[INET6_ADDRSTRLEN + 1];
    const char *port = NULL;
    if (inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1)
        return true;
    if (s[0] == '[') {
        /* "[::1]" (the library reads it as ::1) or "[::1]:PORT" */
        const char *rb = strchr(s, ']');
        if (!rb || (rb[1] != ':' && rb[1]) || (size_t)(rb - s - 1) >= sizeof ip)
            return false;
        memcpy(ip, s + 1, (size_t)(rb - s - 1));
        ip[rb - s - 1] = 0;
        if (inet_pton(AF_INET6, ip, buf) != 1)
            return false;
        if (!rb[1])
            return true;
        port = rb + 2;
    } else {
        const char *colon = strchr(s, ':');
        if (!colon || strchr(colon + 1, ':') ||
            (size_t)(colon - s) >= sizeof ip)
            return false;
        memcpy(ip, s, (size_t)(colon - s));
        ip[colon - s] = 0;
        port = colon + 1;
        if (inet_pton(AF_INET, ip, buf) != 1)
            return false;
    }
    return *port && strspn(port, "0123456789") == strlen(port) &&
           strlen(port) <= 5 && atoi(port) <= 65535;
}

static int parse_request_args(const char *cmd, int argc, char **argv,
                              request_args *a) {
    memset(a, 0, sizeof *a);
    bool seed_given = false;
    const char *pos[MAX_FILES + 2];
    size_t npos = 0;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        bool has_next = i + 1 < argc;
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            return -1; /* the caller prints the help */
        } else if (strcmp(s, "--json") == 0) {
            a->json = true;
        } else if (strcmp(s, "--strict") == 0) {
            a->strict = true;
        } else if (strcmp(s, "-H") == 0 && has_next) {
            const char *h = argv[++i];
            const char *colon = strchr(h, ':');
            if (!colon || colon == h)
                return usage_error(cmd,
                                   "a header must look like 'Name: value'");
            if (a->header_count == MAX_HEADERS)
                return usage_error(cmd, "too many headers");
            const char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            a->headers[a->header_count++] =
                (sy_header){{h, (size_t)(colon - h)}, cs(v)};
        } else if (once(s, "--remote-addr", a->remote_addr) ||
                   once(s, "--now", a->now) ||
                   once(s, "--instances", a->instances) ||
                   once(s, "--seed", seed_given ? "" : NULL)) {
            char msg[64]; /* a value would be dropped */
            snprintf(msg, sizeof msg, "%s given twice", s);
            return usage_error(cmd, msg);
        } else if (strcmp(s, "--remote-addr") == 0 && has_next) {
            a->remote_addr = argv[++i];
            if (!valid_client_addr(a->remote_addr))
                return usage_error(cmd, "--remote-addr takes an IP address "
                                        "(10.0.0.1, ::1, [::1], 10.0.0.1:5000 "
                                        "or [::1]:5000)");
        } else if (strcmp(s, "--now") == 0 && has_next) {
            a->now = argv[++i];
        } else if (strcmp(s, "--instances") == 0 && has_next) {
            a->instances = argv[++i];
        } else if (strcmp(s, "--seed") == 0 && has_next) {
            seed_given = true;
            char *end;
            errno = 0;
            const char *v = argv[++i];
            a->seed = strtoull(v, &end, 10);
            /* digits only: strtoull takes "" as 0, and " 5", "+5" and "-1"
             * (which it wraps to 2^64-1) */
            if (errno || *end || !isdigit((unsigned char)v[0]))
                return usage_error(cmd, "--seed takes a non-negative integer");
            /* the library reads seed 0 as not given */
            if (a->seed == 0)
                return usage_error(cmd, "--seed 0 reads as no seed (the draws "
                                        "are random): give 1 or more");
        } else if (s[0] == '-' && s[1] == '-') {
            return usage_error(cmd, "unknown option or missing value");
        } else if (npos < MAX_FILES + 2) {
            pos[npos++] = s;
        } else {
            return usage_error(cmd, "too many arguments");
        }
    }
    if (npos < 3)
        return usage_error(cmd, "needs FILE... METHOD URL");
    for (size_t i = 0; i + 2 < npos; i++)
        a->files[a->file_count++] = pos[i];
    a->method = pos[npos - 2];
    a->url = pos[npos - 1];
    char why[1024];
    if (!valid_method(a->method, why, sizeof why) ||
        !valid_url(a->url, why, sizeof why))
        return usage_error(cmd, why);
    return 0;
}

/* "2024-01-02T03:04:05[.678](Z|+01:00)" or epoch milliseconds. */
static bool parse_now(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long ms = strtoll(s, &end, 10);
    if (!errno && *end == '\0') {
        *out = ms;
        return true;
    }
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    int frac = 0, n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
               &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6)
        return false;
    const char *p = s + n;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 3)
                frac = frac * 10 + (*p - '0');
        for (; digits < 3; digits++)
            frac *= 10;
    }
    long offset = 0;
    if (*p == '+' || *p == '-') {
        const char *o = p + 1; /* exactly HH:MM, and nothing after */
        if (!(isdigit((unsigned char)o[0]) && isdigit((unsigned char)o[1]) &&
              o[2] == ':' && isdigit((unsigned char)o[3]) &&
              isdigit((unsigned char)o[4]) && !o[5]))
            return false;
        int hh = (o[0] - '0') * 10 + (o[1] - '0');
        int mm = (o[3] - '0') * 10 + (o[4] - '0');
        if (hh > 23 || mm > 59)
            return false;
        offset = (hh * 60L + mm) * 60L * (*p == '-' ? -1 : 1);
    } else if (!(*p == 'Z' && !p[1]) && *p != '\0') {
        return false; /* text after the time was dropped */
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    struct tm given = tm;
    time_t t = timegm(&tm);
    /* a field out of its range (month 13, hour 99, February 30) was
     * carried into the next one by timegm: another time than written */
    if (tm.tm_year != given.tm_year || tm.tm_mon != given.tm_mon ||
        tm.tm_mday != given.tm_mday || tm.tm_hour != given.tm_hour ||
        tm.tm_min != given.tm_min || tm.tm_sec != given.tm_sec)
        return false;
    *out = ((int64_t)t - offset) * 1000 + frac;
    return true;
}

/* Split "scheme://authority/path?query" (or "/path?query"). */
void sy_cli_split_url(const char *url, sy_request *req) {
    const char *p = url;
    const char *sep = strstr(url, "://");
    if (sep) {
        req->scheme = (sy_str){url, (size_t)(sep - url)};
        p = sep + 3;
        const char *end = p + strcspn(p, "/?");
        req->host = (sy_str){p, (size_t)(end - p)};
        p = end;
    }
    const char *q = strchr(p, '?');
    if (q) {
        req->path = (sy_str){p, (size_t)(q - p)};
        req->query = cs(q + 1);
    } else {
        req->path = cs(p);
    }
    if (req->path.len == 0)
        req->path = cs("/");
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    fclose(f);
    if (buf)
        *len = n;
    return buf;
}

/* An instances document (sy_instances_parse: the format of
 * docs/route-definitions.md) -> sy_router_set_instances per service. */
int sy_cli_load_instances(sy_router *r, const char *path) {
    size_t len;
    char *text = read_file(path, &len);
    if (!text) {
        fprintf(stderr, "switchyard: cannot read %s: %s\n", path,
                strerror(errno));
        return 2;
    }
    sy_instances *doc = NULL;
    sy_error err;
    int rc = sy_instances_parse(text, len, NULL, &doc, &err);
    free(text);
    for (size_t i = 0; !rc && i < sy_instances_service_count(doc); i++) {
        const char *name = sy_instances_service(doc, i);
        rc = sy_router_set_instances(r, name, sy_instances_list(doc, i),
                                     sy_instances_count(doc, i), NULL, &err);
        if (rc) { /* checked by the parse already: a library limit */
            char where[sizeof err.path];
            snprintf(where, sizeof where, "services.%s", name);
            memcpy(err.path, where, sizeof where);
        }
    }
    sy_instances_free(doc);
    if (!rc)
        return 0;
    if (err.line)
        fprintf(stderr, "%s: line %u, column %u: %s\n", path, err.line,
                err.column, err.message);
    else
        fprintf(stderr, "%s: %s: %s\n", path, err.path[0] ? err.path : "$",
                err.message);
    return 2;
}

/* One line for an error of FILE, as check prints it. */
static void print_file_error(FILE *out, const char *file, const sy_error *e,
                             const char *suffix) {
    if (e->line)
        fprintf(out, "%s: line %u, column %u: %s%s\n", file, e->line, e->column,
                e->message, suffix);
    else
        fprintf(out, "%s: %s: %s%s\n", file, e->path[0] ? e->path : "$",
                e->message, suffix);
}

/* A router with one source per file. Documents load as `check` reads them:
 * an invalid route is reported on stderr and skipped (the others load);
 * --strict makes it fail the run. Document-level errors always do. */
static int load_router(const char *cmd, const request_args *a,
                       sy_router **out) {
    sy_error err;
    sy_router_options opts = SY_ROUTER_OPTIONS_INIT;
    opts.lenient = !a->strict;
    if (sy_router_new(&opts, out, &err)) {
        fprintf(stderr, "switchyard %s: %s\n", cmd, err.message);
        return 2;
    }
    for (size_t i = 0; i < a->file_count; i++) {
        size_t len;
        char *text = sy_cli_read_routes(a->files[i], &len);
        if (!text) {
            fprintf(stderr, "switchyard %s: cannot read %s: %s\n", cmd,
                    a->files[i], strerror(errno));
            return 2;
        }
        sy_report *rep = NULL;
        int rc = sy_router_add_source(*out, a->files[i], &err);
        if (!rc)
            rc = sy_router_apply(*out, a->files[i], text, len, &rep, &err);
        free(text);
        if (!a->strict && (rc == 0 || rc == SY_EINVALIDDOC)) {
            for (size_t k = 0; rep && k < sy_report_issue_count(rep); k++)
                print_file_error(stderr, a->files[i], sy_report_issue(rep, k),
                                 " (route skipped)");
            rc = 0;
        }
        sy_report_free(rep);
        if (rc) {
            print_file_error(stderr, a->files[i], &err, "");
            return 2;
        }
    }
    return a->instances ? sy_cli_load_instances(*out, a->instances) : 0;
}

static int build_request(const char *cmd, request_args *a, sy_request *req) {
    sy_cli_split_url(a->url, req);
    req->method = cs(a->method);
    bool has_host = false;
    for (size_t i = 0; i < a->header_count; i++)
        if (a->headers[i].name.len == 4 &&
            strncasecmp(a->headers[i].name.ptr, "host", 4) == 0) {
            has_host = true;
            req->host = a->headers[i].value;
        }
    if (!has_host && req->host.len && a->header_count < MAX_HEADERS)
        a->headers[a->header_count++] = (sy_header){cs("Host"), req->host};
    req->headers = a->headers;
    req->header_count = a->header_count;
    req->remote_addr = cs(a->remote_addr ? a->remote_addr : "127.0.0.1");
    req->seed = a->seed;
    if (a->now && !parse_now(a->now, &req->now_ms))
        return usage_error(cmd, "--now takes ISO-8601 (2024-01-02T03:04:05Z) "
                                "or epoch milliseconds");
    /* the library reads now_ms 0 as not given: it would match at today */
    if (a->now && req->now_ms == 0)
        return usage_error(cmd, "--now 0 (1970-01-01T00:00:00Z) reads as not "
                                "given (the time now): give another time, or "
                                "no --now");
    for (size_t i = 0; i < a->header_count; i++)
        if (a->headers[i].name.len == 14 &&
            strncasecmp(a->headers[i].name.ptr, "content-length", 14) == 0) {
            /* digits only, as the gateway reads it (it answers 400 to
             * anything else); "abc" was read as 0 */
            const char *v = a->headers[i].value.ptr;
            size_t d = strspn(v, "0123456789");
            char *end;
            errno = 0;
            long long cl = strtoll(v, &end, 10);
            if (!d || v[d + strspn(v + d, " \t")] || errno)
                return usage_error(cmd, "a Content-Length header takes a "
                                        "number of bytes");
            req->content_length = cl;
        }
    return 0;
}

static const char *op_name(sy_response_op_kind k) {
    switch (k) {
    case SY_RESP_ADD: return "add";
    case SY_RESP_ADD_IF_ABSENT: return "add-if-absent";
    case SY_RESP_SET: return "set";
    case SY_RESP_REMOVE: return "remove";
    case SY_RESP_DEDUPE: return "dedupe";
    case SY_RESP_REWRITE: return "rewrite";
    case SY_RESP_REWRITE_LOCATION: return "rewrite-location";
    }
    return "?";
}

static cJSON *str_json(sy_str s) {
    char *tmp = strndup(s.ptr ? s.ptr : "", s.len);
    cJSON *j = cJSON_CreateString(tmp ? tmp : "");
    free(tmp);
    return j;
}

static void print_match_json(const sy_route *route, sy_match *m,
                             const sy_selection *sel, int sel_rc,
                             const char *sel_why) {
    cJSON *o = cJSON_CreateObject();
    if (!route) {
        cJSON_AddNullToObject(o, "route");
    } else {
        cJSON_AddStringToObject(o, "route", sy_route_id(route));
        cJSON *vars = cJSON_AddObjectToObject(o, "vars");
        for (size_t i = 0; i < sy_match_var_count(m); i++) {
            sy_str n, v;
            sy_match_var(m, i, &n, &v);
            char *name = strndup(n.ptr, n.len);
            cJSON_AddItemToObject(vars, name, str_json(v));
            free(name);
        }
        cJSON_AddItemToObject(o, "path", str_json(sy_match_path(m)));
        cJSON_AddItemToObject(o, "query", str_json(sy_match_query(m)));
        cJSON *hs = cJSON_AddArrayToObject(o, "headers");
        for (size_t i = 0; i < sy_match_header_count(m); i++) {
            sy_header h = sy_match_header(m, i);
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, str_json(h.name));
            cJSON_AddItemToArray(pair, str_json(h.value));
            cJSON_AddItemToArray(hs, pair);
        }
        cJSON *rs = cJSON_AddArrayToObject(o, "response_headers");
        for (size_t i = 0; i < sy_match_response_op_count(m); i++) {
            sy_response_op op = sy_match_response_op(m, i);
            cJSON *e = cJSON_CreateArray();
            cJSON_AddItemToArray(e, cJSON_CreateString(op_name(op.kind)));
            cJSON_AddItemToArray(e, str_json(op.name));
            cJSON_AddItemToArray(e, str_json(op.value));
            cJSON_AddItemToArray(rs, e);
        }
        int status = sy_match_status(m);
        if (status)
            cJSON_AddNumberToObject(o, "status", status);
        else
            cJSON_AddNullToObject(o, "status");
        sy_str redirect = sy_match_redirect(m);
        if (redirect.ptr)
            cJSON_AddItemToObject(o, "redirect", str_json(redirect));
        else
            cJSON_AddNullToObject(o, "redirect");
        cJSON_AddStringToObject(o, "upstream", sy_route_uri(route));
        cJSON *hf = cJSON_AddArrayToObject(o, "filters");
        for (size_t i = 0; i < sy_match_host_filter_count(m); i++) {
            const sy_filter_entry *f = sy_match_host_filter(m, i);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "name", f->name);
            cJSON *args = cJSON_AddObjectToObject(e, "args");
            for (size_t k = 0; k < f->arg_count; k++)
                cJSON_AddStringToObject(args, f->args[k].key, f->args[k].value);
            cJSON_AddItemToArray(hf, e);
        }
        if (sel_rc == 0) {
            cJSON *in = cJSON_AddObjectToObject(o, "instance");
            cJSON_AddStringToObject(in, "id", sel->id);
            cJSON_AddStringToObject(in, "host", sel->host);
            cJSON_AddNumberToObject(in, "port", sel->port);
            cJSON_AddStringToObject(in, "scheme", sel->scheme);
        } else {
            cJSON_AddNullToObject(o, "instance");
            if (sel_why)
                cJSON_AddStringToObject(o, "instance_error", sel_why);
        }
    }
    char *text = cJSON_PrintUnformatted(o);
    printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
}

static void print_match_text(const request_args *a, const sy_route *route,
                             sy_match *m, const sy_selection *sel, int sel_rc,
                             const char *sel_why) {
    if (!route) {
        printf("no route matches %s %s (the gateway answers 404)\n", a->method,
               a->url);
        return;
    }
    printf("route:    %s (order %d)\n", sy_route_id(route),
           sy_route_order(route));
    for (size_t i = 0; i < sy_match_var_count(m); i++) {
        sy_str n, v;
        sy_match_var(m, i, &n, &v);
        printf("var:      %.*s = %.*s\n", (int)n.len, n.ptr, (int)v.len, v.ptr);
    }
    printf("upstream: %s\n", sy_route_uri(route));
    if (sel_rc == 0)
        printf("instance: %s %s://%s:%u\n", sel->id, sel->scheme, sel->host,
               sel->port);
    else if (sel_why)
        printf("instance: none (%s; the gateway answers 503)\n", sel_why);
    sy_action act = sy_match_action(m);
    if (act == SY_ACTION_REDIRECT) {
        sy_str loc = sy_match_redirect(m);
        printf("answer:   %d redirect to %.*s\n", sy_match_status(m),
               (int)loc.len, loc.ptr);
    } else if (act == SY_ACTION_RESPOND) {
        printf("answer:   %d without calling upstream\n", sy_match_status(m));
    }
    sy_str path = sy_match_path(m), query = sy_match_query(m);
    printf("request:  %s %.*s%s%.*s\n", a->method, (int)path.len, path.ptr,
           query.len ? "?" : "", (int)query.len, query.ptr);
    for (size_t i = 0; i < sy_match_header_count(m); i++) {
        sy_header h = sy_match_header(m, i);
        printf("  header: %.*s: %.*s\n", (int)h.name.len, h.name.ptr,
               (int)h.value.len, h.value.ptr);
    }
    if (act == SY_ACTION_PROXY && sy_match_status(m))
        printf("status:   %d\n", sy_match_status(m));
    for (size_t i = 0; i < sy_match_response_op_count(m); i++) {
        sy_response_op op = sy_match_response_op(m, i);
        printf("response: %s %.*s%s%.*s\n", op_name(op.kind), (int)op.name.len,
               op.name.ptr, op.value.len ? ": " : "", (int)op.value.len,
               op.value.ptr);
    }
    for (size_t i = 0; i < sy_match_host_filter_count(m); i++)
        printf("filter:   %s (run by the host)\n",
               sy_match_host_filter(m, i)->name);
}

/* Everything a match or explain run needs: arguments, a router loaded
 * with the files, the request, a match context and a held snapshot. */
typedef struct session {
    request_args a;
    sy_router *r;
    sy_request req;
    sy_match_ctx *ctx;
    sy_snapshot *snap;
} session;

static void session_close(session *s) {
    if (s->snap)
        sy_snapshot_release(s->snap);
    sy_match_ctx_free(s->ctx);
    sy_router_free(s->r);
}

/* 0, or the exit status to return (everything already released), or -1
 * when the help was printed (exit status 0). */
static int session_open(const char *cmd, int argc, char **argv, session *s) {
    memset(s, 0, sizeof *s);
    static const sy_request init = SY_REQUEST_INIT;
    s->req = init;
    int rc = parse_request_args(cmd, argc, argv, &s->a);
    if (rc < 0) { /* --help */
        request_help(cmd);
        return -1;
    }
    if (!rc)
        rc = load_router(cmd, &s->a, &s->r);
    if (!rc)
        rc = build_request(cmd, &s->a, &s->req);
    if (!rc && sy_match_ctx_new(NULL, &s->ctx, NULL))
        rc = 2;
    if (rc) {
        session_close(s);
        return rc;
    }
    s->snap = sy_router_acquire(s->r);
    return 0;
}

int sy_cli_match(int argc, char **argv) {
    session ss;
    int rc = session_open("match", argc, argv, &ss);
    if (rc)
        return rc < 0 ? 0 : rc;
    request_args a = ss.a;
    sy_request req = ss.req;
    sy_match_ctx *ctx = ss.ctx;
    sy_snapshot *snap = ss.snap;
    sy_error err;
    sy_match *m = NULL;
    rc = sy_snapshot_match(snap, ctx, &req, &m);
    const sy_route *route = m ? sy_match_route(m) : NULL;
    sy_selection sel;
    int sel_rc = -1;
    const char *why = NULL;
    if (route) {
        sy_upstream up;
        sy_route_upstream(route, &up);
        if (up.kind == SY_UPSTREAM_SERVICE) {
            sel_rc = sy_snapshot_select(snap, ctx, m, &req, &sel, &err);
            if (sel_rc)
                why = err.message;
        }
    }
    if (rc)
        fprintf(stderr, "switchyard match: %s\n", sy_strerror(rc));
    else if (a.json)
        print_match_json(route, m, &sel, sel_rc, why);
    else
        print_match_text(&a, route, m, &sel, sel_rc, why);
    session_close(&ss);
    /* an lb:// route without an instance is a 503, not a success */
    return rc ? 2 : (route && !why ? 0 : 1);
}

typedef struct explain_state {
    bool json;
    cJSON *list;
    int rank;
} explain_state;

static int explain_one(void *data, const sy_route *route, bool matched,
                       int failed, const char *failed_name) {
    explain_state *st = data;
    st->rank++;
    if (st->json) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "route", sy_route_id(route));
        cJSON_AddNumberToObject(e, "order", sy_route_order(route));
        cJSON_AddBoolToObject(e, "matched", matched);
        if (!matched) {
            if (failed >= 0)
                cJSON_AddNumberToObject(e, "failed_predicate", failed);
            cJSON_AddStringToObject(e, "failed", failed_name);
        }
        cJSON_AddItemToArray(st->list, e);
    } else if (matched) {
        printf("%3d. %-24s order %-6d MATCH\n", st->rank, sy_route_id(route),
               sy_route_order(route));
    } else if (failed < 0) {
        printf("%3d. %-24s order %-6d skipped: %s\n", st->rank,
               sy_route_id(route), sy_route_order(route), failed_name);
    } else {
        printf("%3d. %-24s order %-6d predicates[%d] %s does not hold\n",
               st->rank, sy_route_id(route), sy_route_order(route), failed,
               failed_name);
    }
    return 0;
}

int sy_cli_explain(int argc, char **argv) {
    session ss;
    int rc = session_open("explain", argc, argv, &ss);
    if (rc)
        return rc < 0 ? 0 : rc;
    request_args a = ss.a;
    sy_request req = ss.req;
    sy_match_ctx *ctx = ss.ctx;
    sy_snapshot *snap = ss.snap;
    explain_state st = {a.json, a.json ? cJSON_CreateArray() : NULL, 0};
    rc = sy_snapshot_explain(snap, ctx, &req, explain_one, &st);
    sy_match *m = NULL;
    if (!rc)
        rc = sy_snapshot_match(snap, ctx, &req, &m);
    const char *winner = m ? sy_route_id(sy_match_route(m)) : NULL;
    if (a.json) {
        cJSON *o = cJSON_CreateObject();
        if (winner)
            cJSON_AddStringToObject(o, "route", winner);
        else
            cJSON_AddNullToObject(o, "route");
        cJSON_AddItemToObject(o, "routes", st.list);
        char *text = cJSON_PrintUnformatted(o);
        printf("%s\n", text);
        free(text);
        cJSON_Delete(o);
    } else {
        printf("=> %s\n", winner ? winner : "no route (404)");
    }
    session_close(&ss);
    return rc ? 2 : (winner ? 0 : 1);
}

static const char *const part_names[] = {"predicates", "filters", "uri",
                                         "metadata", "order"};

static sy_document *load_doc(const char *path) {
    size_t len;
    char *text = sy_cli_read_routes(path, &len);
    if (!text) {
        fprintf(stderr, "switchyard diff: cannot read %s: %s\n", path,
                strerror(errno));
        return NULL;
    }
    sy_parse_options po = SY_PARSE_OPTIONS_INIT;
    sy_document *doc = NULL;
    sy_error err;
    if (sy_document_parse(text, len, &po, &doc, &err)) {
        if (err.line)
            fprintf(stderr, "%s: line %u, column %u: %s\n", path, err.line,
                    err.column, err.message);
        else
            fprintf(stderr, "%s: %s: %s\n", path, err.path[0] ? err.path : "$",
                    err.message);
    }
    free(text);
    return doc;
}

static const char diff_help[] =
    "usage: switchyard diff [--json] OLD NEW\n"
    "Compare two route documents by route id and meaning: routes added, "
    "removed,\nupdated (with the parts that changed: predicates, filters, "
    "uri, metadata,\norder), reordered (kept routes whose rank moved past "
    "another: another\nroute now matches first; not an update) and the "
    "number unchanged. Both\ndocuments must be valid (strict).\n"
    "\n"
    "options:\n"
    "  --json       print one JSON object: added, removed, updated, "
    "reordered,\n               unchanged\n"
    "  --requests FILE  replay recorded requests through both instead "
    "(see\n"
    "               switchyard diff --requests - --help)\n"
    "  -h, --help   show this help\n"
    "\n"
    "exit status: 0 the diff was printed (changes or not), 2 usage errors, "
    "unreadable\nor invalid documents.\n"
    "\n"
    "example:\n"
    "  switchyard diff routes-v1.json routes-v2.json\n";

int sy_cli_diff(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--requests") == 0)
            return sy_cli_replay(argc, argv); /* cli_replay.c */
    bool json = false;
    const char *files[2];
    int nf = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("%s", diff_help);
            return 0;
        }
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (nf < 2 && argv[i][0] != '-')
            files[nf++] = argv[i];
        else
            nf = 3;
    }
    if (nf != 2) {
        fprintf(stderr, "usage: switchyard diff [--json] OLD NEW\n");
        return 2;
    }
    sy_document *a = load_doc(files[0]), *b = a ? load_doc(files[1]) : NULL;
    sy_diff *d = NULL;
    sy_error err;
    int rc = 2;
    if (a && b && sy_diff_documents(a, b, NULL, &d, &err) == 0) {
        rc = 0;
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON *add = cJSON_AddArrayToObject(o, "added");
            for (size_t i = 0; i < sy_diff_added_count(d); i++)
                cJSON_AddItemToArray(add,
                                     cJSON_CreateString(sy_diff_added(d, i)));
            cJSON *rem = cJSON_AddArrayToObject(o, "removed");
            for (size_t i = 0; i < sy_diff_removed_count(d); i++)
                cJSON_AddItemToArray(rem,
                                     cJSON_CreateString(sy_diff_removed(d, i)));
            cJSON *upd = cJSON_AddArrayToObject(o, "updated");
            for (size_t i = 0; i < sy_diff_updated_count(d); i++) {
                unsigned mask;
                const char *id = sy_diff_updated(d, i, &mask);
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "id", id);
                cJSON *ch = cJSON_AddArrayToObject(e, "changed");
                for (unsigned k = 0; k < 5; k++)
                    if (mask & (1u << k))
                        cJSON_AddItemToArray(ch,
                                             cJSON_CreateString(part_names[k]));
                cJSON_AddItemToArray(upd, e);
            }
            cJSON *ro = cJSON_AddArrayToObject(o, "reordered");
            for (size_t i = 0; i < sy_diff_reordered_count(d); i++)
                cJSON_AddItemToArray(
                    ro, cJSON_CreateString(sy_diff_reordered(d, i)));
            cJSON_AddNumberToObject(o, "unchanged",
                                    (double)sy_diff_unchanged_count(d));
            char *text = cJSON_PrintUnformatted(o);
            printf("%s\n", text);
            free(text);
            cJSON_Delete(o);
        } else {
            for (size_t i = 0; i < sy_diff_added_count(d); i++)
                printf("+ %s\n", sy_diff_added(d, i));
            for (size_t i = 0; i < sy_diff_removed_count(d); i++)
                printf("- %s\n", sy_diff_removed(d, i));
            for (size_t i = 0; i < sy_diff_updated_count(d); i++) {
                unsigned mask;
                const char *id = sy_diff_updated(d, i, &mask);
                printf("~ %s (", id);
                const char *sep = "";
                for (unsigned k = 0; k < 5; k++)
                    if (mask & (1u << k)) {
                        printf("%s%s", sep, part_names[k]);
                        sep = ", ";
                    }
                printf(")\n");
            }
            for (size_t i = 0; i < sy_diff_reordered_count(d); i++)
                printf("^ %s (reordered)\n", sy_diff_reordered(d, i));
            printf("%zu unchanged\n", sy_diff_unchanged_count(d));
        }
    }
    sy_diff_free(d);
    sy_document_free(a);
    sy_document_free(b);
    return rc;
}
