/*
 * router_int.h - the router's layout (internal), shared by the router's
 * modules: router.c (sources, commits, readers), change_set.c (staging),
 * router_status.c (status, metrics, Prometheus text, passive-health
 * outcomes) and commit.c (running a commit).
 */
#ifndef SY_ROUTER_INT_H
#define SY_ROUTER_INT_H

#include "route/route.h"
#include "snapshot/publish.h"

#include <pthread.h>

#define SY_MAX_SOURCES 256
#define SY_MAX_SOURCE_NAME 127

/* A document kept for rollback (the last `history` applied per source):
 * not its text but what its apply made of it, the compiled routes (a
 * reference each: unchanged routes are the live objects, so a kept
 * document costs 8 bytes a route (12 when invalid routes left holes in
 * its positions) plus the routes only it still holds)
 * with their positions in its routes array, and what a rollback reports
 * again: its version, checksum and (lenient) issues. */
typedef struct sy__history_entry {
    char *version; /* may be NULL */
    uint64_t checksum;
    struct sy_route **routes; /* one block with positions */
    uint32_t *positions;      /* NULL: 0, 1, ... count - 1 */
    size_t count;
    sy_error *issues;
    size_t issue_count;
    bool envelope; /* {"version", "routes"}: error paths "routes[i]" */
} sy__history_entry;

/* Drop a kept document's references and memory (router_core.c). */
void sy__history_entry_free(sy_router *r, sy__history_entry *e);

typedef struct sy__source {
    char *name;
    char *version;     /* of the last applied document */
    uint64_t checksum; /* of the last applied document */
    bool applied;
    bool modified;     /* one-route changes since the last document */
    uint32_t next_pos; /* position for routes upserted without a document */
    sy__history_entry *history;
    size_t history_count; /* newest last */
    /* the last applied document's memo (def.h sy__span_memo); a one-route
     * change clears the entry of the route it replaces or removes
     * (commit_steps.c memo_forget); NULL: none */
    struct sy__span_memo *memo;
    size_t memo_count;
    sy_load_fn load;
    void *load_data;
    _Atomic int dirty;
    _Atomic int running;
    /* notify calls using the source outside the lock (taken under it):
     * sy_router_remove_source refuses while any runs */
    _Atomic int users;
    /* status (sy_router_source_status) */
    int64_t last_apply_ms;
    int last_result;
    sy_error last_error;
    uint64_t applied_count, skipped_count, failed_count;
} sy__source;

/* Keep the documents k[0..n) (borrowed: a commit's documents or kept
 * ones), oldest first, as the source's newest, as n pushes one by one
 * would: the history keeps its newest opts.history entries. The new
 * entries hold their references before the oldest are dropped (k may
 * borrow from those). SY_ENOMEM changes nothing. */
int sy__history_push(sy_router *r, sy__source *s, const sy__history_entry *k,
                     size_t n);

/* A route that left the live table at `generation`: its reference is
 * dropped once no snapshot older than that generation is alive. */
typedef struct sy__grave {
    struct sy_route *route;
    uint64_t generation;
} sy__grave;

struct sy_router {
    sy__alloc alloc;
    sy__grave *graves;
    size_t grave_count, grave_cap;
    sy_router_options opts;
    sy_parse_options popts;
    pthread_mutex_t lock;
    /* fixed array of SY_MAX_SOURCES: never moves. A place whose name is
     * NULL is free (sy_router_remove_source): the lowest free place is
     * taken by the next add. source_count is one past the last place in
     * use; live_sources counts the places in use. A snapshot copies the
     * names ("" for a free place), so a place taken again is never
     * read under its old name by a reader of an older snapshot. */
    sy__source *sources;
    size_t source_count;
    size_t live_sources;
    const char *source_names[SY_MAX_SOURCES];
    sy__pub *pub;
    struct sy_route *defaults;
    /* the defaults' first path filter when the host runs forward:, or -1:
     * a forward: route is refused at it (sy__router_check_policies) */
    int dflt_path;
    struct sy_policy_store *policy; /* the store the snapshots use */
    void *policy_mem;               /* the router's own store, or NULL */
    void *data;
    uint64_t rng;
    /* routes whose live count saturated (route.h live): a reference each,
     * released and dropped by sy_router_free */
    struct sy_route **pinned;
    size_t pinned_count, pinned_cap;
    /* route keys (sy_route_key): a free list below key_limit */
    uint32_t *free_keys;
    size_t free_key_count, free_key_cap;
    uint32_t key_limit;
    /* the thread running a host callback, or 0 (re-entrancy check) */
    _Atomic uintptr_t callback_thread;
    /* counters (writer side, under the lock) */
    uint64_t commits, failed_commits, skipped_applies, instance_updates;
    /* counters (any thread) */
    _Atomic uint64_t ejections, outcomes;
    /* held by the outcome report that counts the ejected share and
     * ejects (sy__service_report_outcome) */
    atomic_bool eject_gate;
    /* per-source fingerprints and route counts of the live snapshot,
     * worked out once per generation (router_status.c), under the lock:
     * NULL until a status asks; status_gen is its snapshot's generation */
    struct sy__source_memo *status_memo;
    uint64_t status_gen;
    /* breaker entries the running commit's checks hold (store keys), so
     * that they stay until its routes are attached (which hold their
     * own); dropped at the commit's end (sy__router_drop_checked) */
    uint64_t *brk_held;
    size_t brk_held_count, brk_held_cap;
    /* the router's owner slot in the store (sy__store_owner_take), and
     * its count of live routes (and checks) naming each breaker key: the
     * store's entry holds the router's bit from the first to the last
     * (open addressing on the key; 0: empty) */
    int brk_owner;
    uint64_t *use_keys;
    uint32_t *use_counts;
    size_t use_n, use_cap;
    /* each breaker key the live snapshot's routes name: the fingerprint
     * of their settings (sy__brk_cfg.fp, one per key: a commit that would
     * publish two is refused, commit_brk.c) and how many name it (open
     * addressing on the key; 0: empty) */
    uint64_t *set_keys, *set_fps;
    uint32_t *set_counts;
    size_t set_n, set_cap;
};

/* The router's allocator (for change sets). */
const sy__alloc *sy__router_allocator(sy_router *r);
/* True when the calling thread is inside one of r's callbacks (it then
 * holds the writer lock already). */
bool sy__router_in_callback(sy_router *r);
/* Take the writer lock unless the calling thread is inside a callback
 * (and so holds it already); returns whether it was taken. */
bool sy__router_lock_for_read(sy_router *r);
/* The live snapshot (writer side or under the lock). */
const struct sy_snapshot *sy__router_current(sy_router *r);
/* The router's clock in epoch ms (clock_ms callback, else real time). */
int64_t sy__router_now_ms(sy_router *r);

/* ---- router_core.c, for router.c and commit.c (writer side, lock held) ----
 */

/* Mark the calling thread as running a callback of r, and clear it. */
void sy__router_cb_enter(sy_router *r);
void sy__router_cb_leave(sy_router *r);
/* Live route rt (its key set) is no longer reachable by any snapshot, or
 * the router goes: route_detach, its breaker entry's use, its key back to
 * the free list; then its key is UINT32_MAX and its host data NULL. The
 * router calls it itself (a route keeps no pointer back to it). */
void sy__router_route_released(sy_router *r, struct sy_route *rt);
/* on_log, as a callback (re-entrancy guarded). */
void sy__router_log(sy_router *r, sy_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* on_event, as a callback. */
void sy__router_event(sy_router *r, const sy_report *rep);
/* on_retired_held, in the shape sy__pub_check_held calls it. */
void sy__router_held_cb(void *data, uint64_t gen, uint64_t age);
sy__source *sy__router_find_source(sy_router *r, const char *name);
/* The configuration every derived snapshot gets from the router. */
struct sy__snapshot_config sy__router_snapshot_config(sy_router *r);
/* Drop the references of removed routes no live snapshot can still use. */
void sy__router_bury(sy_router *r);
bool sy__router_graves_reserve(sy_router *r, size_t extra);
/* A route about to become live (its key UINT32_MAX): its key and host
 * data (route_attach). SY_ENOMEM: no room for the host data (route_detach
 * has had it back): rt is as before. */
int sy__router_attach_route(sy_router *r, struct sy_route *rt);
/* Release every attached route of the live table, the graves and the
 * pinned list, and drop the pinned list's references (sy_router_free,
 * before the references go). */
void sy__router_release_all(sy_router *r);

/* Set r->policy from the options, or make the router's own store. */
int sy__router_policy_init(sy_router *r, sy_error *err);
/* Refuse route rt (located at "<list>[<index>]", e.g. "routes[3]", or
 * "route" when list is NULL: formatted only for an error) when it and the
 * default filters both hold a CircuitBreaker or both a Retry (SCG nests
 * them; one runs per request), and hold the store entry of the breaker
 * its chain runs until the commit ends: SY_ELIMIT when the store has none
 * free (an entry is claimed at the commit, never at a request; !claim, a
 * check: only whether one could be). A forward: route is refused
 * (SY_ENOTRUN) at the default filters' path filter (dflt_path). *bkey
 * (may be NULL): the breaker's key when the check got to it, else 0. */
/* Whether sy__router_check_policies reads every route: the default
 * filters hold a CircuitBreaker (an entry claimed for every route) or a
 * path filter a forward: route cannot run (dflt_path); else it passes a
 * route of neither policy without more. */
bool sy__router_checks_every_route(const sy_router *r);
int sy__router_check_policies(sy_router *r, const struct sy_route *rt,
                              const char *list, unsigned index, bool claim,
                              uint64_t *bkey, sy_error *err);
/* The commit ends: the entries its checks hold are given back (an entry
 * no attached route holds is freed). */
void sy__router_drop_checked(sy_router *r);
/* The router gives up its owner slot and its counts (sy_router_free,
 * after every route was released). */
void sy__router_policy_free(sy_router *r);
/* The store key of the breaker rt's chain runs (the default filters',
 * else its own), or 0 when it runs none; its config in *cfg, its filter's
 * index in the route's chain in *ri (-1: the defaults'); cfg, ri may be
 * NULL. */
struct sy__brk_cfg;
uint64_t sy__router_breaker_of(const sy_router *r, const struct sy_route *rt,
                               const struct sy__brk_cfg **cfg, int *ri);
/* How many of the router's live routes (and running checks) name breaker
 * key (tests). */
uint32_t sy__router_brk_uses(const sy_router *r, uint64_t key);

#endif
