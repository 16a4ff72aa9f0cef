/*
 * service.c - immutable service objects (route model section 7): building
 * and validating instance lists, the version order, candidate groups and
 * their lookup table, reference counting and accessors. The private layout
 * is drawn in service_int.h; deltas and instance diffs live in
 * service_delta.c, the hash pick in service_hrw.c and selection in
 * service_select.c.
 */
#include "service/service_int.h"

#include "base/values.h"

#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- */
/* Versions                                                           */
/* ---------------------------------------------------------------- */

static int sy__svc_segment_cmp(const char *a, size_t an, const char *b,
                               size_t bn) {
    if (an == 0 || bn == 0) /* an empty segment ("1..2") is the smallest */
        return an == bn ? 0 : (an == 0 ? -1 : 1);
    size_t ad = 0, bd = 0;
    while (ad < an && a[ad] >= '0' && a[ad] <= '9')
        ad++;
    while (bd < bn && b[bd] >= '0' && b[bd] <= '9')
        bd++;
    if ((ad > 0) != (bd > 0))
        return ad > 0 ? -1 : 1; /* numeric < non-numeric */
    if (ad > 0) {
        size_t ai = 0, bi = 0;
        while (ai + 1 < ad && a[ai] == '0')
            ai++;
        while (bi + 1 < bd && b[bi] == '0')
            bi++;
        if (ad - ai != bd - bi)
            return ad - ai < bd - bi ? -1 : 1;
        int c = memcmp(a + ai, b + bi, ad - ai);
        if (c)
            return c;
    }
    const char *as = a + ad, *bs = b + bd;
    size_t asn = an - ad, bsn = bn - bd;
    if (asn == 0 || bsn == 0)
        return asn == bsn ? 0 : (asn == 0 ? 1 : -1); /* 1.2 > 1.2-rc1 */
    size_t m = asn < bsn ? asn : bsn;
    int c = memcmp(as, bs, m);
    if (c)
        return c;
    return asn == bsn ? 0 : (asn < bsn ? -1 : 1);
}

int sy__service_version_cmp(const char *a, size_t alen, const char *b,
                            size_t blen) {
    size_t ai = 0, bi = 0;
    for (;;) {
        bool aend = ai > alen, bend = bi > blen;
        if (aend || bend)
            break;
        size_t ae = ai, be = bi;
        while (ae < alen && a[ae] != '.')
            ae++;
        while (be < blen && b[be] != '.')
            be++;
        int c = sy__svc_segment_cmp(a + ai, ae - ai, b + bi, be - bi);
        if (c)
            return c < 0 ? -1 : 1;
        ai = ae + 1;
        bi = be + 1;
    }
    bool amore = ai <= alen, bmore = bi <= blen;
    if (amore != bmore)
        return amore ? 1 : -1; /* missing segment is smaller */
    size_t m = alen < blen ? alen : blen;
    int c = m ? memcmp(a, b, m) : 0;
    if (c)
        return c < 0 ? -1 : 1;
    return alen == blen ? 0 : (alen < blen ? -1 : 1);
}

/* ---------------------------------------------------------------- */
/* Small helpers                                                      */
/* ---------------------------------------------------------------- */

static uint32_t sy__svc_id_find(const sy__service *s, const char *id,
                                size_t len) {
    if (!s->ids.e)
        return SY_NONE;
    uint32_t pos;
    return sy__idtab_find(&s->ids, id, len, sy__idtab_hash(id, len),
                          sy__svc_inst_id, s, &pos);
}

/* ---------------------------------------------------------------- */
/* Validation and copying                                             */
/* ---------------------------------------------------------------- */

void sy__svc_path(char *out, size_t cap, sy__svc_where w, const char *fmt,
                  ...) {
    int n = snprintf(out, cap,
                     w.delta ? "deltas[%zu].instance" : "instances[%zu]", w.i);
    if (n < 0 || (size_t)n >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + n, cap - (size_t)n, fmt, ap);
    va_end(ap);
}

int sy__svc_validate(const sy_instance *in, sy__svc_where w, sy_error *err) {
    char path[160];
    if (!in->id || !*in->id) {
        sy__svc_path(path, sizeof path, w, ".id");
        return sy__error_set(err, SY_EINVAL, path, "instance id is empty");
    }
    if (!in->host || !*in->host) {
        sy__svc_path(path, sizeof path, w, ".host");
        return sy__error_set(err, SY_EINVAL, path,
                             "instance \"%s\" has an empty host", in->id);
    }
    const char *why;
    if (!sy__value_host(in->host, &why)) { /* run or refuse: no host */
        sy__svc_path(path, sizeof path, w, ".host"); /* connects to it */
        return sy__error_set(err, SY_EINVAL, path,
                             "instance \"%s\": host '%.80s': %s", in->id,
                             in->host, why);
    }
    if (in->port == 0) {
        sy__svc_path(path, sizeof path, w, ".port");
        return sy__error_set(err, SY_EINVAL, path, "instance \"%s\" has port 0",
                             in->id);
    }
    if ((unsigned)in->state > SY_INSTANCE_DOWN) {
        sy__svc_path(path, sizeof path, w, ".state");
        return sy__error_set(err, SY_EINVAL, path,
                             "instance \"%s\" has an unknown state %u", in->id,
                             (unsigned)in->state);
    }
    if (in->metadata_count && !in->metadata) {
        sy__svc_path(path, sizeof path, w, ".metadata");
        return sy__error_set(err, SY_EINVAL, path,
                             "metadata is NULL with a non-zero count");
    }
    for (size_t j = 0; j < in->metadata_count; j++) {
        if (!in->metadata[j].key || !in->metadata[j].value) {
            sy__svc_path(path, sizeof path, w, ".metadata[%zu]", j);
            return sy__error_set(err, SY_EINVAL, path,
                                 "metadata key or value is NULL");
        }
        /* "version": "" is a version (the smallest), not "none": its
         * instance would be left out of the untagged traffic */
        if (!*in->metadata[j].value &&
            strcmp(in->metadata[j].key, "version") == 0) {
            sy__svc_path(path, sizeof path, w, ".metadata[%zu].value", j);
            return sy__error_set(err, SY_EINVAL, path,
                                 "instance \"%s\" has an empty version (leave "
                                 "the key out for an unversioned instance)",
                                 in->id);
        }
        for (size_t k = 0; k < j; k++)
            if (strcmp(in->metadata[k].key, in->metadata[j].key) == 0) {
                sy__svc_path(path, sizeof path, w, ".metadata[%zu].key", j);
                return sy__error_set(err, SY_EDUPLICATE, path,
                                     "duplicate metadata key \"%s\"",
                                     in->metadata[j].key);
            }
    }
    return 0;
}

/* Copy `in` into dst: its strings in one arena block (id, host, then each
 * metadata key and value), metadata sorted by key (insertion sort: an
 * instance has a few entries), the version / zone / hint found once. */
static int sy__svc_copy_instance(sy__service *s, sy__svc_inst *dst,
                                 const sy_instance *in, size_t idlen,
                                 uint32_t idh) {
    memset(dst, 0, sizeof *dst);
    dst->pub = *in;
    dst->pub.weight = in->weight ? in->weight : 1;
    dst->idh = idh;
    dst->idlen = (uint32_t)idlen;
    dst->hseed = sy__hash64(in->id, idlen, ~0ull);
    size_t mdn = in->metadata_count;
    /* "[::1]" (validated) is kept as "::1": the address hosts connect to
     * (the authority brackets it again) */
    const char *host = in->host;
    size_t hostlen = strlen(host);
    if (host[0] == '[') {
        host++;
        hostlen -= 2;
    }
    size_t bytes = idlen + hostlen + 2;
    for (size_t j = 0; j < mdn; j++)
        bytes +=
            strlen(in->metadata[j].key) + strlen(in->metadata[j].value) + 2;
    sy_kv *md = mdn ? sy__svc_arena_array(s, mdn, sizeof *md) : NULL;
    char *p = sy__arena_alloc(&s->arena, bytes);
    if (!p || (mdn && !md))
        return SY_ENOMEM;
    memcpy(p, in->id, idlen + 1);
    dst->pub.id = p;
    p += idlen + 1;
    memcpy(p, host, hostlen);
    p[hostlen] = '\0';
    dst->pub.host = p;
    p += hostlen + 1;
    for (size_t j = 0; j < mdn; j++) {
        size_t kl = strlen(in->metadata[j].key) + 1;
        size_t vl = strlen(in->metadata[j].value) + 1;
        sy_kv kv = {p, p + kl};
        memcpy(p, in->metadata[j].key, kl);
        memcpy(p + kl, in->metadata[j].value, vl);
        p += kl + vl;
        size_t k = j;
        while (k > 0 && strcmp(md[k - 1].key, kv.key) > 0) {
            md[k] = md[k - 1];
            k--;
        }
        md[k] = kv;
    }
    dst->pub.metadata = md;
    for (size_t j = 0; j < mdn; j++) { /* version, zone and hint */
        const char *k = md[j].key, *v = md[j].value;
        if (k[0] == 'v' && strcmp(k, "version") == 0) {
            dst->version = v;
            dst->version_len = strlen(v);
        } else if (k[0] == 'z' && strcmp(k, "zone") == 0) {
            dst->zone = v;
            dst->zone_len = strlen(v);
        } else if (k[0] == 'h' && strcmp(k, "hint") == 0) {
            dst->hint = v;
            dst->hint_len = strlen(v);
        }
    }
    dst->authority = sy__arena_authority(&s->arena, dst->pub.host,
                                         dst->pub.port, dst->pub.secure);
    if (!dst->authority)
        return SY_ENOMEM;
    dst->authority_len = strlen(dst->authority);
    return 0;
}

/* ---------------------------------------------------------------- */
/* Group table                                                        */
/* ---------------------------------------------------------------- */

static void sy__svc_map_put(sy__svc_slot *map, size_t cap, uint64_t h,
                            uint32_t g) {
    size_t mask = cap - 1, i = h & mask;
    while (map[i].group != SY_NONE)
        i = (i + 1) & mask;
    map[i].hash = h;
    map[i].group = g;
}

static int sy__svc_group_add(sy__service *s, uint32_t parent, char tag,
                             const char *k, size_t len, uint64_t kh,
                             uint32_t *out) {
    if (s->ngroups == s->groups_cap) {
        sy__svc_group *ng = sy__grow(&s->alloc, s->groups, &s->groups_cap,
                                     s->ngroups + 1, 16, sizeof *ng);
        if (!ng)
            return SY_ENOMEM;
        s->groups = ng;
    }
    if ((s->map_used + 1) * 2 > s->map_cap) {
        size_t cap = s->map_cap * 2;
        sy__svc_slot *nm = sy__malloc(&s->alloc, cap * sizeof *nm);
        if (!nm)
            return SY_ENOMEM;
        for (size_t i = 0; i < cap; i++)
            nm[i].group = SY_NONE;
        for (size_t i = 0; i < s->map_cap; i++)
            if (s->map[i].group != SY_NONE)
                sy__svc_map_put(nm, cap, s->map[i].hash, s->map[i].group);
        sy__free(&s->alloc, s->map);
        s->map = nm;
        s->map_cap = cap;
    }
    uint32_t id = (uint32_t)s->ngroups++;
    sy__svc_group *g = &s->groups[id];
    memset(g, 0, sizeof *g);
    g->parent = parent;
    g->tag = tag;
    g->key = k;
    g->key_len = len;
    g->twin = SY_NONE;
    atomic_init(&g->wrr, NULL);
    if (tag != 'a' && tag != 'u') {
        sy__svc_map_put(s->map, s->map_cap, sy__svc_gkey(parent, tag, kh), id);
        s->map_used++;
    }
    *out = id;
    return 0;
}

static int sy__svc_group_get(sy__service *s, uint32_t parent, char tag,
                             const char *k, size_t len, uint64_t kh,
                             uint32_t *out) {
    *out = sy__svc_group_find_h(s, parent, tag, k, len, kh);
    return *out != SY_NONE ? 0
                           : sy__svc_group_add(s, parent, tag, k, len, kh, out);
}

/* ---------------------------------------------------------------- */
/* Building                                                           */
/* ---------------------------------------------------------------- */

static void sy__svc_destroy(sy__service *s) {
    sy__alloc a = s->alloc;
    sy__svc_wrr_release(s);
    for (size_t i = 0; s->inst && i < s->n; i++)
        sy__svc_health_release(&a, &s->inst[i]);
    sy__free(&a, s->groups);
    sy__free(&a, s->map);
    sy__arena_free(&s->arena);
    sy__free(&a, s);
}

/* The up instance i's groups: its base groups ("a", and "u" or its
 * version's), and under each its hint group, zone group and hint-zone
 * group. Written to m[], their number returned (<= SVC_MEMBERSHIPS). */
static int sy__svc_memberships(sy__service *s, const sy__svc_inst *in,
                               uint32_t v, uint32_t *m, int *k) {
    uint64_t hh = in->hint ? sy__svc_khash(in->hint, in->hint_len) : 0;
    uint64_t zh = in->zone ? sy__svc_khash(in->zone, in->zone_len) : 0;
    uint32_t bases[2] = {SVC_G_ALL, in->version ? v : SVC_G_UNV};
    int rc;
    *k = 0;
    for (int b = 0; b < 2; b++) {
        uint32_t h = SY_NONE, z;
        m[(*k)++] = bases[b];
        if (in->hint) {
            if ((rc = sy__svc_group_get(s, bases[b], 'h', in->hint,
                                        in->hint_len, hh, &h)))
                return rc;
            m[(*k)++] = h;
        }
        if (in->zone) {
            if ((rc = sy__svc_group_get(s, bases[b], 'z', in->zone,
                                        in->zone_len, zh, &z)))
                return rc;
            m[(*k)++] = z;
            if (h != SY_NONE) {
                if ((rc = sy__svc_group_get(s, h, 'z', in->zone, in->zone_len,
                                            zh, &z)))
                    return rc;
                m[(*k)++] = z;
            }
        }
    }
    return 0;
}

/* Twins: a group outside the "a" tree whose counterpart in it (same tags
 * and strings under "a" instead of its base) has as many members has the
 * same members (every member of a group is in its counterpart), so it
 * shares that group's arrays. Parents come before their children. */
static int sy__svc_find_twins(sy__service *s) {
    uint32_t *atree = sy__malloc(&s->alloc, s->ngroups * sizeof *atree);
    if (!atree)
        return SY_ENOMEM;
    for (uint32_t g = 0; g < s->ngroups; g++) {
        sy__svc_group *gr = &s->groups[g];
        if (g == SVC_G_ALL)
            atree[g] = g;
        else if (gr->parent == SY_NONE)
            atree[g] = SVC_G_ALL; /* "u" and versions */
        else if (atree[gr->parent] == SY_NONE)
            atree[g] = SY_NONE;
        else if (atree[gr->parent] == gr->parent)
            atree[g] = g; /* in the "a" tree itself */
        else
            atree[g] = sy__svc_group_find(s, atree[gr->parent], gr->tag,
                                          gr->key, gr->key_len);
        if (atree[g] != SY_NONE && atree[g] != g &&
            s->groups[atree[g]].n == gr->n && gr->n)
            gr->twin = atree[g];
    }
    sy__free(&s->alloc, atree);
    return 0;
}

/* The groups of the last few distinct (version, hint, zone) an up
 * instance had: instances of a service share a few of them (a zone or
 * three), and each look-up of sy__svc_memberships hashes and probes the
 * group table (four of them an instance with a zone: ~210 instructions). */
typedef struct sy__svc_memo {
    struct {
        uint32_t v;
        const char *hint, *zone; /* NULL: none */
        size_t hint_len, zone_len;
        uint32_t m[SVC_MEMBERSHIPS];
        int k;
    } e[4];
    unsigned n, next;
} sy__svc_memo;

static bool sy__svc_memo_same(const char *a, size_t al, const char *b,
                              size_t bl) {
    return a ? b && al == bl && memcmp(a, b, al) == 0 : !b;
}

static const uint32_t *sy__svc_memo_find(const sy__svc_memo *mo,
                                         const sy__svc_inst *in, uint32_t v,
                                         int *k) {
    for (unsigned j = 0; j < mo->n; j++)
        if (mo->e[j].v == v &&
            sy__svc_memo_same(mo->e[j].zone, mo->e[j].zone_len, in->zone,
                              in->zone_len) &&
            sy__svc_memo_same(mo->e[j].hint, mo->e[j].hint_len, in->hint,
                              in->hint_len)) {
            *k = mo->e[j].k;
            return mo->e[j].m;
        }
    return NULL;
}

static void sy__svc_memo_put(sy__svc_memo *mo, const sy__svc_inst *in,
                             uint32_t v, const uint32_t *m, int k) {
    unsigned j = mo->n < 4 ? mo->n++ : mo->next++ % 4;
    mo->e[j].v = v;
    mo->e[j].hint = in->hint;
    mo->e[j].hint_len = in->hint_len;
    mo->e[j].zone = in->zone;
    mo->e[j].zone_len = in->zone_len;
    memcpy(mo->e[j].m, m, (size_t)k * sizeof *m);
    mo->e[j].k = k;
}

static int sy__svc_build_groups(sy__service *s) {
    uint32_t id;
    int rc;
    if ((rc = sy__svc_group_add(s, SY_NONE, 'a', "", 0, 0, &id)) ||
        (rc = sy__svc_group_add(s, SY_NONE, 'u', "", 0, 0, &id)))
        return rc;
    uint32_t *memb = sy__malloc(&s->alloc, (s->n ? s->n : 1) * SVC_MEMBERSHIPS *
                                               sizeof *memb);
    uint8_t *nmemb = sy__calloc(&s->alloc, s->n ? s->n : 1, 1);
    sy__svc_memo memo = {0};
    if (!memb || !nmemb) {
        rc = SY_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < s->n; i++) {
        const sy__svc_inst *in = &s->inst[i];
        uint32_t v = SY_NONE, *m = memb + i * SVC_MEMBERSHIPS;
        if (in->version &&
            (rc = sy__svc_group_get(
                 s, SY_NONE, 'v', in->version, in->version_len,
                 sy__svc_khash(in->version, in->version_len), &v)))
            goto out;
        if (in->pub.state != SY_INSTANCE_UP)
            continue;
        s->up++;
        int k;
        const uint32_t *same = sy__svc_memo_find(&memo, in, v, &k);
        if (same)
            memcpy(m, same, (size_t)k * sizeof *m);
        else if ((rc = sy__svc_memberships(s, in, v, m, &k)))
            goto out;
        else
            sy__svc_memo_put(&memo, in, v, m, k);
        nmemb[i] = (uint8_t)k;
        for (int j = 0; j < k; j++)
            s->groups[m[j]].n++;
    }
    if ((rc = sy__svc_find_twins(s)))
        goto out;
    for (size_t g = 0; g < s->ngroups; g++) {
        sy__svc_group *gr = &s->groups[g];
        if (gr->twin != SY_NONE)
            continue;
        gr->members = sy__svc_arena_array(s, gr->n, sizeof(uint32_t));
        if (!gr->members) {
            rc = SY_ENOMEM;
            goto out;
        }
    }
    for (size_t i = 0; i < s->n; i++)
        for (int j = 0; j < nmemb[i]; j++) {
            sy__svc_group *g = &s->groups[memb[i * SVC_MEMBERSHIPS + j]];
            if (g->twin == SY_NONE)
                g->members[g->fill++] = (uint32_t)i;
        }
    char *raw = sy__svc_arena_array(s, s->ngroups + 1, sizeof(sy__svc_counter));
    if (!raw) {
        rc = SY_ENOMEM;
        goto out;
    }
    s->counters =
        (sy__svc_counter *)(void *)(raw + (64 - (uintptr_t)raw % 64) % 64);
    s->latest = SY_NONE;
    uint32_t oldest = SY_NONE;
    for (uint32_t g = 0; g < s->ngroups; g++) {
        sy__svc_group *gr = &s->groups[g];
        gr->rr = &s->counters[g];
        atomic_init(&gr->rr->v, 0);
        if (gr->twin == SY_NONE && (rc = sy__svc_finish_group(s, gr)))
            goto out;
        if (gr->twin == SY_NONE && (rc = sy__svc_hrw_prepare(s, gr)))
            goto out;
        if (gr->tag == 'v' && gr->n &&
            (s->latest == SY_NONE ||
             sy__service_version_cmp(gr->key, gr->key_len,
                                     s->groups[s->latest].key,
                                     s->groups[s->latest].key_len) > 0))
            s->latest = g;
        if (gr->tag == 'v' && gr->n &&
            (oldest == SY_NONE ||
             sy__service_version_cmp(gr->key, gr->key_len,
                                     s->groups[oldest].key,
                                     s->groups[oldest].key_len) < 0))
            oldest = g;
    }
    /* twins take their arrays (not their counters) from groups finished
     * above */
    for (uint32_t g = 0; g < s->ngroups; g++) {
        sy__svc_group *gr = &s->groups[g];
        if (gr->twin == SY_NONE)
            continue;
        sy__svc_group *t = &s->groups[gr->twin];
        gr->hmem = t->hmem;
        gr->hseed = t->hseed;
        gr->hruns = t->hruns;
        gr->hclasses = t->hclasses;
        gr->members = t->members;
        gr->fill = t->fill;
        gr->total = t->total;
        gr->cum = t->cum;
        gr->prob = t->prob;
        gr->alias = t->alias;
        gr->sched = t->sched;
        gr->smooth = t->smooth; /* its cycle: the twin's wrr */
        gr->step = t->step;
    }
    s->deflt =
        s->groups[SVC_G_UNV].n || s->latest == SY_NONE ? SVC_G_UNV : s->latest;
    s->deflt_oldest =
        s->groups[SVC_G_UNV].n || oldest == SY_NONE ? SVC_G_UNV : oldest;
    if (s->latest == SY_NONE)
        s->latest = SVC_G_UNV;
out:
    sy__free(&s->alloc, memb);
    sy__free(&s->alloc, nmemb);
    return rc;
}

int sy__service_new(const sy__alloc *a, const char *name,
                    const sy_instance *list, size_t n, sy__service **out,
                    sy_error *err) {
    if (!a || !out)
        return sy__error_set(err, SY_EINVAL, "", "NULL allocator or out");
    if (!name || !*name)
        return sy__error_set(err, SY_EINVAL, "name", "service name is empty");
    if (n && !list)
        return sy__error_set(err, SY_EINVAL, "instances",
                             "instance list is NULL with a non-zero count");
    if (n >= SY_NONE / SVC_MEMBERSHIPS)
        return sy__error_set(err, SY_ELIMIT, "instances",
                             "too many instances (%zu)", n);
    for (size_t i = 0; i < n; i++) {
        int rc = sy__svc_validate(&list[i], (sy__svc_where){false, i}, err);
        if (rc)
            return rc;
    }
    sy__service *s = sy__malloc(a, sizeof *s);
    if (!s)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    memset(s, 0, sizeof *s);
    atomic_init(&s->refs, 1);
    atomic_init(&s->fingerprint, 0);
    atomic_init(&s->fingerprint_done, false);
    s->alloc = *a;
    size_t chunk = 2048 + n * 256; /* small services stay small */
    sy__arena_init(&s->arena, &s->alloc, chunk < 262144 ? chunk : 262144);
    s->map_cap = 16;
    s->map = sy__malloc(&s->alloc, s->map_cap * sizeof *s->map);
    s->name = sy__arena_strdup(&s->arena, name);
    s->inst = sy__svc_arena_array(s, n ? n : 1, sizeof *s->inst);
    size_t id_cap = sy__idtab_capacity(n);
    sy__idtab_entry *ids = sy__svc_arena_array(s, id_cap, sizeof *ids);
    int rc = SY_ENOMEM;
    if (!s->map || !s->name || !s->inst || !ids)
        goto fail;
    for (size_t i = 0; i < s->map_cap; i++)
        s->map[i].group = SY_NONE;
    sy__idtab_init(&s->ids, ids, id_cap);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(list[i].id);
        uint32_t h = sy__idtab_hash(list[i].id, len), pos;
        if (sy__idtab_find(&s->ids, list[i].id, len, h, sy__svc_inst_id, s,
                           &pos) != SY_NONE) {
            char path[48];
            snprintf(path, sizeof path, "instances[%zu].id", i);
            rc = sy__error_set(err, SY_EDUPLICATE, path,
                               "duplicate instance id \"%s\"", list[i].id);
            goto fail_set;
        }
        if ((rc = sy__svc_copy_instance(s, &s->inst[i], &list[i], len, h)))
            goto fail;
        s->n = i + 1;
        sy__idtab_set(&s->ids, pos, h, (uint32_t)i);
    }
    if ((rc = sy__svc_health_init(s)) || (rc = sy__svc_build_groups(s)))
        goto fail;
    *out = s;
    return 0;
fail:
    sy__error_set(err, rc, "", "out of memory building service \"%s\"", name);
fail_set:
    sy__svc_destroy(s);
    return rc;
}

sy__service *sy__service_ref(sy__service *s) {
    if (s)
        atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    return s;
}

void sy__service_unref(sy__service *s) {
    if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        sy__svc_destroy(s);
}

const char *sy__service_name(const sy__service *s) {
    return s->name;
}

size_t sy__service_count(const sy__service *s) {
    return s->n;
}

const sy_instance *sy__service_instance(const sy__service *s, size_t i) {
    return i < s->n ? &s->inst[i].pub : NULL;
}

const sy_instance *sy__service_find(const sy__service *s, const char *id) {
    uint32_t i = id ? sy__svc_id_find(s, id, strlen(id)) : SY_NONE;
    return i == SY_NONE ? NULL : &s->inst[i].pub;
}

/* Order-independent: the instances' hashes are summed. Computed on first
 * use and kept (every snapshot holding the service asks for it); two
 * readers racing compute the same value. */
uint64_t sy__service_fingerprint(const sy__service *svc) {
    sy__service *s = (sy__service *)svc;
    if (atomic_load_explicit(&s->fingerprint_done, memory_order_acquire))
        return atomic_load_explicit(&s->fingerprint, memory_order_relaxed);
    uint64_t sum = sy__hash64(s->name, strlen(s->name), 7);
    for (size_t i = 0; i < s->n; i++) {
        const sy_instance *in = &s->inst[i].pub;
        uint64_t h = sy__hash64(in->id, s->inst[i].idlen, 1);
        h = sy__hash_mix(h, sy__hash64(in->host, strlen(in->host), 2));
        h = sy__hash_mix(h, ((uint64_t)in->port << 32) ^
                                ((uint64_t)in->weight << 2) ^
                                ((uint64_t)in->state << 1) ^ in->secure);
        for (size_t k = 0; k < in->metadata_count; k++) {
            const sy_kv *kv = &in->metadata[k];
            h = sy__hash_mix(h, sy__hash64(kv->key, strlen(kv->key), 3));
            h = sy__hash_mix(h, sy__hash64(kv->value, strlen(kv->value), 4));
        }
        sum += h;
    }
    atomic_store_explicit(&s->fingerprint, sum, memory_order_relaxed);
    atomic_store_explicit(&s->fingerprint_done, true, memory_order_release);
    return sum;
}

void sy__service_inherit_rr(sy__service *dst, const sy__service *src) {
    if (!dst || !src)
        return;
    for (uint32_t g = 0; g < dst->ngroups; g++) {
        uint32_t o = sy__svc_counterpart(dst, src, g);
        if (o != SY_NONE)
            atomic_store_explicit(&dst->groups[g].rr->v,
                                  atomic_load_explicit(&src->groups[o].rr->v,
                                                       memory_order_relaxed),
                                  memory_order_relaxed);
    }
    sy__svc_wrr_inherit(dst, src);
}
