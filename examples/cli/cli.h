/* cli.h - the subcommands of the switchyard tool, one function each. */
#ifndef SY_CLI_H
#define SY_CLI_H

#include "switchyard.h"

/* Each takes the arguments after the subcommand name and returns the
 * process exit status. */
int sy_cli_match(int argc, char **argv);
int sy_cli_explain(int argc, char **argv);
int sy_cli_diff(int argc, char **argv);

#endif
