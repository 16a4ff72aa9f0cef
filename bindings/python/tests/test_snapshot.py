"""Snapshot: routes, match (and the filter plan), explain, select,
release semantics and garbage collection."""
from __future__ import annotations

import gc
from datetime import datetime, timezone

import pytest

import switchyard as sy


def test_snapshot_basics(router, gateway):
    with router.acquire() as snap:
        assert snap.generation == router.metrics().generation
        assert isinstance(snap.fingerprint, int)
        assert len(snap) == len(gateway["routes"])
        ids = [r.id for r in snap]
        assert ids[-1] == "fallback"  # order 100 ranks last
        assert snap[0].id == ids[0] and snap[-1].id == "fallback"
        with pytest.raises(IndexError):
            snap[len(snap)]
        assert snap.routes == tuple(snap)
        assert "orders" in snap and "nope" not in snap and 3 not in snap
        r = snap.get("orders")
        assert r.source == "main" and r.uri == "lb://orders"
        assert snap.get("nope") is None
        assert all(r.source == "main" for r in snap)
        assert "Snapshot" in repr(snap)


def test_equal_content_has_equal_fingerprints(gateway):
    fps = []
    for _ in range(2):
        with sy.Router() as r:
            r.add_source("main")
            r.apply("main", gateway)
            with r.acquire() as snap:
                fps.append(snap.fingerprint)
    assert fps[0] == fps[1]


def test_match_captures_vars_and_applies_filters(router):
    with router.acquire() as snap:
        m = snap.match(sy.Request("GET", "http://shop/api/orders/42?expand=1"))
    assert m.route_id == "orders"
    assert dict(m.vars) == {"id": "42"}
    assert m.path == "/orders/42" and m.query == "expand=1"
    assert ("X-Order-Id", "42") in m.headers
    assert m.action == sy.Action.PROXY and m.status == 0 and m.redirect is None
    assert m.upstream.kind == sy.UpstreamKind.SERVICE
    with pytest.raises(Exception):
        m.path = "/x"  # frozen


def test_match_keywords_dicts_and_requests_are_equivalent(router):
    a = router.match(method="GET", url="/api/orders/1")
    b = router.match({"method": "GET", "path": "/api/orders/1"})
    c = router.match(sy.Request(method="GET", path="/api/orders/1", query=""))
    assert a == b == c
    with pytest.raises(TypeError):
        router.match(sy.Request(), method="GET")
    with pytest.raises(TypeError):
        router.match(42)


def test_method_predicate(router):
    assert router.match(method="POST", url="/api/orders/1").route_id == "fallback"


def test_host_vars_response_ops_and_host_filters(router):
    m = router.match(url="http://acme.example.com/users/17/profile")
    assert m.route_id == "users"
    assert m.vars["tenant"] == "acme" and m.vars["rest"] == "/17/profile"
    assert m.path == "/v2/acme/users/17/profile"
    assert sy.ResponseOp(sy.ResponseOpKind.ADD, "X-Tenant", "acme", "") in m.response_ops
    (retry,) = m.host_filters
    assert retry.name == "Retry" and retry.args
    d = m.to_dict()
    assert d["route"] == "users" and d["vars"]["tenant"] == "acme"


def test_host_header_is_used_when_the_url_has_no_authority(router):
    m = router.match(url="/users/1", headers={"Host": "t.example.com"})
    assert m.route_id == "users" and m.vars["tenant"] == "t"
    m = router.match(url="/users/1", headers=[("host", "u.example.com")])
    assert m.vars["tenant"] == "u"


def test_redirect(router):
    m = router.match(url="/docs/intro")
    assert m.action == sy.Action.REDIRECT and m.status == 302
    assert m.redirect and m.redirect.startswith("https://docs.example.com")


def test_request_size_answers_413(router):
    m = router.match(method="POST", url="/upload", content_length=10_000)
    assert m.action == sy.Action.RESPOND and m.status == 413
    m = router.match(method="POST", url="/upload", content_length=10)
    assert m.action == sy.Action.PROXY
    assert router.match(url="/upload").action == sy.Action.PROXY


def test_disabled_route_never_matches(router):
    assert router.match(url="/off").route_id == "fallback"


def test_no_match_is_none(router):
    router.remove("fallback")
    assert router.match(url="/nothing/here") is None


def test_linear_oracle_agrees(router):
    with router.acquire() as snap:
        for url in ("/api/orders/1", "/docs/x", "/off", "/upload", "/z",
                    "http://a.example.com/users/1"):
            assert snap.match(url=url) == snap.match(url=url, linear=True)


def test_headers_as_mapping_with_lists(router):
    m = router.match(url="/api/orders/1", headers={"X-A": ["1", "2"], "X-B": "3"})
    names = [h for h in m.headers if h[0] in ("X-A", "X-B")]
    assert names == [("X-A", "1"), ("X-A", "2"), ("X-B", "3")]


def test_time_remote_addr_and_weight_requests():
    routes = [
        {"id": "new", "uri": "http://x", "predicates": ["After=2025-01-01T00:00:00Z"]},
        {"id": "lan", "uri": "http://x", "predicates": ["RemoteAddr=10.0.0.0/8"]},
        {"id": "w1", "uri": "http://x", "predicates": ["Path=/w", "Weight=g,50"]},
        {"id": "w2", "uri": "http://x", "predicates": ["Path=/w", "Weight=g,50"]},
    ]
    with sy.Router() as r:
        r.add_source("s")
        r.apply("s", routes)
        with r.acquire() as snap:
            old = datetime(2024, 6, 1, tzinfo=timezone.utc)
            assert snap.match(url="/x", now=old) is None
            assert snap.match(url="/x", now=datetime(2026, 1, 1)).route_id == "new"
            assert snap.match(url="/x", now=1_800_000_000_000).route_id == "new"
            assert snap.match(url="/x", now=old, remote_addr="10.1.2.3").route_id == "lan"
            assert snap.match(url="/x", now=old, remote_addr="192.168.0.1") is None
            winners = {snap.match(url="/w", now=old, seed=s).route_id
                       for s in range(64)}
            assert winners == {"w1", "w2"}
            # the same seed always draws the same route
            assert len({snap.match(url="/w", now=old, seed=7).route_id
                        for _ in range(10)}) == 1


def test_explain_walks_routes_in_rank_order(router):
    with router.acquire() as snap:
        steps = snap.explain(method="POST", url="/api/orders/1")
        assert [s.route_id for s in steps] == [r.id for r in snap]
    by_id = {s.route_id: s for s in steps}
    assert by_id["orders"].matched is False
    assert by_id["orders"].failed_predicate == 1
    assert by_id["orders"].failed_name == "Method"
    assert by_id["off"].failed_predicate == -1
    assert by_id["off"].failed_name == "disabled"
    assert by_id["fallback"].matched and by_id["fallback"].failed_name is None
    assert router.explain(url="/docs/a")[0].route_id == steps[0].route_id


def test_release_is_idempotent_and_closes_the_snapshot(router):
    snap = router.acquire()
    router.upsert("main", {"id": "gen", "uri": "http://x"})
    assert router.metrics().retired_snapshots == 1  # held by `snap`
    snap.release()
    snap.release()
    assert snap.released and "released" in repr(snap)
    router.reclaim()
    assert router.metrics().retired_snapshots == 0
    with pytest.raises(sy.ClosedError):
        snap.match(url="/")
    with pytest.raises(sy.ClosedError):
        len(snap)


def test_context_manager_releases(router):
    with router.acquire() as snap:
        pass
    assert snap.released


def test_garbage_collection_releases_snapshots_exactly_once(router):
    base = router.metrics().live_snapshots
    snaps = [router.acquire() for _ in range(50)]
    assert router.metrics().live_snapshots == base  # same published snapshot
    router.upsert("main", {"id": "gen", "uri": "http://x"})
    assert router.metrics().retired_snapshots == 1
    for s in snaps[:25]:
        s.release()
    del snaps  # the other 25 go through the finalizer
    gc.collect()
    router.reclaim()
    m = router.metrics()
    assert m.retired_snapshots == 0 and m.live_snapshots == base


def test_results_outlive_their_snapshot(router):
    with router.acquire() as snap:
        m = snap.match(url="http://a.example.com/users/1")
        route = snap.get("users")
        steps = snap.explain(url="/")
    router.apply("main", {"version": "2", "routes": []})
    router.reclaim()
    assert m.vars["tenant"] == "a" and route.uri.startswith("https")
    assert steps


def test_diff_snapshots(router):
    with router.acquire() as before:
        router.upsert("main", {"id": "extra", "uri": "http://x"})
        router.remove("docs")
        with router.acquire() as after:
            d = sy.diff(before, after)
    assert d.added == ("extra",) and d.removed == ("docs",)


def test_host_predicate_can_match_reentrantly(gateway):
    """A host predicate that itself matches (uses a second context)."""
    reg = sy.Registry()
    inner = sy.Router()
    inner.add_source("s")
    inner.apply("s", gateway)
    reg.add_predicate("InnerMatches", lambda args: (
        lambda req: inner.match(url=req.path) is not None))
    with sy.Router(registry=reg) as r:
        r.add_source("s")
        r.apply("s", [{"id": "a", "uri": "http://x", "predicates": ["InnerMatches="]}])
        assert r.match(url="/docs/x").route_id == "a"
    inner.close()
