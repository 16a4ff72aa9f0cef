/* cli.h - the subcommands of the switchyard tool, one function each. */
#ifndef SY_CLI_H
#define SY_CLI_H

#include "switchyard.h"

#include <stdio.h>

/* Each takes the arguments after the subcommand name and returns the
 * process exit status. */
int sy_cli_match(int argc, char **argv);
int sy_cli_explain(int argc, char **argv);
int sy_cli_diff(int argc, char **argv);
int sy_cli_convert(int argc, char **argv); /* cli_convert.c */
/* A .yml/.yaml/.properties file's text (taken) converted as `convert`
 * does; its issues printed to `out`, one a line; NULL when it does not
 * convert. */
char *sy_cli_convert_for_check(const char *file, char *text, size_t *len,
                               FILE *out);
/* A route file for match, explain and diff: read, and converted when it
 * is Spring Boot configuration (issues on stderr); NULL with errno set
 * (EINVAL: it does not convert). switchyard.c. */
char *sy_cli_read_routes(const char *path, size_t *len);
/* diff --requests: replay recorded requests (cli_replay.c) */
int sy_cli_replay(int argc, char **argv);

/* Split "scheme://authority/path?query" (or "/path?query") into req's
 * scheme, host, path and query (cli_route.c). */
void sy_cli_split_url(const char *url, sy_request *req);
/* An instances document into r, one sy_router_set_instances per
 * service; 0, or 2 with the located error on stderr (cli_route.c). */
int sy_cli_load_instances(sy_router *r, const char *path);

/* Read a whole file ("-": stdin) into a malloc'd buffer; NULL with errno
 * on failure (switchyard.c). */
char *sy_cli_read_file(const char *path, size_t *len);

#endif
