/* cli.h - the subcommands of the switchyard tool, one function each. */
#ifndef SY_CLI_H
#define SY_CLI_H

#include "switchyard.h"

/* Each takes the arguments after the subcommand name and returns the
 * process exit status. */
int sy_cli_match(int argc, char **argv);
int sy_cli_explain(int argc, char **argv);
int sy_cli_diff(int argc, char **argv);
int sy_cli_convert(int argc, char **argv); /* cli_convert.c */

/* Read a whole file ("-": stdin) into a malloc'd buffer; NULL with errno
 * on failure (switchyard.c). */
char *sy_cli_read_file(const char *path, size_t *len);

#endif
