/*
 * breaker.c - the circuit breaker (breaker.h), Resilience4j's count-based
 * state machine kept lock-free in a store entry (store.h):
 *
 *   word  bits 0-1 state, 2-11 epoch (+1 at every transition),
 *         12-24 half-open permits left, 25-37 half-open calls recorded,
 *         38-50 of them failed, 51-63 of them slow
 *   since epoch << 54 | recovering << 53 | ms since the store's base
 *   closed window: pos (calls recorded), one failure bit and one slow bit
 *   per position (pos % slidingWindowSize), failures / slow counted
 *   from the bits (counters kept beside them drifted, even below zero,
 *   when a transition's clear raced a record)
 *
 * Every transition is one CAS on `word`, so the half-open permits and
 * counts are reset with the state. A permit carries the epoch it was
 * given in: an outcome from an older epoch changes nothing.
 */
#include "policy/breaker.h"
#include "base/values.h"

#include <stdio.h>

#define KNOWN                                                                  \
    "name, fallbackUri, statusCodes, resumeWithoutError, "                     \
    "failureRateThreshold, slowCallRateThreshold, "                            \
    "slowCallDurationThreshold, slidingWindowType, slidingWindowSize, "        \
    "minimumNumberOfCalls, waitDurationInOpenState, "                          \
    "permittedNumberOfCallsInHalfOpenState, timeoutDuration, warmupDuration"

#define F13 0x1fffull
#define ST(w) ((int)((w)&3))
#define EPOCH(w) (((w) >> 2) & 0x3ff)
#define PERMITS(w) (((w) >> 12) & F13)
#define HCALLS(w) (((w) >> 25) & F13)
#define HFAILS(w) (((w) >> 38) & F13)
#define HSLOW(w) (((w) >> 51) & F13)
#define HALF_OPEN_MAX 8191u

static uint64_t mkword(int st, uint64_t epoch, uint64_t permits, uint64_t calls,
                       uint64_t fails, uint64_t slow) {
    return (uint64_t)st | (epoch & 0x3ff) << 2 | (permits & F13) << 12 |
           (calls & F13) << 25 | (fails & F13) << 38 | (slow & F13) << 51;
}

static uint64_t mksince(uint64_t epoch, bool recovering, uint64_t ms) {
    return (epoch & 0x3ff) << 54 | (uint64_t)recovering << 53 |
           (ms & ((1ull << 53) - 1));
}

uint64_t sy__brk_key(const char *name, size_t len) {
    uint64_t h = sy__store_hash(name, len, 0x627265616b6572ull);
    return h && h != SY_BRK_TOMB ? h : 1;
}

typedef struct codes_ctx {
    sy__pargs *p;
    sy__brk_cfg *cfg;
} codes_ctx;

static int add_code(void *data, const char *item, size_t len) {
    codes_ctx *c = data;
    char buf[64];
    const char *why = NULL;
    int code;
    if (len >= sizeof buf)
        len = sizeof buf - 1;
    memcpy(buf, item, len);
    buf[len] = '\0';
    if (!sy__value_status(buf, &code, &why))
        return sy__parg_fail(c->p, SY_EARG, "statusCodes", "'%s': %s", buf,
                             why);
    c->cfg->codes[(code - 100) / 64] |= 1ull << ((code - 100) % 64);
    return 0;
}

int sy__brk_compile(sy__pargs *p, sy__brk_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    int rc = 0;
    const char *v = sy__parg(p, "name", &rc);
    if (rc)
        return rc;
    if (v && *v) {
        cfg->name = v;
        cfg->key = sy__brk_key(v, strlen(v));
    }
    v = sy__parg(p, "fallbackUri", &rc);
    if (rc)
        return rc;
    if (v && *v) {
        if (strncmp(v, "forward:", 8) != 0 || v[8] != '/')
            return sy__parg_fail(p, SY_EURI, "fallbackUri",
                                 "'%.80s': only forward:/path is run (the "
                                 "request is dispatched again to that path)",
                                 v);
        const char *why = NULL;
        if (!sy__value_forward_path(v + 8, true, &why))
            return sy__parg_fail(p, SY_EURI, "fallbackUri", "'%.80s': %s", v,
                                 why);
        cfg->fallback = v + 8;
    }
    codes_ctx cc = {p, cfg};
    if ((rc = sy__parg_list(p, "statusCodes", add_code, &cc, &cfg->has_codes)))
        return rc;
    if ((rc = sy__parg_bool(p, "resumeWithoutError",
                            &cfg->resume_without_error)))
        return rc;
    /* Resilience4j's defaults */
    double fr = 50, sr = 100;
    int64_t slow = 60000, win = 100, minc = 100, wait = 60000, half = 10,
            timeout = 1000, warm = 0;
    v = sy__parg(p, "slidingWindowType", &rc);
    if (rc)
        return rc;
    if (v && !sy__parg_enum_eq(v, strlen(v), "COUNT_BASED"))
        return sy__parg_fail(p, SY_EARG, "slidingWindowType",
                             "'%.40s': only COUNT_BASED is run", v);
    if ((rc = sy__parg_float(p, "failureRateThreshold", 0, true, 100, &fr,
                             NULL)) ||
        (rc = sy__parg_float(p, "slowCallRateThreshold", 0, true, 100, &sr,
                             NULL)) ||
        (rc = sy__parg_duration(p, "slowCallDurationThreshold", 1, &slow,
                                NULL)) ||
        (rc = sy__parg_int(p, "slidingWindowSize", 1, SY_BREAKER_WINDOW_MAX,
                           &win, NULL)) ||
        (rc = sy__parg_int(p, "minimumNumberOfCalls", 1, INT32_MAX, &minc,
                           NULL)) ||
        (rc =
             sy__parg_duration(p, "waitDurationInOpenState", 1, &wait, NULL)) ||
        (rc = sy__parg_int(p, "permittedNumberOfCallsInHalfOpenState", 1,
                           HALF_OPEN_MAX, &half, NULL)) ||
        (rc = sy__parg_duration(p, "timeoutDuration", 1, &timeout, NULL)) ||
        (rc = sy__parg_duration(p, "warmupDuration", 0, &warm, NULL)))
        return rc;
    if ((rc = sy__parg_unknown(p, KNOWN)))
        return rc;
    /* the rates run as floats (Resilience4j's): one that rounds to 0 would
     * open the breaker on calls that all succeeded */
    if ((float)fr <= 0.0f || (float)sr <= 0.0f)
        return sy__parg_fail(p, SY_ERANGE,
                             (float)fr <= 0.0f ? "failureRateThreshold"
                                               : "slowCallRateThreshold",
                             "%g is 0 as a float (the threshold must be "
                             "above 0)",
                             (float)fr <= 0.0f ? fr : sr);
    int64_t cap = UINT32_MAX;
    cfg->failure_rate = (float)fr;
    cfg->slow_rate = (float)sr;
    cfg->slow_ms = (uint32_t)(slow < cap ? slow : cap);
    cfg->window = (uint32_t)win;
    cfg->min_calls = (uint32_t)(minc < win ? minc : win);
    cfg->wait_ms = (uint32_t)(wait < cap ? wait : cap);
    cfg->half_open = (uint32_t)half;
    cfg->timeout_ms = (uint32_t)(timeout < cap ? timeout : cap);
    cfg->warmup_ms = (uint32_t)(warm < cap ? warm : cap);
    /* what the window and the state machine run with; statusCodes, the
     * time limit and the fallback are read per call from the permit */
    uint64_t shape[] = {(uint64_t)(fr * 1000), (uint64_t)(sr * 1000),
                        cfg->slow_ms,          cfg->window,
                        cfg->min_calls,        cfg->wait_ms,
                        cfg->half_open,        cfg->warmup_ms};
    cfg->fp = sy__hash64(shape, sizeof shape, 0x62726b636667ull) | 1;
    return 0;
}

bool sy__brk_first_diff(const sy__brk_cfg *a, const sy__brk_cfg *b, char *buf,
                        size_t n) {
    const struct {
        const char *name, *unit;
        uint32_t a, b;
    } u[] = {
        {"slidingWindowSize", "", a->window, b->window},
        {"minimumNumberOfCalls", "", a->min_calls, b->min_calls},
        {"failureRateThreshold", "", 0, 0},
        {"slowCallRateThreshold", "", 0, 0},
        {"slowCallDurationThreshold", "ms", a->slow_ms, b->slow_ms},
        {"waitDurationInOpenState", "ms", a->wait_ms, b->wait_ms},
        {"permittedNumberOfCallsInHalfOpenState", "", a->half_open,
         b->half_open},
        {"warmupDuration", "ms", a->warmup_ms, b->warmup_ms},
    };
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
        if (i == 2 || i == 3) {
            float x = i == 2 ? a->failure_rate : a->slow_rate;
            float y = i == 2 ? b->failure_rate : b->slow_rate;
            if (x != y) {
                snprintf(buf, n, "%s %g, not %g", u[i].name, (double)x,
                         (double)y);
                return true;
            }
        } else if (u[i].a != u[i].b) {
            snprintf(buf, n, "%s %u%s, not %u%s", u[i].name, u[i].a, u[i].unit,
                     u[i].b, u[i].unit);
            return true;
        }
    }
    snprintf(buf, n, "settings that differ");
    return false;
}

/* Empty the closed window (after the state moved to a new epoch). */
static void clear_window(sy__brk *b) {
    atomic_store_explicit(&b->pos, 0, memory_order_relaxed);
    for (size_t i = 0; i < SY_BRK_WORDS; i++) {
        atomic_store_explicit(&b->fbits[i], 0, memory_order_relaxed);
        atomic_store_explicit(&b->sbits[i], 0, memory_order_relaxed);
    }
    atomic_store_explicit(&b->warm, 0, memory_order_relaxed);
}

/* The breaker runs with cfg from now on: new settings start it closed
 * with an empty window. Only settings published later than the ones it
 * runs with replace them (a later snapshot generation). A router refuses
 * two live routes naming one breaker with different settings
 * (router/commit_brk.c); routers sharing a store may still publish
 * different ones for a name (told, not refused: store.h
 * sy__store_settings_follow): they do not reset it in turn, the first
 * asked keeps it. */
static uint64_t rel_now(sy_policy_store *st, sy__brk_now *now) {
    if (!now->ms)
        now->ms = now->read ? now->read(now->arg) : sy__now_realtime_ms();
    return sy__store_rel_ms(st, now->ms);
}

static void adopt(sy_policy_store *st, sy__brk *b, const sy__brk_cfg *cfg,
                  uint64_t gen, sy__brk_now *now) {
    uint64_t c = atomic_load_explicit(&b->cfg, memory_order_acquire);
    if (c == cfg->fp)
        return;
    uint64_t g = atomic_load_explicit(&b->cfg_gen, memory_order_relaxed);
    if (c && gen <= g)
        return;
    if (!atomic_compare_exchange_strong(&b->cfg, &c, cfg->fp))
        return;
    atomic_store(&b->cfg_gen, gen);
    uint64_t w = atomic_load(&b->word);
    uint64_t e = EPOCH(w) + 1;
    clear_window(b);
    atomic_store(&b->since, mksince(e, false, rel_now(st, now)));
    atomic_store(&b->word, mkword(SY_BREAKER_CLOSED, e, 0, 0, 0, 0));
}

static bool warm_admit(sy_policy_store *st, sy__brk *b, const sy__brk_cfg *cfg,
                       uint64_t w, sy__brk_now *clock) {
    if (!cfg->warmup_ms)
        return true;
    uint64_t s = atomic_load_explicit(&b->since, memory_order_acquire);
    if (!(s >> 53 & 1) || (s >> 54) != EPOCH(w))
        return true;
    uint64_t now = rel_now(st, clock);
    uint64_t at = s & ((1ull << 53) - 1);
    uint64_t el = now > at ? now - at : 0;
    if (el >= cfg->warmup_ms)
        return true;
    /* a share el / warmup of the calls, spread evenly */
    uint64_t n = atomic_fetch_add_explicit(&b->warm, 1, memory_order_relaxed);
    uint64_t spot = (n * 0x9e3779b97f4a7c15ull) >> 54; /* 0..1023 */
    return spot < el * 1024 / cfg->warmup_ms;
}

/* The entry of key in st: where cfg's hint says when that entry holds the
 * key (one load; the store never holds a key twice), else the table's
 * probe, whose answer becomes the hint. */
static inline sy__brk *find_entry(sy_policy_store *st, const sy__brk_cfg *cfg,
                                  uint64_t key, uint32_t *index) {
    uint32_t at = atomic_load_explicit(&cfg->at, memory_order_relaxed);
    if (at && at <= st->breakers) {
        sy__brk *b = &sy__store_brks(st)[at - 1];
        if (atomic_load_explicit(&b->key, memory_order_acquire) == key) {
            *index = at - 1;
            return b;
        }
    }
    sy__brk *b = sy__store_breaker_at(st, key, index);
    if (b) /* the cfg is the route's (compiled memory), a hint any thread
              may write */
        atomic_store_explicit(&((sy__brk_cfg *)(uintptr_t)cfg)->at, *index + 1,
                              memory_order_relaxed);
    return b;
}

/* The permit of every state but the usual closed one (no warm-up), and a
 * breaker running other settings: out of line, so the usual permit is a
 * few loads. */
static __attribute__((noinline)) void
acquire_slow(sy_policy_store *st, sy__brk *b, const sy__brk_cfg *cfg,
             uint64_t gen, sy__brk_now *now, sy_breaker_permit *out) {
    adopt(st, b, cfg, gen, now);
    for (;;) {
        uint64_t w = atomic_load_explicit(&b->word, memory_order_acquire);
        out->epoch = (uint32_t)EPOCH(w);
        out->state = (sy_breaker_state)ST(w);
        if (ST(w) == SY_BREAKER_CLOSED) {
            out->permitted = warm_admit(st, b, cfg, w, now);
            break;
        }
        if (ST(w) == SY_BREAKER_OPEN) {
            uint64_t s = atomic_load_explicit(&b->since, memory_order_acquire);
            uint64_t at = s & ((1ull << 53) - 1);
            if ((s >> 54) != EPOCH(w) || rel_now(st, now) < at + cfg->wait_ms) {
                out->permitted = false;
                break;
            }
            uint64_t e = EPOCH(w) + 1;
            uint64_t nw =
                mkword(SY_BREAKER_HALF_OPEN, e, cfg->half_open - 1, 0, 0, 0);
            if (atomic_compare_exchange_strong(&b->word, &w, nw)) {
                atomic_store(&b->since, mksince(e, false, rel_now(st, now)));
                sy__store_count(&st->breaker_half_opened);
                out->epoch = (uint32_t)(e & 0x3ff);
                out->state = SY_BREAKER_HALF_OPEN;
                out->permitted = true;
                return;
            }
            continue;
        }
        /* half-open: take a permit */
        if (!PERMITS(w)) {
            out->permitted = false;
            break;
        }
        uint64_t nw = w - (1ull << 12);
        if (atomic_compare_exchange_weak(&b->word, &w, nw)) {
            out->permitted = true;
            return;
        }
    }
    if (!out->permitted)
        sy__store_count(&st->breaker_rejected);
}

/* sy__brk_acquire past its usual call: the entry found (the hint
 * written), the settings adopted, any state. */
static __attribute__((noinline)) void
acquire_rest(sy_policy_store *st, const sy__brk_cfg *cfg, const char *route_id,
             uint64_t gen, sy__brk_now *now, sy_breaker_permit *out) {
    uint64_t key =
        cfg->key ? cfg->key : sy__brk_key(route_id, strlen(route_id));
    /* the route's attach claimed the entry (a commit refuses a breaker
     * the store has no room for) */
    sy__brk *b = find_entry(st, cfg, key, &out->entry);
    if (!b) {
        sy__store_count(&st->store_full);
        return; /* no entry: calls pass, unbroken */
    }
    acquire_slow(st, b, cfg, gen, now, out);
}

void sy__brk_acquire(sy_policy_store *st, const sy__brk_cfg *cfg,
                     const char *route_id, uint64_t gen, sy__brk_now *now,
                     sy_breaker_permit *out) {
    /* every field, each stored once (no memset before) */
    out->breaker = true;
    out->permitted = true;
    out->state = SY_BREAKER_CLOSED;
    out->timeout_ms = cfg->timeout_ms;
    out->name = cfg->name ? cfg->name : route_id;
    out->fallback = cfg->fallback;
    out->cfg = cfg;
    out->store = st;
    out->entry = UINT32_MAX;
    out->epoch = 0;
    /* the usual call, a few loads: a named breaker at the entry of its
     * hint, running cfg's settings, closed, no warm-up (what
     * acquire_rest would find, without its calls) */
    uint32_t at = atomic_load_explicit(&cfg->at, memory_order_relaxed);
    if (cfg->key && at && at <= st->breakers && !cfg->warmup_ms) {
        sy__brk *b = &sy__store_brks(st)[at - 1];
        if (atomic_load_explicit(&b->key, memory_order_acquire) == cfg->key &&
            atomic_load_explicit(&b->cfg, memory_order_acquire) == cfg->fp) {
            uint64_t w = atomic_load_explicit(&b->word, memory_order_acquire);
            if (ST(w) == SY_BREAKER_CLOSED) {
                out->entry = at - 1;
                out->epoch = (uint32_t)EPOCH(w);
                return;
            }
        }
    }
    acquire_rest(st, cfg, route_id, gen, now, out);
}

static bool is_code(const sy__brk_cfg *cfg, int status) {
    if (status < 100 || status > 599)
        return false;
    return cfg->codes[(status - 100) / 64] >> ((status - 100) % 64) & 1;
}

/* Set the window bit `mask` of *w to `on`; a bit already right costs a
 * load, not a read-modify-write (a steady stream of successes writes
 * nothing). */
static void set_bit(_Atomic uint64_t *w, uint64_t mask, bool on) {
    if (!!(atomic_load_explicit(w, memory_order_relaxed) & mask) == on)
        return;
    if (on)
        atomic_fetch_or(w, mask);
    else
        atomic_fetch_and(w, ~mask);
}

/* The bits set in v, inline (a build for any x86-64 has no popcnt
 * instruction, and __builtin_popcountll is then a call) */
static inline uint32_t pop64(uint64_t v) {
    v -= (v >> 1) & 0x5555555555555555ull;
    v = (v & 0x3333333333333333ull) + ((v >> 2) & 0x3333333333333333ull);
    v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (uint32_t)((v * 0x0101010101010101ull) >> 56);
}

/* The bits set among the first `window` of bits: never more than the
 * window, whatever raced. A word of no bits (the usual window: no
 * failure, no slow call) costs a load and a test. */
static uint32_t ones(_Atomic uint64_t *bits, uint32_t window) {
    if (window > SY_BREAKER_WINDOW_MAX)
        window = SY_BREAKER_WINDOW_MAX;
    uint32_t full = window / 64, rest = window % 64;
    uint64_t last = 0, any = 0;
    if (rest)
        last = atomic_load_explicit(&bits[full], memory_order_relaxed) &
               ((1ull << rest) - 1);
    for (uint32_t i = 0; i < full; i++)
        any |= atomic_load_explicit(&bits[i], memory_order_relaxed);
    if (!(any | last))
        return 0;
    uint32_t n = pop64(last);
    for (uint32_t i = 0; i < full; i++)
        n += pop64(atomic_load_explicit(&bits[i], memory_order_relaxed));
    return n;
}

/* sy_breaker_record's time, read only when the state moves: the host's,
 * or (0) the clock the permit was asked with (the router's clock
 * callback, else real time), as sy_match_breaker_acquire reads it. */
static int64_t now_or_real(const sy_breaker_permit *p, int64_t now_ms) {
    if (now_ms)
        return now_ms;
    return p->clock_ms ? p->clock_ms(p->clock_data) : sy__now_realtime_ms();
}

/* Weigh the closed window after the outcome of call idx went in; opens
 * the breaker past a threshold. */
static void weigh_closed(sy_policy_store *st, sy__brk *b,
                         const sy__brk_cfg *cfg, uint64_t w, uint64_t idx,
                         const sy_breaker_permit *p, int64_t now_ms) {
    uint64_t calls = idx + 1 < cfg->window ? idx + 1 : cfg->window;
    if (calls < cfg->min_calls)
        return;
    /* no failure (no slow call) is a rate of 0, below every threshold
     * (compile refuses 0): no float division for it */
    uint32_t nf = ones(b->fbits, cfg->window), ns = ones(b->sbits, cfg->window);
    if ((!nf || (float)nf * 100.0f / (float)calls < cfg->failure_rate) &&
        (!ns || (float)ns * 100.0f / (float)calls < cfg->slow_rate))
        return;
    uint64_t e = EPOCH(w) + 1;
    if (atomic_compare_exchange_strong(
            &b->word, &w, mkword(SY_BREAKER_OPEN, e, 0, 0, 0, 0))) {
        atomic_store(
            &b->since,
            mksince(e, false, sy__store_rel_ms(st, now_or_real(p, now_ms))));
        sy__store_count(&st->breaker_opened);
    }
}

/* One outcome into the closed window; opens the breaker past a
 * threshold. */
static void record_closed(sy_policy_store *st, sy__brk *b,
                          const sy__brk_cfg *cfg, uint64_t w, bool fail,
                          bool slow, const sy_breaker_permit *p,
                          int64_t now_ms) {
    uint64_t idx = atomic_fetch_add(&b->pos, 1);
    uint64_t i = idx % cfg->window, mask = 1ull << (i % 64);
    size_t word = (size_t)(i / 64);
    set_bit(&b->fbits[word], mask, fail);
    set_bit(&b->sbits[word], mask, slow);
    /* a success after a call that was already weighed (the usual call)
     * lowers both rates or leaves them: the window was weighed when each
     * failure or slow call in it went in (tested first: it decides the
     * usual call) */
    if (!fail && !slow && idx >= cfg->min_calls)
        return;
    weigh_closed(st, b, cfg, w, idx, p, now_ms);
}

static void record_half_open(sy_policy_store *st, sy__brk *b,
                             const sy__brk_cfg *cfg, uint64_t w, bool fail,
                             bool slow, const sy_breaker_permit *p,
                             int64_t now_ms) {
    uint32_t epoch = (uint32_t)EPOCH(w);
    for (;;) {
        uint64_t calls = HCALLS(w) + 1, fails = HFAILS(w) + fail,
                 slows = HSLOW(w) + slow;
        uint64_t nw = mkword(SY_BREAKER_HALF_OPEN, epoch, PERMITS(w), calls,
                             fails, slows);
        int to = -1;
        if (calls >= cfg->half_open) {
            float f = (float)fails * 100.0f / (float)calls;
            float s = (float)slows * 100.0f / (float)calls;
            to = f >= cfg->failure_rate || s >= cfg->slow_rate
                     ? SY_BREAKER_OPEN
                     : SY_BREAKER_CLOSED;
            nw = mkword(to, epoch + 1, 0, 0, 0, 0);
        }
        if (atomic_compare_exchange_weak(&b->word, &w, nw)) {
            uint64_t now =
                to < 0 ? 0 : sy__store_rel_ms(st, now_or_real(p, now_ms));
            if (to == SY_BREAKER_CLOSED) {
                clear_window(b);
                atomic_store(&b->since, mksince(epoch + 1, true, now));
                sy__store_count(&st->breaker_closed);
            } else if (to == SY_BREAKER_OPEN) {
                atomic_store(&b->since, mksince(epoch + 1, false, now));
                sy__store_count(&st->breaker_opened);
            }
            return;
        }
        if (ST(w) != SY_BREAKER_HALF_OPEN || EPOCH(w) != epoch)
            return;
    }
}

/* weigh_closed after a success, its verdict PASS. */
static __attribute__((noinline)) sy_breaker_verdict
weigh_pass(sy_policy_store *st, sy__brk *b, const sy__brk_cfg *cfg, uint64_t w,
           uint64_t idx, const sy_breaker_permit *p, int64_t now_ms) {
    weigh_closed(st, b, cfg, w, idx, p, now_ms);
    return SY_BREAKER_PASS;
}

/* sy_breaker_record but for its usual call: out of line. */
static __attribute__((noinline)) sy_breaker_verdict
record_any(const sy_breaker_permit *p, sy_outcome outcome, int status,
           uint64_t duration_ms, int64_t now_ms) {
    const sy__brk_cfg *cfg = p->cfg;
    bool err =
        outcome == SY_OUTCOME_CONNECT_FAILURE || outcome == SY_OUTCOME_TIMEOUT;
    bool code = is_code(cfg, status);
    bool fail = err || code;
    bool slow = duration_ms > cfg->slow_ms;
    sy_breaker_verdict v = fail ? SY_BREAKER_FALLBACK : SY_BREAKER_PASS;
    /* SCG without a fallbackUri, resumeWithoutError: a timeout stays 504;
     * a listed status resumes with the upstream's answer; any other error
     * (no answer) resumes an exchange nothing wrote: an empty 200 */
    if (fail && cfg->resume_without_error && !cfg->fallback &&
        outcome != SY_OUTCOME_TIMEOUT)
        v = code ? SY_BREAKER_PASS : SY_BREAKER_RESUME;
    sy_policy_store *st = p->store;
    if (!p->permitted || !st || p->entry >= st->breakers)
        return v;
    sy__brk *b = &sy__store_brks(st)[p->entry];
    uint64_t w = atomic_load_explicit(&b->word, memory_order_acquire);
    if (EPOCH(w) != p->epoch)
        return v; /* asked before a transition: counts no more */
    /* the time is read only when the state moves */
    if (ST(w) == SY_BREAKER_CLOSED)
        record_closed(st, b, cfg, w, fail, slow, p, now_ms);
    else if (ST(w) == SY_BREAKER_HALF_OPEN)
        record_half_open(st, b, cfg, w, fail, slow, p, now_ms);
    return v;
}

sy_breaker_verdict sy_breaker_record(const sy_breaker_permit *p,
                                     sy_outcome outcome, int status,
                                     uint64_t duration_ms, int64_t now_ms) {
    if (!p || !p->breaker || !p->cfg)
        return SY_BREAKER_PASS;
    const sy__brk_cfg *cfg = p->cfg;
    sy_policy_store *st = p->store;
    /* the usual call: a success, not slow, permitted by a closed breaker
     * still in the epoch it was asked in, after the window was first
     * weighed (record_closed's path for it, inline): its position in the
     * window, whose bits then are most often clear already */
    if ((outcome == SY_OUTCOME_SUCCESS || outcome == SY_OUTCOME_5XX) &&
        !is_code(cfg, status) && duration_ms <= cfg->slow_ms && p->permitted &&
        st && p->entry < st->breakers) {
        sy__brk *b = &sy__store_brks(st)[p->entry];
        uint64_t w = atomic_load_explicit(&b->word, memory_order_acquire);
        if (EPOCH(w) != p->epoch || ST(w) != SY_BREAKER_CLOSED)
            return record_any(p, outcome, status, duration_ms, now_ms);
        uint64_t idx = atomic_fetch_add(&b->pos, 1);
        uint64_t i = idx % cfg->window, mask = 1ull << (i % 64);
        size_t word = (size_t)(i / 64);
        set_bit(&b->fbits[word], mask, false);
        set_bit(&b->sbits[word], mask, false);
        if (idx < cfg->min_calls) /* a tail call: no register kept */
            return weigh_pass(st, b, cfg, w, idx, p, now_ms);
        return SY_BREAKER_PASS;
    }
    return record_any(p, outcome, status, duration_ms, now_ms);
}

int sy_policy_store_breaker(const sy_policy_store *cst, const char *name,
                            sy_breaker_info *out, sy_error *err) {
    sy_policy_store *st = (sy_policy_store *)(uintptr_t)cst;
    if (!st || !name || !out)
        return sy__error_set(err, SY_EINVAL, "", "store, name and out needed");
    sy__brk *b = sy__store_breaker(st, sy__brk_key(name, strlen(name)));
    if (!b)
        return sy__error_set(err, SY_ENOTFOUND, "",
                             "no published route names a breaker '%.80s'",
                             name);
    uint64_t w = atomic_load(&b->word);
    uint64_t s = atomic_load(&b->since);
    memset(out, 0, sizeof *out);
    out->state = (sy_breaker_state)ST(w);
    if (ST(w) == SY_BREAKER_HALF_OPEN) {
        out->calls = (uint32_t)HCALLS(w);
        out->failures = (uint32_t)HFAILS(w);
        out->slow = (uint32_t)HSLOW(w);
    } else {
        uint64_t pos = atomic_load(&b->pos);
        out->calls = (uint32_t)(pos < UINT32_MAX ? pos : UINT32_MAX);
        out->failures = ones(b->fbits, SY_BREAKER_WINDOW_MAX);
        out->slow = ones(b->sbits, SY_BREAKER_WINDOW_MAX);
    }
    int64_t base = atomic_load(&st->base_ms);
    out->state_since_ms = base + (int64_t)(s & ((1ull << 53) - 1));
    return 0;
}
