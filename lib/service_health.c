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
 * a service (sy_service_inherit_health), so a publish neither forgets an
 * ejection nor resets a failure count. Everything on the request path is a
 * relaxed atomic; the ejected share is counted only when an ejection is
 * about to happen.
 */
#include "service_int.h"

int svc_health_init(sy_service *s, svc_inst *in) {
    svc_health *h = sy_calloc(&s->alloc, 1, sizeof *h);
    if (!h)
        return SY_ENOMEM;
    atomic_init(&h->refs, 1);
    atomic_init(&h->failures, 0);
    atomic_init(&h->ejections, 0);
    atomic_init(&h->ejected_until, 0);
    in->health = h;
    in->owner = s;
    return SY_OK;
}

static void health_unref(const sy_alloc *a, svc_health *h) {
    if (h && atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1)
        sy_free(a, h);
}

void svc_health_release(const sy_alloc *a, svc_inst *in) {
    health_unref(a, in->health);
    in->health = NULL;
}

void sy_service_inherit_health(sy_service *dst, const sy_service *src) {
    if (!dst || !src)
        return;
    for (size_t i = 0; i < dst->n; i++) {
        svc_inst *in = &dst->inst[i];
        const sy_instance *o = sy_service_find(src, in->pub.id);
        /* an id moved to another address is another upstream: its
         * predecessor's failures and ejection are not its own */
        if (!o || o->port != in->pub.port || strcmp(o->host, in->pub.host))
            continue;
        svc_health *h = ((const svc_inst *)(const void *)o)->health;
        if (!h || h == in->health)
            continue;
        atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
        health_unref(&dst->alloc, in->health);
        in->health = h;
    }
}

static int64_t clock_now(const sy_select_params *p) {
    return p->clock_ms ? p->clock_ms(p->clock_data) : sy_now_realtime_ms();
}

bool svc_health_ejected(const svc_inst *in, const sy_select_params *p,
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
static size_t ejected_count(const sy_service *s, int64_t now) {
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        int64_t u = atomic_load_explicit(&s->inst[i].health->ejected_until,
                                         memory_order_relaxed);
        n += u != 0 && now < u;
    }
    return n;
}

bool sy_service_report_outcome(const void *handle, sy_outcome outcome,
                               int64_t now, const sy_outlier_options *o) {
    const svc_inst *in = handle;
    if (!in || !in->health || !o || o->disabled)
        return false;
    svc_health *h = in->health;
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
    const sy_service *s = in->owner;
    uint32_t pct = o->max_ejected_percent ? o->max_ejected_percent : 50;
    size_t cap = s->n * pct / 100;
    if (cap < 1)
        cap = 1;
    if (ejected_count(s, now) >= cap)
        return false;
    uint64_t base = o->base_ejection_ms ? o->base_ejection_ms : 30000;
    uint64_t max = o->max_ejection_ms ? o->max_ejection_ms : 300000;
    uint32_t k = atomic_load_explicit(&h->ejections, memory_order_relaxed) + 1;
    uint64_t ms = base * k;
    if (ms > max || ms / k != base)
        ms = max;
    /* one thread ejects; concurrent failures of the same instance lose,
     * and only the winner counts the ejection (a loser's count would
     * lengthen the next one) */
    if (!atomic_compare_exchange_strong_explicit(
            &h->ejected_until, &until, now + (int64_t)ms, memory_order_relaxed,
            memory_order_relaxed))
        return false;
    atomic_fetch_add_explicit(&h->ejections, 1, memory_order_relaxed);
    atomic_store_explicit(&h->failures, 0, memory_order_relaxed);
    return true;
}
