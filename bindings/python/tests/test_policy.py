"""Policies from Python: rate limits, breakers, retries, key resolvers and
what a host runs (docs/policies.md)."""
from __future__ import annotations

import pytest

import switchyard as sy

T0 = 1_700_000_000_000


def limited_router(args, **opts):
    r = sy.Router(**opts)
    r.add_source("s")
    r.apply("s", [{"id": "rl", "uri": "http://b",
                   "predicates": ["Path=/rl/**"],
                   "filters": [{"name": "RequestRateLimiter", "args": args}]}])
    return r


def test_a_burst_of_one_lets_one_request_through_with_scg_headers():
    r = limited_router({"redis-rate-limiter.replenishRate": "1",
                        "redis-rate-limiter.burstCapacity": "1",
                        "key-resolver": "#{@remoteAddrKeyResolver}"})
    with r.acquire() as snap:
        req = sy.Request(path="/rl/a", remote_addr="10.1.1.1")
        got = [snap.match(req).ratelimit(T0) for _ in range(5)]
    assert [g.allowed for g in got] == [True, False, False, False, False]
    assert got[1].status == 429 and got[1].key == "10.1.1.1"
    assert got[0].headers == {"X-RateLimit-Remaining": "0",
                              "X-RateLimit-Replenish-Rate": "1",
                              "X-RateLimit-Burst-Capacity": "1",
                              "X-RateLimit-Requested-Tokens": "1"}


def test_a_route_without_a_limiter_is_not_limited():
    r = sy.Router()
    r.add_source("s")
    r.apply("s", [{"id": "a", "uri": "http://b"}])
    with r.acquire() as snap:
        rl = snap.match(path="/x").ratelimit(T0)
    assert not rl.limited and rl.allowed


def test_key_resolvers_registered_from_python_key_the_buckets():
    reg = sy.Registry()
    seen = []

    def tenant(req, route):
        seen.append(route.id)
        return {k.lower(): v for k, v in req.headers}.get("x-tenant")

    reg.add_key_resolver("tenantKeyResolver", tenant)
    r = limited_router({"redis-rate-limiter.replenishRate": "1",
                        "key-resolver": "#{@tenantKeyResolver}"},
                       registry=reg)
    with r.acquire() as snap:
        a = [snap.match(path="/rl/x", headers={"X-Tenant": "a"}).ratelimit(T0)
             for _ in range(2)]
        b = snap.match(path="/rl/x", headers={"X-Tenant": "b"}).ratelimit(T0)
        none = snap.match(path="/rl/x").ratelimit(T0)
    assert [x.allowed for x in a] == [True, False]
    assert b.allowed and b.key == "b"
    assert none.empty_key and not none.allowed and none.status == 403
    assert seen and set(seen) == {"rl"}


def test_a_long_key_has_its_own_bucket_and_one_past_the_cap_is_raised():
    # a resolver's key was cut to 255 bytes once, so two clients whose keys
    # share those bytes shared one bucket; then past 255 bytes it raised.
    # Now every byte keys the bucket, the key reported being its first 238
    # bytes, "~" and 16 hex digits of the whole's hash; a key past the 4096
    # bytes the library lets a resolver write raises rather than being cut
    reg = sy.Registry()
    reg.add_key_resolver("longKeyResolver", lambda req, route: "k" * 255 + {
        k.lower(): v for k, v in req.headers}.get("x-client", ""))
    reg.add_key_resolver("hugeKeyResolver", lambda req, route: "k" * 4097)
    r = limited_router({"redis-rate-limiter.replenishRate": "1",
                        "redis-rate-limiter.burstCapacity": "1",
                        "key-resolver": "#{@longKeyResolver}"},
                       registry=reg)
    with r.acquire() as snap:
        assert snap.match(path="/rl/x").ratelimit(T0).key == "k" * 255
        a = [snap.match(path="/rl/x", headers={"X-Client": "a"}).ratelimit(T0)
             for _ in range(2)]
        b = snap.match(path="/rl/x", headers={"X-Client": "b"}).ratelimit(T0)
        assert [x.allowed for x in a] == [True, False]
        assert b.allowed
        assert a[0].key[:238] == "k" * 238 and a[0].key[238] == "~"
        assert len(a[0].key) == 255 and a[0].key != b.key
    r = limited_router({"redis-rate-limiter.replenishRate": "1",
                        "key-resolver": "#{@hugeKeyResolver}"},
                       registry=reg)
    with r.acquire() as snap:
        with pytest.raises(sy.InvalidArgumentError,
                           match="hugeKeyResolver.*4097 bytes.*4096"):
            snap.match(path="/rl/x").ratelimit(T0)


def test_a_resolver_returning_neither_str_nor_bytes_raises_naming_it():
    # a key of another type was str()'d: 42 keyed "42", an object its
    # repr (an address: a new bucket each time), a list its text; now it
    # raises at the call, naming the resolver and the type
    reg = sy.Registry()
    reg.add_key_resolver("intKeyResolver", lambda req, route: 42)
    reg.add_key_resolver("objKeyResolver", lambda req, route: object())
    for name, typ in (("intKeyResolver", "int"), ("objKeyResolver", "object")):
        r = limited_router({"redis-rate-limiter.replenishRate": "1",
                            "key-resolver": "#{@" + name + "}"},
                           registry=reg)
        with r.acquire() as snap:
            with pytest.raises(TypeError,
                               match=f"key resolver '{name}' returned "
                                     f"{typ}: a key is str, bytes or None"):
                snap.match(path="/rl/x").ratelimit(T0)


def test_an_unregistered_resolver_is_refused_at_its_path():
    with pytest.raises(sy.ValidationError) as e:
        limited_router({"redis-rate-limiter.replenishRate": "1",
                        "key-resolver": "#{@userKeyResolver}"})
    assert e.value.path == "[0].filters[0].args.key-resolver"


def test_the_principal_is_the_default_key():
    r = limited_router({"redis-rate-limiter.replenishRate": "1"})
    with r.acquire() as snap:
        rl = snap.match(path="/rl/a", principal="alice").ratelimit(T0)
    assert rl.allowed and rl.key == "alice"


def test_a_breaker_opens_and_its_state_is_visible():
    r = sy.Router()
    r.add_source("s")
    r.apply("s", [{"id": "cb", "uri": "http://b", "filters": [
        {"name": "CircuitBreaker", "args": {
            "name": "orders", "fallbackUri": "forward:/fallback",
            "slidingWindowSize": 2, "minimumNumberOfCalls": 2,
            "waitDurationInOpenState": "1s"}}]}])
    # the commit claimed its entry: closed, no call yet
    first = r.breaker("orders")
    assert first is not None and first.state == "closed" and first.calls == 0
    assert r.breaker("nobody-names-this") is None
    with r.acquire() as snap:
        m = snap.match(path="/x")
        for _ in range(2):
            p = m.breaker(T0)
            assert p.permitted and p.fallback == "/fallback"
            assert p.timeout_ms == 1000
            assert p.record("connect_failure", 0, 3, T0) == "fallback"
        assert not m.breaker(T0).permitted
        assert m.breaker(T0 + 1000).state == "half_open"
    info = r.breaker("orders")
    assert info.state == "half_open"
    assert r.policy_stats()["breaker_opened"] == 1


def test_record_without_now_runs_on_the_routers_clock():
    # accepted and run on another clock before: m.breaker() read the
    # router's clock, permit.record() without now_ms real time (the C
    # call's 0), so a breaker opened at today's date and, on a clock
    # driven by a test, never half-opened
    now = [T0]
    r = sy.Router(clock=lambda: now[0])
    r.add_source("s")
    r.apply("s", [{"id": "cb", "uri": "http://b", "filters": [
        {"name": "CircuitBreaker", "args": {
            "name": "clocked", "slidingWindowSize": 2,
            "minimumNumberOfCalls": 2, "waitDurationInOpenState": "10s"}}]}])
    with r.acquire() as snap:
        m = snap.match(path="/x")
        for _ in range(2):
            p = m.breaker()
            assert p.permitted
            assert p.record("connect_failure", 0, 3) == "fallback"
        info = r.breaker("clocked")
        assert info.state == "open" and info.state_since_ms == T0
        now[0] += 9_999
        assert not m.breaker().permitted
        now[0] += 1
        assert m.breaker().state == "half_open"


def test_a_permit_is_recorded_once():
    # accepted and counted again before: a second record() of one permit
    # counted a second call in the window (two failures of one call could
    # open the breaker)
    r = sy.Router()
    r.add_source("s")
    r.apply("s", [{"id": "cb", "uri": "http://b", "filters": [
        {"name": "CircuitBreaker", "args": {
            "name": "once", "slidingWindowSize": 2,
            "minimumNumberOfCalls": 2}}]}])
    with r.acquire() as snap:
        p = snap.match(path="/x").breaker(T0)
        assert p.record("connect_failure", 0, 3, T0) == "fallback"
        with pytest.raises(sy.InvalidArgumentError, match="recorded"):
            p.record("connect_failure", 0, 3, T0)
    info = r.breaker("once")
    assert info.calls == 1 and info.state == "closed"


def test_resume_without_error_and_no_fallback_is_resume():
    """SCG without a fallbackUri, resumeWithoutError: a connect failure is
    an empty 200 ("resume"), a listed status passes, a timeout is still
    the error ("fallback")."""
    r = sy.Router()
    r.add_source("s")
    r.apply("s", [{"id": "cb", "uri": "http://b", "filters": [
        {"name": "CircuitBreaker", "args": {
            "name": "rw", "resumeWithoutError": True,
            "statusCodes": ["500"]}}]}])
    with r.acquire() as snap:
        m = snap.match(path="/x")
        assert m.breaker(T0).record("connect_failure", 0, 3, T0) == "resume"
        assert m.breaker(T0).record("5xx", 500, 3, T0) == "pass"
        assert m.breaker(T0).record("timeout", 0, 3, T0) == "fallback"


def test_retry_policy_answers_retry_and_backoff():
    r = sy.Router()
    r.add_source("s")
    r.apply("s", [{"id": "r", "uri": "http://b", "filters": [
        "Retry=3, BAD_GATEWAY, GET, 10ms, 50ms, 2, false"]}])
    with r.acquire() as snap:
        p = snap.match(path="/x").retry_policy()
        assert p.retries == 3 and p.first_backoff_ms == 10
        assert p.next(0, "GET", "5xx", 502) == 10
        assert p.next(1, "GET", "5xx", 502) == 20
        assert p.next(3, "GET", "5xx", 502) is None
        assert p.next(0, "POST", "5xx", 502) is None
    r.apply("s", [{"id": "r", "uri": "http://b"}])
    with r.acquire() as snap:
        assert snap.match(path="/x").retry_policy() is None


def test_retry_jitter_is_drawn_when_no_random_is_given():
    # accepted and not used before: next() without random passed 0 to
    # sy_retry_next, so a jitter.randomFactor of 0.5 drew the same delay
    # (the low end, 50 ms for 100 ms) on every call: no jitter at all
    jittered = [{"id": "r", "uri": "http://b", "filters": [
        {"name": "Retry", "args": {
            "retries": 3, "statuses": "BAD_GATEWAY",
            "backoff.firstBackoff": "100ms", "backoff.maxBackoff": "1s",
            "backoff.factor": 2, "jitter.randomFactor": "0.5"}}]}]
    r = sy.Router()
    r.add_source("s")
    r.apply("s", jittered)
    with r.acquire() as snap:
        p = snap.match(path="/x").retry_policy()
        assert p.jitter == 0.5
        second = {p.next(1, "GET", "5xx", 502) for _ in range(64)}
        assert len(second) > 8 and min(second) >= 100 and max(second) <= 300
        # an explicit random is used as given
        assert p.next(1, "GET", "5xx", 502, random=0) == 100
    # the router's random callback, when it has one, draws it
    r = sy.Router(random=lambda: 7)
    r.add_source("s")
    r.apply("s", jittered)
    with r.acquire() as snap:
        p = snap.match(path="/x").retry_policy()
        assert {p.next(1, "GET", "5xx", 502) for _ in range(8)} == {
            p.next(1, "GET", "5xx", 502, random=7)}


def test_a_host_refuses_what_it_does_not_run():
    assert "CircuitBreaker" in sy.host_runs_all()
    assert sy.host_profile("nginx")[0] == "host=nginx"
    r = sy.Router(host_runs="nginx")
    r.add_source("s")
    with pytest.raises(sy.NotRunError) as e:
        r.apply("s", [{"id": "a", "uri": "http://b",
                       "filters": ["RewriteLocationResponseHeader"]}])
    assert e.value.path == "[0].filters[0]"
    assert "host 'nginx'" in str(e.value)
    with pytest.raises(sy.InvalidArgumentError):
        sy.Router(host_runs="iis")


def test_a_host_list_with_a_misspelled_entry_is_refused():
    # "!Retry.backof" would let the host accept a backoff it cannot wait
    with pytest.raises(sy.InvalidArgumentError) as e:
        sy.Router(host_runs=["Retry", "!Retry.backof"])
    assert "!Retry.backof" in str(e.value)
    with pytest.raises(sy.InvalidArgumentError):
        sy.parse([], host_runs=["CircuitBreakr"])
    sy.Router(host_runs=["host=mine", "Retry", "!Retry.backoff"]).close()
