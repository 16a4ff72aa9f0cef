/*
 * service_health.c - passive health of instances, as Envoy's outlier
 * detection does it: consecutive failed outcomes eject an instance for a
 * time that grows with each ejection (capped), at most a share of the
 * service at once, and the instance returns by itself when the time is up.
 *
 *   outcome(failure) --> failures++ --(>= threshold, under the cap)-->
 *       ejected_until = now + min(base * ejections, max)
 *   select: skip an instance while now < ejected_until (the clock is read
 *       only when the picked instance carries an ejection)
 *   outcome(success) --> failures = 0; once back, the ejection count decays
 *
 * Records are refcounted and shared by id between consecutive versions of
 * a service (sy__service_inherit_health), so a publish neither forgets an
 * ejection nor resets a failure count. A build allocates its records in
 * one block, which counts its live records and is freed with the last:
 *
 *   v1: block A [a1 a2 a3]        v2 = v1 + d, inheriting:
 *   v2: block B [-- -- -- d]      a1..a3 shared (refs 2), B's three fresh
 *                                 records dropped at once (live 4 -> 1)
 * Everything on the request path is a relaxed atomic; the ejected share is
 * counted only when an ejection is about to happen, and counted and
 * ejected by one report at a time (the caller's gate: a try, never a
 * wait), so concurrent reports never eject past max_ejected_percent.
 */
#include "service/service_int.h"

int sy__svc_health_init(sy__service *s) {
    size_t head = (sizeof(sy__svc_hblock) + 7) & ~(size_t)7;
    if (s->n == 0)
        return SY_OK;
    sy__svc_hblock *b =
        sy__malloc(&s->alloc, head + s->n * sizeof(sy__svc_health));
    if (!b)
        return SY_ENOMEM;
    atomic_init(&b->live, s->n);
    sy__svc_health *h = (sy__svc_health *)(void *)((char *)b + head);
    for (size_t i = 0; i < s->n; i++) {
        atomic_init(&h[i].refs, 1);
        atomic_init(&h[i].failures, 0);
        atomic_init(&h[i].ejections, 0);
        atomic_init(&h[i].ejected_until, 0);
        h[i].block = b;
        s->inst[i].health = &h[i];
        s->inst[i].owner = s;
    }
    s->hblock = b;
    return SY_OK;
}

/* k records fewer in block b: the last frees it (returns true). */
static bool block_drop(const sy__alloc *a, sy__svc_hblock *b, size_t k) {
    if (k &&
        atomic_fetch_sub_explicit(&b->live, k, memory_order_acq_rel) == k) {
        sy__free(a, b);
        return true;
    }
    return false;
}

static void health_unref(const sy__alloc *a, sy__svc_health *h) {
    if (h && atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1)
        block_drop(a, h->block, 1);
}

void sy__svc_health_release(const sy__alloc *a, sy__svc_inst *in) {
    health_unref(a, in->health);
    in->health = NULL;
}

void sy__service_inherit_health(sy__service *dst, const sy__service *src) {
    if (!dst || !src)
        return;
    size_t dropped = 0; /* dst's own fresh records given up */
    for (size_t i = 0; i < dst->n; i++) {
        sy__svc_inst *in = &dst->inst[i];
        uint32_t j = sy__svc_match(dst, i, src);
        if (j == SY_NONE)
            continue;
        const sy__svc_inst *o = &src->inst[j];
        /* an id moved to another address is another upstream: its
         * predecessor's failures and ejection are not its own */
        if (o->pub.port != in->pub.port || strcmp(o->pub.host, in->pub.host))
            continue;
        sy__svc_health *h = o->health;
        if (!h || h == in->health)
            continue;
        atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
        sy__svc_health *mine = in->health;
        in->health = h;
        /* dst is not published: its own records are still private, so
         * dropping one needs no atomic step but the block count at the
         * end */
        if (mine && mine->block == dst->hblock &&
            atomic_load_explicit(&mine->refs, memory_order_relaxed) == 1) {
            atomic_store_explicit(&mine->refs, 0, memory_order_relaxed);
            dropped++;
        } else {
            health_unref(&dst->alloc, mine);
        }
    }
    if (block_drop(&dst->alloc, dst->hblock, dropped))
        dst->hblock = NULL;
}

static int64_t clock_now(const sy__select_params *p) {
    return p->clock_ms ? p->clock_ms(p->clock_data) : sy__now_realtime_ms();
}

bool sy__svc_health_ejected(const sy__svc_inst *in, const sy__select_params *p,
                            int64_t *now) {
    int64_t until =
        atomic_load_explicit(&in->health->ejected_until, memory_order_relaxed);
    if (until == 0)
        return false;
    if (*now == 0)
        *now = clock_now(p);
    return *now < until;
}

/* Instances of the service ejected at `now`. */
static size_t ejected_count(const sy__service *s, int64_t now) {
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        int64_t u = atomic_load_explicit(&s->inst[i].health->ejected_until,
                                         memory_order_relaxed);
        n += u != 0 && now < u;
    }
    return n;
}

bool sy__service_report_outcome(const void *handle, sy_outcome outcome,
                                int64_t now, const sy_outlier_options *o,
                                atomic_bool *gate) {
    const sy__svc_inst *in = handle;
    if (!in || !in->health || !o || o->disabled)
        return false;
    sy__svc_health *h = in->health;
    int64_t until =
        atomic_load_explicit(&h->ejected_until, memory_order_relaxed);
    if (outcome == SY_OUTCOME_SUCCESS) {
        atomic_store_explicit(&h->failures, 0, memory_order_relaxed);
        /* back and well: the next ejection is a little shorter. Only the
         * success that clears the ejection takes a step off (racing
         * successes would take one each) */
        if (until != 0 && now >= until &&
            atomic_compare_exchange_strong_explicit(&h->ejected_until, &until,
                                                    0, memory_order_relaxed,
                                                    memory_order_relaxed)) {
            uint32_t e =
                atomic_load_explicit(&h->ejections, memory_order_relaxed);
            while (e && !atomic_compare_exchange_weak_explicit(
                            &h->ejections, &e, e - 1, memory_order_relaxed,
                            memory_order_relaxed))
                ;
        }
        return false;
    }
    uint32_t threshold = o->consecutive_failures ? o->consecutive_failures : 5;
    uint32_t f =
        atomic_fetch_add_explicit(&h->failures, 1, memory_order_relaxed) + 1;
    if (f < threshold || (until != 0 && now < until))
        return false;
    /* counting the ejected share and ejecting is one step: only the
     * holder of the gate takes it (a report that finds it held ejects
     * nothing now; its instance stays over the threshold). Ejections are
     * made only under the gate and the share only shrinks without it
     * (time, successes), so the count it reads stays true until it
     * ejects. */
    if (atomic_exchange_explicit(gate, true, memory_order_acquire))
        return false;
    bool ejected = false;
    const sy__service *s = in->owner;
    uint32_t pct = o->max_ejected_percent ? o->max_ejected_percent : 50;
    size_t cap = s->n * pct / 100;
    if (cap < 1)
        cap = 1;
    uint64_t base = o->base_ejection_ms ? o->base_ejection_ms : 30000;
    uint64_t max = o->max_ejection_ms ? o->max_ejection_ms : 300000;
    uint32_t k = atomic_load_explicit(&h->ejections, memory_order_relaxed) + 1;
    uint64_t ms = base * k;
    if (ms > max || ms / k != base)
        ms = max;
    /* concurrent failures of the same instance: one ejects, and only it
     * counts the ejection (a loser's count would lengthen the next one);
     * a success may have cleared an expired ejection meanwhile */
    if (ejected_count(s, now) < cap &&
        atomic_compare_exchange_strong_explicit(
            &h->ejected_until, &until, now + (int64_t)ms, memory_order_relaxed,
            memory_order_relaxed)) {
        atomic_fetch_add_explicit(&h->ejections, 1, memory_order_relaxed);
        atomic_store_explicit(&h->failures, 0, memory_order_relaxed);
        ejected = true;
    }
    atomic_store_explicit(gate, false, memory_order_release);
    return ejected;
}

void sy__service_health_of(const sy__service *s, size_t i, uint32_t *failures,
                           uint32_t *ejections, int64_t *ejected_until) {
    const sy__svc_health *h = i < s->n ? s->inst[i].health : NULL;
    *failures =
        h ? atomic_load_explicit(&h->failures, memory_order_relaxed) : 0;
    *ejections =
        h ? atomic_load_explicit(&h->ejections, memory_order_relaxed) : 0;
    *ejected_until =
        h ? atomic_load_explicit(&h->ejected_until, memory_order_relaxed) : 0;
}
