/*
 * cli_convert.c - the `convert` subcommand of the switchyard tool: Spring
 * Cloud Gateway's application.yml / application.properties route
 * definitions to a switchyard route document on stdout (the conversion
 * itself is scg_convert.c, shared with the mini-gateway). Issues go to
 * stderr, one line each: FILE:LINE: message.
 */
#include "cli.h"
#include "scg_convert.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SETS 256

static int convert_usage(FILE *out) {
    fprintf(out,
            "usage: switchyard convert [--set NAME=VALUE]... [--profile P]... "
            "[--no-env]\n"
            "                          [--keep-unresolved] [-o FILE] "
            "FILE...\n"
            "Convert Spring Cloud Gateway route definitions "
            "(application.yml, .yaml or\n"
            ".properties: spring.cloud.gateway.routes or "
            "spring.cloud.gateway.server.webflux.routes)\n"
            "to one switchyard route document on stdout. default-filters "
            "are merged into\n"
            "each route's filters in SCG's order. Later files override "
            "earlier ones, as\n"
            "Spring Boot's property sources do.\n"
            "\n"
            "options:\n"
            "  --set NAME=VALUE     resolve ${NAME} (before the environment "
            "and the files)\n"
            "  --profile P          also read the YAML documents for profile "
            "P\n"
            "                       (spring.config.activate.on-profile)\n"
            "  --no-env             do not resolve placeholders from the "
            "environment\n"
            "  --keep-unresolved    an unresolved ${NAME} is a warning and "
            "stays as written\n"
            "                       (by default it is an error, reported "
            "with FILE:LINE)\n"
            "  -o FILE              write the document to FILE instead of "
            "stdout\n"
            "  -h, --help           show this help\n"
            "\n"
            "exit status: 0 converted (warnings may be on stderr), 1 "
            "errors (each on\nstderr as FILE:LINE: message; nothing is "
            "written), 2 usage errors or\nunreadable files.\n"
            "\n"
            "example:\n"
            "  switchyard convert --set BACKEND=http://10.0.0.5:8080 "
            "application.yml > routes.json\n");
    return out == stderr ? 2 : 0;
}

int sy_cli_convert(int argc, char **argv) {
    const char *sets[MAX_SETS], *profiles[MAX_SETS];
    scg_options o = {0};
    o.set = sets;
    o.profiles = profiles;
    const char *out_path = NULL;
    int i = 0;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
            return convert_usage(stdout);
        if (strcmp(a, "--no-env") == 0) {
            o.no_env = true;
        } else if (strcmp(a, "--keep-unresolved") == 0) {
            o.keep_unresolved = true;
        } else if (strcmp(a, "--set") == 0 || strcmp(a, "-o") == 0 ||
                   strcmp(a, "--profile") == 0) {
            if (i + 1 == argc) {
                fprintf(stderr, "switchyard convert: %s needs a value\n", a);
                return convert_usage(stderr);
            }
            const char *v = argv[++i];
            if (a[1] == 'o' && out_path) {
                /* one output: the first was dropped */
                fprintf(stderr, "switchyard convert: -o given twice\n");
                return 2;
            }
            size_t nl = strcspn(v, "=");
            for (size_t k = 0; a[2] == 's' && k < o.set_count; k++)
                if (strncmp(sets[k], v, nl) == 0 && sets[k][nl] == '=') {
                    /* the last was taken where Spring reads a repeated
                     * --NAME as the list of both */
                    fprintf(stderr,
                            "switchyard convert: --set %.*s given twice\n",
                            (int)nl, v);
                    return 2;
                }
            if (a[1] == 'o') {
                out_path = v;
            } else if (a[2] == 'p') {
                if (o.profile_count == MAX_SETS) {
                    fprintf(stderr,
                            "switchyard convert: at most %d "
                            "--profile\n",
                            MAX_SETS);
                    return 2;
                }
                profiles[o.profile_count++] = v;
            } else if (!strchr(v, '=') || v[0] == '=' ||
                       o.set_count == MAX_SETS) {
                fprintf(stderr,
                        "switchyard convert: --set takes NAME=VALUE (at most "
                        "%d), not \"%s\"\n",
                        MAX_SETS, v);
                return 2;
            } else {
                sets[o.set_count++] = v;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "switchyard convert: unknown option '%s'\n", a);
            return convert_usage(stderr);
        } else {
            break;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "switchyard convert: no file given\n");
        return convert_usage(stderr);
    }
    scg_converter *c = scg_converter_new(&o);
    if (!c) {
        fprintf(stderr, "switchyard convert: out of memory\n");
        return 2;
    }
    int status = 0;
    for (; i < argc && status != 2; i++) {
        size_t len;
        char *text = sy_cli_read_file(argv[i], &len);
        if (!text) {
            fprintf(stderr, "switchyard convert: %s: %s\n", argv[i],
                    strerror(errno));
            status = 2;
            break;
        }
        scg_converter_add(c, argv[i], text, len, SCG_FORMAT_UNKNOWN);
        free(text);
    }
    size_t len = 0, routes = 0;
    char *doc = NULL;
    if (status == 0 && !scg_converter_error_count(c))
        doc = scg_converter_document(c, &len, &routes);
    for (size_t k = 0; k < scg_converter_issue_count(c); k++) {
        const scg_issue *is = scg_converter_issue(c, k);
        fprintf(stderr, "%s%s\n", is->error ? "" : "warning: ", is->text);
    }
    if (status == 0 && !doc)
        status = 1;
    if (doc) {
        FILE *out = out_path ? fopen(out_path, "wb") : stdout;
        if (!out || fwrite(doc, 1, len, out) != len || fputc('\n', out) < 0 ||
            (out_path ? fclose(out) : fflush(out)) != 0) {
            fprintf(stderr, "switchyard convert: %s: %s\n",
                    out_path ? out_path : "stdout", strerror(errno));
            status = 2;
        } else {
            fprintf(stderr, "converted %zu route%s\n", routes,
                    routes == 1 ? "" : "s");
        }
    }
    free(doc);
    scg_converter_free(c);
    return status;
}

char *sy_cli_convert_for_check(const char *file, char *text, size_t *len,
                               FILE *out) {
    scg_options o = {0};
    scg_converter *c = scg_converter_new(&o);
    char *doc = NULL;
    size_t routes = 0;
    if (c && !scg_converter_add(c, file, text, *len, SCG_FORMAT_UNKNOWN))
        doc = scg_converter_document(c, len, &routes);
    free(text);
    for (size_t k = 0; c && k < scg_converter_issue_count(c); k++) {
        const scg_issue *is = scg_converter_issue(c, k);
        fprintf(out, "%s%s\n", is->error ? "" : "warning: ", is->text);
    }
    if (!c)
        fprintf(out, "%s: out of memory\n", file);
    scg_converter_free(c);
    return doc;
}
