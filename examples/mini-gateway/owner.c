/*
 * owner.c - who may change what, so that no admin edit is silently
 * undone. A route source read from a file, or a service the instances
 * file names, is the file's: the next change of the file would replace
 * what the admin API did. So such a change is refused (409, naming the
 * file), unless the operator chose --admin-overrides-files: then the
 * admin change is kept as an override, staged again on top of the file's
 * content after every read of the file (in the same change set: one
 * publish), and listed in /status under "overrides" (state.c keeps them).
 * Main thread only.
 */
#define _DEFAULT_SOURCE
#include "gw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int gw_owner_check(const char *source, const char *service, char *msg,
                   size_t cap) {
    const char *file = source    ? gw_config_source_file(source)
                       : service ? gw_config_service_file(service)
                                 : NULL;
    if (!file || G.cfg.admin_overrides_files)
        return 0;
    snprintf(msg, cap,
             "%s %s comes from the file %s: the next change of the file "
             "would undo this; change the file (or start with "
             "--admin-overrides-files)",
             source ? "source" : "service", source ? source : service, file);
    return 409;
}
