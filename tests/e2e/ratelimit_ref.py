"""SCG's token bucket, written out line by line as route-model.md section 9
states it (tonumber of every argument and stored value, math.min and
math.max, numbers handed to SETEX), and a check that the library's two
Redis scripts give what it gives: the same replies and the same keys
(value bytes and TTL) over sequences of calls with time steps, edge
arguments and stored values that are not what SCG writes.

REF_SINGLE is SCG's script; REF_BATCH is N runs of it in one script (the
batch's definition: the draws in order at one reading of the clock,
stopping at the first denied one, the keys written once). Both are the
library's texts before it made them cheaper; the library's must not
differ from them in anything a caller or Redis sees but the error text of
a call whose arguments are not numbers (an error either way).
"""
import socket

# what both scripts share: their keys, arguments and the stored bucket
REF_PROLOGUE = """\
if redis.replicate_commands then redis.replicate_commands() end
local tokens_key = KEYS[1]
local stamp_key = KEYS[2]
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
if now == nil then now = tonumber(redis.call('TIME')[1]) end
local requested = tonumber(ARGV[4])
local ttl = math.floor(2 * (capacity / rate))
local last = tonumber(redis.call('GET', tokens_key))
if last == nil then last = capacity end
local stamp = tonumber(redis.call('GET', stamp_key))
if stamp == nil then stamp = 0 end
"""

REF_SINGLE = REF_PROLOGUE + """\
local filled = math.min(capacity, last + math.max(0, now - stamp) * rate)
local left = filled
local ok = 0
if filled >= requested then
  left = filled - requested
  ok = 1
end
if ttl > 0 then
  redis.call('SETEX', tokens_key, ttl, left)
  redis.call('SETEX', stamp_key, ttl, now)
end
return { ok, left }
"""

REF_BATCH = REF_PROLOGUE + """\
local out = { 0, 0 }
for i = 1, tonumber(ARGV[5]) do
  local filled = math.min(capacity, last + math.max(0, now - stamp) * rate)
  local left = filled
  local ok = 0
  if filled >= requested then
    left = filled - requested
    ok = 1
  end
  out[2] = left
  if ttl > 0 then
    last = left
    stamp = now
  end
  if ok == 0 then break end
  out[1] = i
end
if ttl > 0 then
  redis.call('SETEX', tokens_key, ttl, last)
  redis.call('SETEX', stamp_key, ttl, now)
end
return out
"""


class Conn:
    """One kept connection to Redis (thousands of commands: one connect)."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.f = self.s.makefile("rb")

    def close(self):
        self.f.close()
        self.s.close()

    def _read(self):
        line = self.f.readline().rstrip(b"\r\n")
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return ("error",)  # compared as "an error", not its text
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2].decode()
        if t == b"*":
            return [self._read() for _ in range(int(rest))]
        raise RuntimeError("unexpected reply %r" % line)

    @staticmethod
    def _encode(args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        return out

    def cmd(self, *args):
        self.s.sendall(self._encode(args))
        return self._read()

    def atomic(self, cmds):
        """cmds in one MULTI/EXEC, written at once: their replies. Redis
        runs them back to back, so keys written by different commands get
        their TTLs within moments of each other, whatever this process's
        scheduling."""
        self.s.sendall(b"".join(self._encode(c) for c in
                                [("MULTI",)] + cmds + [("EXEC",)]))
        for _ in range(len(cmds) + 1):
            self._read()  # +OK, +QUEUED...
        return self._read()


# (replenishRate, burstCapacity, requestedTokens) as the caller passes them:
# SCG's usual ones, the bench's never-denying bucket, ttl 0, capacity 0,
# and what no gateway sends (fractions, 0, negatives, huge, inf)
CONFIGS = [("1", "10", "1"), ("5", "20", "3"), ("3", "7", "2"),
           ("10", "4", "1"), ("1", "0", "1"),
           ("2000000000", "2000000000", "1"), ("0.5", "3", "1"),
           ("1", "10", "2.5"), ("1", "1e20", "1"), ("1", "10", "0"),
           ("1", "10", "-1"), ("0", "10", "1"), ("1", "inf", "1"),
           ("7", "9007199254740993", "4"), ("1", "10", "x")]

# what the two keys hold before the first call (None: absent): SCG's
# values, and text SCG never writes
STATES = [(None, None), ("3", "999"), ("0", "1000"), ("abc", "999"),
          ("2.5", "999"), ("-3", "1000"), ("1e20", "0"), ("-0", "1000"),
          ("", ""), (" 7 ", "999"), ("0x10", "999"),
          ("9007199254740993", "999"), ("5", "2000"), ("nan", "999"),
          ("1e15", "999"), ("3", "nan")]

# (seconds after 1000 as ARGV[3], draws): the clock standing, stepping by
# a second, by more than a refill, a fraction; batches of 0 to 9
STEPS = [(0, 1), (0, 3), (1, 2), (1, 0), (2.5, 4), (60, 9), (60, 1),
         (61, 5)]


def _state_cmds(keys):
    return [c for k in keys for c in (("GET", k), ("PTTL", k))]


def _state(replies):
    """_state_cmds' replies as [(value, TTL in ms)]."""
    return list(zip(replies[0::2], replies[1::2]))


def _same(a, b):
    """Two _state()s alike: the same values, the same TTL (written in one
    MULTI, moments apart: within 400 ms; no TTL or no key, -1 / -2,
    exactly)."""
    return all(va == vb and (ta == tb or (ta >= 0 and tb >= 0 and
                                          abs(ta - tb) <= 400))
               for (va, ta), (vb, tb) in zip(a, b))


def _reset(r, keys, state):
    r.atomic([("DEL", *keys)] + [("SET", k, v) for k, v in zip(keys, state)
                                  if v is not None])


def _keys(name):
    base = "request_rate_limiter.{ref.%s}" % name
    return [base + ".tokens", base + ".timestamp"]


def _walk(r, shas, cfg, state, steps, now_text):
    """One sequence on four buckets: SCG's runs (R), the library's
    single script run as often (S), the library's batch (B) and the
    reference batch (O). Returns the differences."""
    ref_single, ref_batch, lib_single, lib_batch = shas
    R, S, B, O = _keys("R"), _keys("S"), _keys("B"), _keys("O")
    for keys in (R, S, B, O):
        _reset(r, keys, state)
    diffs = []
    apart = False  # a batch of 0 wrote B and O, not R: B against R no more
    for dt, n in steps:
        argv = [cfg[0], cfg[1], now_text(dt), cfg[2]]
        got = r.atomic(
            [("EVALSHA", ref_single, "2", *R, *argv)] * n +
            [("EVALSHA", lib_single, "2", *S, *argv)] * n +
            [("EVALSHA", lib_batch, "2", *B, *argv, str(n)),
             ("EVALSHA", ref_batch, "2", *O, *argv, str(n))] +
            _state_cmds(R + S + B + O))
        runs, mine = got[:n], got[n:2 * n]
        batch, want = got[2 * n], got[2 * n + 1]
        st = _state(got[2 * n + 2:])
        sr, ss, sb, so = st[0:2], st[2:4], st[4:6], st[6:8]
        what = (cfg, state, dt, n)
        if mine != runs:
            diffs.append(("single script's replies", what, mine, runs))
        if batch != want:
            diffs.append(("batch script's reply", what, batch, want))
        apart = apart or n == 0
        if not apart and ("error",) not in runs:
            k = sum(1 for x in runs if x[0] == 1)
            derived = [k, runs[min(k, n - 1)][1]]
            if batch != derived:
                diffs.append(("batch against SCG's runs", what, batch,
                              derived))
        if not _same(ss, sr):
            diffs.append(("keys after the single script", what, ss, sr))
        if not _same(sb, so):
            diffs.append(("keys after the batch script", what, sb, so))
        if not apart and ("error",) not in runs and not _same(sb, sr):
            diffs.append(("keys after the batch against SCG's runs", what,
                          sb, sr))
    return diffs


def compare(c, port, lib_single_sha, lib_batch_sha):
    """c.ok for each part: the library's scripts (by digest) against the
    references over CONFIGS x STATES x STEPS with the clock passed as
    ARGV[3], then with Redis's own clock (ARGV[3] "", inside one second)."""
    r = Conn(port)
    try:
        shas = (r.cmd("SCRIPT", "LOAD", REF_SINGLE),
                r.cmd("SCRIPT", "LOAD", REF_BATCH),
                lib_single_sha, lib_batch_sha)
        diffs = []
        walks = 0
        for cfg in CONFIGS:
            for state in STATES:
                diffs += _walk(r, shas, cfg, state, STEPS,
                               lambda dt: "%g" % (1000 + dt))
                walks += 1
        for cfg in CONFIGS:  # a batch of 0 first: the values read written
            for state in STATES:
                diffs += _walk(r, shas, cfg, state, [(0, 0), (0, 2)],
                               lambda dt: "%g" % (1000 + dt))
                walks += 1
        for cfg in CONFIGS[:4]:  # the clock as text Redis writes otherwise
            for state in STATES[:4]:
                diffs += _walk(r, shas, cfg, state, STEPS,
                               lambda dt: "%.2f" % (1000 + dt))
                walks += 1
        c.ok(not diffs, "%d sequences of calls: the library's scripts "
             "give SCG's replies and keys (%d differ: %r)"
             % (walks, len(diffs), diffs[:4]))
        # Redis's clock: SCG's runs and the library's within one second
        diffs = None
        for _ in range(5):
            s0 = r.cmd("TIME")[0]
            d = []
            for cfg in CONFIGS[:6]:
                for state in STATES[:3]:
                    d += _walk(r, shas, cfg, state, [(0, 3), (0, 1)],
                               lambda dt: "")
            if r.cmd("TIME")[0] == s0:
                diffs = d
                break
        c.ok(diffs == [], "on Redis's clock (TIME): the same replies and "
             "keys, the second stored as TIME gave it (%r)"
             % (diffs if diffs is None else diffs[:4],))
    finally:
        r.close()
