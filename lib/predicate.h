/*
 * predicate.h - compiling each predicate kind of route model section 4
 * (and host-registered ones) from its definition entry, and evaluating it
 * against a request. Evaluation reads only the request, the per-request
 * state in sy_eval and the immutable compiled predicate.
 */
#ifndef SY_PREDICATE_H
#define SY_PREDICATE_H

#include "compile_env.h"
#include "pattern.h"

/* Weight: position of a route inside its group, computed per snapshot. */
typedef struct sy_weight_slot {
    uint32_t group; /* group number within the snapshot */
    double lo, hi;  /* owned range of [0,1) */
} sy_weight_slot;

/*
 * Per-request evaluation state, owned by the match context and prepared
 * once per request before any predicate runs.
 */
typedef struct sy_eval {
    const sy_request *req;
    const sy_segments *path; /* split request path */
    const sy_segments *host; /* host labels (port stripped if option) */
    sy_str host_str;         /* host as matched (port stripped if option) */
    int64_t now_ms;
    /* Weight: the weight slot of the route being tested, or NULL. */
    const sy_weight_slot *weight;
    /* captures of the route being tested (reset per route) */
    sy_capture *caps;
    size_t ncaps;
    size_t caps_cap;
    pcre2_match_data *md;
    sy_arena *scratch;
} sy_eval;

typedef enum sy_pred_kind {
    SY_PK_PATH,
    SY_PK_HOST,
    SY_PK_METHOD,
    SY_PK_HEADER,
    SY_PK_QUERY,
    SY_PK_COOKIE,
    SY_PK_TIME,
    SY_PK_REMOTE_ADDR,
    SY_PK_XFF,
    SY_PK_WEIGHT,
    SY_PK_HOST_FACTORY
} sy_pred_kind;

typedef struct sy_pred sy_pred;

/*
 * Compile one predicate entry. `path` is the entry's JSON path
 * ("routes[3].predicates[1]"); errors name "<path>.args.<field>" and, for
 * patterns and regexes, the offset inside the value.
 */
int sy_pred_compile(const sy_def_entry *e, const sy_compile_env *env,
                    const char *path, sy_pred **out, sy_error *err);
void sy_pred_free(sy_pred *p, const sy_alloc *a);
bool sy_pred_test(const sy_pred *p, sy_eval *ev);

sy_pred_kind sy_pred_get_kind(const sy_pred *p);
/* Path / Host: the patterns, in order. */
size_t sy_pred_pattern_count(const sy_pred *p);
/* A Path (Host) predicate whose every pattern is all literal segments
 * (labels): what the index can prove by itself. */
bool sy_pred_all_literal(const sy_pred *p);
const sy_pattern *sy_pred_pattern(const sy_pred *p, size_t i);
/* Method: bit mask (1 << sy_method_bit(...)) of accepted methods; bit 31
 * set when any non-standard method is listed. */
uint32_t sy_pred_method_mask(const sy_pred *p);
/* Bit of a standard method (GET=0, HEAD, POST, PUT, PATCH, DELETE,
 * OPTIONS, TRACE, CONNECT=8), or 31 for anything else. */
int sy_method_bit(sy_str method);
/* The name of a standard method bit ("GET"...), or NULL (bit 31 too). */
const char *sy_method_name(int bit);
/* Method: the non-standard methods listed (bit 31), in order. */
size_t sy_pred_method_other_count(const sy_pred *p);
const char *sy_pred_method_other(const sy_pred *p, size_t i);
/* Weight: group name and weight. */
const char *sy_pred_weight_group(const sy_pred *p);
uint32_t sy_pred_weight_value(const sy_pred *p);
/* Largest regex group count + 1 and capture count, for sizing scratch. */
uint32_t sy_pred_max_groups(const sy_pred *p);
uint32_t sy_pred_var_count(const sy_pred *p);

/* The Weight draw for a group: deterministic in [0,1) from seed and group. */
double sy_weight_draw(uint64_t seed, uint32_t group);

/* What a compiled predicate object takes in its route's arena (a list
 * of several patterns is 8 bytes a pattern more): for sizing the arena
 * ahead (def_route.c). */
#define SY_PRED_OBJECT_BYTES 40

#endif
