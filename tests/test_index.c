/* test_index.c - the index's whole-host table: the stepwise
 * build makes the very table the one-shot build makes; a host is a key
 * exactly when its walk meets no list but its own (no wildcard, no "**"
 * on the way) and then the key's list is the walk's whole host answer;
 * a host of one more label than a node whose only child is a wildcard
 * one ("eu" + ".w1.example.com") finds that child's list by its wildcard
 * key, again the walk's whole host answer, and an odd spelling none;
 * and matching through the table (labels split only on need) picks what
 * the linear scan picks, with the same captures, for hosts that hit, that
 * miss and that are spelled oddly. */
#include "request/match.h"
#include "route/predicate_int.h" /* a literal Path's text */
#include "snapshot/index_int.h"
#include "snapshot/snapshot_int.h"
#include "testutil.h"

#include "switchyard.h"

#include <stdio.h>
#include <stdlib.h>

enum { N = 600 };

/* Route i's predicates; kinds by i % 6:
 *   0  Host=h<i>.example.com, Path=/api/data     a key (host-placed)
 *   1  Host=*.w<i>.example.com                   under a wildcard: none
 *   2  Host=a<i>.b.example.org, Method=GET       a key
 *   3  Host=**.z<i>.example.net                  a multi list at z<i>
 *   4  Host=c<i>.z<i-1>.example.net              past that multi: none
 *   5  Host=v<i>.example.io, Path=/v/{id}        a key (host-placed)
 * and beside each route of kind 0 a route "b<i>": Path=/only<i>, Host=
 * h<i>.example.com, placed in the path trie (its path list is shorter):
 * its Host predicate is tested, labels and all, after the table's hit. */
static void preds_of(size_t i, char *buf, size_t cap) {
    switch (i % 6) {
    case 0:
        snprintf(buf, cap, "\"Host=h%zu.example.com\",\"Path=/api/data\"", i);
        break;
    case 1: snprintf(buf, cap, "\"Host=*.w%zu.example.com\"", i); break;
    case 2:
        snprintf(buf, cap, "\"Host=a%zu.b.example.org\",\"Method=GET\"", i);
        break;
    case 3: snprintf(buf, cap, "\"Host=**.z%zu.example.net\"", i); break;
    case 4:
        snprintf(buf, cap, "\"Host=c%zu.z%zu.example.net\"", i, i - 1);
        break;
    default:
        snprintf(buf, cap, "\"Host=v%zu.example.io\",\"Path=/v/{id}\"", i);
        break;
    }
}

/* The host a request for route i names (as the route spells it; a
 * wildcard label filled in). */
static void host_of(size_t i, char *buf, size_t cap) {
    switch (i % 6) {
    case 0: snprintf(buf, cap, "h%zu.example.com", i); break;
    case 1: snprintf(buf, cap, "eu.w%zu.example.com", i); break;
    case 2: snprintf(buf, cap, "a%zu.b.example.org", i); break;
    case 3: snprintf(buf, cap, "x.y.z%zu.example.net", i); break;
    case 4: snprintf(buf, cap, "c%zu.z%zu.example.net", i, i - 1); break;
    default: snprintf(buf, cap, "v%zu.example.io", i); break;
    }
}

static bool is_key(size_t i) {
    return i % 6 == 0 || i % 6 == 2 || i % 6 == 5;
}

static sy_router *router_new_of(void) {
    size_t cap = (size_t)N * 260 + 128, o = 0;
    char *doc = malloc(cap);
    ck_assert_ptr_nonnull(doc);
    doc[o++] = '[';
    for (size_t i = 0; i < N; i++) {
        char p[128];
        preds_of(i, p, sizeof p);
        o += (size_t)snprintf(doc + o, cap - o,
                              "%s{\"id\":\"r%zu\",\"uri\":\"http://b\","
                              "\"order\":%d,\"predicates\":[%s]}",
                              i ? "," : "", i, (int)(i % 7), p);
        if (i % 6 == 0)
            o += (size_t)snprintf(doc + o, cap - o,
                                  ",{\"id\":\"b%zu\",\"uri\":\"http://b\","
                                  "\"predicates\":[\"Path=/only%zu\","
                                  "\"Host=h%zu.example.com\"]}",
                                  i, i, i);
    }
    /* a generic route (no Path, no Host): the method lists */
    o += (size_t)snprintf(doc + o, cap - o,
                          ",{\"id\":\"g\",\"uri\":\"http://b\","
                          "\"order\":100,\"predicates\":[\"Method=POST\"]}");
    doc[o++] = ']';
    sy_router *r = sy_test_router(doc, o);
    free(doc);
    return r;
}

/* Whether candidates a and b say the same: equal, but for a host key
 * record's copy carrying its literal Path's text (SY_CAND_LIT_SELF),
 * whose offset is from itself: the same text and options then. */
static bool same_cand(const sy__cand *a, const sy__cand *b) {
    if (!((a->vars ^ b->vars) & SY_CAND_LIT_SELF))
        return memcmp(a, b, sizeof *a) == 0;
    sy_str x = sy__cand_lit_text(a), y = sy__cand_lit_text(b);
    return a->rtag == b->rtag && a->mbits == b->mbits && a->flags == b->flags &&
           a->nvars == b->nvars && sy__cand_has_lit(a) && sy__cand_has_lit(b) &&
           x.len == y.len && memcmp(x.ptr, y.ptr, x.len) == 0 &&
           ((a->vars ^ b->vars) & ~(SY_CAND_LIT_SELF | 0xffffu)) == 0;
}

/* Slot j of group g's record, or NULL for an empty slot. */
static const char *record_at(const sy__index *ix, uint32_t g, unsigned j) {
    return host_tag_at(&ix->hosts[g], j) ? ix->hkeys + ix->hosts[g].slot[j].off
                                         : NULL;
}

/* The entries of one kind: whole hosts (wild 0) or wildcard keys. */
static size_t keys_in(const sy__index *ix, unsigned wild) {
    size_t k = 0;
    for (uint32_t g = 0; ix->hosts && g <= ix->host_gmask; g++)
        for (unsigned j = 0; j < HG_SLOTS; j++) {
            const char *rec = record_at(ix, g, j);
            uint16_t len, term_len;
            if (!rec)
                continue;
            host_rec_head(rec, &len, &term_len);
            k += (len & HE_WILD) == wild;
        }
    return k;
}

/* The snapshot's routes in rank order, as its index build takes them
 * (route_count entries, malloc'd). */
static sy__index_route *routes_of(const sy_snapshot *s) {
    size_t n = s->route_count;
    sy__index_route *in = malloc(n * sizeof *in);
    ck_assert_ptr_nonnull(in);
    for (size_t i = 0; i < n; i++) {
        uint32_t slot = sy__snapshot_rank_at(s, i);
        const sy__slot *sl = sy__snapshot_slot(s, slot);
        in[i] = (sy__index_route){slot, sl->key, sl->route};
    }
    return in;
}

/* The stepwise build of in[0..n) run `budget` items at a time to its
 * end; *stp is the builder (the caller frees it after the index). */
static sy__index *step_build(const sy__alloc *a, const sy__index_route *in,
                             size_t n, size_t budget, sy__index_step **stp) {
    sy__index_step *st = sy__index_step_new(a);
    ck_assert_ptr_nonnull(st);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(sy__index_step_add(st, &in[i]), 0);
    sy__index *ix = NULL;
    int rc;
    while ((rc = sy__index_step_run(st, budget, &ix)) == 0)
        ;
    ck_assert_int_eq(rc, 1);
    *stp = st;
    return ix;
}

/* The stepwise build's trie tables are the one-shot build's, byte for
 * byte: nodes, the path trie's child table, the host trie's own. */
static void ck_same_trie_tables(const sy__index *sx, const sy__index *ix) {
    ck_assert_uint_eq(sx->node_count, ix->node_count);
    ck_assert_int_eq(
        memcmp(sx->nodes, ix->nodes, ix->node_count * sizeof *ix->nodes), 0);
    ck_assert_uint_eq(sx->slot_mask, ix->slot_mask);
    ck_assert_uint_eq(sx->slot_count, ix->slot_count);
    ck_assert_int_eq(
        memcmp(sx->slots, ix->slots, ix->slot_count * sizeof *ix->slots), 0);
    ck_assert_uint_eq(sx->hslot_mask, ix->hslot_mask);
    ck_assert_uint_eq(sx->hslot_count, ix->hslot_count);
    ck_assert(!sx->hslots == !ix->hslots);
    if (ix->hslots)
        ck_assert_int_eq(memcmp(sx->hslots, ix->hslots,
                                ix->hslot_count * sizeof *ix->hslots),
                         0);
    ck_assert_uint_eq(sx->bytes, ix->bytes);
}

START_TEST(both_builds_make_the_same_whole_host_table) {
    sy_router *r = router_new_of();
    sy_snapshot *h = sy_router_acquire(r);
    const sy_snapshot *s = sy__snapshot_from_handle(h);
    size_t n = s->route_count;
    sy__index_route *in = routes_of(s);
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__index *one;
    ck_assert_int_eq(sy__index_build(&a, in, n, &one), 0);
    ck_assert_uint_eq(keys_in(one, 0), N / 2);
    ck_assert_uint_eq(keys_in(one, HE_WILD), N / 6); /* kind 1's */
    size_t text = 0;
    for (uint32_t g = 0; g <= one->host_gmask; g++) {
        ck_assert_uint_eq(one->hosts[g].tags >> 56, 0);
        for (unsigned j = 0; j < HG_SLOTS; j++) {
            const char *rec = record_at(one, g, j);
            if (!rec)
                continue;
            uint16_t hlen, term_len;
            host_rec_head(rec, &hlen, &term_len);
            size_t len = hlen & HE_MAX_LEN;
            bool wild = hlen & HE_WILD;
            /* each key is a host of the table's kind 0, 2 or 5, or the
             * labels after kind 1's wildcard */
            char k[64];
            ck_assert_uint_lt(len, sizeof k);
            memcpy(k, rec + HK_HEAD, len);
            k[len] = '\0';
            size_t id;
            char tail[32];
            ck_assert_msg(sscanf(k, "%*c%zu.%31s", &id, tail) == 2, "%s", k);
            ck_assert_msg(id < N && (wild ? id % 6 == 1 : is_key(id)), "%s", k);
            char want[64];
            host_of(id, want, sizeof want);
            ck_assert_str_eq(k, wild ? strchr(want, '.') + 1 : want);
            ck_assert_uint_ne(term_len, 0);
            /* its tag; in its hash's group, or a later one past full
             * groups */
            uint64_t h = host_hash(k, len);
            ck_assert_uint_eq(host_tag_at(&one->hosts[g], j), host_tag(h));
            for (uint32_t f = (uint32_t)h & one->host_gmask; f != g;
                 f = (f + 1) & one->host_gmask)
                ck_assert_uint_eq(~one->hosts[f].tags & HT_HIGHS, 0);
            size_t end = one->hosts[g].slot[j].off + HK_HEAD + len;
            text = end > text ? end : text;
        }
    }
    const size_t budgets[] = {1, 7, 4096};
    for (size_t bi = 0; bi < 3; bi++) {
        sy__index_step *st;
        sy__index *ix = step_build(&a, in, n, budgets[bi], &st);
        ck_assert_uint_eq(ix->host_gmask, one->host_gmask);
        ck_assert_int_eq(memcmp(ix->hosts, one->hosts,
                                (one->host_gmask + 1) * sizeof *one->hosts),
                         0);
        ck_assert_uint_eq(ix->hkeys_used, one->hkeys_used);
        ck_assert_uint_ge(one->hkeys_used, text);
        ck_assert_int_eq(memcmp(ix->hkeys, one->hkeys, one->hkeys_used), 0);
        ck_assert_int_eq(memcmp(&ix->hfilt, &one->hfilt, sizeof ix->hfilt), 0);
        ck_assert_uint_eq(ix->bytes, one->bytes);
        ck_assert_uint_ne(one->generic_some, 0);
        ck_assert_uint_eq(ix->generic_some, one->generic_some);
        for (size_t g = 0; g < GENERIC_LISTS; g++)
            ck_assert_uint_eq((ix->generic_some >> g) & 1u,
                              ix->generic[g].len != 0);
        sy__index_unref(ix);
        sy__index_step_free(st);
    }
    sy__index_unref(one);
    free(in);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* A key's list is the host walk's only host list; a non-key host finds
 * nothing in the table. */
START_TEST(a_key_is_the_whole_answer_of_the_host_walk) {
    sy_router *r = router_new_of();
    sy_snapshot *h = sy_router_acquire(r);
    const sy_snapshot *s = sy__snapshot_from_handle(h);
    const sy__index *ix = s->base;
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__arena ar;
    sy__arena_init(&ar, &a, 256);
    sy__segments path = {0}, labels = {0};
    ck_assert(sy__segments_split(&path, (sy_str){"/api/data", 9}, &ar, &a));
    size_t hits = 0, lone = 0;
    for (size_t i = 0; i < N; i++) {
        char host[64];
        host_of(i, host, sizeof host);
        sy_str hs = {host, strlen(host)};
        sy__cand_list key, wkey;
        bool hit = sy__index_host_exact(ix, hs, &key);
        ck_assert_msg(hit == is_key(i), "%s", host);
        bool whit = !hit && index_host_wild(ix, hs, &wkey);
        ck_assert_msg(whit == (i % 6 == 1), "%s", host);
        if (whit) {
            key = wkey;
            hit = true;
        }
        ck_assert(sy__segments_split_host(&labels, hs, &a));
        sy__cand_list out[16];
        size_t k = sy__index_lookup(ix, &path, &labels, 0, out, 16);
        ck_assert_uint_ne(k, SIZE_MAX);
        size_t host_lists = 0;
        for (size_t j = 0; j < k; j++) {
            if (!out[j].host)
                continue;
            host_lists++;
            /* a lone list's candidate is its record's copy, aligned,
             * right before the record; its slot is the pool copy's */
            if (hit && key.len == 1) {
                uintptr_t at = (uintptr_t)(const void *)key.c,
                          lo = (uintptr_t)(const void *)ix->hkeys;
                ck_assert(at >= lo && at - lo < ix->hkeys_used);
                ck_assert_uint_eq(at % 8, 0);
                uint32_t slot, want;
                ck_assert(sy__index_cand_slot(ix, key.c, &slot));
                ck_assert(sy__index_cand_slot(ix, out[j].c, &want));
                ck_assert_uint_eq(slot, want);
                lone++;
            }
            /* the same candidates (an X_LONE node's is a copy of the
             * pool's, which the key names; the record's copy may carry
             * its literal's text) */
            if (hit) {
                ck_assert(out[j].len == key.len && out[j].proof == key.proof &&
                          out[j].exact == key.exact && key.host);
                for (size_t c = 0; c < key.len; c++)
                    ck_assert(same_cand(&out[j].c[c], &key.c[c]));
            }
        }
        if (hit) {
            ck_assert_uint_eq(host_lists, 1);
            hits += !whit;
        } else {
            ck_assert_uint_ge(host_lists, 1); /* its route's list */
        }
        /* a spelling the walk reads the same is no key: it is walked */
        char odd[80];
        snprintf(odd, sizeof odd, "%s.", host);
        ck_assert(!sy__index_host_exact(ix, (sy_str){odd, strlen(odd)}, &key));
        ck_assert(!index_host_wild(ix, (sy_str){odd, strlen(odd)}, &key));
        /* nor a wildcard label that is empty or two labels */
        if (i % 6 == 1) {
            const char *suffix = strchr(host, '.');
            snprintf(odd, sizeof odd, "%s", suffix);
            ck_assert(!index_host_wild(ix, (sy_str){odd, strlen(odd)}, &key));
            snprintf(odd, sizeof odd, "a.b%s", suffix);
            ck_assert(!index_host_wild(ix, (sy_str){odd, strlen(odd)}, &key));
        }
    }
    ck_assert_uint_eq(hits, N / 2);
    ck_assert_uint_eq(lone, N / 2 + N / 6); /* every key's list is one */
    sy__segments_free(&path, &a);
    sy__segments_free(&labels, &a);
    sy__arena_free(&ar);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* The route and captures of the indexed matcher equal the linear scan's
 * for every route's host, spelled as routed and oddly (case, trailing or
 * leading '.', an empty label, a port, a near miss), several paths and
 * methods; the same context throughout, so labels left by one request
 * must not leak into the next one's answer. */

/* The scan's match b has the same variables as the index's (na of them,
 * the first 4 in vals). */
static void assert_same_vars(const sy_str *vals, size_t na, const sy_match *b) {
    ck_assert_uint_eq(na, b ? sy_match_var_count(b) : 0);
    for (size_t k = 0; k < na && k < 4; k++) {
        sy_str vb;
        sy_match_var(b, k, NULL, &vb);
        ck_assert(vals[k].len == vb.len &&
                  memcmp(vals[k].ptr, vb.ptr, vb.len) == 0);
    }
}

START_TEST(matching_through_the_table_equals_the_scan) {
    sy_router *r = router_new_of();
    sy_snapshot *h = sy_router_acquire(r);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    const char *paths[] = {"/api/data", "/v/7", "/other", "/", NULL};
    char only[32];
    static const char *const methods[] = {"GET", "POST"};
    size_t found = 0, checked = 0;
    for (size_t i = 0; i < N; i++) {
        char base[64], host[96];
        host_of(i, base, sizeof base);
        snprintf(only, sizeof only, "/only%zu", i);
        paths[4] = only;
        for (int v = 0; v < 7; v++) {
            switch (v) {
            case 0: snprintf(host, sizeof host, "%s", base); break;
            case 1: snprintf(host, sizeof host, "%s.", base); break;
            case 2: snprintf(host, sizeof host, ".%s", base); break;
            case 3: snprintf(host, sizeof host, "%s:8080", base); break;
            case 4: /* an empty label: Ant drops it */
                snprintf(host, sizeof host, "%s", base);
                {
                    char *dot = strchr(host, '.');
                    memmove(dot + 1, dot, strlen(dot) + 1);
                }
                break;
            case 5:
                snprintf(host, sizeof host, "%s", base);
                host[0] = (char)(host[0] - 'a' + 'A');
                break;
            default: snprintf(host, sizeof host, "q%s", base); break;
            }
            for (size_t p = 0; p < 5; p++)
                for (size_t m = 0; m < 2; m++) {
                    sy_request req = SY_REQUEST_INIT;
                    req.method = (sy_str){methods[m], strlen(methods[m])};
                    req.path = (sy_str){paths[p], strlen(paths[p])};
                    req.host = (sy_str){host, strlen(host)};
                    sy_match *a = NULL, *b = NULL;
                    ck_assert_int_eq(sy_snapshot_match(h, ctx, &req, &a), 0);
                    const sy_route *ra = a ? sy_match_route(a) : NULL;
                    size_t na = a ? sy_match_var_count(a) : 0;
                    sy_str vals[4];
                    for (size_t k = 0; k < na && k < 4; k++)
                        sy_match_var(a, k, NULL, &vals[k]);
                    ck_assert_int_eq(sy_snapshot_match_linear(h, ctx, &req, &b),
                                     0);
                    const sy_route *rb = b ? sy_match_route(b) : NULL;
                    ck_assert_msg(ra == rb, "%s %s%s: index %s, scan %s",
                                  methods[m], host, paths[p],
                                  ra ? sy_route_id(ra) : "-",
                                  rb ? sy_route_id(rb) : "-");
                    assert_same_vars(vals, na, b);
                    found += ra != NULL;
                    checked++;
                }
        }
    }
    /* most requests of the exact spelling find their route */
    ck_assert_uint_gt(found, N * 4);
    ck_assert_uint_eq(checked, (size_t)N * 7 * 10);
    sy_match_ctx_free(ctx);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

static int match_one(sy_snapshot *h, sy_match_ctx *ctx, const char *host,
                     const char *path, const sy_route **route) {
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){path, strlen(path)};
    req.host = (sy_str){host, strlen(host)};
    sy_match *m = NULL;
    int rc = sy_snapshot_match(h, ctx, &req, &m);
    *route = m ? sy_match_route(m) : NULL;
    return rc;
}

/* A host the table answers is never split (the context's label arrays
 * stay unallocated); a split needed later (a Host predicate after a hit,
 * the walk after a miss) that cannot allocate fails the match with
 * SY_ENOMEM and no route, and the next match, with memory, is right. */
START_TEST(labels_are_split_only_on_need_and_a_failed_split_is_reported) {
    sy_router *r = router_new_of();
    sy_snapshot *h = sy_router_acquire(r);
    for (int miss = 0; miss < 2; miss++) {
        sy_test_alloc c = {0};
        sy_allocator al = sy_test_allocator(&c);
        sy_match_ctx *ctx;
        ck_assert_int_eq(sy_match_ctx_new(&al, &ctx, NULL), 0);
        const sy_route *rt;
        ck_assert_int_eq(match_one(h, ctx, "h0.example.com", "/api/data", &rt),
                         0);
        ck_assert_ptr_nonnull(rt);
        ck_assert_str_eq(sy_route_id(rt), "r0");
        ck_assert_ptr_null(ctx->host.dec); /* never split */
        /* a wildcard key's hit needs no labels either */
        ck_assert_int_eq(match_one(h, ctx, "eu.w1.example.com", "/", &rt), 0);
        ck_assert_ptr_nonnull(rt);
        ck_assert_str_eq(sy_route_id(rt), "r1");
        ck_assert_ptr_null(ctx->host.dec);
        /* a literal Host predicate the unsplit host decides: none */
        ck_assert_int_eq(match_one(h, ctx, "h0.example.com", "/only0", &rt), 0);
        ck_assert_ptr_nonnull(rt);
        ck_assert_str_eq(sy_route_id(rt), "b0");
        ck_assert_ptr_null(ctx->host.dec);
        /* a host walked ("**" on the way), or one with an empty label
         * (longer than the literal: its labels decide) */
        const char *host = miss ? "x.y.z3.example.net" : "h0..example.com";
        const char *path = miss ? "/" : "/only0";
        const char *want = miss ? "r3" : "b0";
        c.calls = 0;
        c.fail_at = 1; /* the labels' arrays are the next allocation */
        ck_assert_int_eq(match_one(h, ctx, host, path, &rt), SY_ENOMEM);
        ck_assert_ptr_null(rt);
        c.fail_at = 0;
        ck_assert_int_eq(match_one(h, ctx, host, path, &rt), 0);
        ck_assert_ptr_nonnull(rt);
        ck_assert_str_eq(sy_route_id(rt), want);
        ck_assert_ptr_nonnull(ctx->host.dec);
        sy_match_ctx_free(ctx);
        ck_assert_int_eq(c.live, 0);
    }
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* A wildcard key's captures are the request's first label, as the
 * scan's: a named label, a "*" beside a literal sibling's own key, and
 * spellings the key must not answer (no first label, an empty one, two,
 * another case, a trailing '.'). */
START_TEST(a_wildcard_keys_captures_are_the_first_label) {
    /* the first document builds the base index (later one-route changes
     * would go to the overlay) */
    char doc[4096];
    size_t o =
        (size_t)snprintf(doc, sizeof doc, "%s",
                         "[{\"id\":\"n\",\"uri\":\"http://b\",\"predicates\":"
                         "[\"Host={sub}.t.example.com\"]},"
                         "{\"id\":\"s\",\"uri\":\"http://b\",\"predicates\":"
                         "[\"Host=*.u.example.com\"]},"
                         "{\"id\":\"l\",\"uri\":\"http://b\",\"predicates\":"
                         "[\"Host=u.example.com\"]}");
    for (int i = 0; i < 40; i++)
        o += (size_t)snprintf(doc + o, sizeof doc - o,
                              ",{\"id\":\"f%d\",\"uri\":\"http://b\","
                              "\"predicates\":[\"Host=f%d.example.org\"]}",
                              i, i);
    o += (size_t)snprintf(doc + o, sizeof doc - o, "]");
    ck_assert_uint_lt(o, sizeof doc);
    sy_router *r = sy_test_router(doc, o);
    sy_snapshot *h = sy_router_acquire(r);
    const sy__index *ix = sy__snapshot_from_handle(h)->base;
    ck_assert_uint_eq(keys_in(ix, HE_WILD), 2);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    static const char *const hosts[] = {
        "eu.t.example.com", "x.u.example.com",   "u.example.com",
        ".t.example.com",   "a..t.example.com",  "a.b.t.example.com",
        "eu.T.example.com", "eu.t.example.com.", "t.example.com"};
    size_t found = 0;
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        sy_request req = SY_REQUEST_INIT;
        req.method = (sy_str){"GET", 3};
        req.path = (sy_str){"/p/7", 4};
        req.host = (sy_str){hosts[i], strlen(hosts[i])};
        sy_match *a = NULL, *b = NULL;
        ck_assert_int_eq(sy_snapshot_match(h, ctx, &req, &a), 0);
        const sy_route *ra = a ? sy_match_route(a) : NULL;
        size_t na = a ? sy_match_var_count(a) : 0;
        sy_str vals[4];
        for (size_t k = 0; k < na && k < 4; k++)
            sy_match_var(a, k, NULL, &vals[k]);
        ck_assert_int_eq(sy_snapshot_match_linear(h, ctx, &req, &b), 0);
        const sy_route *rb = b ? sy_match_route(b) : NULL;
        ck_assert_msg(ra == rb, "%s: index %s, scan %s", hosts[i],
                      ra ? sy_route_id(ra) : "-", rb ? sy_route_id(rb) : "-");
        assert_same_vars(vals, na, b);
        found += ra != NULL;
    }
    ck_assert_uint_ge(found, 3); /* n with sub=eu, s, l */
    sy_match_ctx_free(ctx);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* ---- the node layout (index_int.h) ---- */

/* The layout table: under /k<n>/ n literal children (1 .. 5: compared one
 * by one up to DIRECT_MAX, then through the child table), with a wildcard
 * child beside 2 (k6) or 6 (k7), long literals compared past their words
 * (k8, direct; k9, hashed), and a node whose lists do not follow each
 * other in the pool (s: a route's two equal patterns keep one entry,
 * then a multi list): its lists in the side table. */
static const char *const layout_paths[] = {"/k1/a",
                                           "/k2/a",
                                           "/k2/b",
                                           "/k3/a",
                                           "/k3/b",
                                           "/k3/c",
                                           "/k4/a",
                                           "/k4/b",
                                           "/k4/c",
                                           "/k4/d",
                                           "/k5/a",
                                           "/k5/b",
                                           "/k5/c",
                                           "/k5/d",
                                           "/k5/e",
                                           "/k6/{x}",
                                           "/k6/a",
                                           "/k6/b",
                                           "/k7/{x}",
                                           "/k7/a",
                                           "/k7/b",
                                           "/k7/c",
                                           "/k7/d",
                                           "/k7/e",
                                           "/k7/f",
                                           "/k8/abcdefgh-ijklmnop-1",
                                           "/k8/abcdefgh-ijklmnop-2",
                                           "/k8/abcdefgh",
                                           "/k9/abcdefgh-ijklmnop-qrstuvwx",
                                           "/k9/abcdefgh-ijklmno",
                                           "/k9/abcdefgh-ijklmnop",
                                           "/k9/abcdefgh",
                                           "/k9/abcdefg",
                                           "/k9/x/y/z",
                                           NULL};

static sy_router *layout_router(void) {
    size_t cap = 8192, o = 0;
    char *doc = malloc(cap);
    ck_assert_ptr_nonnull(doc);
    doc[o++] = '[';
    for (size_t i = 0; layout_paths[i]; i++)
        o += (size_t)snprintf(doc + o, cap - o,
                              "%s{\"id\":\"p%zu\",\"uri\":\"http://b\","
                              "\"predicates\":[\"Path=%s\"]}",
                              i ? "," : "", i, layout_paths[i]);
    o += (size_t)snprintf(doc + o, cap - o,
                          ",{\"id\":\"s1\",\"uri\":\"http://b\",\"order\":1,"
                          "\"predicates\":[\"Path=/s/a,/s/a\"]}"
                          ",{\"id\":\"s2\",\"uri\":\"http://b\",\"order\":2,"
                          "\"predicates\":[\"Path=/s/a\"]}"
                          ",{\"id\":\"s3\",\"uri\":\"http://b\",\"order\":3,"
                          "\"predicates\":[\"Path=/s/a/**\"]}]");
    sy_router *r = sy_test_router(doc, o);
    free(doc);
    return r;
}

/* The words a node keeps of its segment, as index_int.h spells them:
 * 8 bytes or more: the first 8, then bytes 8 .. 15 (16 or more) or the
 * last 8 (else); 4 .. 7: the first 4 and the last 4; fewer: the first,
 * the middle and the last byte. */
static void words_of(const char *s, size_t len, uint64_t *w0, uint64_t *w1) {
    unsigned char b[16] = {0};
    *w0 = *w1 = 0;
    if (len >= 8) {
        memcpy(b, s, 8);
        memcpy(b + 8, len >= 16 ? s + 8 : s + len - 8, 8);
    } else if (len >= 4) {
        memcpy(b, s, 4);
        memcpy(b + 4, s + len - 4, 4);
    } else if (len) {
        b[0] = (unsigned char)s[0];
        b[1] = (unsigned char)s[len / 2];
        b[2] = (unsigned char)s[len - 1];
    }
    memcpy(w0, b, 8);
    memcpy(w1, b + 8, 8);
}

static bool node_spells(const sy__index *ix, const xnode *y, const char *seg) {
    size_t len = strlen(seg);
    uint64_t w0, w1;
    words_of(seg, len, &w0, &w1);
    if (y->len != len || y->w0 != w0)
        return false;
    if (len <= KEY_BYTES) /* a short one's w0 is all of it (X_LONE) */
        return len < 8 || y->w1 == w1;
    return memcmp(ix->strings + y->w1, seg + 8, len - 8) == 0;
}

/* The node a literal segment leads to from `n`, by the layout's rules
 * alone (not the lookup's code): NONE when there is none. */
static uint32_t layout_child(const sy__index *ix, uint32_t n, const char *seg) {
    const xnode *x = &ix->nodes[n];
    uint32_t kid = x->shape & X_HCHILD ? n + 1 : x->kids;
    kid += (x->shape & X_WILD) != 0;
    for (uint32_t c = 0; c < (x->shape & X_NLIT); c++) {
        ck_assert(!(ix->nodes[kid + c].shape & X_HCHILD));
        if (node_spells(ix, &ix->nodes[kid + c], seg))
            return kid + c;
    }
    uint32_t found = NONE;
    /* every entry of n in both child tables (the path trie's, the host
     * trie's) */
    for (int t = 0; t < 2 && (x->shape & X_HASH); t++) {
        const xslot *sl = t ? ix->hslots : ix->slots;
        uint32_t count = t ? ix->hslot_count : ix->slot_count;
        for (uint32_t i = 0; sl && i < count; i++) {
            uint32_t c = sl[i].child;
            if (!c || !(ix->nodes[c].shape & X_HCHILD) ||
                ix->nodes[c].kids != n)
                continue;
            if (node_spells(ix, &ix->nodes[c], seg)) {
                ck_assert_uint_eq(found, NONE); /* one entry a child */
                found = c;
            }
        }
    }
    return found;
}

static uint32_t layout_walk(const sy__index *ix, const char *path) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path + 1);
    uint32_t n = ROOT_PATH;
    for (char *seg = strtok(buf, "/"); seg && n != NONE;
         seg = strtok(NULL, "/"))
        n = layout_child(ix, n, seg);
    return n;
}

/* Each node's shape says how many literal children it has and how they
 * are found, and they are where it says: a few right at its kids (after
 * its wildcard child), more in the child table with their parent in their
 * kids field; both builds lay the nodes out alike. */
START_TEST(nodes_are_laid_out_by_their_number_of_children) {
    sy_router *r = layout_router();
    sy_snapshot *h = sy_router_acquire(r);
    const sy_snapshot *s = sy__snapshot_from_handle(h);
    const sy__index *ix = s->base;
    static const struct {
        const char *at;
        uint16_t shape; /* X_NLIT | X_WILD | X_HASH */
    } want[] = {{"/k1", 1},
                {"/k2", 2},
                {"/k3", 3},
                {"/k4", 4},
                {"/k5", X_HASH},
                {"/k6", X_WILD | 2},
                {"/k7", X_WILD | X_HASH},
                {"/k8", 3},
                {"/k9", X_HASH}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        uint32_t n = layout_walk(ix, want[i].at);
        ck_assert_msg(n != NONE, "%s", want[i].at);
        ck_assert_msg((ix->nodes[n].shape & (X_NLIT | X_WILD | X_HASH)) ==
                          want[i].shape,
                      "%s: shape %x", want[i].at, ix->nodes[n].shape);
    }
    /* the root's children (k1 .. k9, s) are in the child table */
    ck_assert(ix->nodes[ROOT_PATH].shape & X_HASH);
    for (size_t i = 0; layout_paths[i]; i++) {
        char p[64];
        snprintf(p, sizeof p, "%s", layout_paths[i]);
        char *brace = strchr(p, '{');
        if (brace)
            continue; /* a wildcard: not a literal walk */
        uint32_t n = layout_walk(ix, p);
        ck_assert_msg(n != NONE, "%s", p);
        ck_assert_msg(ix->nodes[n].tlen == 1 ||
                          (ix->nodes[n].shape & (X_SIDE | X_LONE)),
                      "%s", p);
    }
    /* s/a: two patterns of s1 kept once, then s2 in the term list, s3 in
     * the multi list, apart in the pool: in the side table */
    uint32_t sa = layout_walk(ix, "/s/a");
    ck_assert(sa != NONE && (ix->nodes[sa].shape & X_SIDE));
    ck_assert_uint_eq(ix->nodes[sa].tlen, UINT16_MAX);
    ck_assert_uint_ge(ix->nside, 1);
    /* near misses: no node */
    ck_assert(layout_walk(ix, "/k4/e") == NONE);
    ck_assert(layout_walk(ix, "/k5/f") == NONE);
    ck_assert(layout_walk(ix, "/k8/abcdefgh-ijklmnop-3") == NONE);
    ck_assert(layout_walk(ix, "/k9/abcdefgh-ijklmnop-qrstuvwy") == NONE);
    /* a lone candidate is in its leaf (X_LONE) where the leaf's fields are
     * free: under a node of a few children (k1/a), not under an X_HASH
     * node (k5/a: kids is the parent), not a segment of 8 bytes or more
     * (k8/abcdefgh: w1 compared); it is its pool copy, and its slot is
     * the copy's */
    ck_assert(ix->nodes[layout_walk(ix, "/k1/a")].shape & X_LONE);
    ck_assert(ix->nodes[layout_walk(ix, "/k4/d")].shape & X_LONE);
    ck_assert(!(ix->nodes[layout_walk(ix, "/k5/a")].shape & X_LONE));
    ck_assert(!(ix->nodes[layout_walk(ix, "/k8/abcdefgh")].shape & X_LONE));
    size_t lone = 0;
    for (uint32_t j = 0; j < ix->node_count; j++) {
        const xnode *x = &ix->nodes[j];
        if (!(x->shape & X_LONE))
            continue;
        lone++;
        ck_assert(!(x->shape &
                    (X_NLIT | X_WILD | X_HASH | X_HCHILD | X_SIDE | X_MULTI)));
        ck_assert_uint_lt(x->len, 8);
        ck_assert_uint_lt(x->kids, ix->ncands);
        ck_assert_int_eq(
            memcmp(xnode_lone(x), &ix->cands[x->kids], sizeof(sy__cand)), 0);
        uint32_t slot = NONE;
        ck_assert(sy__index_cand_slot(ix, xnode_lone(x), &slot));
        ck_assert_uint_eq(slot, ix->cslots[x->kids]);
    }
    ck_assert_uint_ge(lone, 10);

    /* the stepwise build lays out the same nodes, table and side lists */
    size_t n = s->route_count;
    sy__index_route *in = routes_of(s);
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__index_step *st;
    sy__index *sx = step_build(&a, in, n, 3, &st);
    ck_same_trie_tables(sx, ix);
    ck_assert_uint_eq(sx->nside, ix->nside);
    ck_assert_int_eq(memcmp(sx->side, ix->side, ix->nside * sizeof *ix->side),
                     0);
    sy__index_unref(sx);
    sy__index_step_free(st);
    free(in);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* Match `path` with the index and with the scan: the same route. */
static const sy_route *match_both(sy_snapshot *h, sy_match_ctx *ctx,
                                  const char *path) {
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){path, strlen(path)};
    sy_match *a = NULL, *b = NULL;
    ck_assert_int_eq(sy_snapshot_match(h, ctx, &req, &a), 0);
    const sy_route *ra = a ? sy_match_route(a) : NULL;
    ck_assert_int_eq(sy_snapshot_match_linear(h, ctx, &req, &b), 0);
    const sy_route *rb = b ? sy_match_route(b) : NULL;
    ck_assert_msg(ra == rb, "%s: index %s, scan %s", path,
                  ra ? sy_route_id(ra) : "-", rb ? sy_route_id(rb) : "-");
    return ra;
}

/* A candidate carries where its route's predicate objects lie and how
 * many there are (sy__cand_tag), so a lookup reads no line of the route's
 * struct for them: 1-15 objects within 16 KiB either side of the route,
 * else none (the matcher reads the route). Then the index's candidates of
 * routes of 1, 2, 15, 16 and 17 predicates, each a walk-proven Path and
 * Header presences: the tag where it fits, and the lookups that take the
 * tag's objects or the route's (16 and 17) find what the scan finds, and
 * miss when the last Header is missing (a count or offset off by one,
 * or a route read past its objects, fails). */
START_TEST(a_candidate_carries_its_routes_predicates) {
    char *area = malloc(3 * 16384 + 64);
    ck_assert_ptr_nonnull(area);
    struct sy_route *fr = (struct sy_route *)(void *)(area + 16384 + 32);
    memset(fr, 0, sizeof *fr);
    static const struct {
        ptrdiff_t off;
        size_t n;
        bool tagged;
    } cases[] = {{-16384, 3, true}, {16376, 3, true}, {-16392, 3, false},
                 {16384, 3, false}, {120, 1, true},   {120, 15, true},
                 {120, 16, false},  {124, 3, false},  {-8, 2, true}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fr->predicate_count = (uint16_t)cases[i].n;
        fr->cpred = (struct sy__pred *)(void *)((char *)fr + cases[i].off);
        sy__cand cd = {sy__cand_tag(fr), 0, 0, 0, 0};
        ck_assert_ptr_eq(sy__cand_route(&cd), fr);
        bool tagged = SY_CAND_TAGGED && cases[i].tagged; /* x86-64 only */
        ck_assert_uint_eq((uint64_t)cd.rtag >> 48 != 0, tagged);
        fr->predicate_count = 0; /* the tag's, not the route's */
        fr->cpred = NULL;
        size_t n = 99;
        const sy__pred *p = sy__cand_preds(&cd, fr, &n);
        if (tagged) {
            ck_assert_uint_eq(n, cases[i].n);
            ck_assert_ptr_eq(p, (const char *)fr + cases[i].off);
        } else {
            ck_assert_uint_eq(n, 0);
            ck_assert_ptr_null(p);
        }
    }
    free(area);

    static const size_t counts[] = {1, 2, 15, 16, 17};
    enum { NR = sizeof counts / sizeof *counts };
    char doc[8192];
    size_t o = 0;
    doc[o++] = '[';
    for (size_t j = 0; j < NR; j++) {
        o += (size_t)snprintf(doc + o, sizeof doc - o,
                              "%s{\"id\":\"t%zu\",\"uri\":\"http://b\","
                              "\"predicates\":[\"Path=/t%zu/{id}\"",
                              j ? "," : "", j, j);
        for (size_t k = 1; k < counts[j]; k++)
            o += (size_t)snprintf(doc + o, sizeof doc - o, ",\"Header=X-H%zu\"",
                                  k);
        o += (size_t)snprintf(doc + o, sizeof doc - o, "]}");
    }
    o += (size_t)snprintf(doc + o, sizeof doc - o, "]");
    ck_assert_uint_lt(o, sizeof doc);
    sy_router *r = sy_test_router(doc, o);
    sy_snapshot *h = sy_router_acquire(r);
    const sy__index *ix = sy__snapshot_from_handle(h)->base;
    size_t seen = 0;
    for (uint32_t i = 0; i < ix->ncands; i++) {
        const sy__cand *cd = &ix->cands[i];
        const struct sy_route *rt = sy__cand_route(cd);
        size_t n = 99;
        const sy__pred *p = sy__cand_preds(cd, rt, &n);
        ck_assert_uint_eq(n, rt->predicate_count);
        ck_assert_ptr_eq(p, sy__route_cpred(rt, 0));
        ck_assert_uint_eq(cd->rtag >> 48 != 0, rt->predicate_count <= 15);
        ck_assert(cd->flags & SY_CAND_WALK);
        seen++;
    }
    ck_assert_uint_eq(seen, NR);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_header hs[20];
    char names[20][8];
    for (size_t j = 0; j < NR; j++)
        for (size_t drop = 0; drop < 2; drop++) {
            size_t nh = counts[j] - 1 - (drop && counts[j] > 1);
            for (size_t k = 0; k < nh; k++) {
                snprintf(names[k], sizeof names[k], "X-H%zu", k + 1);
                hs[k] = (sy_header){{names[k], strlen(names[k])}, {"v", 1}};
            }
            char path[32];
            snprintf(path, sizeof path, "/t%zu/42", j);
            sy_request req = SY_REQUEST_INIT;
            req.method = (sy_str){"GET", 3};
            req.path = (sy_str){path, strlen(path)};
            req.headers = hs;
            req.header_count = nh;
            sy_match *a = NULL, *b = NULL;
            ck_assert_int_eq(sy_snapshot_match(h, ctx, &req, &a), 0);
            const sy_route *ra = a ? sy_match_route(a) : NULL;
            ck_assert_int_eq(sy_snapshot_match_linear(h, ctx, &req, &b), 0);
            const sy_route *rb = b ? sy_match_route(b) : NULL;
            ck_assert_ptr_eq(ra, rb);
            bool want = !drop || counts[j] == 1;
            ck_assert_msg(want == (ra != NULL), "t%zu drop %zu: %s", j, drop,
                          ra ? sy_route_id(ra) : "-");
            if (ra) {
                char id[8];
                snprintf(id, sizeof id, "t%zu", j);
                ck_assert_str_eq(sy_route_id(ra), id);
            }
        }
    sy_match_ctx_free(ctx);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* Every layout path finds its route through the index, and near misses
 * (one byte off in the first word, the second, past both, one byte
 * longer or shorter) find what the scan finds. */
START_TEST(matching_through_each_shape_equals_the_scan) {
    sy_router *r = layout_router();
    sy_snapshot *h = sy_router_acquire(r);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    for (size_t i = 0; layout_paths[i]; i++) {
        char p[64], id[16];
        snprintf(p, sizeof p, "%s", layout_paths[i]);
        char *brace = strchr(p, '{');
        if (brace)
            snprintf(brace, sizeof p - (size_t)(brace - p), "zz");
        const sy_route *rt = match_both(h, ctx, p);
        snprintf(id, sizeof id, "p%zu", i);
        /* k6/k7: the earlier {x} route takes its literal siblings' paths */
        bool wild_first =
            strncmp(p, "/k6/", 4) == 0 || strncmp(p, "/k7/", 4) == 0;
        ck_assert_msg(rt && (wild_first || strcmp(sy_route_id(rt), id) == 0),
                      "%s", p);
        size_t len = strlen(p);
        for (size_t k = 4; k < len; k++) { /* one byte off, each place */
            char q[64];
            memcpy(q, p, len + 1);
            q[k] = q[k] == '-' ? '+' : '-';
            match_both(h, ctx, q);
        }
        char q[72];
        snprintf(q, sizeof q, "%sq", p);
        match_both(h, ctx, q);
        memcpy(q, p, len - 1);
        q[len - 1] = '\0';
        match_both(h, ctx, q);
    }
    const sy_route *rt = match_both(h, ctx, "/s/a");
    ck_assert(rt && strcmp(sy_route_id(rt), "s1") == 0);
    rt = match_both(h, ctx, "/s/a/b/c");
    ck_assert(rt && strcmp(sy_route_id(rt), "s3") == 0);
    sy_match_ctx_free(ctx);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* A router holding n routes "<id><i>" whose only predicate is Path with
 * path_fmt's pattern for i (one %zu in it). */
static sy_router *numbered_router(size_t n, const char *id,
                                  const char *path_fmt) {
    size_t cap = n * 96 + 16, o = 0;
    char *doc = malloc(cap);
    ck_assert_ptr_nonnull(doc);
    doc[o++] = '[';
    for (size_t i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, path_fmt, i);
        o += (size_t)snprintf(doc + o, cap - o,
                              "%s{\"id\":\"%s%zu\",\"uri\":\"http://b\","
                              "\"predicates\":[\"Path=%s\"]}",
                              i ? "," : "", id, i, path);
    }
    doc[o++] = ']';
    sy_router *r = sy_test_router(doc, o);
    free(doc);
    return r;
}

/* A child table at its highest load (2/3: 683 children in 1,024 slots)
 * and one past it (twice the slots): every child found, every other
 * segment not. */
START_TEST(a_child_table_at_its_highest_load_finds_every_child) {
    const size_t counts[] = {683, 684};
    for (size_t ci = 0; ci < 2; ci++) {
        size_t n = counts[ci];
        sy_router *r = numbered_router(n, "c", "/c%zu");
        sy_snapshot *h = sy_router_acquire(r);
        const sy__index *ix = sy__snapshot_from_handle(h)->base;
        ck_assert_uint_eq(ix->slot_mask + 1, ci ? 2048 : 1024);
        size_t used = 0;
        for (uint32_t i = 0; i < ix->slot_count; i++)
            used += ix->slots[i].child != 0;
        ck_assert_uint_eq(used, n);
        sy_match_ctx *ctx;
        ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
        for (size_t i = 0; i < n + 64; i++) {
            char p[32], id[32];
            snprintf(p, sizeof p, "/c%zu", i);
            const sy_route *rt = match_both(h, ctx, p);
            snprintf(id, sizeof id, "c%zu", i);
            if (i < n)
                ck_assert_msg(rt && strcmp(sy_route_id(rt), id) == 0, "%s", p);
            else
                ck_assert_ptr_null(rt);
        }
        sy_match_ctx_free(ctx);
        sy_snapshot_release(h);
        sy_router_free(r);
    }
}
END_TEST

/* The child table spreads short segments that differ in a byte or two
 * ("p0" .. "p4095" under the root): no run of occupied slots is long
 * (at load 1/2 the longest is ~20; a hash keeping the low bytes' poor
 * spread made runs of ~400, and probes ~15x longer). */
START_TEST(the_child_table_spreads_short_segments) {
    enum { K = 4096 };
    sy_router *r = numbered_router(K, "p", "/p%zu/**");
    sy_snapshot *h = sy_router_acquire(r);
    const sy__index *ix = sy__snapshot_from_handle(h)->base;
    ck_assert_uint_eq(ix->slot_mask + 1, 2 * K);
    size_t run = 0, longest = 0;
    for (size_t i = 0; i < ix->slot_count; i++) {
        run = ix->slots[i].child ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    ck_assert_msg(longest <= 64, "a run of %zu occupied slots", longest);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* The child table in ordered linear probing: an entry at or past its
 * home with no empty slot between, each run in order of its hashes (so
 * a probe stops at the first larger one), the last slot empty. Here 100
 * of the root's 512 children have their homes in the table's last 8
 * slots, so their run passes the mask's end and the tail grows: every
 * child is found, misses are not, and the stepwise build lays out the
 * same table. */
START_TEST(the_child_table_keeps_runs_in_order_and_grows_its_tail) {
    enum { N = 512, LAST = 100 };
    size_t cap = N * 96 + 16, o = 0, near = 0, far = 0;
    char *doc = malloc(cap), (*seg)[16] = malloc(N * sizeof *seg);
    ck_assert(doc && seg);
    doc[o++] = '[';
    for (size_t k = 0; near + far < N; k++) {
        char t[16];
        snprintf(t, sizeof t, "e%zu", k);
        uint64_t h = child_hash(ROOT_PATH, segment_key(t, strlen(t)).hash);
        bool at_end = child_slot(h, 2 * N - 1) >= 2 * N - 8;
        if (at_end ? near == LAST : far == N - LAST)
            continue;
        size_t i = near + far;
        memcpy(seg[i], t, sizeof t);
        near += at_end;
        far += !at_end;
        o += (size_t)snprintf(doc + o, cap - o,
                              "%s{\"id\":\"%s\",\"uri\":\"http://b\","
                              "\"predicates\":[\"Path=/%s\"]}",
                              i ? "," : "", t, t);
    }
    doc[o++] = ']';
    sy_router *r = sy_test_router(doc, o);
    free(doc);
    sy_snapshot *h = sy_router_acquire(r);
    const sy_snapshot *s = sy__snapshot_from_handle(h);
    const sy__index *ix = s->base;
    ck_assert_uint_eq(ix->slot_mask + 1, 2 * N);
    ck_assert_uint_gt(ix->slot_count, 2 * N + SLOT_TAIL);
    ck_assert_uint_eq(ix->slots[ix->slot_count - 1].child, 0);
    size_t used = 0;
    for (uint32_t i = 0; i < ix->slot_count; i++) {
        const xslot *e = &ix->slots[i];
        if (!e->child)
            continue;
        used++;
        uint32_t home = (~e->ntag) >> (ix->slot_shift - 32);
        ck_assert_uint_le(home, i);
        for (uint32_t k = home; k < i; k++) /* its run, in order */
            ck_assert_uint_ge(ix->slots[k].ntag, ix->slots[k + 1].ntag);
        ck_assert(i == home || ix->slots[i - 1].child);
    }
    ck_assert_uint_eq(used, N);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    for (size_t i = 0; i < N; i++) {
        char p[32];
        snprintf(p, sizeof p, "/%s", seg[i]);
        const sy_route *rt = match_both(h, ctx, p);
        ck_assert_msg(rt && strcmp(sy_route_id(rt), seg[i]) == 0, "%s", p);
        snprintf(p, sizeof p, "/%sx", seg[i]);
        ck_assert_ptr_null(match_both(h, ctx, p));
    }
    sy_match_ctx_free(ctx);

    sy__index_route *in = routes_of(s);
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__index_step *st;
    sy__index *sx = step_build(&a, in, s->route_count, 3, &st);
    ck_same_trie_tables(sx, ix);
    sy__index_unref(sx);
    sy__index_step_free(st);
    free(in);
    free(seg);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* Literal segments of every length class the keys treat apart (1..3,
 * 4..7, 8..15, 16, longer: 17, 24, 64), 8 of each under a node that
 * hashes them (/h/, 104 children) and 3 under one that compares them
 * one by one (/d<len>/): each found, and a request one byte off at each
 * place, a byte shorter or longer, or spelled with %xx escapes finds what
 * the scan finds. */
static const size_t key_lens[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 64};
enum { NKL = sizeof key_lens / sizeof key_lens[0] };

static void key_seg(size_t li, size_t j, char *out) {
    uint32_t x = (uint32_t)(li * 131 + j * 7919 + 17);
    for (size_t k = 0; k < key_lens[li]; k++) {
        x = x * 1103515245u + 12345u;
        out[k] = "abcdefghijklmnopqrstuvwxyz0123456789"[(x >> 16) % 36];
    }
    out[0] = (char)('a' + j); /* the 8 of a length differ */
    out[key_lens[li]] = '\0';
}

START_TEST(segments_of_each_length_are_keyed_as_the_scan_reads_them) {
    size_t cap = 64 * 1024, o = 0;
    char *doc = malloc(cap);
    ck_assert_ptr_nonnull(doc);
    doc[o++] = '[';
    for (size_t li = 0; li < NKL; li++)
        for (size_t j = 0; j < 8; j++) {
            char seg[72];
            key_seg(li, j, seg);
            o += (size_t)snprintf(doc + o, cap - o,
                                  "%s{\"id\":\"h%zu_%zu\",\"uri\":\"http://b\","
                                  "\"predicates\":[\"Path=/h/%s\"]}",
                                  o > 1 ? "," : "", li, j, seg);
            if (j < 3)
                o += (size_t)snprintf(
                    doc + o, cap - o,
                    ",{\"id\":\"d%zu_%zu\",\"uri\":\"http://b\","
                    "\"predicates\":[\"Path=/d%zu/%s/x\"]}",
                    li, j, li, seg);
        }
    doc[o++] = ']';
    sy_router *r = sy_test_router(doc, o);
    free(doc);
    sy_snapshot *h = sy_router_acquire(r);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    for (size_t li = 0; li < NKL; li++)
        for (size_t j = 0; j < 8; j++) {
            char seg[72], p[128], q[256], id[32];
            key_seg(li, j, seg);
            size_t len = key_lens[li];
            for (int d = 0; d < 2 && (d == 0 || j < 3); d++) {
                if (d)
                    snprintf(p, sizeof p, "/d%zu/%s/x", li, seg);
                else
                    snprintf(p, sizeof p, "/h/%s", seg);
                snprintf(id, sizeof id, "%c%zu_%zu", d ? 'd' : 'h', li, j);
                const sy_route *rt = match_both(h, ctx, p);
                ck_assert_msg(rt && strcmp(sy_route_id(rt), id) == 0, "%s", p);
                /* the segment at p + at */
                size_t at = (size_t)(strstr(p + 1, seg) - p);
                for (size_t k = 0; k < len; k++) { /* one byte off */
                    snprintf(q, sizeof q, "%s", p);
                    q[at + k] = q[at + k] == 'z' ? 'y' : 'z';
                    match_both(h, ctx, q);
                }
                /* a byte shorter, a byte longer */
                snprintf(q, sizeof q, "%.*s%s", (int)(at + len - 1), p,
                         p + at + len);
                match_both(h, ctx, q);
                snprintf(q, sizeof q, "%.*sq%s", (int)(at + len), p,
                         p + at + len);
                match_both(h, ctx, q);
                /* the first and the last byte escaped: decoded, the same
                 * segment */
                snprintf(q, sizeof q, "%.*s%%%02X%.*s%s", (int)at, p,
                         (unsigned char)seg[0], (int)(len - 1), seg + 1,
                         p + at + len);
                rt = match_both(h, ctx, q);
                ck_assert_msg(rt && strcmp(sy_route_id(rt), id) == 0, "%s", q);
                snprintf(q, sizeof q, "%.*s%.*s%%%02x%s", (int)at, p,
                         (int)(len - 1), seg, (unsigned char)seg[len - 1],
                         p + at + len);
                rt = match_both(h, ctx, q);
                ck_assert_msg(rt && strcmp(sy_route_id(rt), id) == 0, "%s", q);
            }
        }
    sy_match_ctx_free(ctx);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* The child table spreads one segment under many parents: 1,024 nodes
 * with the same 5 children ("/q<i>/a" .. "/q<i>/e"), where only the
 * parent tells the entries apart; each found. */
START_TEST(the_child_table_spreads_one_segment_under_many_parents) {
    enum { P = 1024 };
    size_t cap = (size_t)P * 5 * 96 + 16, o = 0;
    char *doc = malloc(cap);
    doc[o++] = '[';
    for (size_t i = 0; i < P; i++)
        for (char c = 'a'; c <= 'e'; c++)
            o += (size_t)snprintf(doc + o, cap - o,
                                  "%s{\"id\":\"q%zu%c\",\"uri\":\"http://b\","
                                  "\"predicates\":[\"Path=/q%zu/%c\"]}",
                                  o > 1 ? "," : "", i, c, i, c);
    doc[o++] = ']';
    sy_router *r = sy_test_router(doc, o);
    free(doc);
    sy_snapshot *h = sy_router_acquire(r);
    const sy__index *ix = sy__snapshot_from_handle(h)->base;
    size_t run = 0, longest = 0;
    for (size_t i = 0; i < ix->slot_count; i++) {
        run = ix->slots[i].child ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    ck_assert_msg(longest <= 64, "a run of %zu occupied slots", longest);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    for (size_t i = 0; i < P; i += 7) {
        char p[32], id[32];
        snprintf(p, sizeof p, "/q%zu/c", i);
        snprintf(id, sizeof id, "q%zuc", i);
        const sy_route *rt = match_both(h, ctx, p);
        ck_assert_msg(rt && strcmp(sy_route_id(rt), id) == 0, "%s", p);
        snprintf(p, sizeof p, "/q%zu/f", i);
        ck_assert_ptr_null(match_both(h, ctx, p));
    }
    sy_match_ctx_free(ctx);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* The host trie's hashed children are in a child table of their own:
 * 40 hosts h<i>.example.com (a hashed node "example") and 40 paths /p<i>
 * (a hashed root): each table sized for its own 40 children (64 homes at
 * load <= 2/3), each entry its trie's, and both builds make both tables
 * alike. A host with an empty label misses the whole-host table and is
 * walked (the label dropped): it reaches its key's node through the host
 * table; every answer is the scan's. */
START_TEST(the_host_tries_children_are_in_a_table_of_their_own) {
    enum { K = 40 };
    size_t cap = (size_t)K * 2 * 128 + 16, o = 0;
    char *doc = malloc(cap);
    ck_assert_ptr_nonnull(doc);
    doc[o++] = '[';
    for (size_t i = 0; i < K; i++)
        o += (size_t)snprintf(doc + o, cap - o,
                              "%s{\"id\":\"h%zu\",\"uri\":\"http://b\","
                              "\"predicates\":[\"Host=h%zu.example.com\"]},"
                              "{\"id\":\"p%zu\",\"uri\":\"http://b\","
                              "\"predicates\":[\"Path=/p%zu\"]}",
                              i ? "," : "", i, i, i, i);
    doc[o++] = ']';
    sy_router *r = sy_test_router(doc, o);
    free(doc);
    sy_snapshot *h = sy_router_acquire(r);
    const sy_snapshot *s = sy__snapshot_from_handle(h);
    const sy__index *ix = s->base;
    ck_assert_ptr_nonnull(ix->slots);
    ck_assert_ptr_nonnull(ix->hslots);
    ck_assert_uint_eq(ix->slot_mask + 1, slot_homes(K));
    ck_assert_uint_eq(ix->hslot_mask + 1, slot_homes(K));
    ck_assert_uint_eq(slot_homes(K), 64);
    size_t used[2] = {0, 0};
    for (int t = 0; t < 2; t++) {
        const xslot *sl = t ? ix->hslots : ix->slots;
        uint32_t count = t ? ix->hslot_count : ix->slot_count;
        for (uint32_t i = 0; i < count; i++) {
            uint32_t c = sl[i].child;
            if (!c)
                continue;
            used[t]++;
            const xnode *x = &ix->nodes[c];
            ck_assert(x->shape & X_HCHILD);
            char want = t ? 'h' : 'p';
            ck_assert_int_eq((char)(x->w0 & 0xff), want);
            /* the path's entries are the root's children; the host's
             * the node "example"'s */
            if (t)
                ck_assert_uint_ne(x->kids, ROOT_PATH);
            else
                ck_assert_uint_eq(x->kids, ROOT_PATH);
        }
    }
    ck_assert_uint_eq(used[0], K);
    ck_assert_uint_eq(used[1], K);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    static const char *const hosts[] = {"h%zu..example.com", "h%zu.example.com",
                                        "h%zux..example.com", "zz.example.com"};
    for (size_t i = 0; i < K; i++)
        for (size_t a = 0; a < 4; a++) {
            char host[64], path[32], id[32];
            snprintf(host, sizeof host, hosts[a], i);
            snprintf(path, sizeof path, "/p%zu", i);
            sy_request req = SY_REQUEST_INIT;
            req.method = (sy_str){"GET", 3};
            req.path = (sy_str){path, strlen(path)};
            req.host = (sy_str){host, strlen(host)};
            sy_match *m = NULL, *l = NULL;
            ck_assert_int_eq(sy_snapshot_match(h, ctx, &req, &m), 0);
            const sy_route *ra = m ? sy_match_route(m) : NULL;
            ck_assert_int_eq(sy_snapshot_match_linear(h, ctx, &req, &l), 0);
            const sy_route *rb = l ? sy_match_route(l) : NULL;
            ck_assert_msg(ra == rb, "%s%s: index %s, scan %s", host, path,
                          ra ? sy_route_id(ra) : "-",
                          rb ? sy_route_id(rb) : "-");
            /* h<i> ranks first (listed before p<i>); else p<i> */
            if (a < 2)
                snprintf(id, sizeof id, "h%zu", i);
            else
                snprintf(id, sizeof id, "p%zu", i);
            ck_assert_msg(ra && strcmp(sy_route_id(ra), id) == 0, "%s%s: %s",
                          host, path, ra ? sy_route_id(ra) : "-");
        }
    sy_match_ctx_free(ctx);

    sy__index_route *in = routes_of(s);
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    const size_t budgets[] = {1, 7, 4096};
    for (size_t bi = 0; bi < 3; bi++) {
        sy__index_step *st;
        sy__index *sx = step_build(&a, in, s->route_count, budgets[bi], &st);
        ck_same_trie_tables(sx, ix);
        sy__index_unref(sx);
        sy__index_step_free(st);
    }
    free(in);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* A candidate holds the predicate its walk proves in 5 bits and its
 * walk's vars in 8 (16-byte candidates): a route whose Path is a later
 * predicate (here the 36th, behind a Header the request lacks at index
 * 3), or whose pattern has more vars, is tested in full, never with
 * another predicate taken as proven. */
START_TEST(a_late_path_or_many_vars_is_not_walk_proven) {
    size_t cap = 16384, o = 0;
    char *doc = malloc(cap);
    o += (size_t)snprintf(doc + o, cap - o,
                          "[{\"id\":\"late\",\"uri\":\"http://b\","
                          "\"predicates\":[");
    for (int i = 0; i < 35; i++)
        o += (size_t)snprintf(doc + o, cap - o, "%s\"%s\"", i ? "," : "",
                              i == 3 ? "Header=X-Need" : "Method=GET");
    o += (size_t)snprintf(doc + o, cap - o,
                          ",\"Path=/late/{name}\"]},"
                          "{\"id\":\"many\",\"uri\":\"http://b\","
                          "\"predicates\":[\"Path=/many");
    for (int i = 0; i < 257; i++)
        o += (size_t)snprintf(doc + o, cap - o, "/{v%d}", i);
    o += (size_t)snprintf(doc + o, cap - o, "\",\"Header=X-Need\"]}]");
    ck_assert_uint_lt(o, cap);
    sy_router *r = sy_test_router(doc, o);
    free(doc);
    sy_snapshot *h = sy_router_acquire(r);
    const sy__index *ix = sy__snapshot_from_handle(h)->base;
    for (uint32_t n = 0; n < ix->node_count; n++) /* no walk proof left */
        for (uint32_t j = 0,
                      len = ix->nodes[n].shape & X_LONE ? 1 : ix->nodes[n].tlen;
             j < len; j++) {
            const xnode *x = &ix->nodes[n];
            const sy__cand *cd =
                x->shape & X_LONE ? xnode_lone(x) : &ix->cands[x->off + j];
            ck_assert(!(cd->flags & SY_CAND_WALK));
        }
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    ck_assert_ptr_null(match_both(h, ctx, "/late/x"));
    char p[1024];
    size_t po = 0;
    po += (size_t)snprintf(p + po, sizeof p - po, "/many");
    for (int i = 0; i < 257; i++)
        po += (size_t)snprintf(p + po, sizeof p - po, "/x");
    ck_assert_ptr_null(match_both(h, ctx, p));
    sy_match_ctx_free(ctx);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* A key's candidate whose route has, besides its Host, Methods and one
 * literal Path is flagged SY_CAND_LIT with that Path's index (kind 0:
 * Host, then Path: 1), and without a {var} carries that Path's text
 * (SY_CAND_VAR1: sy__cand_has_lit); a route of only Methods besides is whole
 * (kind 2), one whose Path is a pattern (kind 5) neither. */
START_TEST(a_literal_path_behind_a_key_is_flagged) {
    sy_router *r = router_new_of();
    sy_snapshot *h = sy_router_acquire(r);
    const sy__index *ix = sy__snapshot_from_handle(h)->base;
    size_t seen[3] = {0, 0, 0};
    for (size_t i = 0; i < N; i++) {
        if (!is_key(i))
            continue;
        char host[64];
        host_of(i, host, sizeof host);
        sy__cand_list key;
        ck_assert(sy__index_host_exact(ix, (sy_str){host, strlen(host)}, &key));
        ck_assert_uint_eq(key.len, 1);
        uint8_t f = key.c[0].flags;
        ck_assert(f & SY_CAND_WALK);
        switch (i % 6) {
        case 0: /* no {var}: the literal "/api/data" in the candidate */
            ck_assert_uint_eq(f, SY_CAND_WALK | SY_CAND_LIT | SY_CAND_VAR1 |
                                     1u << SY_CAND_LIT_SHIFT);
            ck_assert(sy__cand_has_lit(&key.c[0]));
            {
                /* the record's copy: the text after the key's */
                sy_str lit = sy__cand_lit_text(&key.c[0]);
                ck_assert_uint_ne(key.c[0].vars & SY_CAND_LIT_SELF, 0);
                ck_assert_ptr_eq(lit.ptr, (const char *)&key.c[0] +
                                              sizeof(sy__cand) + HK_HEAD +
                                              strlen(host));
                ck_assert_uint_eq(lit.len, 9);
                ck_assert(memcmp(lit.ptr, "/api/data", 9) == 0);
                ck_assert_uint_eq(key.c[0].vars & SY_CAND_LIT_REST, 0);
                ck_assert_uint_ne(key.c[0].vars & SY_CAND_LIT_TRAILING, 0);
            }
            seen[0]++;
            break;
        case 2:
            ck_assert_uint_eq(f, SY_CAND_WALK | SY_CAND_WHOLE);
            seen[1]++;
            break;
        default:
            ck_assert_uint_eq(f, SY_CAND_WALK);
            seen[2]++;
            break;
        }
    }
    ck_assert_uint_eq(seen[0], N / 6);
    ck_assert_uint_eq(seen[1], N / 6);
    ck_assert_uint_eq(seen[2], N / 6);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* A key's route of a literal Path in each form (a last "**", exact, no
 * trailing slash, the root) with a catch-all route of the same Host
 * after it: the candidate carries the Path's text, length and options as
 * the route's predicate holds them (sy__cand_has_lit), and matching,
 * which then compares the path with that text alone, picks what the scan
 * picks for paths on each side of each literal. A key of that route alone
 * (m{j}: a lone list) has the text in its record, after the key's, where
 * its copy's offset (SY_CAND_LIT_SELF) leads. */
START_TEST(a_keys_literal_path_is_in_its_candidate) {
    enum { K = 40 };
    static const char *const forms[] = {"/api/**", "/api/data",
                                        "/api/data,false", "/"};
    char *doc = malloc((size_t)K * 450 + 16);
    ck_assert_ptr_nonnull(doc);
    size_t o = 0;
    doc[o++] = '[';
    for (size_t j = 0; j < K; j++)
        o += (size_t)sprintf(
            doc + o,
            "%s{\"id\":\"l%zu\",\"uri\":\"http://b\",\"order\":1,"
            "\"predicates\":[\"Host=l%zu.example.com\",\"Path=%s\"]},"
            "{\"id\":\"c%zu\",\"uri\":\"http://b\",\"order\":2,"
            "\"predicates\":[\"Host=l%zu.example.com\"]},"
            "{\"id\":\"m%zu\",\"uri\":\"http://b\",\"order\":1,"
            "\"predicates\":[\"Host=m%zu.example.com\",\"Path=%s\"]}",
            j ? "," : "", j, j, forms[j % 4], j, j, j, j, forms[j % 4]);
    doc[o++] = ']';
    sy_router *r = sy_test_router(doc, o);
    free(doc);
    sy_snapshot *h = sy_router_acquire(r);
    const sy__index *ix = sy__snapshot_from_handle(h)->base;
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    static const char *const paths[] = {
        "/api",       "/api/",       "/api/data", "/api/data/",
        "/api/datax", "/api/data/x", "/apix",     "/ap",
        "/",          "//",          "/x"};
    size_t lit_hits = 0;
    for (size_t j = 0; j < 2 * K; j++) {
        bool lone = j >= K;
        char host[64];
        snprintf(host, sizeof host, "%c%zu.example.com", lone ? 'm' : 'l',
                 j % K);
        sy__cand_list key;
        ck_assert(sy__index_host_exact(ix, (sy_str){host, strlen(host)}, &key));
        ck_assert_uint_eq(key.len, lone ? 1 : 2);
        const sy__cand *cd = &key.c[0];
        ck_assert(sy__cand_has_lit(cd));
        const sy__pred *p =
            sy__route_cpred(sy__cand_route(cd), cd->flags >> SY_CAND_LIT_SHIFT);
        sy_str lit = sy__cand_lit_text(cd);
        ck_assert_uint_eq(lit.len, p->lit_len);
        ck_assert_uint_eq(!!(cd->vars & SY_CAND_LIT_SELF), lone);
        if (lone) /* the record's copy: the text after the key's */
            ck_assert_ptr_eq(lit.ptr, (const char *)cd + sizeof *cd + HK_HEAD +
                                          strlen(host));
        else
            ck_assert_ptr_eq(lit.ptr, p->lit_src);
        ck_assert(memcmp(lit.ptr, p->lit_src, lit.len) == 0);
        ck_assert_uint_eq(!!(cd->vars & SY_CAND_LIT_REST), p->lit_rest);
        ck_assert_uint_eq(!!(cd->vars & SY_CAND_LIT_TRAILING), p->trailing);
        ck_assert(lone || !sy__cand_has_lit(&key.c[1])); /* no Path */
        for (size_t k = 0; k < sizeof paths / sizeof *paths; k++) {
            sy_request req = SY_REQUEST_INIT;
            req.method = (sy_str){"GET", 3};
            req.path = (sy_str){paths[k], strlen(paths[k])};
            req.host = (sy_str){host, strlen(host)};
            sy_match *a = NULL, *b = NULL;
            ck_assert_int_eq(sy_snapshot_match(h, ctx, &req, &a), 0);
            const sy_route *ra = a ? sy_match_route(a) : NULL;
            ck_assert_int_eq(sy_snapshot_match_linear(h, ctx, &req, &b), 0);
            const sy_route *rb = b ? sy_match_route(b) : NULL;
            ck_assert_msg(ra == rb, "%s%s: index %s, scan %s", host, paths[k],
                          ra ? sy_route_id(ra) : "-",
                          rb ? sy_route_id(rb) : "-");
            lit_hits += ra && sy_route_id(ra)[0] != 'c';
        }
    }
    /* each form holds for some paths: the last-"**" one for 5 of them,
     * the exact one 2, without a trailing slash 1, the root 1 or 2 */
    ck_assert_uint_ge(lit_hits, (size_t)K / 4 * 8 * 2);
    sy_match_ctx_free(ctx);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* A wildcard key's route ("*.w{j}.example.com" and a literal Path): its
 * "*" takes no var entry in the host trie (no label a walk or the key's
 * probe meets is empty), so the candidate carries the Path's text
 * (sy__cand_has_lit) and is decided without its route; hosts with an
 * empty label, an odd end or another label count match as the scan
 * says. */
START_TEST(a_wildcard_keys_literal_path_is_in_its_candidate) {
    enum { K = 20 };
    char *doc = malloc((size_t)K * 300 + 128);
    ck_assert_ptr_nonnull(doc);
    size_t o = 0;
    doc[o++] = '[';
    for (size_t j = 0; j < K; j++)
        o +=
            (size_t)sprintf(doc + o,
                            "{\"id\":\"w%zu\",\"uri\":\"http://b\",\"order\":1,"
                            "\"predicates\":[\"Host=*.w%zu.example.com\","
                            "\"Path=/api/data\"]},",
                            j, j);
    o +=
        (size_t)sprintf(doc + o, "{\"id\":\"all\",\"uri\":\"http://b\","
                                 "\"order\":2,\"predicates\":[\"Path=/**\"]}]");
    sy_router *r = sy_test_router(doc, o);
    free(doc);
    sy_snapshot *h = sy_router_acquire(r);
    const sy__index *ix = sy__snapshot_from_handle(h)->base;
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    static const char *const hosts[] = {
        "eu.w%zu.example.com",  "eu..w%zu.example.com",  ".w%zu.example.com",
        "eu.w%zu.example.com.", "a.eu.w%zu.example.com", "w%zu.example.com"};
    static const char *const paths[] = {"/api/data", "/api/datax", "/api"};
    size_t hits = 0;
    for (size_t j = 0; j < K; j++) {
        char host[64];
        snprintf(host, sizeof host, hosts[0], j);
        sy__cand_list key;
        ck_assert(index_host_wild(ix, (sy_str){host, strlen(host)}, &key));
        ck_assert_uint_eq(key.len, 1);
        ck_assert_uint_eq(key.c[0].nvars, 0);
        ck_assert(sy__cand_has_lit(&key.c[0]));
        for (size_t a = 0; a < sizeof hosts / sizeof *hosts; a++)
            for (size_t k = 0; k < sizeof paths / sizeof *paths; k++) {
                snprintf(host, sizeof host, hosts[a], j);
                sy_request req = SY_REQUEST_INIT;
                req.method = (sy_str){"GET", 3};
                req.path = (sy_str){paths[k], strlen(paths[k])};
                req.host = (sy_str){host, strlen(host)};
                sy_match *m = NULL, *l = NULL;
                ck_assert_int_eq(sy_snapshot_match(h, ctx, &req, &m), 0);
                const sy_route *ra = m ? sy_match_route(m) : NULL;
                ck_assert_int_eq(sy_snapshot_match_linear(h, ctx, &req, &l), 0);
                const sy_route *rb = l ? sy_match_route(l) : NULL;
                ck_assert_msg(ra == rb, "%s%s: index %s, scan %s", host,
                              paths[k], ra ? sy_route_id(ra) : "-",
                              rb ? sy_route_id(rb) : "-");
                hits += ra && sy_route_id(ra)[0] == 'w';
            }
    }
    /* eu. and eu.. (the empty label dropped) on /api/data */
    ck_assert_uint_ge(hits, (size_t)K * 2);
    sy_match_ctx_free(ctx);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

/* Thirty literal hosts, ten of them hashed to the table's last group
 * of eight (seven slots each: load <= 3/4), the others to groups 1..6,
 * at most four each: the last group fills and the rest spill over into
 * the first one (the probe wraps). Every key is found, its route the
 * scan's; a missing host of the full group (the same length and first
 * byte: past the filters) probes on into the next one and finds
 * nothing. */
START_TEST(a_full_group_spills_into_the_next_one) {
    enum { KEYS = 30, CROWD = 10, LAST = 7 };
    char hosts[KEYS][32], miss[32] = "";
    size_t n = 0, crowd = 0, per[LAST + 1] = {0};
    for (size_t j = 100; j < 10000 && (n < KEYS || !miss[0]); j++) {
        char k[32];
        snprintf(k, sizeof k, "k%zu.crowd.test", j);
        size_t g = host_hash(k, strlen(k)) & LAST;
        bool last = g == LAST;
        bool other = g != 0 && g != LAST && per[g] < 4;
        if (n < KEYS &&
            (last ? crowd < CROWD : other && n - crowd < KEYS - CROWD)) {
            memcpy(hosts[n++], k, sizeof k);
            per[g]++;
            crowd += last;
        } else if (last && !miss[0] && crowd == CROWD) {
            memcpy(miss, k, sizeof k);
        }
    }
    ck_assert_uint_eq(n, KEYS);
    ck_assert_uint_eq(crowd, CROWD);
    ck_assert(miss[0]);
    char doc[8192];
    size_t o = 0;
    doc[o++] = '[';
    for (size_t i = 0; i < KEYS; i++)
        o += (size_t)snprintf(doc + o, sizeof doc - o,
                              "%s{\"id\":\"k%zu\",\"uri\":\"http://b\","
                              "\"predicates\":[\"Host=%s\"]}",
                              i ? "," : "", i, hosts[i]);
    doc[o++] = ']';
    sy_router *r = sy_test_router(doc, o);
    sy_snapshot *h = sy_router_acquire(r);
    const sy__index *ix = sy__snapshot_from_handle(h)->base;
    ck_assert_uint_eq(ix->host_gmask, LAST);
    ck_assert_uint_eq(~ix->hosts[LAST].tags & HT_HIGHS, 0); /* full */
    size_t in_first = 0;
    for (unsigned j = 0; j < HG_SLOTS; j++) {
        const char *rec = record_at(ix, 0, j);
        uint16_t len, term_len;
        if (!rec)
            continue;
        host_rec_head(rec, &len, &term_len);
        in_first += (host_hash(rec + HK_HEAD, len) & LAST) == LAST;
    }
    ck_assert_uint_eq(in_first, CROWD - HG_SLOTS);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    for (size_t i = 0; i <= KEYS; i++) {
        const char *host = i < KEYS ? hosts[i] : miss;
        sy_str hs = {host, strlen(host)};
        sy__cand_list key;
        ck_assert_msg(sy__index_host_exact(ix, hs, &key) == (i < KEYS), "%s",
                      host);
        const sy_route *ra, *rb;
        ck_assert_int_eq(match_one(h, ctx, host, "/", &ra), 0);
        sy_request req = SY_REQUEST_INIT;
        req.method = (sy_str){"GET", 3};
        req.path = (sy_str){"/", 1};
        req.host = hs;
        sy_match *b = NULL;
        ck_assert_int_eq(sy_snapshot_match_linear(h, ctx, &req, &b), 0);
        rb = b ? sy_match_route(b) : NULL;
        ck_assert_ptr_eq(ra, rb);
        if (i < KEYS) {
            char id[8];
            snprintf(id, sizeof id, "k%zu", i);
            ck_assert_ptr_nonnull(ra);
            ck_assert_str_eq(sy_route_id(ra), id);
        } else {
            ck_assert_ptr_null(ra);
        }
    }
    sy_match_ctx_free(ctx);
    sy_snapshot_release(h);
    sy_router_free(r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("index");
    TCase *tc = tcase_create("whole_host");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, both_builds_make_the_same_whole_host_table);
    tcase_add_test(tc, a_key_is_the_whole_answer_of_the_host_walk);
    tcase_add_test(tc, matching_through_the_table_equals_the_scan);
    tcase_add_test(tc, a_wildcard_keys_captures_are_the_first_label);
    tcase_add_test(
        tc, labels_are_split_only_on_need_and_a_failed_split_is_reported);
    tcase_add_test(tc, a_full_group_spills_into_the_next_one);
    tcase_add_test(tc, a_literal_path_behind_a_key_is_flagged);
    suite_add_tcase(s, tc);
    TCase *tl = tcase_create("layout");
    tcase_set_timeout(tl, 600);
    tcase_add_test(tl, nodes_are_laid_out_by_their_number_of_children);
    tcase_add_test(tl, matching_through_each_shape_equals_the_scan);
    tcase_add_test(tl, a_child_table_at_its_highest_load_finds_every_child);
    tcase_add_test(tl, the_child_table_spreads_short_segments);
    tcase_add_test(tl, the_child_table_keeps_runs_in_order_and_grows_its_tail);
    tcase_add_test(tl,
                   segments_of_each_length_are_keyed_as_the_scan_reads_them);
    tcase_add_test(tl, the_child_table_spreads_one_segment_under_many_parents);
    tcase_add_test(tl, the_host_tries_children_are_in_a_table_of_their_own);
    tcase_add_test(tl, a_late_path_or_many_vars_is_not_walk_proven);
    tcase_add_test(tl, a_keys_literal_path_is_in_its_candidate);
    tcase_add_test(tl, a_candidate_carries_its_routes_predicates);
    tcase_add_test(tl, a_wildcard_keys_literal_path_is_in_its_candidate);
    suite_add_tcase(s, tl);
    return sy_test_run(s);
}
