/*
 * predicate.h - compiling each predicate kind of route model section 4
 * (and host-registered ones) from its definition entry, and evaluating it
 * against a request. Evaluation reads only the request, the per-request
 * state in sy__eval and the immutable compiled predicate.
 */
#ifndef SY_PREDICATE_H
#define SY_PREDICATE_H

#include "route/compile_env.h"
#include "route/pattern.h"

/* Weight: position of a route inside its group, computed per snapshot. */
typedef struct sy__weight_slot {
    uint32_t group; /* group number within the snapshot */
    double lo, hi;  /* owned range of [0,1) */
} sy__weight_slot;

/*
 * Per-request evaluation state, owned by the match context and prepared
 * once per request before any predicate runs.
 */
typedef struct sy__eval {
    const sy_request *req;
    const sy__segments *path; /* split request path */
    const sy__segments *host; /* host labels (port stripped if option) */
    sy_str host_str;          /* host as matched (port stripped if option) */
    int64_t now_ms;
    /* Weight: the weight slot of the route being tested, or NULL. */
    const sy__weight_slot *weight;
    /* captures of the route being tested (reset per route) */
    sy__capture *caps;
    size_t ncaps;
    size_t caps_cap;
    pcre2_match_data *md;
    sy__arena *scratch;
} sy__eval;

typedef enum sy__pred_kind {
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
} sy__pred_kind;

typedef struct sy__pred sy__pred;

/*
 * Compile one predicate entry. `path` is the entry's JSON path
 * ("routes[3].predicates[1]"); errors name "<path>.args.<field>" and, for
 * patterns and regexes, the offset inside the value.
 */
int sy__pred_compile(const sy__def_entry *e, const sy__compile_env *env,
                     const char *path, sy__pred **out, sy_error *err);
/* The same into the caller's slot of SY_PRED_OBJECT_BYTES (a route's
 * array of them, in env->arena, which must be set: what the predicate
 * holds goes there too, from the top of `top` first when not NULL:
 * sy__compile_obj): freed with sy__pred_free, which leaves the slot's
 * memory to the arena. On failure the slot is zeroed, nothing to free. */
int sy__pred_compile_into(const sy__def_entry *e, const sy__compile_env *env,
                          sy__arena_chunk *top, const char *path, sy__pred *p,
                          sy_error *err);
void sy__pred_free(sy__pred *p, const sy__alloc *a);
bool sy__pred_test(const sy__pred *p, sy__eval *ev);
/* sy__pred_test for a literal Path, or a Method when `mbit` (the
 * request's sy__method_bit) is below 31: 1 holds, 0 fails; -1 for any
 * other predicate (left untested). Reads no budget. */
int sy__pred_test_quick(const sy__pred *p, const sy__eval *ev, int mbit);
/* A Host predicate's literal (sy__pred_note_literal) against the host as
 * matched, unsplit: 1 holds, 0 fails, -1 undecided (not a literal, or a
 * host longer than it: its labels decide). */
int sy__pred_test_host_flat(const sy__pred *p, sy_str host);

sy__pred_kind sy__pred_get_kind(const sy__pred *p);
/* Path / Host: the patterns, in order. */
size_t sy__pred_pattern_count(const sy__pred *p);
/* A Path (Host) predicate whose every pattern is all literal segments
 * (labels): what the index can prove by itself. */
bool sy__pred_all_literal(const sy__pred *p);
/* A Path of one all-literal pattern (perhaps then a last "**") that the
 * matcher compares with a plain path's text (predicate_quick.h,
 * sy__pred_lit_flat). */
bool sy__pred_path_lit(const sy__pred *p);
const sy__pattern *sy__pred_pattern(const sy__pred *p, size_t i);
/* Method: bit mask (1 << sy__method_bit(...)) of accepted methods; bit 31
 * set when any non-standard method is listed. */
uint32_t sy__pred_method_mask(const sy__pred *p);
/* Bit of a standard method (GET=0, HEAD, POST, PUT, PATCH, DELETE,
 * OPTIONS, TRACE, CONNECT=8), or 31 for anything else. */
int sy__method_bit(sy_str method);
/* The name of a standard method bit ("GET"...), or NULL (bit 31 too). */
const char *sy__method_name(int bit);
/* Method: the non-standard methods listed (bit 31), in order. */
size_t sy__pred_method_other_count(const sy__pred *p);
const char *sy__pred_method_other(const sy__pred *p, size_t i);
/* Weight: group name and weight. */
const char *sy__pred_weight_group(const sy__pred *p);
uint32_t sy__pred_weight_value(const sy__pred *p);
/* Largest regex group count + 1 and capture count, for sizing scratch. */
uint32_t sy__pred_max_groups(const sy__pred *p);
uint32_t sy__pred_var_count(const sy__pred *p);

/* Containment (predicate_cover.c), for the shadowed-route check. A Path
 * (Host) predicate q holds for every request b holds for: each pattern of
 * b (only pattern `only`, unless SIZE_MAX) is contained in one of q's
 * (sy__pattern_covers_path / _host). False when unsure. */
bool sy__pred_patterns_cover(const sy__pred *q, const sy__pred *b, size_t only,
                             const sy__alloc *alloc);
/* False for a Path predicate none of whose patterns can match a path. */
bool sy__pred_can_match_path(const sy__pred *p);
/* After / Before / Between: true and now must lie in (lo, hi) (INT64_MIN /
 * INT64_MAX for a missing bound); false for other kinds. */
bool sy__pred_time_window(const sy__pred *p, int64_t *lo, int64_t *hi);

/* The Weight draw for a group: deterministic in [0,1) from seed and group. */
double sy__weight_draw(uint64_t seed, uint32_t group);

/* What a compiled predicate object takes in its route's arena (a list
 * of several patterns is 8 bytes a pattern more): for sizing the arena
 * ahead (def_route.c). */
#define SY_PRED_OBJECT_BYTES 24

#endif
