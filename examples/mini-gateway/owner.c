/*
 * owner.c - who may change what, so that no admin edit is silently
 * undone. A route source read from a file, or a service the instances
 * file names, is the file's: the next change of the file would replace
 * what the admin API did. So such a change is refused (409, naming the
 * file), unless the operator chose --admin-overrides-files: then the
 * admin change is kept as an override, staged again on top of the file's
 * content after every read of the file (in the same change set: one
 * publish), and listed in /status under "overrides" (state.c keeps them).
 * Also the one path for the actuator's route writes
 * (gw_admin_change_route). Main thread only.
 */
#define _DEFAULT_SOURCE
#include "gw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int gw_owner_check(const char *source, const char *service, char *msg,
                   size_t cap) {
    const char *file = source ? gw_config_source_file(source)
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

int gw_admin_change_route(const char *source, const char *id,
                          const char *json, size_t len, const char *what,
                          sy_error *err) {
    int rc = sy_router_add_source(G.router, source, err);
    if (rc && rc != SY_EEXIST)
        return rc;
    sy_change_set *cs;
    if ((rc = sy_change_set_new(G.router, &cs, err)))
        return rc;
    rc = json ? sy_change_set_upsert_route(cs, source, json, len, err)
              : sy_change_set_remove_route(cs, id, err);
    if (!rc)
        rc = gw_commit(cs, what, err);
    sy_change_set_free(cs);
    char *seg[3] = {"routes", (char *)source, (char *)id};
    char msg[160];
    if (!rc && gw_state_note(json ? "PUT" : "DELETE", seg, 3, json, len, msg,
                             sizeof msg)) { /* live, but not kept */
        memset(err, 0, sizeof *err);
        err->code = rc = SY_ECALLBACK;
        snprintf(err->message, sizeof err->message,
                 "the change is live but not kept: %s", msg);
    }
    return rc;
}
