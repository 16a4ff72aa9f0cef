/*
 * store.h - the policy store (public sy_policy_store): one block with no
 * pointers inside, so that it may live in memory several processes map.
 *
 *   +----------------------+  offset 0
 *   | header (128 bytes)   |  magic, version, capacities, time base,
 *   |                      |  counters (atomics)
 *   +----------------------+  128
 *   | owners               |  SY_STORE_OWNERS x 8 bytes: the process id
 *   |                      |  of each router using the store (0: free)
 *   +----------------------+  OWNERS_END = 128 + 8 * SY_STORE_OWNERS
 *   | bucket slots         |  slots x 16 bytes: key, state (ratelimit.c)
 *   +----------------------+  OWNERS_END + 16 * slots
 *   | breaker entries      |  breakers x 320 bytes (breaker.c)
 *   +----------------------+
 *   | breaker users        |  breakers x 72 bytes: each entry's owner bits,
 *   |                      |  its setter bits and settings fingerprint
 *   +----------------------+  (writers only: off the entries' lines)
 *
 * Both tables are open-addressed on a 64-bit key (0: empty), claimed with
 * a CAS. A bucket slot whose bucket is full again may be taken by another
 * key (a full bucket and no bucket are the same). Each router using the
 * store takes an owner slot (its process id); a breaker entry holds one
 * bit per owner with a live route naming it (the router counts its own
 * routes: the bit is set at its first, from the route's attach, and
 * cleared at its last release: no snapshot reaches it then). With no bit
 * left the entry is freed: its key becomes a tombstone (SY_BRK_TOMB,
 * passed by lookups, reused by claims), or 0 when the entry after it is
 * empty. An owner whose process is gone (a worker killed) is reaped: its
 * bits go as its routes' would have. Claims, frees and owner slots take
 * the store's writer lock (brk_lock, never on the request path); lookups
 * take nothing.
 *
 * Routes naming one breaker must give it one set of window settings
 * (router/commit_brk.c), across the routers of a store too: an entry
 * keeps the fingerprint of the settings its setters' live routes give it
 * and a setter bit per owner with such a route, set after the commit
 * that publishes its first and cleared after the one that publishes its
 * last gone (sy__store_settings_follow: published commits only, so a
 * failed one has nothing to give back); a commit of other settings while
 * another owner's bit is set is told so (the router logs it), not
 * refused.
 */
#ifndef SY_POLICY_STORE_H
#define SY_POLICY_STORE_H

#include "base/util.h"

#include <stdatomic.h>

#define SY_STORE_MAGIC 0x3152545359505953ull /* "SYPYSTR1" */
/* 5: owner bits in a table of their own; 6: a bucket's refill end in
 * 1/4096 us, its tag 4 bits; 7: breaker entries' setter
 * bits and settings */
#define SY_STORE_VERSION 7u
#define SY_STORE_PROBES 32u
/* routers (of any process) using one store at once */
#define SY_STORE_OWNERS 256u
#define SY_OWNER_WORDS (SY_STORE_OWNERS / 64)

typedef struct sy__bucket {
    _Atomic uint64_t key;
    /* (theoretical arrival time since the base, in SY_BUCKET_UNITS_PER_MS
     * units a millisecond) << SY_BUCKET_TAG_BITS | key's tag */
    _Atomic uint64_t state;
} sy__bucket;
/* A bucket's time unit, 1/4096 us: fine enough that every accepted rate
 * (at most 2^31 - 1 tokens a second) has a whole unit or more between
 * two tokens (ratelimit.c runs the rate exactly on that grid), and 60
 * bits of it are 2^48 us (8.9 years), what 48 bits of microseconds held.
 * The tag is the key's top 4 bits: it tells a slot's state is its key's
 * (store.c sy__store_bucket_own; a new state's time also carries 40 bits
 * of the key, so an old key's taker's CAS fails on it). */
#define SY_BUCKET_TAG_BITS 4u
#define SY_BUCKET_TAG_MASK ((1ull << SY_BUCKET_TAG_BITS) - 1)
#define SY_BUCKET_UNITS_PER_MS 4096000ull
#define SY_BUCKET_TIME_END (1ull << (64 - SY_BUCKET_TAG_BITS))
static inline uint64_t sy__bucket_tag(uint64_t key) {
    return key >> (64 - SY_BUCKET_TAG_BITS);
}
static inline uint64_t sy__bucket_time(uint64_t state) {
    return state >> SY_BUCKET_TAG_BITS;
}

#define SY_BRK_WORDS (SY_BREAKER_WINDOW_MAX / 64)
#define SY_BRK_TOMB UINT64_MAX /* a freed entry's key (sy__brk_key never) */
typedef struct sy__brk {
    _Atomic uint64_t key; /* the name's hash; 0: empty; SY_BRK_TOMB: freed */
    _Atomic uint64_t cfg; /* fingerprint of the config it runs with */
    _Atomic uint64_t cfg_gen; /* the snapshot generation that set it */
    _Atomic uint64_t word;    /* state, epoch, half-open counts (breaker.c) */
    _Atomic uint64_t since;   /* epoch << 54 | ms since the base */
    _Atomic uint64_t pos;     /* calls recorded in the closed window */
    _Atomic uint64_t warm;    /* calls asked during a recovery warm-up */
    uint32_t unused[2]; /* the window's counts are its bits' (breaker.c) */
    _Atomic uint64_t fbits[SY_BRK_WORDS], sbits[SY_BRK_WORDS];
} sy__brk;

struct sy_policy_store {
    uint64_t magic;
    uint32_t version, slots, breakers, reserved;
    uint64_t bytes;
    _Atomic int64_t base_ms; /* the time base (0: not yet set) */
    _Atomic uint64_t limited, store_full, breaker_rejected, breaker_opened,
        breaker_half_opened, breaker_closed;
    /* breaker claims and frees: 0, or the holder's process id (a holder
     * whose process is gone is passed; store.c sy__store_brk_lock) */
    _Atomic uint64_t brk_lock;
    uint64_t pad[4];
};
_Static_assert(sizeof(struct sy_policy_store) == 128, "a 128-byte header");
_Static_assert(sizeof(sy__brk) % 64 == 0, "entries on whole cache lines");

static inline _Atomic uint64_t *sy__store_owners(sy_policy_store *st) {
    return (_Atomic uint64_t *)(void *)((char *)st + sizeof *st);
}
#define SY_STORE_OWNERS_END (128u + 8u * SY_STORE_OWNERS)
static inline sy__bucket *sy__store_buckets(sy_policy_store *st) {
    return (sy__bucket *)(void *)((char *)st + SY_STORE_OWNERS_END);
}
static inline sy__brk *sy__store_brks(sy_policy_store *st) {
    return (sy__brk *)(void *)((char *)st + SY_STORE_OWNERS_END +
                               (size_t)st->slots * sizeof(sy__bucket));
}
/* Words per entry in the users table: the owner bits, the setter bits,
 * the settings' fingerprint. */
#define SY_USER_WORDS (2u * SY_OWNER_WORDS + 1u)
/* Entry b's owner bits (SY_OWNER_WORDS words; bit i: owner i has a live
 * route naming it), in a table after the entries: the request path never
 * reads them. */
static inline _Atomic uint64_t *sy__store_users(sy_policy_store *st,
                                                const sy__brk *b) {
    sy__brk *t = sy__store_brks(st);
    _Atomic uint64_t *u = (_Atomic uint64_t *)(void *)(t + st->breakers);
    return u + (size_t)(b - t) * SY_USER_WORDS;
}
/* Its setter bits (SY_OWNER_WORDS words; bit i: owner i published a live
 * route naming it), then the fingerprint of their settings (one word). */
static inline _Atomic uint64_t *sy__store_setters(sy_policy_store *st,
                                                  const sy__brk *b) {
    return sy__store_users(st, b) + SY_OWNER_WORDS;
}

/* The store's time base, set by the first call (a day before now_ms). */
int64_t sy__store_set_base(sy_policy_store *st, int64_t now_ms);
static inline int64_t sy__store_base(sy_policy_store *st, int64_t now_ms) {
    int64_t b = atomic_load_explicit(&st->base_ms, memory_order_relaxed);
    return b ? b : sy__store_set_base(st, now_ms);
}
/* Milliseconds since the store's time base for now_ms (earlier times
 * give 0); inline: every check reads it. */
static inline uint64_t sy__store_since_ms(sy_policy_store *st, int64_t now_ms) {
    int64_t b = sy__store_base(st, now_ms);
    return now_ms > b ? (uint64_t)(now_ms - b) : 0;
}
/* Milliseconds since the base, at least 1. */
static inline uint64_t sy__store_rel_ms(sy_policy_store *st, int64_t now_ms) {
    int64_t b = sy__store_base(st, now_ms);
    return now_ms > b ? (uint64_t)(now_ms - b) : 1;
}

/* The first slot of key in a table of n (a power of two) slots: the
 * key's high bits after a multiply by 2^64 / phi. The key's low bits
 * alone (version 1) clustered: 100,000 breaker names in 131,072 entries
 * took 17 probes a lookup, against 2.6 for a uniform spread. */
static inline uint32_t sy__store_home(uint64_t key, uint32_t n) {
    uint32_t h =
        (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - __builtin_ctz(n)));
    return h & (n - 1);
}
/* sy__store_bucket's first probe, inline: the key's home slot when it
 * holds the key (the usual check: what sy__store_bucket returns then),
 * else NULL (then sy__store_bucket). */
static inline sy__bucket *sy__store_bucket_home(sy_policy_store *st,
                                                uint64_t key) {
    sy__bucket *b = &sy__store_buckets(st)[sy__store_home(key, st->slots)];
    uint64_t k = atomic_load_explicit(&b->key, memory_order_acquire);
    return k == key ? b : NULL;
}
/* The bucket slot of `key` (never 0), found or claimed at `now` (bucket
 * units since the base: a slot whose bucket is full by then may be
 * taken); NULL: no slot within the probe limit (counted in store_full). */
sy__bucket *sy__store_bucket(sy_policy_store *st, uint64_t key, uint64_t now);
/* Make b's state key's (a full bucket under key's tag) unless it is
 * already, while b holds key. A slot's claimer does it right after its key
 * CAS, and a taker that finds the key there with another tag's state (the
 * claimer switched out between the two) does it in the claimer's place:
 * no taker waits for a claimer, nor fails open for one. */
void sy__store_bucket_own(sy__bucket *b, uint64_t key);
/* The breaker entry of `key`, or NULL. Lock-free. */
sy__brk *sy__store_breaker(sy_policy_store *st, uint64_t key);
/* The same, for the request path: *index its index among the entries
 * when found (untouched when not). */
sy__brk *sy__store_breaker_at(sy_policy_store *st, uint64_t key,
                              uint32_t *index);
/* Whether `key` has an entry or a free one could be claimed for it. */
bool sy__store_breaker_room(sy_policy_store *st, uint64_t key);
/* An owner slot for a router of this process: its index, or -1 when
 * every slot is taken by a live process (slots of processes gone are
 * reaped first). Writer side (takes the store's lock). */
int sy__store_owner_take(sy_policy_store *st);
/* The bits of owners whose process is gone go (as in the two calls
 * around): for a check that would find the store full. Writer side. */
void sy__store_reap(sy_policy_store *st);
/* The router of owner slot `owner` is freed: its bits go (its routes were
 * released), the slot is free. */
void sy__store_owner_give(sy_policy_store *st, int owner);
/* Owner `owner` uses `key`'s entry (its first route naming it), claimed
 * (closed, empty) when there is none; NULL: the table is full (after the
 * bits of owners gone were reaped). Writer side (takes the store's lock). */
sy__brk *sy__store_breaker_hold(sy_policy_store *st, uint64_t key, int owner);
/* Owner `owner` no longer uses `key`'s entry; the last owner frees it.
 * The caller guarantees no reader can still reach the entry through that
 * owner (its routes naming it no snapshot holds). Writer side. */
void sy__store_breaker_drop(sy_policy_store *st, uint64_t key, int owner);
/* A router's (owner's) breaker settings after its commit: key, the
 * fingerprint of the settings its live routes give it and how many name
 * it (0: none now). */
typedef struct sy__store_setting {
    uint64_t key, fp;
    uint32_t count;
} sy__store_setting;
/* Owner `owner`'s commit was published, giving the keys of v[0, n) these
 * settings: at each key of count > 0 the owner's setter bit is set and
 * the entry's settings become its (the last router to publish a change
 * sets them); at each of count 0 (its last route gone) its setter bit
 * goes. Keys without an entry are passed. Only a published commit comes
 * here, so a failed one has nothing to give back, and nothing another
 * router took up meanwhile can be undone under it. 1 when another
 * owner's live routes give one of them other settings (*clash: the
 * first one's index in v, *other: that owner), else 0. Not refused:
 * workers applying one change one after the other (nginx's), or a
 * reload's new workers beside the old ones draining, differ for a while
 * by design. Writer side (takes the lock). */
int sy__store_settings_follow(sy_policy_store *st, int owner,
                              const sy__store_setting *v, size_t n,
                              size_t *clash, int *other);
/* The process id of owner slot `owner` (0: free). */
uint64_t sy__store_owner_pid(sy_policy_store *st, int owner);

/* The writer lock itself (the two calls above take it). */
void sy__store_brk_lock(sy_policy_store *st);
void sy__store_brk_unlock(sy_policy_store *st);

/* A quick hash of a short text (route ids, keys, names) for the store's
 * tables: 8 bytes a step, multiply and fold. Not for hostile inputs'
 * collision resistance: a collision only shares a bucket or a breaker. */
static inline uint64_t sy__store_hash(const void *data, size_t len,
                                      uint64_t seed) {
    const unsigned char *p = data;
    uint64_t h = seed ^ (len * 0x9e3779b97f4a7c15ull);
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        p += 8, len -= 8;
    }
    uint64_t w = 0; /* the last 0-7 bytes, in two fixed-size loads */
    if (len >= 4) {
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, p + len - 4, 4);
        w = (uint64_t)a << 32 | b;
    } else if (len) {
        w = (uint64_t)p[0] << 16 | (uint64_t)p[len >> 1] << 8 | p[len - 1];
    }
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

/* Counters. */
static inline void sy__store_count(_Atomic uint64_t *c) {
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

#endif
