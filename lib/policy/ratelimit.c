/*
 * ratelimit.c - RequestRateLimiter (ratelimit.h). The local bucket is
 * SCG's token bucket kept as one 64-bit word, the time at which it will
 * be full again (a "theoretical arrival time", GCRA), in bucket units
 * (1/4096 us since the store's base, store.h) on a grid of whole tokens:
 *
 *   P = 4,096,000,000 units a second; token k comes at g(k) = ceil(k P / rate)
 *   tokens come by now: K(now) = floor(now rate / P)
 *   the bucket's time is always some g(j), and j = floor(tat rate / P)
 *   tokens(now) = burstCapacity - (j - K(now))        (tat <= now: full)
 *   take n: allowed when tokens(now) >= n, then tat = g(max(j, K(now)) + n)
 *
 * which is SCG's filled = min(capacity, last + elapsed * rate) with a
 * continuous clock instead of Redis's whole seconds, whole tokens coming
 * at fixed instants `rate` times a second: over any interval a key that
 * asks often enough is granted burstCapacity + rate x time tokens within
 * one. (It was a token's refill time of 1,000,000 / rate whole
 * microseconds, truncated: 150,000/s ran as 166,666/s, 600,000/s as
 * 1,000,000/s, 2,000,000/s as 1,000,000/s.) A unit is shorter than the
 * gap between two tokens at every accepted rate (< 2^31 a second), so j
 * is read back from tat exactly. The arithmetic stays in 64 bits (times
 * split at whole seconds; divisions by P and 1,000 are constant, a
 * multiply): a draw from a bucket in use adds the requested tokens' step
 * and one unit more when the remainders say, no division; a draw from a
 * full bucket divides by the rate once. The word also holds the key's
 * tag, so that a CAS fails when the slot was given to another key
 * meanwhile (store.c).
 */
#include "policy/ratelimit.h"
#include "base/util.h"

#include <string.h>

#define KNOWN                                                                  \
    "redis-rate-limiter.replenishRate, redis-rate-limiter.burstCapacity, "     \
    "redis-rate-limiter.requestedTokens, key-resolver, rate-limiter, "         \
    "deny-empty-key, empty-key-status, status-code"

#define UNITS_PER_S (SY_BUCKET_UNITS_PER_MS * 1000u)

void sy__rl_shape(sy__rl_cfg *cfg) {
    uint64_t r = cfg->rate ? cfg->rate : 1;
    uint64_t need = (uint64_t)cfg->requested * UNITS_PER_S; /* < 2^63 */
    cfg->step = need / r;
    cfg->step_rem = need % r;
    sy__int_text(cfg->rate, cfg->argv[0]); /* u32: 10 digits at most */
    sy__int_text(cfg->burst, cfg->argv[1]);
    sy__int_text(cfg->requested, cfg->argv[2]);
}

int sy__rl_compile(sy__pargs *p, const sy_registry *reg, sy__rl_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    int64_t rate = 0, burst = 1, req = 1;
    bool has_rate = false;
    int rc;
    if ((rc = sy__parg_int(p, "redis-rate-limiter.replenishRate", 1, INT32_MAX,
                           &rate, &has_rate)) ||
        (rc = sy__parg_int(p, "redis-rate-limiter.burstCapacity", 0, INT32_MAX,
                           &burst, NULL)) ||
        (rc = sy__parg_int(p, "redis-rate-limiter.requestedTokens", 1,
                           INT32_MAX, &req, NULL)))
        return rc;
    if (!has_rate)
        return sy__parg_fail(p, SY_EMISSING, "redis-rate-limiter.replenishRate",
                             "missing required argument (tokens per second, "
                             "at least 1)");
    /* the bucket's word holds its refill end in 60 bits of 1/4096 us
     * (2^48 us, about 8.9 years from the store's base): a bucket refilling
     * for 2^46 us or longer (a quarter of it) would run past it sooner
     * and fail open, so it is refused; the rate is run exactly however it
     * divides a second (no rate is refused for it) */
    if ((uint64_t)burst * 1000000u / (uint64_t)rate >= 1ull << 46)
        return sy__parg_fail(
            p, SY_ERANGE, "redis-rate-limiter.burstCapacity",
            "%lld tokens at replenishRate %lld take more than 800 days to "
            "refill, which the bucket does not hold",
            (long long)burst, (long long)rate);
    cfg->rate = (uint32_t)rate;
    cfg->burst = (uint32_t)burst;
    cfg->requested = (uint32_t)req;
    sy__rl_shape(cfg);
    const char *v, *why = NULL;
    rc = 0;
    v = sy__parg(p, "key-resolver", &rc);
    if (rc)
        return rc;
    if (v) {
        if (!sy__keyres_parse(v, reg, &cfg->kr, &why))
            return sy__parg_fail(p, SY_EARG, "key-resolver", "%s", why);
    } else {
        cfg->kr.kind = SY_KR_PRINCIPAL; /* SCG's default resolver */
    }
    v = sy__parg(p, "rate-limiter", &rc);
    if (rc)
        return rc;
    if (v) {
        const char *s = v;
        while (*s == ' ')
            s++;
        if (strncmp(s, "#{@redisRateLimiter}", 20) != 0 ||
            s[20 + strspn(s + 20, " ")])
            return sy__parg_fail(p, SY_EARG, "rate-limiter",
                                 "only \"#{@redisRateLimiter}\" (SCG's token "
                                 "bucket) is run");
    }
    cfg->deny_empty = true;
    cfg->empty_status = 403;
    cfg->status = 429;
    if ((rc = sy__parg_bool(p, "deny-empty-key", &cfg->deny_empty)))
        return rc;
    /* SCG's route arg is emptyKeyStatus; its global property is
     * empty-key-status-code: both are taken */
    bool has_eks = sy__parg(p, "empty-key-status", &rc) != NULL;
    if (rc)
        return rc;
    if (has_eks &&
        (rc = sy__parg_status(p, "empty-key-status", &cfg->empty_status)))
        return rc;
    if (sy__parg(p, "empty-key-status-code", &rc)) {
        if (has_eks)
            return sy__parg_fail(p, SY_EARG, "empty-key-status-code",
                                 "given with empty-key-status");
        if ((rc = sy__parg_status(p, "empty-key-status-code",
                                  &cfg->empty_status)))
            return rc;
    }
    if (rc || (rc = sy__parg_status(p, "status-code", &cfg->status)))
        return rc;
    if ((rc = sy__parg_unknown(p, KNOWN)))
        return rc;
    uint32_t shape[3] = {cfg->rate, cfg->burst, cfg->requested};
    cfg->fp = sy__hash64(shape, sizeof shape, 0x726174656c696dull);
    return 0;
}

void sy__rl_fill(const sy__rl_cfg *cfg, sy_ratelimit *out) {
    out->limited = true;
    out->headers = true;
    out->empty_key = false;
    out->status = 0;
    out->replenish_rate = cfg->rate;
    out->burst_capacity = cfg->burst;
    out->requested_tokens = cfg->requested;
}

void sy__rl_empty_key(const sy__rl_cfg *cfg, sy_ratelimit *out) {
    sy__rl_fill(cfg, out);
    out->empty_key = true;
    out->headers = false; /* SCG answers an empty key without them */
    out->allowed = !cfg->deny_empty;
    out->status = cfg->deny_empty ? cfg->empty_status : 0;
    out->remaining = 0;
    out->key_len = 0;
    out->key[0] = '\0';
}

void sy__rl_take(sy_policy_store *st, const sy__rl_cfg *cfg,
                 uint64_t bucket_key, int64_t now_ms, sy_ratelimit *out) {
    sy__rl_fill(cfg, out);
    uint64_t ms = sy__store_since_ms(st, now_ms);
    uint64_t r = cfg->rate, burst = cfg->burst, req = cfg->requested;
    uint64_t tag = sy__bucket_tag(bucket_key);
    if (ms >= SY_BUCKET_TIME_END / SY_BUCKET_UNITS_PER_MS)
        goto open; /* past the word's range */
    uint64_t now = ms * SY_BUCKET_UNITS_PER_MS;
    /* K(now) = sec x rate + part (part < rate): whole seconds, then the
     * milliseconds past them */
    uint64_t sec = ms / 1000u, part = ms % 1000u * r / 1000u;
    uint64_t k_now = sec * r + part;
    for (int tries = 0; tries < 64; tries++) {
        sy__bucket *b = sy__store_bucket_home(st, bucket_key);
        if (!b && !(b = sy__store_bucket(st, bucket_key, now)))
            break;
        uint64_t s = atomic_load_explicit(&b->state, memory_order_acquire);
        if (atomic_load_explicit(&b->key, memory_order_relaxed) != bucket_key)
            continue; /* given to another key meanwhile: find again */
        if ((s & SY_BUCKET_TAG_MASK) != tag) {
            /* claimed for this key, its state not made this key's yet
             * (its claimer between the two): do it in the claimer's
             * place rather than fail open after 64 tries */
            sy__store_bucket_own(b, bucket_key);
            continue;
        }
        uint64_t tat = sy__bucket_time(s), used = 0, e = 0;
        if (tat > now) {
            /* in use: tat = g(j); j from its whole seconds and the units
             * past them (x < 2^63), e = tat x rate - j x P (< rate) */
            uint64_t ts = tat / UNITS_PER_S;
            uint64_t x = (tat - ts * UNITS_PER_S) * r, jx = x / UNITS_PER_S;
            used =
                ts * r + jx - k_now; /* <= burst unless the clock went back */
            e = x - jx * UNITS_PER_S;
        }
        if (used + req > burst) {
            out->allowed = false;
            out->status = cfg->status;
            out->remaining = (int64_t)(used >= burst ? 0 : burst - used);
            sy__store_count(&st->limited);
            return;
        }
        /* g(j + n) = tat + ceil((n P - e) / rate), n P = step x rate +
         * step_rem; from a full bucket g(K(now) + n) = sec x P +
         * ceil((part + n) P / rate), (part + n) P < 2^64 */
        uint64_t nt = tat > now ? tat + cfg->step + (cfg->step_rem > e)
                                : sec * UNITS_PER_S +
                                      ((part + req) * UNITS_PER_S + r - 1) / r;
        if (nt >= SY_BUCKET_TIME_END)
            break; /* past the word's range: fail open */
        if (atomic_compare_exchange_weak_explicit(
                &b->state, &s, nt << SY_BUCKET_TAG_BITS | tag,
                memory_order_acq_rel, memory_order_relaxed)) {
            out->allowed = true;
            out->remaining = (int64_t)(burst - used - req);
            return;
        }
    }
open:
    out->allowed = true; /* no slot: fail open, as SCG does without Redis */
    out->remaining = -1;
}

/* "request_rate_limiter.{ROUTE_ID.KEY}" + suffix into out (cap bytes),
 * the route id cut at 300 bytes and the whole cut to fit, NUL-ended: what
 * snprintf("request_rate_limiter.{%.300s.%.*s}%s") wrote, without printf
 * (a Redis-limited request formats two). */
static void rl_redis_key(char *out, size_t cap, const char *route_id,
                         const char *key, size_t kl, const char *suffix) {
    static const char pre[] = "request_rate_limiter.{";
    char full[sizeof pre + 300 + SY_POLICY_KEY_MAX + 16];
    size_t il = strnlen(route_id, 300), sl = strlen(suffix);
    size_t o = sizeof pre - 1;
    kl = strnlen(key, kl < SY_POLICY_KEY_MAX ? kl : SY_POLICY_KEY_MAX);
    memcpy(full, pre, o);
    memcpy(full + o, route_id, il);
    o += il;
    full[o++] = '.';
    memcpy(full + o, key, kl);
    o += kl;
    full[o++] = '}';
    memcpy(full + o, suffix, sl); /* ".tokens", ".timestamp" */
    o += sl;
    if (o > cap - 1)
        o = cap - 1;
    memcpy(out, full, o);
    out[o] = '\0';
}

void sy__rl_redis_call(const sy__rl_cfg *cfg, const char *route_id,
                       sy_redis_call *call) {
    call->needed = true;
    call->status = cfg->status;
    call->replenish_rate = cfg->rate;
    call->burst_capacity = cfg->burst;
    call->requested_tokens = cfg->requested;
    /* the two keys share "request_rate_limiter.{ROUTE_ID.KEY}": built once
     * when both fit whole (always, unless the route id and the key are
     * both near their limits), else rl_redis_key cuts them */
    static const char pre[] = "request_rate_limiter.{";
    size_t il = strnlen(route_id, 300);
    size_t kl = strnlen(call->key, call->key_len < SY_POLICY_KEY_MAX
                                       ? call->key_len
                                       : SY_POLICY_KEY_MAX);
    size_t n = sizeof pre - 1 + il + kl + 2;
    if (n + sizeof ".timestamp" <= sizeof call->timestamp_key) {
        char *o = call->tokens_key;
        memcpy(o, pre, sizeof pre - 1);
        o += sizeof pre - 1;
        memcpy(o, route_id, il);
        o += il;
        *o++ = '.';
        memcpy(o, call->key, kl);
        o += kl;
        *o++ = '}';
        memcpy(call->timestamp_key, call->tokens_key, n);
        memcpy(call->tokens_key + n, ".tokens", sizeof ".tokens");
        memcpy(call->timestamp_key + n, ".timestamp", sizeof ".timestamp");
    } else {
        rl_redis_key(call->tokens_key, sizeof call->tokens_key, route_id,
                     call->key, call->key_len, ".tokens");
        rl_redis_key(call->timestamp_key, sizeof call->timestamp_key, route_id,
                     call->key, call->key_len, ".timestamp");
    }
    memcpy(call->rate, cfg->argv[0], sizeof cfg->argv[0]);
    memcpy(call->capacity, cfg->argv[1], sizeof cfg->argv[1]);
    memcpy(call->requested, cfg->argv[2], sizeof cfg->argv[2]);
}

/* The token bucket in Redis, as route-model.md section 9 states SCG's:
 * written for switchyard, the same keys, arguments and reply. The batch
 * script shares its lines: the bucket read (READ), the same draw (DRAW),
 * the keys written once (WRITE).
 *
 * Both give, for every input, the keys and reply that SCG's lines give
 * (tonumber of each argument and stored value, math.min/max, the numbers
 * handed to SETEX; tests/e2e/ratelimit_ref.py runs them side by side),
 * but the text of an error, for ~10 % fewer Redis instructions a call and
 * a seventh of the cost a draw (callgrind on redis-server 7.0: 85,200 ->
 * 76,700 a call of one draw, 107,600 -> 82,100 a batch of 10):
 *   - an argument is made a number by arithmetic (one strtod) where
 *     tonumber parses it twice; tonumber stays where a non-number must
 *     read as nil (ARGV[3], the stored values) or may go unread
 *     (ARGV[4] in a batch of 0);
 *   - math.min(capacity, x) and math.max(0, d) are written as the
 *     comparisons they make (the same result for NaN too);
 *   - Redis turns a number argument into text with printf's "%.17g"
 *     (~2,700 instructions); an integer of fewer than 16 digits (not -0)
 *     has the same text as string.format('%d') (~1,400), and the clock is
 *     handed on as the text TIME gave (its digits, no conversion);
 *   - in a batch, once a draw was allowed and the bucket is carried
 *     (ttl > 0) with 0 < requested <= 1e308, every later draw of the
 *     batch finds the bucket as the last one left it (no time passed, not
 *     above capacity): it takes `requested` while the bucket holds that
 *     many, a four-operation loop.
 * The batch replies with two numbers, not a pair a draw: the draws allowed
 * are a prefix of the batch (a denied draw leaves the bucket as it found
 * it, so every later one sees the same bucket and is denied too; the loop
 * stops there) and each one's tokens left follow from the last one's
 * (sy_ratelimit_redis_batch_result). */
/* clang-format off */
#define REDIS_SCRIPT_READ \
    "if redis.replicate_commands then redis.replicate_commands() end\n" \
    "local call = redis.call\n" \
    "local fmt = string.format\n" \
    "local function text(x)\n" \
    "  if x % 1 == 0 and x > -1e15 and x < 1e15 and (x ~= 0 or 1 / x > 0) then\n" \
    "    return fmt('%d', x)\n" \
    "  end\n" \
    "  return x\n" \
    "end\n" \
    "local tokens_key = KEYS[1]\n" \
    "local stamp_key = KEYS[2]\n" \
    "local rate = ARGV[1] + 0\n" \
    "local capacity = ARGV[2] + 0\n" \
    "local now = tonumber(ARGV[3])\n" \
    "local now_text = now\n" \
    "if now == nil then\n" \
    "  now_text = call('TIME')[1]\n" \
    "  now = tonumber(now_text)\n" \
    "end\n" \
    "local requested = tonumber(ARGV[4])\n" \
    "local ttl = math.floor(2 * (capacity / rate))\n" \
    "local last = tonumber(call('GET', tokens_key))\n" \
    "if last == nil then last = capacity end\n" \
    "local stamp = tonumber(call('GET', stamp_key))\n" \
    "if stamp == nil then stamp = 0 end\n"
#define REDIS_SCRIPT_DRAW(in) \
    in "local elapsed = now - stamp\n" \
    in "if not (elapsed > 0) then elapsed = 0 end\n" \
    in "local filled = last + elapsed * rate\n" \
    in "if not (filled < capacity) then filled = capacity end\n" \
    in "left = filled\n" \
    in "local ok = 0\n" \
    in "if filled >= requested then\n" \
    in "  left = filled - requested\n" \
    in "  ok = 1\n" \
    in "end\n"
#define REDIS_SCRIPT_WRITE(tokens) \
    "if ttl > 0 then\n" \
    "  ttl = text(ttl)\n" \
    "  call('SETEX', tokens_key, ttl, text(" tokens "))\n" \
    "  call('SETEX', stamp_key, ttl, now_text)\n" \
    "end\n"

static const char redis_script[] =
    "-- switchyard: SCG's RequestRateLimiter token bucket\n"
    REDIS_SCRIPT_READ
    "local left\n"
    REDIS_SCRIPT_DRAW("")
    REDIS_SCRIPT_WRITE("left")
    "return { ok, left }\n";

static const char redis_batch_script[] =
    "-- switchyard: N draws of SCG's RequestRateLimiter token bucket\n"
    REDIS_SCRIPT_READ
    "local n = ARGV[5] + 0\n"
    "local allowed = 0\n"
    "local left = 0\n"
    "for i = 1, n do\n"
    REDIS_SCRIPT_DRAW("  ")
    "  if ttl > 0 then\n"
    "    last = left\n"
    "    stamp = now\n"
    "  end\n"
    "  if ok == 0 then break end\n"
    "  allowed = i\n"
    "  if ttl > 0 and requested > 0 and requested <= 1e308 then\n"
    "    while allowed + 1 <= n and last >= requested do\n"
    "      last = last - requested\n"
    "      allowed = allowed + 1\n"
    "    end\n"
    "    left = last\n"
    "    break\n"
    "  end\n"
    "end\n"
    REDIS_SCRIPT_WRITE("last")
    "return { allowed, left }\n";
/* clang-format on */

const char *sy_ratelimit_redis_script(void) {
    return redis_script;
}

const char *sy_ratelimit_redis_batch_script(void) {
    return redis_batch_script;
}

void sy_ratelimit_redis_result(const sy_redis_call *call, bool ok,
                               int64_t allowed, int64_t tokens_left,
                               sy_ratelimit *out) {
    if (!call || !out)
        return;
    if (!call->needed) {
        *out = call->decided;
        return;
    }
    memset(out, 0, offsetof(sy_ratelimit, key));
    out->limited = true;
    out->headers = true;
    out->replenish_rate = call->replenish_rate;
    out->burst_capacity = call->burst_capacity;
    out->requested_tokens = call->requested_tokens;
    out->key_len = call->key_len;
    memcpy(out->key, call->key, call->key_len);
    if (call->key_len < sizeof out->key)
        out->key[call->key_len] = '\0';
    if (!ok) {
        out->allowed = true; /* SCG's fail open */
        out->remaining = -1;
        return;
    }
    out->allowed = allowed == 1;
    out->remaining = tokens_left;
    out->status = out->allowed ? 0 : call->status;
}

void sy_ratelimit_redis_batch_result(const sy_redis_call *call, bool ok,
                                     int64_t allowed, int64_t tokens_left,
                                     size_t i, sy_ratelimit *out) {
    if (!call)
        return;
    /* the script's ttl > 0 (floor(2 x capacity / rate) >= 1): each draw
     * leaves the bucket to the next, else each sees the same one */
    bool carried = call->replenish_rate &&
                   2 * (uint64_t)call->burst_capacity >= call->replenish_rate;
    int64_t step = carried ? (int64_t)call->requested_tokens : 0;
    bool yes = allowed > 0 && (uint64_t)allowed > i;
    int64_t left = tokens_left;
    if (yes)
        left += (allowed - 1 - (int64_t)i) * step;
    sy_ratelimit_redis_result(call, ok, yes, left, out);
}

size_t sy_ratelimit_headers(const sy_ratelimit *rl, sy_header hdrs[4],
                            char *buf, size_t cap) {
    if (!rl || !rl->limited || !rl->headers || !hdrs || !buf || cap < 96)
        return 0;
    static const char *const names[4] = {
        "X-RateLimit-Remaining", "X-RateLimit-Replenish-Rate",
        "X-RateLimit-Burst-Capacity", "X-RateLimit-Requested-Tokens"};
    int64_t v[4] = {(int64_t)rl->remaining, (int64_t)rl->replenish_rate,
                    (int64_t)rl->burst_capacity, (int64_t)rl->requested_tokens};
    size_t at = 0;
    for (int i = 0; i < 4; i++) {
        size_t n = sy__int_text(v[i], buf + at); /* 4 x (20 + NUL) < 96 */
        hdrs[i].name = (sy_str){names[i], strlen(names[i])};
        hdrs[i].value = (sy_str){buf + at, n};
        at += n + 1;
    }
    return 4;
}
