/*
 * change_set.h - staged changes (internal layout). A change set is a list
 * of changes copied at staging time (documents, routes, instance lists),
 * committed by the router (router.c) as one snapshot. This module only
 * stages and owns the copies; it knows nothing of snapshots.
 */
#ifndef SY_CHANGE_SET_H
#define SY_CHANGE_SET_H

#include "base/util.h"

typedef enum sy__change_kind {
    SY_CHANGE_APPLY,            /* name = source, bytes = document */
    SY_CHANGE_ROLLBACK,         /* name = source, text = version or NULL */
    SY_CHANGE_UPSERT,           /* name = source, bytes = route object */
    SY_CHANGE_REMOVE,           /* name = route id */
    SY_CHANGE_ENABLE,           /* name = route id, enabled */
    SY_CHANGE_SET_INSTANCES,    /* name = service, instances */
    SY_CHANGE_UPDATE_INSTANCES, /* name = service, deltas */
} sy__change_kind;

typedef struct sy__change {
    sy__change_kind kind;
    const char *name;
    const char *bytes; /* APPLY / UPSERT (NUL-terminated copy) */
    size_t len;
    const char *text; /* ROLLBACK version, may be NULL */
    bool enabled;
    const sy_instance *instances; /* deep copies */
    const sy_instance_delta *deltas;
    size_t count;
} sy__change;

struct sy_change_set {
    sy_router *router;
    sy__alloc alloc;
    sy__arena arena; /* every copy */
    sy__change *items;
    size_t count, cap;
    bool committed; /* published once: a second commit is refused */
};

/*
 * The counts of an instance list (`list`) or delta list (`deltas`) of n
 * entries, as every call that takes one checks them before computing any
 * size from them (the single calls and staging alike): n at most
 * SY_MAX_INSTANCES, each instance's metadata_count at most
 * SY_MAX_INSTANCE_METADATA. SY_ELIMIT with the path ("instances",
 * "deltas[2].instance.metadata"), else SY_OK. The entries are read only
 * when n is within the limit.
 */
int sy__check_instance_counts(const sy_instance *list,
                              const sy_instance_delta *deltas, size_t n,
                              sy_error *err);

/* What a change is, for messages: "apply 'orders'", "remove 'r1'"... */
const char *sy__change_kind_name(sy__change_kind k);

#endif
