/*
 * etcd_decode.h - what the etcd source reads out of etcd's answers: the
 * base64 of keys and values, watch responses (one JSON line each, read in
 * place without a copy of their values), range answers, non-200 answers,
 * the mapping from keys to changes, and instance values.
 *
 * Key layout under PREFIX: PREFIX "routes/<source>" and
 * PREFIX "instances/<service>/<id>"; other keys are not changes.
 *
 * Pure functions of their input (no loop, no router): the source
 * (etcd_source.c) decides what a decoded answer means. Any thread.
 */
#ifndef GW_ETCD_DECODE_H
#define GW_ETCD_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <switchyard.h>

char *etcd_strdup(const char *s);
char *etcd_strndup(const char *s, size_t n);
/* Room for element n of the array v of *cap elements of `size` bytes: v
 * itself, or a larger copy (*cap doubled, `first` when empty); NULL when
 * out of memory (v and *cap unchanged). */
void *etcd_grow(void *v, size_t *cap, size_t n, size_t size, size_t first);

/* Standard base64 with padding; malloc'd, NUL-terminated. */
char *etcd_b64_encode(const char *src, size_t n);
/* Decode base64 (padding optional) into a new buffer; malloc'd and
 * NUL-terminated, *n gets the length. NULL on a bad character, a dangling
 * sextet or no memory. */
char *etcd_b64_decode_n(const char *src, size_t len, size_t *n);

/* A key change to apply (from a watch event or a full read). */
typedef struct etcd_change {
    bool is_route;
    bool del;
    char *name; /* source, or service */
    char *id;   /* instance id */
    char *key;
    char *value;
    size_t len;
    bool borrowed; /* value points into a watch line: not freed here */
    int64_t mod_revision;
    int64_t create_revision;
} etcd_change;

typedef struct etcd_change_list {
    etcd_change *v;
    size_t n, cap;
} etcd_change_list;

void etcd_change_free(etcd_change *c);
void etcd_changes_clear(etcd_change_list *l);
/* Append *c (the list takes it); false when out of memory (c untouched). */
bool etcd_changes_push(etcd_change_list *l, etcd_change *c);

/* The key prefix the changes are read under. */
typedef struct etcd_keys {
    const char *prefix;
    size_t prefix_len;
    /* a key under the prefix that is no route or instance key: told
     * (why: what it lacks), then left alone; NULL: not told */
    void (*on_other)(void *data, const char *key, size_t key_len, bool del,
                     const char *why);
    void *data;
} etcd_keys;

/* One line of the watch stream, decoded. */
typedef enum etcd_watch_kind {
    ETCD_WATCH_ERROR,    /* not a result: `message` says why */
    ETCD_WATCH_CANCELED, /* `compact_revision` > 0: that far compacted */
    ETCD_WATCH_CREATED,  /* `cluster_id`, `revision`: etcd's now */
    ETCD_WATCH_EVENTS,   /* `changes` after `applied`, up to `top` */
    ETCD_WATCH_PROGRESS  /* no events: etcd is at `revision` (a progress
                            notification) */
} etcd_watch_kind;

typedef struct etcd_watch_msg {
    etcd_watch_kind kind;
    char message[512];
    int64_t compact_revision;
    char cluster_id[32];
    int64_t revision; /* the header's */
    /* EVENTS: the events newer than `applied`, in order; their values are
     * decoded in place in the line and borrowed (the line must outlive
     * the list); `top` is the newest mod_revision among them. */
    etcd_change_list changes;
    int64_t top;
} etcd_watch_msg;

/* Decode one watch line (changed in place) into *m. `applied`: the
 * revision the router reflects; older events are left out. Returns 0, or
 * -1 when memory ran out (*m then holds nothing to apply: a change was
 * lost, so the caller must not move past `applied`). */
int etcd_decode_watch(char *line, size_t n, const etcd_keys *keys,
                      int64_t applied, etcd_watch_msg *m);

/* One page of a range answer, decoded. */
typedef struct etcd_range_page {
    bool has_header;
    int64_t revision; /* the header's */
    char cluster_id[32];
    bool more;
    char *next_b64; /* with `more`: where the next page starts (malloc'd) */
} etcd_range_page;

/* Decode a range answer; its kvs under the prefix are appended to `into`
 * (owning their values). Returns 0, -1 for a malformed answer (message in
 * err), or -2 when memory ran out. */
int etcd_decode_range(const char *body, size_t n, const etcd_keys *keys,
                      etcd_change_list *into, etcd_range_page *page, char *err,
                      size_t err_len);

/* The error of a non-200 answer: "HTTP <status>: <etcd's message>" in out
 * and etcd's gRPC code in *code (-1 when none). */
void etcd_decode_answer_error(int status, const char *body, size_t n, char *out,
                              size_t cap, int *code);

/* One instance value (an entry of the instances file format) as the
 * router takes it; `inst` points into `json` and `md`. */
typedef struct etcd_instance {
    cJSON *json; /* NULL: no valid value */
    sy_instance inst;
    sy_kv *md;
} etcd_instance;

/* Parse json into *out for instance `id` (the key's; an "id" member must
 * equal it), replacing its value only on success. -1 with a located
 * message in err, or -2 when memory ran out (not the value's fault). */
int etcd_decode_instance(const char *id, const char *json, size_t len,
                         etcd_instance *out, char *err, size_t err_len);
void etcd_instance_clear(etcd_instance *v);

#endif /* GW_ETCD_DECODE_H */
