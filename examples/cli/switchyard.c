/*
 * switchyard.c - the command-line tool: main() and its subcommand table,
 * `--version`, `--help`, and the `check` subcommand (validate route
 * documents, one line per error, warn of routes no request reaches, list
 * what the host must run, check against what a host runs). Other
 * subcommands live in their own
 * files and are declared in cli.h. Uses only the public API.
 */
#include "cli.h"
#ifdef SY_HAVE_YAML
#include "../mini-gateway/cors_parse.h"
#include "../mini-gateway/host_filters.h"
#include "scg_convert.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- check ---- */

char *sy_cli_read_file(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) {
            if (ferror(f)) {
                free(buf);
                buf = NULL;
                errno = EIO;
            }
            break;
        }
        char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            errno = ENOMEM;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (f != stdin)
        fclose(f);
    *len = n;
    return buf;
}

/* One line per error: FILE: PATH: message, or FILE: line L, column C:
 * message for errors at a position of the text. */
static void print_error(const char *file, const sy_error *e) {
    if (e->line)
        printf("%s: line %u, column %u: %s\n", file, (unsigned)e->line,
               (unsigned)e->column, e->message);
    else if (e->path[0])
        printf("%s: %s: %s\n", file, e->path, e->message);
    else
        printf("%s: %s\n", file, e->message);
}

/* One warning line per shadowed or unreachable route: FILE: PATH:
 * warning: route 'x' is shadowed by 'y' (PATH): reason. */
typedef struct warn_state {
    const char *file;
    size_t count;
} warn_state;

static int print_shadow(void *data, const sy_shadow *s) {
    warn_state *w = data;
    w->count++;
    const char *id = sy_route_id(s->route);
    if (!s->by_count) {
        printf("%s: %s: warning: route '%s' is unreachable: %s\n", w->file,
               s->path, id, s->reason);
        return 0;
    }
    printf("%s: %s: warning: route '%s' is shadowed by ", w->file, s->path, id);
    for (size_t i = 0; i < s->by_count; i++)
        printf("%s'%s' (%s)",
               i == 0                 ? ""
               : i + 1 == s->by_count ? " and "
                                      : ", ",
               sy_route_id(s->by[i]), s->by_path[i]);
    printf(": %s\n", s->reason);
    return 0;
}

/* One line per host-run item a document uses (docs/policies.md, "Run or
 * refuse"): FILE: host-run [NAME]: 'a', 'b' (the ids of its routes). */
static void print_host_runs(const char *file, const sy_document *doc) {
    const char *const *all = sy_host_runs_all();
    size_t n = sy_document_route_count(doc);
    for (size_t k = 0; all[k]; k++) {
        size_t hits = 0;
        for (size_t i = 0; i < n; i++) {
            const sy_route *r = sy_document_route(doc, i);
            const char *names[32];
            size_t c = sy_route_host_runs(r, names, 32);
            for (size_t j = 0; j < c && j < 32; j++)
                if (strcmp(names[j], all[k]) == 0) {
                    if (!hits)
                        printf("%s: host-run [%s]:", file, all[k]);
                    printf("%s '%s'", hits ? "," : "", sy_route_id(r));
                    hits++;
                }
        }
        if (hits)
            printf("\n");
    }
}

char *sy_cli_read_routes(const char *path, size_t *len) {
    char *text = sy_cli_read_file(path, len);
#ifdef SY_HAVE_YAML
    if (text && scg_format_of(path) != SCG_FORMAT_UNKNOWN &&
        !(text = sy_cli_convert_for_check(path, text, len, stderr)))
        errno = EINVAL;
#endif
    return text;
}

static int check_usage(FILE *out) {
    fprintf(out, "usage: switchyard check [--quiet] [--fail-on-warning] "
                 "[--host gateway|nginx] FILE...\n"
                 "Validate route documents (a JSON array of routes or "
                 "{\"version\", \"routes\"}),\nor Spring Cloud Gateway's "
                 "application.yml/.yaml/.properties as `switchyard\n"
                 "convert` makes them.\n"
                 "Prints one line per error, every error of every route: "
                 "FILE: PATH: message.\n"
                 "Warns of each route no request can reach: shadowed by "
                 "routes ranked above\nit (they take every request it "
                 "matches) or matching nothing at all:\n"
                 "FILE: PATH: warning: route 'x' is shadowed by 'y' (PATH): "
                 "...\n"
                 "Lists what the host must run (rate limiters, breakers, "
                 "retries, forward:, ...):\n"
                 "FILE: host-run [NAME]: 'a', 'b'   (the routes using it)\n"
                 "\n"
                 "options:\n"
                 "  -q, --quiet          print nothing for valid files\n"
                 "  --fail-on-warning    exit 1 when any warning is printed\n"
                 "  --host NAME          refuse what host NAME does not run "
                 "(gateway: the\n"
                 "                       mini-gateway, nginx: the nginx "
                 "module)\n"
                 "  -h, --help           show this help\n"
                 "FILE may be - for standard input.\n"
                 "\n"
                 "exit status: 0 every file is valid (warnings or not), 1 "
                 "any is not (or\nwarned, with --fail-on-warning), 2 usage "
                 "errors or unreadable files.\n"
                 "\n"
                 "example:\n"
                 "  switchyard check routes.json other-routes.json\n");
    return out == stderr ? 2 : 0;
}

/* The host filters of `--host`: the mini-gateway's own (the same source it
 * compiles) for gateway; for another host the same names, refused there
 * with an error naming the host. Exits on failure. */
static sy_registry *host_registry(const char *host) {
    bool gateway = strcmp(host, "gateway") == 0;
    sy_registry *reg = NULL;
    sy_error err;
    if (sy_registry_new(NULL, &reg, &err) ||
        (gateway ? gw_host_filters_register(reg, &err)
                 : gw_host_filters_refuse(reg, host, &err))) {
        fprintf(stderr, "switchyard check: %s\n", err.message);
        exit(2);
    }
    return reg;
}

/* --host gateway: each route's `cors` metadata read as the gateway reads
 * it at apply (cors_parse.c), one error line per route it would refuse;
 * how many. Paths index the document's routes when none was dropped, else
 * name the route by id. */
static size_t check_gateway_cors(const char *file, const sy_document *doc,
                                 bool envelope, bool dropped) {
    size_t bad = 0;
    for (size_t i = 0; i < sy_document_route_count(doc); i++) {
        const sy_route *r = sy_document_route(doc, i);
        const char *v = sy_route_metadata(r, "cors");
        char msg[256] = "";
        gw_cors *c = v ? gw_cors_parse(v, msg, sizeof msg) : NULL;
        if (!v || c) {
            gw_cors_free(c);
            continue;
        }
        sy_error e;
        memset(&e, 0, sizeof e);
        if (dropped)
            snprintf(e.path, sizeof e.path, "route '%.100s'.metadata.cors",
                     sy_route_id(r));
        else
            snprintf(e.path, sizeof e.path, "%s[%zu].metadata.cors",
                     envelope ? "routes" : "", i);
        snprintf(e.message, sizeof e.message, "cors: %s",
                 msg[0] ? msg : "out of memory");
        print_error(file, &e);
        bad++;
    }
    return bad;
}

static int cli_check(int argc, char **argv) {
    bool quiet = false, fail_on_warning = false;
    const char *const *host_runs = NULL;
    sy_registry *registry = NULL;
    bool gateway = false;
    int first = 0;
    for (; first < argc; first++) {
        const char *a = argv[first];
        if (strcmp(a, "--") == 0) {
            first++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
            return check_usage(stdout);
        if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = true;
            continue;
        }
        if (strcmp(a, "--fail-on-warning") == 0) {
            fail_on_warning = true;
            continue;
        }
        if (strcmp(a, "--host") == 0 && host_runs) {
            /* one host is checked for: the first was dropped */
            fprintf(stderr, "switchyard check: --host given twice\n");
            sy_registry_free(registry);
            return check_usage(stderr);
        }
        if (strcmp(a, "--host") == 0) {
            host_runs =
                first + 1 < argc ? sy_host_profile(argv[first + 1]) : NULL;
            if (!host_runs) {
                fprintf(stderr,
                        "switchyard check: --host takes gateway or nginx\n");
                return check_usage(stderr);
            }
            sy_registry_free(registry);
            registry = host_registry(argv[first + 1]);
            gateway = strcmp(argv[first + 1], "gateway") == 0;
            first++;
            continue;
        }
        if (a[0] == '-' && a[1]) {
            fprintf(stderr, "switchyard check: unknown option '%s'\n", a);
            return check_usage(stderr);
        }
        break;
    }
    if (first >= argc) {
        fprintf(stderr, "switchyard check: no file given\n");
        return check_usage(stderr);
    }
    int status = 0;
    for (int i = first; i < argc; i++) {
        const char *file = argv[i];
        size_t len = 0;
        char *json = sy_cli_read_file(file, &len);
        if (!json) {
            fprintf(stderr, "switchyard check: %s: %s\n", file,
                    strerror(errno));
            status = 2;
            continue;
        }
#ifdef SY_HAVE_YAML
        /* Spring Boot configuration: checked as `convert` makes it (the
         * paths of route errors are those of the converted document) */
        if (scg_format_of(file) != SCG_FORMAT_UNKNOWN &&
            !(json = sy_cli_convert_for_check(file, json, &len, stdout))) {
            if (status == 0)
                status = 1;
            continue;
        }
#endif
        sy_parse_options opts = SY_PARSE_OPTIONS_INIT;
        opts.lenient = true; /* list every bad route, not just the first */
        opts.host_runs = host_runs;
        opts.registry = registry;
        sy_document *doc = NULL;
        sy_error err;
        memset(&err, 0, sizeof err);
        int rc = sy_document_parse(json, len, &opts, &doc, &err);
        size_t lead = strspn(json, " \t\r\n");
        bool envelope = lead < len && json[lead] == '{';
        free(json);
        if (rc) {
            print_error(file, &err);
            if (status == 0)
                status = 1;
            continue;
        }
        size_t issues = sy_document_issue_count(doc);
        for (size_t k = 0; k < issues; k++)
            print_error(file, sy_document_issue(doc, k));
        if (gateway)
            issues += check_gateway_cors(file, doc, envelope, issues != 0);
        if (issues && status == 0)
            status = 1;
        warn_state w = {file, 0};
        if (sy_document_shadowed(doc, NULL, print_shadow, &w, &err)) {
            fprintf(stderr, "switchyard check: %s: %s\n", file, err.message);
            status = 2;
        }
        if (w.count && fail_on_warning && status == 0)
            status = 1;
        if (!issues && !quiet) {
            size_t n = sy_document_route_count(doc);
            printf("%s: ok, %zu route%s\n", file, n, n == 1 ? "" : "s");
        }
        if (!quiet)
            print_host_runs(file, doc);
        sy_document_free(doc);
    }
    sy_registry_free(registry);
    return status;
}

/* ---- dispatch ---- */

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv); /* args after the name */
    const char *summary;
} cli_command;

/* Add a subcommand here; implement it in its own file, declare it in
 * cli.h and list the file in examples/meson.build. */
static const cli_command commands[] = {
    {"check", cli_check, "validate route documents"},
    {"match", sy_cli_match, "find the route a request would take"},
    {"explain", sy_cli_explain, "show why each route matches or not"},
    {"diff", sy_cli_diff, "compare two route documents"},
#ifdef SY_HAVE_YAML
    {"convert", sy_cli_convert,
     "Spring Cloud Gateway YAML/properties to a "
     "route document"},
#endif
};

static int usage(FILE *out) {
    fprintf(out, "usage: switchyard COMMAND [ARGS...]\n"
                 "       switchyard --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nswitchyard COMMAND --help shows a command's options.\n");
    return out == stderr ? 2 : 0;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return usage(stderr);
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("switchyard %s\n", sy_version());
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
        strcmp(cmd, "help") == 0)
        return usage(stdout);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "switchyard: unknown command '%s'\n", cmd);
    return usage(stderr);
}
