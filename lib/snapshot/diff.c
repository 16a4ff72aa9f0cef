/*
 * diff.c - three-way route diffs (diff.h) and the public sy_diff API, and
 * the kept routes whose rank order moved (reordered). Ids are matched
 * through a temporary open-addressing table over the old list; the diff
 * owns copies of every id it reports.
 */
#include "snapshot/diff.h"
#include "base/idtab.h"
#include "def/def.h"

#include "snapshot/snapshot.h"

struct sy_diff {
    sy__alloc alloc;
    sy__arena arena;
    const char **added;
    size_t added_count;
    const char **removed;
    size_t removed_count;
    const char **updated;
    unsigned *updated_mask;
    size_t updated_count;
    size_t unchanged;
    const char **reordered; /* kept routes outside a longest run in order */
    size_t reordered_count;
};

unsigned sy__diff_route_changes(const struct sy_route *a,
                                const struct sy_route *b) {
    return sy__def_route_changes(a, b);
}

static const char *old_id(const void *ctx, uint32_t i) {
    return ((const struct sy_route *const *)ctx)[i]->id;
}

int sy__diff_set_reordered(sy_diff *d, sy__rank_pair *p, size_t n) {
    /* the common case reads the keys once: already in new rank order, and
     * the old ranks increase along it (nothing moved) */
    size_t i = 1;
    while (i < n && p[i - 1].new_key < p[i].new_key)
        i++;
    if (i < n && !sy__sort_by_u64(&d->alloc, p, n, sizeof *p,
                                  offsetof(sy__rank_pair, new_key)))
        return SY_ENOMEM;
    for (i = 1; i < n && p[i - 1].old_key < p[i].old_key;)
        i++;
    if (i >= n)
        return SY_OK;
    /* a longest increasing run of old ranks in new order (patience, with
     * binary search: O(n log n)); the routes outside it are the fewest
     * whose moves explain the new order */
    uint32_t *tail = sy__malloc(&d->alloc, n * sizeof *tail);
    uint32_t *prev = sy__malloc(&d->alloc, n * sizeof *prev);
    bool *in = sy__calloc(&d->alloc, n, sizeof *in);
    int rc = SY_ENOMEM;
    if (!tail || !prev || !in)
        goto out;
    size_t len = 0;
    for (i = 0; i < n; i++) {
        size_t lo = 0, hi = len;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (p[tail[mid]].old_key < p[i].old_key)
                lo = mid + 1;
            else
                hi = mid;
        }
        prev[i] = lo ? tail[lo - 1] : UINT32_MAX;
        tail[lo] = (uint32_t)i;
        if (lo == len)
            len++;
    }
    for (uint32_t k = tail[len - 1]; k != UINT32_MAX; k = prev[k])
        in[k] = true;
    d->reordered = sy__arena_alloc(&d->arena, (n - len + 1) * sizeof(char *));
    if (!d->reordered)
        goto out;
    for (i = 0; i < n; i++)
        if (!in[i]) {
            char *id = sy__arena_strdup(&d->arena, p[i].id);
            if (!id)
                goto out;
            d->reordered[d->reordered_count++] = id;
        }
    rc = SY_OK;
out:
    sy__free(&d->alloc, tail);
    sy__free(&d->alloc, prev);
    sy__free(&d->alloc, in);
    return rc;
}

int sy__diff_routes(const sy__alloc *a,
                    const struct sy_route *const *old_routes, size_t old_count,
                    const struct sy_route *const *new_routes, size_t new_count,
                    sy_diff **out) {
    return sy__diff_routes_ranked(a, old_routes, NULL, old_count, new_routes,
                                  NULL, new_count, out);
}

int sy__diff_routes_ranked(const sy__alloc *a,
                           const struct sy_route *const *old_routes,
                           const uint64_t *old_keys, size_t old_count,
                           const struct sy_route *const *new_routes,
                           const uint64_t *new_keys, size_t new_count,
                           sy_diff **out) {
    *out = NULL;
    sy__rank_pair *pairs = NULL;
    size_t npairs = 0;
    sy_diff *d = sy__calloc(a, 1, sizeof *d);
    if (!d)
        return SY_ENOMEM;
    d->alloc = *a;
    /* chunks sized to the diff: a one-route change's report (a commit
     * keeps one per change) costs a few hundred bytes, not 4 KB */
    size_t guess = 160 + (old_count + new_count) * 48;
    sy__arena_init(&d->arena, &d->alloc, guess < 4096 ? guess : 4096);
    size_t cap = sy__idtab_capacity(old_count);
    sy__idtab_entry *table = sy__malloc(a, cap * sizeof *table);
    bool *seen = sy__calloc(a, old_count + 1, sizeof *seen);
    if (old_keys && new_keys &&
        !(pairs = sy__malloc(a, (new_count + 1) * sizeof *pairs)))
        goto fail;
    d->added = sy__arena_alloc(&d->arena, (new_count + 1) * sizeof(char *));
    d->removed = sy__arena_alloc(&d->arena, (old_count + 1) * sizeof(char *));
    d->updated = sy__arena_alloc(&d->arena, (new_count + 1) * sizeof(char *));
    d->updated_mask =
        sy__arena_alloc(&d->arena, (new_count + 1) * sizeof(unsigned));
    if (!table || !seen || !d->added || !d->removed || !d->updated ||
        !d->updated_mask)
        goto fail;
    sy__idtab t;
    sy__idtab_init(&t, table, cap);
    for (size_t i = 0; i < old_count; i++) {
        const char *id = old_routes[i]->id;
        sy__idtab_add(&t, sy__idtab_hash(id, strlen(id)), (uint32_t)i);
    }
    for (size_t i = 0; i < new_count; i++) {
        const struct sy_route *n = new_routes[i];
        /* routes ahead, in two stages: the route, then its id's text */
        if (i + 16 < new_count)
            __builtin_prefetch(&new_routes[i + 16]->id);
        if (i + 8 < new_count)
            __builtin_prefetch(new_routes[i + 8]->id);
        uint32_t pos, k = SY_NONE;
        if (old_count) { /* (a first document: every route is added) */
            size_t len = strlen(n->id);
            k = sy__idtab_find(&t, n->id, len, sy__idtab_hash(n->id, len),
                               old_id, old_routes, &pos);
        }
        const struct sy_route *o = k == SY_NONE ? NULL : old_routes[k];
        if (o) {
            seen[k] = true;
            if (pairs)
                pairs[npairs++] =
                    (sy__rank_pair){new_keys[i], old_keys[k], n->id};
        }
        if (o && (o == n || sy__def_route_fp(o) == sy__def_route_fp(n))) {
            d->unchanged++; /* the common case: no copy of the id */
            continue;
        }
        char *id = sy__arena_strdup(&d->arena, n->id);
        if (!id)
            goto fail;
        if (!o) {
            d->added[d->added_count++] = id;
        } else {
            d->updated_mask[d->updated_count] = sy__diff_route_changes(o, n);
            d->updated[d->updated_count++] = id;
        }
    }
    for (size_t i = 0; i < old_count; i++)
        if (!seen[i]) {
            char *id = sy__arena_strdup(&d->arena, old_routes[i]->id);
            if (!id)
                goto fail;
            d->removed[d->removed_count++] = id;
        }
    if (pairs && sy__diff_set_reordered(d, pairs, npairs))
        goto fail;
    sy__free(a, table);
    sy__free(a, seen);
    sy__free(a, pairs);
    *out = d;
    return SY_OK;
fail:
    sy__free(a, table);
    sy__free(a, seen);
    sy__free(a, pairs);
    sy_diff_free(d);
    return SY_ENOMEM;
}

/* Diff two route lists read through `get` (documents or snapshots). */
static int diff_lists(const void *old_c, size_t on, const void *new_c,
                      size_t nn,
                      const sy_route *(*get)(const void *c, size_t i),
                      uint64_t (*rank)(const void *c, size_t i),
                      const sy_allocator *alloc, sy_diff **out, sy_error *err) {
    sy__alloc a;
    sy__alloc_init(&a, alloc);
    const struct sy_route **o = sy__malloc(&a, (on + 1) * sizeof *o);
    const struct sy_route **n = sy__malloc(&a, (nn + 1) * sizeof *n);
    uint64_t *ok = sy__malloc(&a, (on + 1) * sizeof *ok);
    uint64_t *nk = sy__malloc(&a, (nn + 1) * sizeof *nk);
    int rc = SY_ENOMEM;
    if (o && n && ok && nk) {
        for (size_t i = 0; i < on; i++) {
            o[i] = get(old_c, i);
            ok[i] = rank(old_c, i);
        }
        for (size_t i = 0; i < nn; i++) {
            n[i] = get(new_c, i);
            nk[i] = rank(new_c, i);
        }
        rc = sy__diff_routes_ranked(&a, o, ok, on, n, nk, nn, out);
    }
    sy__free(&a, o);
    sy__free(&a, n);
    sy__free(&a, ok);
    sy__free(&a, nk);
    return rc ? sy__error_set(err, rc, "", "out of memory") : SY_OK;
}

static const sy_route *doc_route(const void *c, size_t i) {
    return sy_document_route(c, i);
}

static const sy_route *snap_route(const void *c, size_t i) {
    return sy_snapshot_route_at(c, i);
}

/* A document's rank: its order, then its position in the document. */
static uint64_t doc_rank(const void *c, size_t i) {
    const sy_document *doc = c;
    uint32_t pos = doc->positions ? doc->positions[i] : (uint32_t)i;
    return sy__rank_key(doc->routes[i]->order, 0, pos);
}

/* A snapshot lists its routes in rank order. */
static uint64_t snap_rank(const void *c, size_t i) {
    (void)c;
    return i;
}

int sy_diff_documents(const sy_document *old_doc, const sy_document *new_doc,
                      const sy_allocator *alloc, sy_diff **out, sy_error *err) {
    if (out)
        *out = NULL;
    if (!old_doc || !new_doc || !out)
        return sy__error_set(err, SY_EINVAL, "", "document or out is NULL");
    return diff_lists(old_doc, sy_document_route_count(old_doc), new_doc,
                      sy_document_route_count(new_doc), doc_route, doc_rank,
                      alloc, out, err);
}

int sy_diff_snapshots(const sy_snapshot *old_snap, const sy_snapshot *new_snap,
                      const sy_allocator *alloc, sy_diff **out, sy_error *err) {
    if (out)
        *out = NULL;
    if (!old_snap || !new_snap || !out)
        return sy__error_set(err, SY_EINVAL, "", "snapshot or out is NULL");
    return diff_lists(old_snap, sy_snapshot_route_count(old_snap), new_snap,
                      sy_snapshot_route_count(new_snap), snap_route, snap_rank,
                      alloc, out, err);
}

void sy_diff_free(sy_diff *d) {
    if (!d)
        return;
    sy__alloc a = d->alloc;
    sy__arena_free(&d->arena);
    sy__free(&a, d);
}

size_t sy_diff_added_count(const sy_diff *d) {
    return d ? d->added_count : 0;
}
const char *sy_diff_added(const sy_diff *d, size_t i) {
    return d && i < d->added_count ? d->added[i] : NULL;
}
size_t sy_diff_removed_count(const sy_diff *d) {
    return d ? d->removed_count : 0;
}
const char *sy_diff_removed(const sy_diff *d, size_t i) {
    return d && i < d->removed_count ? d->removed[i] : NULL;
}
size_t sy_diff_updated_count(const sy_diff *d) {
    return d ? d->updated_count : 0;
}
const char *sy_diff_updated(const sy_diff *d, size_t i, unsigned *changed) {
    if (changed) /* no bits past the end */
        *changed = d && i < d->updated_count ? d->updated_mask[i] : 0;
    if (!d || i >= d->updated_count)
        return NULL;
    return d->updated[i];
}
void sy__diff_add_unchanged(sy_diff *d, size_t n) {
    d->unchanged += n;
}

size_t sy_diff_unchanged_count(const sy_diff *d) {
    return d ? d->unchanged : 0;
}

size_t sy_diff_reordered_count(const sy_diff *d) {
    return d ? d->reordered_count : 0;
}
const char *sy_diff_reordered(const sy_diff *d, size_t i) {
    return d && i < d->reordered_count ? d->reordered[i] : NULL;
}
