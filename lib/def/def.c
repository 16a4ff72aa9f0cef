/*
 * def.c - route documents (route model section 1): JSON syntax
 * errors with line and column, the two document shapes, strict and
 * lenient modes, duplicate ids, document fingerprints and the public
 * sy_document_* calls; the JSON text's parse is def_json.c's, which
 * def_single.c (single routes, default filters) shares. One route object is
 * built by def_route.c; a router's apply shares the live route built from the
 * same bytes instead (build_routes).
 */
#include "base/idtab.h"
#include "def/def_breakers.h"
#include "def/def_build.h"
#include "def/def_memo.h"
#include "def/def_scan.h"
#include "policy/host_runs.h"
#include "route/filter.h"

#include <stdio.h>

#define SEED_DOC 0x5359444f43ull /* "SYDOC" */

/* ---- documents ---- */

static bool add_issue(sy_document *d, const sy_error *e) {
    sy_error *p =
        sy__realloc(&d->alloc, d->issues, (d->issue_count + 1) * sizeof *p);
    if (!p)
        return false;
    d->issues = p;
    d->issues[d->issue_count++] = *e;
    return true;
}

void sy_document_free(sy_document *doc) {
    if (!doc)
        return;
    sy__alloc a = doc->alloc;
    for (size_t i = 0; i < doc->route_count; i++)
        if (!doc->prev || doc->prev[i] == UINT32_MAX) /* not borrowed */
            sy__route_unref(doc->routes[i]);
    sy__free(&a, doc->routes);
    sy__free(&a, doc->positions);
    sy__free(&a, doc->prev);
    sy__free(&a, doc->memo);
    sy__free(&a, doc->issues);
    sy__free(&a, doc->version);
    sy__free(&a, doc);
}

/* Route ids seen in one document: an id table over d->routes. */
static const char *doc_route_id(const void *ctx, uint32_t i) {
    return ((const sy_document *)ctx)->routes[i]->id;
}

static int read_version_value(sy_document *d, const cJSON *v, sy_error *err) {
    char num[64];
    const char *text;
    if (!v || cJSON_IsNull(v))
        return 0;
    if (cJSON_IsString(v)) {
        text = v->valuestring;
    } else if (cJSON_IsNumber(v) && v->valuedouble > -9.2e18 &&
               v->valuedouble < 9.2e18 && /* the cast below is defined */
               v->valuedouble == (double)(int64_t)v->valuedouble) {
        sy__def_number_text(v->valuedouble, num, sizeof num);
        text = num;
    } else {
        return sy__error_set(err, SY_ETYPE, "version",
                             "version must be a string or an integer");
    }
    d->version = sy__strdup(&d->alloc, text);
    if (!d->version)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    return 0;
}

static int read_version(sy_document *d, const char *json,
                        const sy__json_span *span, sy_error *err) {
    if (!span->end)
        return 0;
    cJSON *v = NULL;
    int rc = sy__def_parse_scanned(json, span->start, span->end, &v, err);
    if (!rc)
        rc = read_version_value(d, v, err);
    cJSON_Delete(v);
    return rc;
}

/* The seed of a route's span hash (def.h sy__span_memo): the routes array's
 * nesting is part of what the bytes were checked under (the depth limit),
 * so a route read in a root array and in an envelope hash apart. */
static uint64_t span_seed(uint32_t depth) {
    return SY_ROUTE_SPAN_SEED ^ (depth == 2 ? 0 : (uint64_t)depth << 56);
}

/* The id table entries of routes shared by bytes are cold in memory at
 * large sizes: the entry route i + SPAN_AHEAD names is prefetched, so
 * those cache misses overlap. */
#define SPAN_AHEAD 8
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

/* The scan's skip hook (def_scan.h) for an apply: element i of the routes
 * array is guessed to be the route that the document before held at
 * position i + shift (shift: where the last known element was, relative to
 * its own index; an insert or a removal moves it). When the element's bytes
 * are that position's span in the memo (length, the closing brace, what
 * follows, then the hash) they are the very bytes the scan accepted when the
 * route was built (under the router's fixed limits, at the same nesting:
 * span_seed), so they are skipped unread. A guess that fails costs a few
 * compares and at most three hashes of one element; an element the scan read is
 * hashed on the next call and looked for by its bytes (find_span), and the
 * shift follows it. */
typedef struct skip_state {
    const sy__def_reuse *reuse;
    bool guess;    /* at_position is there */
    int64_t shift; /* see above */
    size_t misses; /* elements not found near their guess */
    /* the document's checksum, hashed along with the spans, so a large
     * document is read from memory once, not twice */
    sy__hash_stream sum;
    struct route_walk *walk; /* builds the routes as the scan reads them */
} skip_state;

/* Positions either side of the guess that find_span looks at. */
#define SPAN_WINDOW 8
/* Elements not found near their guess before find_span asks by_bytes too
 * (which builds a table of every live route: worth it when the document
 * was reordered, not for a few new or edited routes). */
#define SPAN_MISSES_BEFORE_TABLE 16

static const struct sy_route *route_at(const sy__def_reuse *ru, int64_t pos) {
    return pos < 0 ? NULL : ru->at_position(ru->data, (size_t)pos);
}

/* The memo entry of position `pos`, describing the route at pos (def.h),
 * or NULL (then that route is not known by its bytes). */
static const sy__span_memo *memo_at(const sy__def_reuse *ru, int64_t pos) {
    if (!ru->memo || pos < 0 || (size_t)pos >= ru->memo_count)
        return NULL;
    const sy__span_memo *m = &ru->memo[pos];
    return m->span_len ? m : NULL;
}

/* The span length and hash of the route at position pos (0: none, or no
 * route there). */
static size_t span_of(const sy__def_reuse *ru, int64_t pos, uint64_t *hash) {
    const sy__span_memo *m = memo_at(ru, pos);
    *hash = m ? m->span_hash : 0;
    return m ? m->span_len : 0;
}

/* A live route whose span is `n` bytes hashing to `h`: near position
 * `expect` of the document before, else (after a few such misses, or
 * without positions) through by_bytes; *pos gets its position or
 * SIZE_MAX. NULL: none. */
static const struct sy_route *find_span(skip_state *ss, uint64_t h, size_t n,
                                        int64_t expect, size_t *pos) {
    const sy__def_reuse *ru = ss->reuse;
    *pos = SIZE_MAX;
    if (ru->none_live)
        return NULL;
    if (ss->guess && ru->memo) {
        for (int64_t d = 0; d <= SPAN_WINDOW; d++)
            for (int64_t p = expect - d; p <= expect + d; p += d ? 2 * d : 1) {
                uint64_t rh = 0;
                if (span_of(ru, p, &rh) == n && rh == h) {
                    const struct sy_route *r = route_at(ru, p);
                    if (r) {
                        *pos = (size_t)p;
                        return r;
                    }
                }
            }
        if (ss->misses++ < SPAN_MISSES_BEFORE_TABLE)
            return NULL;
    }
    size_t p = SIZE_MAX;
    const struct sy_route *r = ru->by_bytes(ru->data, h, n, &p);
    if (r && ss->guess)
        *pos = p;
    return r;
}

/* Element `index`'s span (complete) hashed and looked for by its bytes
 * (find_span), the guess's shift following it. */
static void span_look(skip_state *ss, const char *json, sy__json_span *sp,
                      size_t index, uint64_t seed) {
    size_t n = sp->end - sp->start, p;
    sy__hash64_advance(&ss->sum, sp->end);
    sp->hash = sy__hash64(json + sp->start, n, seed);
    sp->hashed = true;
    sp->known = find_span(ss, sp->hash, n, (int64_t)index + ss->shift, &p);
    sp->aux = p;
    if (p != SIZE_MAX)
        ss->shift = (int64_t)p - (int64_t)index;
}

static inline __attribute__((always_inline)) size_t
span_skip(skip_state *ss, const char *json, size_t len, sy__json_scan *out,
          size_t index, size_t at, uint32_t depth) {
    static const int tries[3] = {0, 1, -1};
    const sy__def_reuse *ru = ss->reuse;
    uint64_t seed = span_seed(depth);
    sy__json_span *pv = index ? &out->routes[index - 1] : NULL;
    if (pv && !pv->hashed) /* read by the scan: looked for now */
        span_look(ss, json, pv, index - 1, seed);
    if (ru->none_live || !ru->memo)
        return 0; /* no span known (a first document; after a rollback) */
    for (int k = 0; k < 3; k++) {
        int64_t p = (int64_t)index + ss->shift + tries[k];
        uint64_t rh = 0;
        size_t n = span_of(ru, p, &rh);
        if (!n || n > len - at || json[at + n - 1] != '}')
            continue;
        if (at + n < len) {
            char c = json[at + n];
            if (c != ',' && c != ']' && c != ' ' && c != '\n' && c != '\r' &&
                c != '\t')
                continue;
        }
        sy__hash64_advance(&ss->sum, at + n);
        uint64_t h = sy__hash64(json + at, n, seed);
        const struct sy_route *r = h == rh ? route_at(ru, p) : NULL;
        if (!r)
            continue;
        sy__json_span *sp = &out->routes[index];
        sp->hash = h;
        sp->hashed = true;
        sp->known = r;
        sp->aux = (size_t)p;
        ss->shift += tries[k];
        return n;
    }
    return 0;
}

/* An id hashing to h is surely not in t when no entry of its run has that
 * hash: then *pos is the free entry for it (as sy__idtab_find says) and
 * true; false: look with the id. */
static bool idtab_free_for(const sy__idtab *t, uint32_t h, uint32_t *pos) {
    for (uint32_t i = h & t->mask;; i = (i + 1) & t->mask) {
        if (t->e[i].val == SY_NONE) {
            *pos = i;
            return true;
        }
        if (t->e[i].hash == h)
            return false;
    }
}

/* *p (old elements of `size` bytes) reallocated to cap elements, the new
 * ones zero when `zero`. False: out of memory (*p untouched). */
static bool grow_array(const sy__alloc *a, void **p, size_t old, size_t cap,
                       size_t size, bool zero) {
    char *n = sy__realloc(a, *p, cap * size);
    if (!n)
        return false;
    if (zero)
        memset(n + old * size, 0, (cap - old) * size);
    *p = n;
    return true;
}

/* The document's route arrays (the reuse arrays only when the scan
 * guesses) grown to room for cap elements, and the id table to hold that
 * many ids (its entries moved by their hashes). The routes are built as
 * the scan reads them, so their count is known only at its end: the room
 * doubles from the caller's expected count; the memo, which the router
 * keeps, is cut to the count at the end (build_routes). */
static bool route_arrays_grow(sy_document *d, size_t old, size_t cap,
                              bool guess, sy__idtab *ids) {
    const sy__alloc *a = &d->alloc;
    /* entries past route_count are never read: only the memo (an element
     * that gives no route leaves its entry empty) needs zeroes */
    if (!grow_array(a, (void **)&d->routes, old, cap, sizeof *d->routes,
                    false) ||
        !grow_array(a, (void **)&d->positions, old, cap, sizeof *d->positions,
                    false) ||
        (guess &&
         (!grow_array(a, (void **)&d->prev, old, cap, sizeof *d->prev, false) ||
          !grow_array(a, (void **)&d->memo, old, cap, sizeof *d->memo, true))))
        return false;
    size_t tcap = sy__idtab_capacity(cap);
    if (ids->e && tcap <= (size_t)ids->mask + 1)
        return true;
    sy__idtab_entry *entries = sy__malloc(a, tcap * sizeof *entries);
    if (!entries)
        return false;
    sy__idtab t;
    sy__idtab_init(&t, entries, tcap);
    for (size_t i = 0; ids->e && i <= ids->mask; i++)
        if (ids->e[i].val != SY_NONE)
            sy__idtab_add(&t, ids->e[i].hash, ids->e[i].val);
    sy__free(a, ids->e);
    *ids = t;
    return true;
}

/* The id table entry that the id hash of route i + SPAN_AHEAD (shared
 * by bytes, its hash in the memo) names. */
static void prefetch_ahead(const sy__json_scan *scan,
                           const sy__def_reuse *reuse, const sy__idtab *ids,
                           size_t i, size_t n) {
    if (i + SPAN_AHEAD < n) {
        const sy__json_span *ka = &scan->routes[i + SPAN_AHEAD];
        const sy__span_memo *m =
            ka->known ? memo_at(reuse, (int64_t)ka->aux) : NULL;
        if (m)
            PREFETCH(&ids->e[m->id_hash & ids->mask]);
    }
}

/* The id table entry a freshly parsed route's id names, fetched while the
 * route is built (at 100k routes a random line of 2 MB, a miss per
 * route); a hint only: the id is checked as built. */
static void prefetch_id(const sy__idtab *ids, const cJSON *c) {
    const cJSON *idn = c->child; /* the first "id", as cJSON finds */
    while (idn && !(idn->string && idn->string[0] == 'i' &&
                    idn->string[1] == 'd' && !idn->string[2]))
        idn = idn->next;
    if (sy__def_is(idn, cJSON_String) && idn->valuestring) {
        const char *v = idn->valuestring;
        PREFETCH(&ids->e[sy__idtab_hash(v, strlen(v)) & ids->mask]);
    }
}

/* Lenient parse: every error of a route that failed with *e (not only the
 * first) into the document's issues. SY_ENOMEM or 0. */
static int note_route_errors(sy_document *d, sy__def_ctx *ctx, const cJSON *c,
                             bool built, const char *path, const sy_error *e,
                             sy_error *err) {
    sy_error all[SY_DEF_ROUTE_ERRORS_MAX];
    size_t k = built || !c ? (all[0] = *e, 1)
                           : sy__def_route_errors(ctx, c, path, e, all,
                                                  SY_DEF_ROUTE_ERRORS_MAX);
    for (size_t j = 0; j < k; j++)
        if (!add_issue(d, &all[j]))
            return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    return 0;
}

/* The id check of build_routes: true when r's id is not in the table yet,
 * with its hash, length (0 when the memo m gave the hash: the id is read
 * only when an entry has that hash) and free slot. */
static bool id_is_free(const sy_document *d, sy__idtab *ids,
                       const struct sy_route *r, const sy__span_memo *m,
                       uint32_t *h, size_t *id_len, uint32_t *pos) {
    *id_len = m ? 0 : strlen(r->id);
    *h = m ? m->id_hash : sy__idtab_hash(r->id, *id_len);
    return idtab_free_for(ids, *h, pos) ||
           sy__idtab_find(ids, r->id, m ? strlen(r->id) : *id_len, *h,
                          doc_route_id, d, pos) == SY_NONE;
}

static int duplicate_id(const struct sy_route *r, const char *path,
                        sy_error *e) {
    char p[96];
    sy__error_clear(e);
    sy__def_path(p, sizeof p, "%s.id", path);
    return sy__error_set(e, SY_EDUPLICATE, p,
                         "route id '%.120s' is already used", r->id);
}

/* The walk of build_routes: what every route of the document shares.
 * The walk runs inside the scan (route_hook): a route the scan's hook
 * reads is built at once from the tree that read checked, the elements
 * the scan read itself before it when the hook is next called or when the
 * scan ends; a failure is held until the scan ends (a syntax error after
 * it, the version or the envelope's shape are reported first, as when
 * the scan ran before any route was built). */
typedef struct route_walk {
    sy_document *d;
    const sy_parse_options *opts;
    const sy__def_reuse *reuse;
    const char *json;
    const sy__json_scan *scan;
    skip_state *ss;
    sy_error *err;
    int held;      /* a failure of the walk: no route is built after it */
    size_t built;  /* elements walked */
    size_t cap;    /* room in the route arrays */
    size_t expect; /* their first room */
    bool framed;   /* the path and seed below are set */
    size_t max_bytes;
    uint32_t max_depth;
    sy__idtab ids;
    sy__def_brks brks; /* the breakers the fresh routes named */
    sy__def_ctx ctx;
    sy__def_memo memo; /* ctx.memo */
    sy__buf scratch;
    sy__arena tree; /* the tree of the route being built (def_tree.c) */
    bool by_bytes;
    uint64_t seed;
    char path[64];
    size_t at;          /* path's length before the route's index */
    size_t path_i;      /* the index path ends with (SIZE_MAX: none yet) */
    size_t path_digits; /* its digits (when written whole) */
} route_walk;

/* One route of the walk, from its span to its place in the document. */
typedef struct route_step {
    const sy__json_span *sp;
    size_t span_len;
    uint64_t span_hash;
    const struct sy_route *same; /* the live route of the same bytes */
    size_t prev;                 /* same's position in the previous doc */
    struct sy_route *r;
    cJSON *c;    /* this route's tree only: parsed, used, deleted */
    bool own;    /* c is cJSON's (deleted), not the arena's */
    bool borrow; /* a live route found by position is used without a
                  * reference (def.h sy_document.prev says for how long) */
    bool built;
    uint32_t pos, h;
    size_t id_len;
    sy_error e;
} route_step;

/* The walk's shared state (the build context, the scratch and tree; the
 * route arrays and id table come with the first route). */
static void route_walk_begin(route_walk *w, sy_document *d,
                             const sy_parse_options *opts, const sy_limits *lim,
                             const char *json, const sy__json_scan *scan,
                             skip_state *ss, sy_error *err) {
    const sy__def_reuse *reuse = ss->reuse;
    w->d = d;
    w->opts = opts;
    w->reuse = reuse;
    w->json = json;
    w->scan = scan;
    w->ss = ss;
    w->err = err;
    w->held = 0;
    memset(&w->brks, 0, sizeof w->brks);
    w->built = w->cap = 0;
    w->expect = reuse && reuse->count_hint > 64 ? reuse->count_hint : 64;
    if (w->expect > lim->max_routes)
        w->expect = lim->max_routes ? lim->max_routes : 1;
    w->framed = false;
    w->max_bytes = lim->max_string_bytes;
    w->max_depth =
        lim->max_depth < SY_JSON_MAX_DEPTH ? lim->max_depth : SY_JSON_MAX_DEPTH;
    w->ids = (sy__idtab){NULL, 0};
    ss->walk = w;
    /* without a cache (out of memory) every regex is compiled on its own */
    sy__buf_init(&w->scratch, &d->alloc);
    sy__arena_init(&w->tree, &d->alloc, 4096);
    /* no live route: no fingerprint to compare (def_route.c) */
    sy__def_reuse_fn by_fp =
        reuse && !reuse->none_live ? reuse->by_fingerprint : NULL;
    w->ctx = (sy__def_ctx){&d->alloc,
                           opts->registry,
                           by_fp,
                           reuse ? reuse->data : NULL,
                           sy__regex_cache_new(&d->alloc),
                           &w->scratch,
                           0,
                           sy__def_host_runs(opts),
                           &w->memo};
    sy__def_memo_init(&w->memo, &d->alloc);
    w->by_bytes = reuse && reuse->by_bytes;
}

/* The routes' path prefix and span seed, from the routes array's nesting
 * (1: a root array, 2: an envelope's "routes"). */
static void route_walk_frame(route_walk *w, uint32_t depth) {
    if (w->framed)
        return;
    w->framed = true;
    w->seed = span_seed(depth);
    w->at =
        sy__path_join(w->path, sizeof w->path, "", depth == 2 ? "routes" : "");
    w->path_i = SIZE_MAX;
    w->path_digits = 0;
}

/* w->path ends with "[i]" after this: the digits of the index before
 * counted up when i follows it (the walk goes in order), else written by
 * sy__path_index. Counted up only where sy__path_index writes any index
 * whole (room for every digit) and no digit is added (not after 9, 99). */
static void route_path(route_walk *w, size_t i) {
    if (i == w->path_i)
        return;
    bool whole = sizeof w->path - w->at > 24;
    char *digits = w->path + w->at + 1;
    if (whole && w->path_i != SIZE_MAX && i == w->path_i + 1) {
        size_t k = w->path_digits;
        while (k > 0 && digits[k - 1] == '9')
            k--;
        if (k > 0) {
            digits[k - 1]++;
            memset(digits + k, '0', w->path_digits - k);
            w->path_i = i;
            return;
        }
    }
    sy__path_index(w->path, sizeof w->path, w->at, i);
    w->path_i = i;
    if (whole)
        w->path_digits = strlen(digits) - 1; /* less the ']' */
}

/* A document at least this long makes its entry memo's tables before
 * its first route (def_memo.h sy__def_memo_reserve). */
#define MEMO_EARLY (64u << 10)

static void route_walk_end(route_walk *w) {
    sy__free(&w->d->alloc, w->ids.e);
    sy__def_brks_free(&w->d->alloc, &w->brks);
    sy__regex_cache_free(w->ctx.regex_cache);
    sy__buf_free(&w->scratch);
    sy__def_memo_free(&w->memo);
    sy__arena_free(&w->tree);
}

/* A live route built from exactly these bytes is this route: the caller
 * offers only routes of one router, whose options (registry, limits,
 * lenient or strict) never change after it is created, so equal bytes
 * mean the same route; an invalid route never became live, so it is never
 * found here. Only the id check and the position are left to do. The
 * scan's guess (span_skip) found most of them already. */
static void route_find_same(route_walk *w, size_t i, route_step *s) {
    s->sp = &w->scan->routes[i];
    s->span_len = w->by_bytes ? s->sp->end - s->sp->start : 0;
    s->span_hash = 0;
    s->same = s->sp->known;
    s->prev = s->sp->aux;
    if (s->same) {
        s->span_hash = s->sp->hash;
    } else if (w->by_bytes) {
        /* the scan looked for every element it read but the last */
        s->span_hash = s->sp->hashed ? s->sp->hash
                                     : sy__hash64(w->json + s->sp->start,
                                                  s->span_len, w->seed);
        s->same = s->sp->hashed
                      ? NULL
                      : find_span(w->ss, s->span_hash, s->span_len,
                                  (int64_t)i + w->ss->shift, &s->prev);
    }
}

/* The route of step s: the live one of the same bytes (the scan's finds
 * compared the span already, from the memo without reading the route),
 * else built from its tree (s->c: read by the hook, else parsed from its
 * span now). */
static int route_obtain(route_walk *w, size_t i, route_step *s) {
    const sy__json_span *sp = s->sp;
    int rc = 0;
    if (s->same) { /* found by its span's length and hash */
        s->borrow = w->d->prev && s->prev < UINT32_MAX;
        s->r = s->borrow ? (struct sy_route *)s->same : sy__route_ref(s->same);
    } else {
        route_path(w, i);
        /* as sy__error_clear reads, without writing all 500 bytes */
        s->e.line = s->e.column = 0;
        s->e.offset = 0;
        s->e.path[0] = s->e.message[0] = '\0';
        if (!s->c) {
            sy__arena_reset(&w->tree);
            rc = sy__def_parse_tree(&w->tree, w->json, sp->start, sp->end,
                                    &s->c, &s->own, &s->e);
        }
    }
    w->ctx.text_len = sp->end - sp->start;
    if (!rc && !s->r && s->c)
        prefetch_id(&w->ids, s->c);
    if (!rc && !s->r)
        rc = sy__def_build_route(&w->ctx, s->c, w->path, &s->r, &s->e);
    return rc;
}

/* The id check of step s's built route, and its breaker's settings
 * against the document's earlier routes (def_breakers.h): a duplicate id
 * or a clash fails the route (and drops the reference taken for it). */
static int route_check_id(route_walk *w, size_t i, route_step *s) {
    bool kept = s->same && s->r == s->same;
    const sy__span_memo *m =
        kept && s->borrow ? memo_at(w->reuse, (int64_t)s->prev) : NULL;
    int rc = 0;
    if (id_is_free(w->d, &w->ids, s->r, m, &s->h, &s->id_len, &s->pos)) {
        /* a fresh route (just built, in the cache) naming a breaker
         * another fresh one named with other settings; a shared one is
         * not read (the commit weighs it, router/commit_brk.c) */
        if (kept ||
            atomic_load_explicit(&s->r->refs, memory_order_relaxed) != 1 ||
            sy__route_policy_free(s->r))
            return 0;
        route_path(w, i);
        rc = sy__def_brks_check(&w->d->alloc, &w->brks, s->r, w->path, &s->e);
        if (!rc)
            return 0;
    } else {
        route_path(w, i);
        rc = duplicate_id(s->r, w->path, &s->e);
    }
    if (!s->borrow)
        sy__route_unref(s->r);
    return rc;
}

/* A failed route: fatal (out of memory, or strict) with its error in
 * *err, else noted in the document's issues (lenient). The route's tree
 * is deleted either way. 0: go on with the next route. */
static int route_failed(route_walk *w, route_step *s, int rc, sy_error *err) {
    if (rc == SY_ENOMEM || !w->opts->lenient) {
        if (err)
            *err = s->e;
    } else {
        rc = note_route_errors(w->d, &w->ctx, s->c, s->built, w->path, &s->e,
                               err);
    }
    if (s->own)
        cJSON_Delete(s->c);
    return rc;
}

/* A route that passed: its place in the document, the id table and the
 * memo. */
static void route_place(route_walk *w, size_t i, route_step *s) {
    sy_document *d = w->d;
    struct sy_route *r = s->r;
    bool kept = s->same && r == s->same;
    if (s->own)
        cJSON_Delete(s->c);
    bool fresh =
        !kept && atomic_load_explicit(&r->refs, memory_order_relaxed) == 1;
    if (fresh)
        r->doc_index = (uint32_t)i; /* fresh; shared routes stay as is */
    /* a fresh route was just built (its `more` is in the cache); a shared
     * one is not read for it */
    d->policy_some = d->policy_some || !fresh || !sy__route_policy_free(r);
    /* shared by bytes, fresh, or shared for bytes of the same meaning:
     * these bytes find it at the next apply (the memo is the only record
     * of them; a parse without byte reuse, sy_document_parse, keeps none) */
    if (d->memo && s->span_len && s->span_len <= UINT32_MAX)
        d->memo[i] = (sy__span_memo){s->span_hash, (uint32_t)s->span_len, s->h};
    sy__idtab_set(&w->ids, s->pos, s->h, (uint32_t)d->route_count);
    d->positions[d->route_count] = (uint32_t)i;
    if (d->prev)
        d->prev[d->route_count] = s->borrow ? (uint32_t)s->prev : UINT32_MAX;
    d->routes[d->route_count++] = r;
}

/* Step i of the walk (n: the elements known so far): its live twin, the
 * route (from the tree c the hook read, or NULL), its id check, and its
 * place or its failure. 0: go on with the next element. */
static int route_walk_step(route_walk *w, size_t i, size_t n, cJSON *c) {
    if (i >= w->cap) {
        size_t cap = w->cap ? w->cap * 2 : w->expect;
        if (cap <= i)
            cap = i + 1;
        if (!route_arrays_grow(w->d, w->cap, cap, w->ss->guess, &w->ids))
            return sy__error_set(w->err, SY_ENOMEM, "", "out of memory");
        w->cap = cap;
    }
    route_step s; /* set field by field: s.e is 500 bytes */
    s.r = NULL;
    s.c = c;
    s.own = s.borrow = false;
    s.pos = s.h = 0;
    s.id_len = 0;
    s.e.code = 0;
    prefetch_ahead(w->scan, w->reuse, &w->ids, i, n);
    route_find_same(w, i, &s);
    int rc = route_obtain(w, i, &s);
    s.built = rc == 0;
    if (!rc)
        rc = route_check_id(w, i, &s);
    if (rc)
        rc = route_failed(w, &s, rc, w->err);
    else
        route_place(w, i, &s);
    return rc;
}

/* The elements before `upto` not walked yet (those the scan read itself,
 * or skipped as known), in order; false once the walk has failed. */
static bool route_walk_upto(route_walk *w, size_t upto) {
    size_t i = w->built;
    int rc = w->held;
    while (!rc && i < upto)
        rc = route_walk_step(w, i++, upto, NULL);
    w->built = i;
    w->held = rc;
    return !rc;
}

/* The scan's hook (def_scan.h) for an apply or a parse: a known span
 * skipped (span_skip), else the element read into its tree, checked as
 * the scan's fast pass checks it (sy__def_tree_parse_checked), and its
 * route built at once. 0 (the scan reads the element, and the walk takes
 * it later): not known, and the checked read gave up on it, or the walk
 * has failed. */
/* route_hook's read of element `index`, not known by its span. */
static __attribute__((noinline)) size_t
route_read(skip_state *ss, const char *json, size_t len, sy__json_scan *out,
           size_t index, size_t at, uint32_t depth, size_t *values) {
    route_walk *w = ss->walk;
    if (w->held || index >= UINT32_MAX)
        return 0;
    route_walk_frame(w, depth);
    if (!route_walk_upto(w, index))
        return 0;
    size_t end = 0;
    cJSON *c = NULL;
    sy__def_tree_check chk = {w->max_bytes, depth, w->max_depth, values};
    sy__arena_reset(&w->tree);
    if (sy__def_tree_parse_checked(&w->tree, json, at, len, &chk, &end, &c))
        return 0;
    sy__json_span *sp = &out->routes[index];
    sp->end = end;
    if (ss->guess)
        span_look(ss, json, sp, index, w->seed);
    w->built = index + 1;
    w->held = route_walk_step(w, index, index + 1, c);
    return end - at;
}

static size_t route_hook(void *data, const char *json, size_t len,
                         sy__json_scan *out, size_t index, size_t at,
                         uint32_t depth, size_t *values) {
    skip_state *ss = data;
    size_t n = ss->guess ? span_skip(ss, json, len, out, index, at, depth) : 0;
    return n ? n : route_read(ss, json, len, out, index, at, depth, values);
}

/* The walk after the scan: the limits, the elements not walked yet, the
 * memo cut to the element count. */
static int build_routes(route_walk *w, const sy_limits *lim,
                        const sy__json_scan *scan, const char *prefix,
                        sy_error *err) {
    size_t n = scan->route_count;
    if (n > lim->max_routes)
        return sy__error_set(err, SY_ELIMIT, prefix,
                             "%zu routes exceed the limit of %zu", n,
                             lim->max_routes);
    if (n > UINT32_MAX)
        return sy__error_set(err, SY_ELIMIT, prefix, "too many routes");
    route_walk_frame(w, scan->root == '{' ? 2 : 1);
    if (!route_walk_upto(w, n))
        return w->held;
    sy_document *d = w->d;
    if (d->memo && w->cap > n) { /* the router keeps it: no spare room */
        sy__span_memo *m =
            n ? sy__realloc(&d->alloc, d->memo, n * sizeof *m) : NULL;
        if (m || !n) {
            if (!n)
                sy__free(&d->alloc, d->memo);
            d->memo = m;
        }
    }
    d->memo_count = d->memo ? n : 0;
    return 0;
}

int sy_document_parse(const char *json, size_t len,
                      const sy_parse_options *opts, sy_document **out,
                      sy_error *err) {
    if (out)
        *out = NULL;
    int rc = sy__host_runs_check(sy__def_host_runs(opts), err);
    if (rc)
        return rc;
    return sy__document_parse_reusing(json, len, opts, NULL, out, err);
}

int sy__document_parse_reusing(const char *json, size_t len,
                               const sy_parse_options *opts,
                               const sy__def_reuse *reuse, sy_document **out,
                               sy_error *err) {
    static const sy_parse_options defaults = SY_PARSE_OPTIONS_INIT;
    if (!out || (!json && len))
        return sy__error_set(err, SY_EINVAL, "", "json and out are required");
    *out = NULL;
    if (!opts)
        opts = &defaults;
    /* the struct grows at the end: a 0.2 host's ends before host_runs
     * (sy__def_host_runs reads that only when the size covers it) */
    if (opts->size < offsetof(sy_parse_options, host_runs))
        return sy__error_set(err, SY_EINVAL, "",
                             "sy_parse_options.size is not set");
    if (!json)
        json = "";
    sy_limits lim;
    sy__limits_resolve(&lim, &opts->limits);
    sy__alloc a;
    sy__alloc_init(&a, opts->allocator);
    sy_document *d = sy__calloc(&a, 1, sizeof *d);
    if (!d)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    d->alloc = a;
    sy__json_scan scan;
    memset(&scan, 0, sizeof scan);
    skip_state ss = {.reuse = reuse,
                     .guess = reuse && reuse->by_bytes && reuse->at_position};
    sy__json_skip skip = {route_hook, &ss, reuse ? reuse->count_hint : 0};
    route_walk w;
    route_walk_begin(&w, d, opts, &lim, json, &scan, &ss, err);
    if (len >= MEMO_EARLY) /* (out of memory: no memo, nothing fails) */
        sy__def_memo_reserve(&w.memo);
    if (ss.guess)
        sy__hash64_begin(&ss.sum, json, len, 0);
    else
        d->checksum = sy__hash64(json, len, 0);
    int rc = 0;
    if (len > lim.max_document_bytes)
        rc = sy__error_set(err, SY_ELIMIT, "",
                           "document of %zu bytes exceeds the limit of %zu",
                           len, lim.max_document_bytes);
    else
        rc = sy__json_scan_routes(&a, json, len, &lim, &skip, &scan, err);
    if (!rc && ss.guess)
        d->checksum = sy__hash64_end(&ss.sum);
    if (!rc) {
        const char *prefix = "";
        if (scan.root == '{') {
            prefix = "routes";
            d->envelope = true;
            rc = read_version(d, json, &scan.version, err);
            if (!rc && scan.default_filters) /* accepted, it was ignored */
                rc = sy__error_set(
                    err, SY_EARG, scan.default_filters,
                    "a document's default filters are not run: merge them "
                    "into the routes' filters (switchyard convert does) or "
                    "give them to the router (its default filters)");
            else if (!rc && !scan.has_routes)
                rc = sy__error_set(err, SY_EMISSING, "routes",
                                   "the document object has no \"routes\"");
            else if (!rc && scan.routes_first != '[')
                rc = sy__error_set(err, SY_ETYPE, "routes",
                                   "routes must be an array");
        } else if (scan.root != '[') {
            rc = sy__error_set(err, SY_ETYPE, "",
                               "a document is an array of routes or an "
                               "object with \"routes\"");
        }
        if (!rc && w.held)
            rc = w.held; /* a route's failure, in err since */
        if (!rc)
            rc = build_routes(&w, &lim, &scan, prefix, err);
    }
    route_walk_end(&w);
    sy__free(&a, scan.routes);
    if (rc) {
        sy_document_free(d);
        return rc;
    }
    *out = d;
    return SY_OK;
}

const char *sy_document_version(const sy_document *doc) {
    return doc ? doc->version : NULL;
}

/* Computed when asked: an apply never asks, and its document may borrow
 * routes (def.h) that only live as long as the commit. */
uint64_t sy_document_fingerprint(const sy_document *doc) {
    if (!doc)
        return 0;
    uint64_t fp = SEED_DOC;
    for (size_t i = 0; i < doc->route_count; i++)
        fp = sy__hash_mix(fp, sy__def_route_fp(doc->routes[i]));
    return sy__hash_mix(fp, doc->route_count);
}

uint64_t sy_document_checksum(const sy_document *doc) {
    return doc ? doc->checksum : 0;
}

size_t sy_document_route_count(const sy_document *doc) {
    return doc ? doc->route_count : 0;
}

const sy_route *sy_document_route(const sy_document *doc, size_t i) {
    return doc && i < doc->route_count ? doc->routes[i] : NULL;
}

size_t sy_document_issue_count(const sy_document *doc) {
    return doc ? doc->issue_count : 0;
}

const sy_error *sy_document_issue(const sy_document *doc, size_t i) {
    return doc && i < doc->issue_count ? &doc->issues[i] : NULL;
}
