/*
 * state.c - the admin changes the gateway keeps, so that none is lost
 * silently:
 *   - the overrides of --admin-overrides-files: an admin change to what a
 *     file owns, staged again on top of the file's content after every
 *     read of the file (owner.c decides who may change what);
 *   - with --state FILE, every accepted admin change (and actuator write):
 *     written durably to FILE (FILE.tmp, fsync, rename, fsync of the
 *     directory) before it is committed (a change that cannot be saved
 *     is refused; a rollback, saved once committed, is undone), and
 *     replayed at start
 *     after the files are read, each change as one change set (all or
 *     nothing), logged.
 * The list is compacted as it grows: a change drops the earlier ones it
 * makes void (a document, rollback or instance list those of its source
 * or service; an upsert or removal those of its route), and a route
 * upserted again takes its earlier upsert's place, so that it keeps its
 * rank when replayed, as it did live. Also where each
 * source's live document came from (file, admin, state, etcd), for
 * /status. Main thread only (the admin loop and the config ticks); the
 * worker threads never touch any of it.
 */
#define _DEFAULT_SOURCE
#include "gw.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef GW_HAVE_ETCD
#include "etcd_source.h"
#endif

typedef enum kept_kind {
    K_DOCUMENT,  /* PUT /routes/<source> */
    K_UPSERT,    /* PUT /routes/<source>/<id> */
    K_REMOVE,    /* DELETE /routes/<source>/<id> */
    K_ENABLE,    /* POST /routes/<source>/<id>/enable */
    K_DISABLE,   /* POST /routes/<source>/<id>/disable */
    K_INSTANCES, /* PUT /instances/<service> */
    K_ROLLBACK,  /* POST /rollback/<source>: the version rolled back to */
    K_COUNT
} kept_kind;

static const char *const kind_names[K_COUNT] = {
    "document", "upsert",    "remove",  "enable",
    "disable",  "instances", "rollback"};

typedef struct kept {
    kept_kind kind;
    char *name; /* the source, or the service for K_INSTANCES */
    char *id;   /* the route; NULL for a document, instances, rollback */
    char *body; /* JSON: document, upsert, instances; for a rollback the
                   source's routes after it (a document), NULL if none */
    size_t len;
    char *version; /* a rollback's version; else NULL */
    int64_t at_ms; /* when the admin made it (wall clock) */
} kept;

static kept *list;
static size_t nkept;

/* What the start's replay did, for /status. */
#define STATE_ERRORS 16
static size_t replayed, not_replayed;
static char *replay_errors[STATE_ERRORS];

static const char *owner_file(const kept *k) {
    return k->kind == K_INSTANCES ? gw_config_service_file(k->name)
                                  : gw_config_source_file(k->name);
}

static void kept_free(kept *k) {
    free(k->name);
    free(k->id);
    free(k->body);
    free(k->version);
}

/* Does the new change k make the kept change o void? A document, a
 * rollback or an instance list voids everything of its source (service);
 * an upsert, removal or switch voids what was kept of its route. */
static bool voids(const kept *k, const kept *o) {
    bool same_name = strcmp(o->name, k->name) == 0 &&
                     (k->kind == K_INSTANCES) == (o->kind == K_INSTANCES);
    bool same_route = o->id && k->id && strcmp(o->id, k->id) == 0;
    bool state = o->kind == K_ENABLE || o->kind == K_DISABLE;
    bool whole = k->kind == K_DOCUMENT || k->kind == K_INSTANCES ||
                 k->kind == K_ROLLBACK;
    return same_name &&
           (whole || (same_route &&
                      (k->kind == K_UPSERT || k->kind == K_REMOVE || state)));
}

/* The kept list as it would be with k: what k voids left out (not freed:
 * the list stays as it is until adopt()), k in its place (a route
 * upserted again takes its earlier upsert's place, so that it keeps its
 * rank, as in the router), else at the end. NULL: out of memory. */
static kept *list_with(const kept *k, size_t *n) {
    kept *next = malloc((nkept + 1) * sizeof *next);
    if (!next)
        return NULL;
    size_t j = 0, at = SIZE_MAX;
    for (size_t i = 0; i < nkept; i++) {
        const kept *o = &list[i];
        bool gone = voids(k, o);
        if (gone && at == SIZE_MAX && k->kind == K_UPSERT &&
            o->kind == K_UPSERT)
            at = j;
        if (!gone)
            next[j++] = *o;
    }
    if (at == SIZE_MAX)
        at = j;
    memmove(&next[at + 1], &next[at], (j - at) * sizeof *next);
    next[at] = *k;
    *n = j + 1;
    return next;
}

/* next (from list_with, holding k) becomes the kept list: what k voids
 * is freed. */
static void adopt(kept *next, size_t n, const kept *k) {
    for (size_t i = 0; i < nkept; i++)
        if (voids(k, &list[i]))
            kept_free(&list[i]);
    free(list);
    list = next;
    nkept = n;
}

/* Append k (taking its strings), after dropping what it voids; false
 * when out of memory (k freed). */
static bool keep(kept *k) {
    size_t n;
    kept *next = list_with(k, &n);
    if (!next) {
        kept_free(k);
        return false;
    }
    adopt(next, n, k);
    return true;
}

/* ---- origins ---- */

typedef struct origin {
    char *source;
    const char *from; /* "file", "admin", "state", "demo" */
} origin;
static origin *origins;
static size_t norigins;

void gw_origin_set(const char *source, const char *from) {
    for (size_t i = 0; i < norigins; i++)
        if (strcmp(origins[i].source, source) == 0) {
            origins[i].from = from;
            return;
        }
    origin *n = realloc(origins, (norigins + 1) * sizeof *n);
    if (!n)
        return;
    origins = n;
    if ((origins[norigins].source = strdup(source)))
        origins[norigins++].from = from;
}

const char *gw_origin(const char *source) {
#ifdef GW_HAVE_ETCD
    gw_etcd_source_info ei;
    if (G.etcd && !gw_etcd_source_info_get(G.etcd, source, &ei))
        return "etcd";
#endif
    for (size_t i = 0; i < norigins; i++)
        if (strcmp(origins[i].source, source) == 0)
            return origins[i].from;
    return NULL;
}

/* ---- the state file ---- */

static int write_durable(const char *path, const char *data, size_t len,
                         char *msg, size_t cap) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const char *step = "open";
    if (fd < 0)
        goto fail;
    step = "write";
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close(fd);
            goto fail;
        }
        off += (size_t)n;
    }
    step = "fsync";
    if (fsync(fd)) {
        close(fd);
        goto fail;
    }
    step = "close";
    if (close(fd))
        goto fail;
    step = "rename";
    if (rename(tmp, path))
        goto fail;
    char dir[4096];
    gw_copy_str(dir, sizeof dir, path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) { /* the rename itself durable */
        fsync(dfd);
        close(dfd);
    }
    return 0;
fail:
    snprintf(msg, cap, "%s of %s failed: %s", step, tmp, strerror(errno));
    unlink(tmp);
    return -1;
}

/* Save v[0..n) as the state: with --state, written durably; else
 * nothing to do. */
static int save(const kept *v, size_t n, char *msg, size_t cap) {
    if (!G.cfg.state_file)
        return 0;
    gw_buf b = {0};
    gw_buf_adds(&b, "{\"format\":\"mini-gateway-state/1\",\"changes\":[");
    for (size_t i = 0; i < n; i++) {
        const kept *k = &v[i];
        gw_buf_printf(&b, "%s\n{\"change\":\"%s\",\"%s\":", i ? "," : "",
                      kind_names[k->kind],
                      k->kind == K_INSTANCES ? "service" : "source");
        gw_buf_json_str(&b, k->name, strlen(k->name));
        if (k->id) {
            gw_buf_adds(&b, ",\"route\":");
            gw_buf_json_str(&b, k->id, strlen(k->id));
        }
        if (k->version) {
            gw_buf_adds(&b, ",\"version\":");
            gw_buf_json_str(&b, k->version, strlen(k->version));
        }
        gw_buf_printf(&b, ",\"at_ms\":%lld", (long long)k->at_ms);
        if (k->body) {
            gw_buf_adds(&b, ",\"body\":");
            gw_buf_add(&b, k->body, k->len);
        }
        gw_buf_adds(&b, "}");
    }
    gw_buf_adds(&b, "]}\n");
    int rc = b.failed ? (snprintf(msg, cap, "out of memory"), -1)
                      : write_durable(G.cfg.state_file, b.p, b.len, msg, cap);
    gw_buf_free(&b);
    return rc;
}

/* ---- noting an admin change ---- */

/* The live routes of `source` as a document of `version`. */
static char *live_document(const char *source, const char *version,
                           size_t *len) {
    gw_buf b = {0};
    gw_buf_adds(&b, "{\"version\":");
    gw_buf_json_str(&b, version, strlen(version));
    gw_buf_adds(&b, ",\"routes\":[");
    sy_snapshot *s = sy_router_acquire(G.router);
    size_t n = sy_snapshot_route_count(s), k = 0;
    for (size_t i = 0; i < n; i++) {
        const sy_route *r = sy_snapshot_route_at(s, i);
        const char *src = NULL, *def = sy_route_canonical(r);
        sy_snapshot_find_route(s, sy_route_id(r), &src);
        if (!src || strcmp(src, source) != 0)
            continue;
        if (!def)
            b.failed = true;
        else {
            gw_buf_adds(&b, k++ ? "," : "");
            gw_buf_adds(&b, def);
        }
    }
    sy_snapshot_release(s);
    gw_buf_adds(&b, "]}");
    if (b.failed) {
        gw_buf_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

/* The version of `source` now live ("" when none). */
static void live_version(const char *source, char *out, size_t cap) {
    out[0] = 0;
    size_t n = sy_router_source_count(G.router);
    for (size_t i = 0; i < n; i++) {
        sy_source_status st;
        if (!sy_router_source_status(G.router, i, &st, NULL) &&
            strcmp(st.name, source) == 0)
            gw_copy_str(out, cap, st.version);
    }
}

/* The admin change under way, between gw_state_begin and gw_state_end
 * (main thread only, one at a time). */
static struct {
    bool active;  /* begun, not ended */
    bool keeping; /* the change is kept */
    kept k;       /* what is kept of it (a rollback's filled at the end) */
    kept *next;   /* the list with k, saved (NULL for a rollback) */
    size_t n;
    char *undo; /* a rollback: the source's document before it */
    size_t undo_len;
} pending;

static void pending_clear(void) {
    kept_free(&pending.k);
    free(pending.next);
    free(pending.undo);
    memset(&pending, 0, sizeof pending);
}

/* What of the change is kept, but a rollback's version and routes (known
 * once it is committed). False: out of memory. */
static bool describe(kept *k, const char *method, char *const *seg, int ns,
                     bool inst, const char *body, size_t len) {
    if (inst)
        k->kind = K_INSTANCES;
    else if (strcmp(seg[0], "rollback") == 0)
        k->kind = K_ROLLBACK;
    else if (ns == 2)
        k->kind = K_DOCUMENT;
    else if (ns == 3)
        k->kind = strcmp(method, "DELETE") == 0 ? K_REMOVE : K_UPSERT;
    else
        k->kind = strcmp(seg[3], "enable") == 0 ? K_ENABLE : K_DISABLE;
    k->at_ms = gw_wall_ms();
    bool ok = (k->name = strdup(seg[1])) != NULL;
    if (ns >= 3 && !inst && k->kind != K_ROLLBACK)
        ok &= (k->id = strdup(seg[2])) != NULL;
    if (k->kind == K_DOCUMENT || k->kind == K_UPSERT ||
        k->kind == K_INSTANCES) {
        if ((k->body = malloc(len + 1))) {
            memcpy(k->body, body, len);
            k->body[len] = 0;
            k->len = len;
        }
        ok &= k->body != NULL;
    }
    return ok;
}

int gw_state_begin(const char *method, char *const *seg, int ns,
                   const char *body, size_t len, char *msg, size_t cap) {
    pending_clear();
    pending.active = true;
    if (ns < 2)
        return 0;
    bool inst = strcmp(seg[0], "instances") == 0;
    bool file = inst ? gw_config_service_file(seg[1]) != NULL
                     : gw_config_source_file(seg[1]) != NULL;
    /* kept: an override of a file's (nothing else would keep it), or,
     * with --state, any change */
    if (!(file ? G.cfg.admin_overrides_files : G.cfg.state_file != NULL))
        return 0;
    pending.keeping = true;
    bool ok = describe(&pending.k, method, seg, ns, inst, body, len);
    if (ok && pending.k.kind == K_ROLLBACK) { /* saved at the end; what
                                                 undoes it if it cannot be */
        char version[128];
        live_version(seg[1], version, sizeof version);
        ok = (pending.undo =
                  live_document(seg[1], version, &pending.undo_len)) != NULL;
    } else if (ok) {
        ok = (pending.next = list_with(&pending.k, &pending.n)) != NULL;
    }
    if (!ok) {
        pending_clear();
        snprintf(msg, cap,
                 "out of memory keeping the change of %s; "
                 "nothing changed",
                 seg[1]);
        return -1;
    }
    if (pending.next && save(pending.next, pending.n, msg, cap)) {
        gw_log("--state %s: %s; the change is refused", G.cfg.state_file, msg);
        pending_clear();
        return -1;
    }
    return 0;
}

/* A rollback committed: kept with its version and routes, and saved;
 * when it cannot be, undone (its source's document before it applied
 * again). */
static int end_rollback(char *msg, size_t cap) {
    kept *k = &pending.k;
    char version[128];
    live_version(k->name, version, sizeof version);
    bool ok = (k->version = strdup(version)) != NULL &&
              (k->body = live_document(k->name, version, &k->len)) != NULL &&
              (pending.next = list_with(k, &pending.n)) != NULL;
    if (!ok)
        snprintf(msg, cap, "out of memory keeping the change of %s", k->name);
    if (ok && !save(pending.next, pending.n, msg, cap))
        return 0;
    sy_change_set *cs = NULL;
    sy_error err;
    int rc = sy_change_set_new(G.router, &cs, &err);
    if (!rc)
        rc = sy_change_set_apply(cs, k->name, pending.undo, pending.undo_len,
                                 &err);
    if (!rc)
        rc = gw_commit(cs, "--state: undo of a rollback not saved", &err);
    sy_change_set_free(cs);
    size_t at = strlen(msg);
    snprintf(msg + at, cap - at, "%s",
             rc ? "; the rollback is live but not kept (a restart would "
                  "lose it)"
                : "; the rollback was undone");
    gw_log("--state %s: %s", G.cfg.state_file ? G.cfg.state_file : "", msg);
    return -1;
}

int gw_state_end(bool committed, const char *source, char *msg, size_t cap) {
    int rc = 0;
    if (committed && source)
        gw_origin_set(source, "admin");
    if (!pending.active || !pending.keeping) {
        pending_clear();
        return 0;
    }
    if (!committed) { /* the file as it was */
        if (pending.next && save(list, nkept, msg, cap))
            gw_log("--state %s: %s; it holds a change that was refused "
                   "(not replayed at start)",
                   G.cfg.state_file, msg);
    } else if (pending.k.kind != K_ROLLBACK || !(rc = end_rollback(msg, cap))) {
        adopt(pending.next, pending.n, &pending.k);
        pending.next = NULL;
        pending.k = (kept){0}; /* its strings are the list's now */
    }
    pending_clear();
    return rc;
}

/* ---- staging kept changes ---- */

/* Stage one kept change into cs. */
static int stage_one(sy_change_set *cs, const kept *o, sy_error *err) {
    int rc = 0;
    switch (o->kind) {
    case K_DOCUMENT:
        rc = gw_document_check(o->body, o->len, false, err);
        if (!rc)
            rc = sy_change_set_apply(cs, o->name, o->body, o->len, err);
        break;
    case K_UPSERT:
        rc = gw_document_check(o->body, o->len, true, err);
        if (!rc)
            rc = sy_change_set_upsert_route(cs, o->name, o->body, o->len, err);
        break;
    case K_REMOVE: rc = sy_change_set_remove_route(cs, o->id, err); break;
    case K_ENABLE:
    case K_DISABLE:
        rc = sy_change_set_set_route_enabled(cs, o->id, o->kind == K_ENABLE,
                                             err);
        break;
    case K_INSTANCES:
        rc = gw_instances_stage(cs, o->body, o->len, o->name, err);
        break;
    case K_ROLLBACK:
        rc = sy_change_set_rollback(cs, o->name, o->version, err);
        if (rc == SY_ENOTFOUND && o->body) /* out of the history by now:
                                              its routes as they were */
            rc = sy_change_set_apply(cs, o->name, o->body, o->len, err);
        break;
    default: break;
    }
    if (rc == SY_ENOTFOUND && o->id)
        rc = 0; /* the route is not there: nothing to remove or switch */
    return rc;
}

static int stage_kept(void *data, sy_change_set *cs, sy_error *err) {
    return stage_one(cs, data, err);
}

int gw_overrides_stage(sy_change_set *cs, const char *source, sy_error *err) {
    if (!G.cfg.admin_overrides_files)
        return 0;
    for (size_t i = 0; i < nkept; i++) {
        const kept *o = &list[i];
        bool mine =
            source ? o->kind != K_INSTANCES && strcmp(o->name, source) == 0
                   : o->kind == K_INSTANCES && gw_config_service_file(o->name);
        if (!mine)
            continue;
        int rc = stage_one(cs, o, err);
        if (rc)
            return rc;
    }
    return 0;
}

void gw_overrides_json(gw_buf *b) {
    gw_buf_adds(b, ",\"overrides\":[");
    size_t n = 0;
    for (size_t i = 0; i < nkept; i++) {
        const kept *o = &list[i];
        const char *file = owner_file(o);
        if (!file || !G.cfg.admin_overrides_files)
            continue; /* an admin source's change, kept for --state */
        bool inst = o->kind == K_INSTANCES;
        gw_buf_printf(b, "%s{\"%s\":", n++ ? "," : "",
                      inst ? "service" : "source");
        gw_buf_json_str(b, o->name, strlen(o->name));
        gw_buf_adds(b, ",\"route\":");
        if (o->id)
            gw_buf_json_str(b, o->id, strlen(o->id));
        else
            gw_buf_adds(b, "null");
        gw_buf_adds(b, ",\"file\":");
        gw_buf_json_str(b, file, strlen(file));
        gw_buf_printf(b, ",\"change\":\"%s\",\"at_ms\":%lld}",
                      kind_names[o->kind], (long long)o->at_ms);
    }
    gw_buf_adds(b, "]");
}

void gw_state_json(gw_buf *b) {
    gw_buf_adds(b, ",\"state\":");
    if (!G.cfg.state_file) {
        gw_buf_adds(b, "null");
        return;
    }
    gw_buf_adds(b, "{\"file\":");
    gw_buf_json_str(b, G.cfg.state_file, strlen(G.cfg.state_file));
    gw_buf_printf(b,
                  ",\"changes\":%zu,\"replayed\":%zu,\"not_replayed\":%zu,"
                  "\"errors\":[",
                  nkept, replayed, not_replayed);
    for (size_t i = 0; i < STATE_ERRORS && replay_errors[i]; i++) {
        gw_buf_adds(b, i ? "," : "");
        gw_buf_json_str(b, replay_errors[i], strlen(replay_errors[i]));
    }
    gw_buf_adds(b, "]}");
}

/* ---- loading and replaying the state file ---- */

/* "FILE: PATH: MSG" for the start's error. */
static int bad(const char *path, const char *msg) {
    gw_log("--state %s: %s%s%s; the gateway does not start", G.cfg.state_file,
           path, path[0] ? ": " : "", msg);
    return -1;
}

/* One entry of "changes" into k; 0, or -1 after the located message. */
static int parse_entry(const cJSON *e, size_t i, kept *k) {
    char path[96];
    snprintf(path, sizeof path, "changes[%zu]", i);
    if (!cJSON_IsObject(e))
        return bad(path, "must be an object");
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(e, "change");
    int kind = -1;
    for (int j = 0; cJSON_IsString(ch) && j < K_COUNT; j++)
        if (strcmp(ch->valuestring, kind_names[j]) == 0)
            kind = j;
    snprintf(path, sizeof path, "changes[%zu].change", i);
    if (kind < 0)
        return bad(path, "must be one of document, upsert, remove, enable, "
                         "disable, instances, rollback");
    k->kind = (kept_kind)kind;
    const char *nkey = kind == K_INSTANCES ? "service" : "source";
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, nkey);
    snprintf(path, sizeof path, "changes[%zu].%s", i, nkey);
    if (!cJSON_IsString(name) || !name->valuestring[0])
        return bad(path, "must be a non-empty string");
    k->name = strdup(name->valuestring);
    bool needs_id = kind == K_UPSERT || kind == K_REMOVE || kind == K_ENABLE ||
                    kind == K_DISABLE;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "route");
    snprintf(path, sizeof path, "changes[%zu].route", i);
    if (needs_id && (!cJSON_IsString(id) || !id->valuestring[0]))
        return bad(path, "must be a non-empty string for this change");
    if (needs_id)
        k->id = strdup(id->valuestring);
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(e, "version");
    snprintf(path, sizeof path, "changes[%zu].version", i);
    if (kind == K_ROLLBACK && !cJSON_IsString(ver))
        return bad(path, "must be a string for a rollback");
    if (kind == K_ROLLBACK)
        k->version = strdup(ver->valuestring);
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(e, "at_ms");
    snprintf(path, sizeof path, "changes[%zu].at_ms", i);
    if (at && !cJSON_IsNumber(at))
        return bad(path, "must be a number");
    k->at_ms = at ? (int64_t)at->valuedouble : 0;
    const cJSON *body = cJSON_GetObjectItemCaseSensitive(e, "body");
    snprintf(path, sizeof path, "changes[%zu].body", i);
    bool needs_body = kind == K_DOCUMENT || kind == K_UPSERT ||
                      kind == K_INSTANCES || kind == K_ROLLBACK;
    if (needs_body) {
        bool shape = kind == K_UPSERT ? cJSON_IsObject(body)
                     : kind == K_INSTANCES
                         ? cJSON_IsArray(body)
                         : cJSON_IsObject(body) || cJSON_IsArray(body);
        if (!shape)
            return bad(path, kind == K_UPSERT ? "must be a route object"
                             : kind == K_INSTANCES
                                 ? "must be an array of instances"
                                 : "must be a route document");
        k->body = cJSON_PrintUnformatted(body);
        k->len = k->body ? strlen(k->body) : 0;
    }
    if (!k->name || (needs_id && !k->id) || (needs_body && !k->body) ||
        (kind == K_ROLLBACK && !k->version))
        return bad(path, "out of memory");
    return 0;
}

/* Replay one parsed change as one change set; 0, or the error. */
static int replay_one(const kept *o, sy_error *err) {
    const char *file = owner_file(o);
    memset(err, 0, sizeof *err);
    err->code = SY_EINVAL;
    if (file && !G.cfg.admin_overrides_files) {
        snprintf(err->message, sizeof err->message,
                 "%s %s now comes from the file %s (start with "
                 "--admin-overrides-files to keep admin changes over it)",
                 o->kind == K_INSTANCES ? "service" : "source", o->name, file);
        return SY_EINVAL;
    }
    if (!file && G.cfg.etcd_url) {
        snprintf(err->message, sizeof err->message,
                 "with --etcd, admin changes of %s are written through to "
                 "etcd, not kept here",
                 o->name);
        return SY_EINVAL;
    }
    memset(err, 0, sizeof *err);
    int rc = 0;
    /* a change of a source not known yet registers it only when it
     * passes (as the admin API's): a failed one leaves no empty source */
    if ((o->kind == K_DOCUMENT || o->kind == K_UPSERT ||
         o->kind == K_ROLLBACK) &&
        !gw_source_exists(o->name)) {
        rc = gw_try_new_source(o->name, stage_kept, (void *)o, err);
        if (!rc)
            rc = sy_router_add_source(G.router, o->name, err);
    }
    sy_change_set *cs = NULL;
    if (!rc)
        rc = sy_change_set_new(G.router, &cs, err);
    if (!rc)
        rc = stage_one(cs, o, err);
    char what[512];
    snprintf(what, sizeof what, "state: %s %s%s%s", kind_names[o->kind],
             o->name, o->id ? "/" : "", o->id ? o->id : "");
    if (!rc && sy_change_set_count(cs))
        rc = gw_commit(cs, what, err);
    sy_change_set_free(cs);
    return rc;
}

/* The state written once at start, so that a FILE the gateway cannot
 * write stops the start instead of every admin change later. */
static int saved_at_start(void) {
    char m[512];
    return save(list, nkept, m, sizeof m) ? bad("", m) : 0;
}

int gw_state_load(void) {
    bool etcd = G.cfg.etcd_url != NULL;
    if (!G.cfg.state_file) {
        if (G.cfg.admin_port > 0 && !G.cfg.demo &&
            (!etcd || G.cfg.admin_overrides_files))
            gw_log("warning: admin changes%s are kept in memory only: a "
                   "restart loses them (--state FILE keeps them)",
                   etcd ? " over files" : "");
        return 0;
    }
    size_t len;
    char *text = gw_read_file(G.cfg.state_file, &len);
    if (!text) {
        if (errno == ENOENT) {
            gw_log("--state %s: no such file yet; admin changes will be "
                   "kept in it",
                   G.cfg.state_file);
            return saved_at_start();
        }
        return bad("", strerror(errno));
    }
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!doc) {
        size_t off = end ? (size_t)(end - text) : 0, line = 1;
        for (size_t i = 0; i < off && i < len; i++)
            line += text[i] == '\n';
        char m[128];
        snprintf(m, sizeof m, "JSON syntax error at offset %zu (line %zu)", off,
                 line);
        free(text);
        return bad("", m);
    }
    free(text);
    const cJSON *changes = cJSON_GetObjectItemCaseSensitive(doc, "changes");
    if (!cJSON_IsObject(doc) || !cJSON_IsArray(changes)) {
        cJSON_Delete(doc);
        return bad("changes", "the state file must be an object with a "
                              "\"changes\" array");
    }
    size_t n = (size_t)cJSON_GetArraySize(changes);
    kept *parsed = calloc(n ? n : 1, sizeof *parsed);
    int rc = parsed ? 0 : bad("", "out of memory");
    size_t i = 0;
    for (const cJSON *e = changes->child; !rc && e; e = e->next, i++)
        rc = parse_entry(e, i, &parsed[i]);
    cJSON_Delete(doc);
    if (rc) { /* nothing replayed: the start fails */
        for (size_t j = 0; j < n; j++)
            kept_free(&parsed[j]);
        free(parsed);
        return -1;
    }
    for (i = 0; i < n; i++) {
        kept *o = &parsed[i];
        sy_error err;
        int r = replay_one(o, &err);
        if (r) {
            char m[1024];
            snprintf(m, sizeof m,
                     "changes[%zu] (%s %s%s%s) not replayed: "
                     "%s%s%s",
                     i, kind_names[o->kind], o->name, o->id ? "/" : "",
                     o->id ? o->id : "", err.path, err.path[0] ? ": " : "",
                     err.message);
            gw_log("--state %s: %s", G.cfg.state_file, m);
            if (not_replayed < STATE_ERRORS)
                replay_errors[not_replayed] = strdup(m);
            not_replayed++;
            kept_free(o);
            continue;
        }
        gw_log("--state %s: replayed changes[%zu] (%s %s%s%s)",
               G.cfg.state_file, i, kind_names[o->kind], o->name,
               o->id ? "/" : "", o->id ? o->id : "");
        replayed++;
        if (o->kind != K_INSTANCES)
            gw_origin_set(o->name, "state");
        if (!keep(o))
            gw_log("--state: out of memory keeping changes[%zu]", i);
    }
    free(parsed);
    if (not_replayed) { /* the file as it was, for the operator */
        char copy[4096], m[512];
        snprintf(copy, sizeof copy, "%s.not-replayed", G.cfg.state_file);
        text = gw_read_file(G.cfg.state_file, &len);
        int rc = text ? write_durable(copy, text, len, m, sizeof m)
                      : (snprintf(m, sizeof m, "cannot read it again"), -1);
        free(text);
        if (rc) /* rewritten below, they would be gone: stop here */
            return bad("", m);
        gw_log("--state: %zu change(s) not replayed; the file as it was "
               "is kept in %s",
               not_replayed, copy);
    }
    return saved_at_start(); /* compacted, and FILE writable */
}

void gw_state_free(void) {
    for (size_t i = 0; i < nkept; i++)
        kept_free(&list[i]);
    free(list);
    list = NULL;
    nkept = 0;
    for (size_t i = 0; i < norigins; i++)
        free(origins[i].source);
    free(origins);
    origins = NULL;
    norigins = 0;
    for (size_t i = 0; i < STATE_ERRORS; i++) {
        free(replay_errors[i]);
        replay_errors[i] = NULL;
    }
}
