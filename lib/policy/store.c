/*
 * store.c - the policy store's block (store.h): formatting, attaching,
 * the time base, claiming bucket slots, claiming, counting and freeing
 * breaker entries, statistics.
 */
#include "policy/store.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static uint32_t pow2_at_least(uint32_t n, uint32_t min) {
    uint32_t p = min;
    while (p < n && p < (1u << 30))
        p <<= 1;
    return p;
}

static size_t bytes_for(uint32_t slots, uint32_t breakers) {
    return SY_STORE_OWNERS_END + (size_t)slots * sizeof(sy__bucket) +
           (size_t)breakers * (sizeof(sy__brk) + 8u * SY_USER_WORDS);
}

size_t sy_policy_store_bytes(uint32_t slots, uint32_t breakers) {
    return bytes_for(pow2_at_least(slots, 64), pow2_at_least(breakers, 16));
}

int sy_policy_store_init(void *mem, size_t len, uint32_t slots,
                         uint32_t breakers, sy_policy_store **out,
                         sy_error *err) {
    if (out)
        *out = NULL;
    if (!mem || !out || ((uintptr_t)mem & 7))
        return sy__error_set(err, SY_EINVAL, "",
                             "a store needs 8-byte aligned memory");
    uint32_t s = pow2_at_least(slots, 64), b = pow2_at_least(breakers, 16);
    if (len < bytes_for(64, 16))
        return sy__error_set(err, SY_ETOOSMALL, "",
                             "a policy store needs at least %zu bytes",
                             bytes_for(64, 16));
    while (bytes_for(s, b) > len && s > 64)
        s >>= 1;
    while (bytes_for(s, b) > len && b > 16)
        b >>= 1;
    memset(mem, 0, bytes_for(s, b));
    sy_policy_store *st = mem;
    st->version = SY_STORE_VERSION;
    st->slots = s;
    st->breakers = b;
    st->bytes = bytes_for(s, b);
    atomic_thread_fence(memory_order_release);
    st->magic = SY_STORE_MAGIC;
    *out = st;
    return 0;
}

int sy_policy_store_attach(void *mem, size_t len, sy_policy_store **out,
                           sy_error *err) {
    sy_policy_store *st = mem;
    if (out)
        *out = NULL;
    if (!st || !out || ((uintptr_t)mem & 7) || len < sizeof *st ||
        st->magic != SY_STORE_MAGIC || st->version != SY_STORE_VERSION ||
        st->bytes > len || st->bytes != bytes_for(st->slots, st->breakers))
        return sy__error_set(err, SY_EINVAL, "",
                             "not a policy store of this library version");
    *out = st;
    return 0;
}

int64_t sy__store_set_base(sy_policy_store *st, int64_t now_ms) {
    int64_t b = atomic_load_explicit(&st->base_ms, memory_order_relaxed);
    if (b)
        return b;
    int64_t want = now_ms - 86400000;
    if (want <= 0)
        want = 1;
    if (atomic_compare_exchange_strong(&st->base_ms, &b, want))
        return want;
    return b;
}

static uint32_t home_of(uint64_t key, uint32_t n) {
    return sy__store_home(key, n);
}

void sy__store_bucket_own(sy__bucket *b, uint64_t key) {
    uint64_t tag = sy__bucket_tag(key);
    /* a full bucket: a time of 40 bits of the key (under 269 s, the base
     * is a day before the first check), so that no other key's new state
     * nor any taken one (a time of now or later) is the same word */
    uint64_t full = (key >> 8 & ((1ull << 40) - 1)) << SY_BUCKET_TAG_BITS;
    uint64_t s = atomic_load_explicit(&b->state, memory_order_acquire);
    while ((s & SY_BUCKET_TAG_MASK) != tag &&
           atomic_load_explicit(&b->key, memory_order_acquire) == key)
        if (atomic_compare_exchange_weak_explicit(&b->state, &s, full | tag,
                                                  memory_order_acq_rel,
                                                  memory_order_acquire))
            return;
}

sy__bucket *sy__store_bucket(sy_policy_store *st, uint64_t key, uint64_t now) {
    sy__bucket *t = sy__store_buckets(st);
    uint32_t mask = st->slots - 1;
    sy__bucket *spare = NULL;
    uint32_t h = home_of(key, st->slots);
    for (uint32_t i = 0; i < SY_STORE_PROBES && i <= mask; i++) {
        sy__bucket *b = &t[(h + i) & mask];
        uint64_t k = atomic_load_explicit(&b->key, memory_order_acquire);
        if (k == key)
            return b;
        if (k == 0) {
            if (atomic_compare_exchange_strong(&b->key, &k, key)) {
                sy__store_bucket_own(b, key);
                return b;
            }
            if (k == key)
                return b;
            continue;
        }
        if (!spare) {
            uint64_t s = atomic_load_explicit(&b->state, memory_order_relaxed);
            if (sy__bucket_time(s) <= now)
                spare = b; /* full again: no bucket is the same */
        }
    }
    if (spare) {
        uint64_t k = atomic_load_explicit(&spare->key, memory_order_relaxed);
        uint64_t s = atomic_load_explicit(&spare->state, memory_order_relaxed);
        if (sy__bucket_time(s) <= now &&
            (s & SY_BUCKET_TAG_MASK) == sy__bucket_tag(k) &&
            atomic_compare_exchange_strong(&spare->key, &k, key)) {
            /* an old key's taker may still write its tag after s was read:
             * sy__store_bucket_own tries until the state is this key's;
             * after that the old key's takers fail their CAS on the tag */
            sy__store_bucket_own(spare, key);
            return spare;
        }
        if (k == key)
            return spare;
    }
    sy__store_count(&st->store_full);
    return NULL;
}

/* Walk key's probe chain (lock-free): its entry, or NULL at the chain's
 * end (an empty entry, or the whole table). *free_at, unless NULL: the
 * first freed or empty entry passed, where a claim would go. */
/* The entry of key (its index in *index when found and index is not
 * NULL), or NULL; with free_at, the first free or tombstoned entry on the
 * way too (where a claim would go). */
static sy__brk *brk_find(sy_policy_store *st, uint64_t key, sy__brk **free_at,
                         uint32_t *index) {
    sy__brk *t = sy__store_brks(st);
    uint32_t mask = st->breakers - 1, j = home_of(key, st->breakers);
    if (free_at)
        *free_at = NULL;
    for (uint32_t i = 0; i <= mask; i++, j = (j + 1) & mask) {
        uint64_t k = atomic_load_explicit(&t[j].key, memory_order_acquire);
        if (k == key) {
            if (index)
                *index = j;
            return &t[j];
        }
        if ((k == 0 || k == SY_BRK_TOMB) && free_at && !*free_at)
            *free_at = &t[j];
        if (k == 0)
            return NULL;
    }
    return NULL;
}

sy__brk *sy__store_breaker(sy_policy_store *st, uint64_t key) {
    return brk_find(st, key, NULL, NULL);
}

sy__brk *sy__store_breaker_at(sy_policy_store *st, uint64_t key,
                              uint32_t *index) {
    return brk_find(st, key, NULL, index);
}

bool sy__store_breaker_room(sy_policy_store *st, uint64_t key) {
    sy__brk *fr;
    return brk_find(st, key, &fr, NULL) || fr;
}

/* Process `pid` (a lock holder, an owner slot's) is gone: kill(pid, 0)
 * finds no such process, or /proc says it is a zombie (dead, its parent
 * has not waited for it yet; a parent that never waits would otherwise
 * keep its lock and entries for good). */
static bool holder_gone(uint64_t pid) {
    if (kill((pid_t)pid, 0) != 0)
        return errno == ESRCH;
    char path[48], buf[256];
    snprintf(path, sizeof path, "/proc/%llu/stat", (unsigned long long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false; /* no /proc: alive as far as anyone can tell */
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) S ...": the state after the last ')' */
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/* The store's writer lock over breaker claims and frees (several routers,
 * even processes, may share a store), held for one probe chain. The word
 * is the holder's process id: a waiter passes a holder only when that
 * process is gone (a worker killed holding it blocks no other), never a
 * live one however long it holds it (preempted, stopped). A time limit
 * once passed a holder after a second: two writers then changed the
 * counts at once, and the first one's unlock freed the second's lock. */
void sy__store_brk_lock(sy_policy_store *st) {
    uint64_t me = (uint64_t)getpid();
    for (unsigned spin = 0;; spin++) {
        uint64_t held =
            atomic_load_explicit(&st->brk_lock, memory_order_relaxed);
        /* a holder's liveness is asked now and then, not at every turn */
        if ((held == 0 ||
             (held != me && spin % 64 == 63 && holder_gone(held))) &&
            atomic_compare_exchange_weak_explicit(&st->brk_lock, &held, me,
                                                  memory_order_acquire,
                                                  memory_order_relaxed))
            return;
        if (spin >= 64)
            sched_yield();
    }
}

void sy__store_brk_unlock(sy_policy_store *st) {
    atomic_store_explicit(&st->brk_lock, 0, memory_order_release);
}

static bool brk_used(sy_policy_store *st, sy__brk *b) {
    _Atomic uint64_t *u = sy__store_users(st, b);
    uint64_t any = 0;
    for (size_t w = 0; w < SY_OWNER_WORDS; w++)
        any |= atomic_load_explicit(&u[w], memory_order_relaxed);
    return any != 0;
}

/* b has no owner left: the last entry of a chain goes back to empty, and
 * the freed ones before it with it (no chain passes an empty entry's
 * successor: no lookup needs them); any other becomes a tombstone. Under
 * the lock. */
static void brk_free(sy_policy_store *st, sy__brk *b) {
    sy__brk *t = sy__store_brks(st);
    uint32_t mask = st->breakers - 1, i = (uint32_t)(b - t);
    if (atomic_load_explicit(&t[(i + 1) & mask].key, memory_order_relaxed) !=
        0) {
        atomic_store_explicit(&b->key, SY_BRK_TOMB, memory_order_release);
        return;
    }
    for (uint32_t k = 0; k <= mask; k++, i = (i - 1) & mask) {
        uint64_t v = atomic_load_explicit(&t[i].key, memory_order_relaxed);
        if (k && v != SY_BRK_TOMB)
            break;
        atomic_store_explicit(&t[i].key, 0, memory_order_release);
    }
}

/* Owner `o`'s bit off in every entry, those left with none freed; the
 * slot free. Under the lock, where an entry of a key without a bit is
 * one a process killed between the two steps of a claim or a free left:
 * freed too. */
static void owner_clear(sy_policy_store *st, unsigned o) {
    sy__brk *t = sy__store_brks(st);
    uint64_t bit = 1ull << (o % 64);
    for (uint32_t i = 0; i < st->breakers; i++) {
        uint64_t k = atomic_load_explicit(&t[i].key, memory_order_relaxed);
        if (k == 0 || k == SY_BRK_TOMB)
            continue;
        /* written only where set: readers share these lines */
        _Atomic uint64_t *u = &sy__store_users(st, &t[i])[o / 64];
        if (atomic_load_explicit(u, memory_order_relaxed) & bit)
            atomic_fetch_and_explicit(u, ~bit, memory_order_relaxed);
        u = &sy__store_setters(st, &t[i])[o / 64];
        if (atomic_load_explicit(u, memory_order_relaxed) & bit)
            atomic_fetch_and_explicit(u, ~bit, memory_order_relaxed);
        if (!brk_used(st, &t[i]))
            brk_free(st, &t[i]);
    }
    atomic_store_explicit(&sy__store_owners(st)[o], 0, memory_order_relaxed);
}

/* The owners whose process is gone (killed: their routers never gave
 * their entries back) lose their bits. Under the lock. */
static void owners_reap(sy_policy_store *st) {
    _Atomic uint64_t *own = sy__store_owners(st);
    for (unsigned o = 0; o < SY_STORE_OWNERS; o++) {
        uint64_t pid = atomic_load_explicit(&own[o], memory_order_relaxed);
        if (pid && holder_gone(pid))
            owner_clear(st, o);
    }
}

void sy__store_reap(sy_policy_store *st) {
    sy__store_brk_lock(st);
    owners_reap(st);
    sy__store_brk_unlock(st);
}

int sy__store_owner_take(sy_policy_store *st) {
    _Atomic uint64_t *own = sy__store_owners(st);
    int got = -1;
    sy__store_brk_lock(st);
    owners_reap(st);
    for (unsigned o = 0; got < 0 && o < SY_STORE_OWNERS; o++)
        if (!atomic_load_explicit(&own[o], memory_order_relaxed)) {
            atomic_store_explicit(&own[o], (uint64_t)getpid(),
                                  memory_order_relaxed);
            got = (int)o;
        }
    sy__store_brk_unlock(st);
    return got;
}

void sy__store_owner_give(sy_policy_store *st, int owner) {
    if (owner < 0 || owner >= (int)SY_STORE_OWNERS)
        return;
    sy__store_brk_lock(st);
    owner_clear(st, (unsigned)owner);
    sy__store_brk_unlock(st);
}

sy__brk *sy__store_breaker_hold(sy_policy_store *st, uint64_t key, int owner) {
    if (owner < 0 || owner >= (int)SY_STORE_OWNERS)
        return NULL;
    sy__store_brk_lock(st);
    sy__brk *fr, *b = brk_find(st, key, &fr, NULL);
    if (!b && !fr) { /* full: the entries of owners gone may be free */
        owners_reap(st);
        b = brk_find(st, key, &fr, NULL);
    }
    if (!b && fr) {
        /* no reader reaches a free entry: reset it, then publish the key */
        atomic_store_explicit(&fr->cfg, 0, memory_order_relaxed);
        atomic_store_explicit(&fr->cfg_gen, 0, memory_order_relaxed);
        atomic_store_explicit(&fr->word, 0, memory_order_relaxed);
        atomic_store_explicit(&fr->since, 0, memory_order_relaxed);
        atomic_store_explicit(&fr->pos, 0, memory_order_relaxed);
        atomic_store_explicit(&fr->warm, 0, memory_order_relaxed);
        for (size_t i = 0; i < SY_BRK_WORDS; i++) {
            atomic_store_explicit(&fr->fbits[i], 0, memory_order_relaxed);
            atomic_store_explicit(&fr->sbits[i], 0, memory_order_relaxed);
        }
        for (size_t w = 0; w < SY_USER_WORDS; w++)
            atomic_store_explicit(&sy__store_users(st, fr)[w], 0,
                                  memory_order_relaxed);
        atomic_store_explicit(&fr->key, key, memory_order_release);
        b = fr;
    }
    if (b)
        atomic_fetch_or_explicit(&sy__store_users(st, b)[owner / 64],
                                 1ull << (owner % 64), memory_order_relaxed);
    sy__store_brk_unlock(st);
    return b;
}

void sy__store_breaker_drop(sy_policy_store *st, uint64_t key, int owner) {
    if (owner < 0 || owner >= (int)SY_STORE_OWNERS)
        return;
    sy__store_brk_lock(st);
    sy__brk *b = brk_find(st, key, NULL, NULL);
    if (b) {
        atomic_fetch_and_explicit(&sy__store_users(st, b)[owner / 64],
                                  ~(1ull << (owner % 64)),
                                  memory_order_relaxed);
        if (!brk_used(st, b))
            brk_free(st, b);
    }
    sy__store_brk_unlock(st);
}

/* ---- breaker settings across owners ---- */

/* Another owner than `owner` with a setter bit at b: the lowest, or -1. */
static int other_setter(sy_policy_store *st, const sy__brk *b, int owner) {
    _Atomic uint64_t *s = sy__store_setters(st, b);
    for (int w = 0; w < (int)SY_OWNER_WORDS; w++) {
        uint64_t bits = atomic_load_explicit(&s[w], memory_order_relaxed);
        if (w == owner / 64)
            bits &= ~(1ull << (owner % 64));
        if (bits)
            return w * 64 + __builtin_ctzll(bits);
    }
    return -1;
}

static void set_setter(sy_policy_store *st, const sy__brk *b, int owner,
                       bool on) {
    _Atomic uint64_t *w = &sy__store_setters(st, b)[owner / 64];
    uint64_t bit = 1ull << (owner % 64);
    if (on)
        atomic_fetch_or_explicit(w, bit, memory_order_relaxed);
    else
        atomic_fetch_and_explicit(w, ~bit, memory_order_relaxed);
}

static _Atomic uint64_t *settings_fp(sy_policy_store *st, const sy__brk *b) {
    return sy__store_setters(st, b) + SY_OWNER_WORDS;
}

int sy__store_settings_follow(sy_policy_store *st, int owner,
                              const sy__store_setting *v, size_t n,
                              size_t *clash, int *other) {
    if (owner < 0 || owner >= (int)SY_STORE_OWNERS || !n)
        return 0;
    int found = 0;
    sy__store_brk_lock(st);
    for (size_t i = 0; i < n; i++) {
        sy__brk *b = brk_find(st, v[i].key, NULL, NULL);
        if (!b)
            continue;
        if (!v[i].count) { /* its last route gone */
            set_setter(st, b, owner, false);
            continue;
        }
        int o = other_setter(st, b, owner);
        if (!found && o >= 0 &&
            atomic_load_explicit(settings_fp(st, b), memory_order_relaxed) !=
                v[i].fp) {
            *clash = i;
            *other = o;
            found = 1;
        }
        set_setter(st, b, owner, true);
        atomic_store_explicit(settings_fp(st, b), v[i].fp,
                              memory_order_relaxed);
    }
    sy__store_brk_unlock(st);
    return found;
}

uint64_t sy__store_owner_pid(sy_policy_store *st, int owner) {
    if (owner < 0 || owner >= (int)SY_STORE_OWNERS)
        return 0;
    return atomic_load_explicit(&sy__store_owners(st)[owner],
                                memory_order_relaxed);
}

void sy_policy_store_stats(const sy_policy_store *cst, sy_policy_stats *out) {
    sy_policy_store *st = (sy_policy_store *)(uintptr_t)cst;
    memset(out, 0, sizeof *out);
    if (!st)
        return;
    out->slots = st->slots;
    out->breakers = st->breakers;
    int64_t b = atomic_load_explicit(&st->base_ms, memory_order_relaxed);
    uint64_t now = b ? sy__store_since_ms(st, sy__now_realtime_ms()) *
                           SY_BUCKET_UNITS_PER_MS
                     : 0;
    sy__bucket *t = sy__store_buckets(st);
    for (uint32_t i = 0; i < st->slots; i++) {
        uint64_t k = atomic_load_explicit(&t[i].key, memory_order_relaxed);
        uint64_t s = atomic_load_explicit(&t[i].state, memory_order_relaxed);
        out->buckets_used += k && sy__bucket_time(s) > now;
    }
    sy__brk *bt = sy__store_brks(st);
    for (uint32_t i = 0; i < st->breakers; i++) {
        uint64_t k = atomic_load_explicit(&bt[i].key, memory_order_relaxed);
        out->breakers_used += k != 0 && k != SY_BRK_TOMB;
    }
    out->limited = atomic_load(&st->limited);
    out->store_full = atomic_load(&st->store_full);
    out->breaker_rejected = atomic_load(&st->breaker_rejected);
    out->breaker_opened = atomic_load(&st->breaker_opened);
    out->breaker_half_opened = atomic_load(&st->breaker_half_opened);
    out->breaker_closed = atomic_load(&st->breaker_closed);
}
