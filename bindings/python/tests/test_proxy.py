"""What a proxy needs, through the binding: change sets, route
host data and keys, targets, retries and passive health, no-match reasons,
version-not-bumped, path normalisation, re-entrancy, source status and
Prometheus metrics. Mirrors tests/test_proxy.c."""
from __future__ import annotations

import gc
import re
import threading
import weakref

import pytest

import switchyard as sy

ROUTES_LB = [{"id": "orders", "uri": "lb://orders",
              "predicates": ["Path=/orders/{id}"]}]

TWO = [sy.Instance("o1", "10.0.0.1", 8081,
                   metadata={"version": "1.0", "zone": "a"}),
       sy.Instance("o2", "10.0.0.2", 8082,
                   metadata={"version": "1.0", "zone": "b"})]


def new_router(**options):
    r = sy.Router(**options)
    r.add_source("main")
    r.add_source("extra")
    return r


def lb_router(**options):
    r = new_router(**options)
    r.apply("main", {"version": "1", "routes": ROUTES_LB})
    r.set_instances("orders", TWO)
    return r


# ---- change sets -------------------------------------------------------


def test_change_set_publishes_documents_and_instances_once():
    with new_router() as r:
        before = r.metrics()
        with r.change_set() as cs:
            assert cs.apply("main", ROUTES_LB) == 0
            assert cs.set_instances("orders", TWO) == 1
            assert cs.upsert("extra", {"id": "x", "uri": "http://x:9000",
                                       "predicates": ["Path=/x"]}) == 2
            assert len(cs) == 3
        after = r.metrics()
        assert after.publishes == before.publishes + 1
        assert after.generation == before.generation + 1
        rep = cs.report
        assert cs.committed and rep.failed_change is None
        assert len(rep.parts) == 3
        assert rep.parts[0].source == "main"
        assert rep.parts[1].service == "orders"
        assert rep.parts[1].instances_added == ("o1", "o2")
        assert rep.parts[2].generation == after.generation
        # the new route finds its instances in the very same snapshot
        with r.acquire() as snap:
            assert snap.match(url="/orders/1").target().service == "orders"
            assert snap.match(url="/x").route_id == "x"


def test_change_set_failing_at_its_last_change_publishes_nothing():
    with new_router() as r:
        r.apply("main", {"version": "1", "routes": ROUTES_LB})
        gen = r.metrics().generation
        cs = r.change_set()
        cs.apply("extra", [{"id": "new", "uri": "http://n:1",
                            "predicates": ["Path=/new"]}])
        cs.set_instances("orders", TWO)
        cs.remove("orders")
        cs.upsert("main", {"id": "b", "uri": "nowhere"})
        with pytest.raises(sy.ValidationError) as info:
            r.commit(cs)
        e = info.value
        assert e.code_name == "SY_EURI"
        assert e.path == "route.uri"
        assert e.change == 3 and "change 3" in e.message
        assert e.report.failed_change == 3
        cs.close()
        # nothing of the first three changes is visible
        assert r.metrics().generation == gen
        with r.acquire() as snap:
            assert snap.match(url="/new") is None
            m = snap.match(url="/orders/1")
            assert m.route_id == "orders"
            with pytest.raises(sy.NoInstanceError):
                m.target()
        st = r.source_status()[0]
        assert st.name == "main" and st.last_result == e.code
        assert st.last_error.path == "route.uri"
        assert st.last_error.code_name == "SY_EURI"
        assert (st.failed_count, st.applied_count) == (1, 1)
        assert r.metrics().failed_commits == 1


def test_change_set_steps_see_the_steps_before_them():
    with new_router() as r:
        with r.change_set() as cs:
            cs.apply("main", [{"id": "a", "uri": "http://a:1",
                               "predicates": ["Path=/a"]},
                              {"id": "b", "uri": "http://b:1",
                               "predicates": ["Path=/b"]}])
            cs.remove("a")
            cs.disable("b")
        with r.acquire() as snap:
            assert snap.match(url="/a") is None
            assert snap.match(url="/b") is None
            assert len(snap) == 1 and snap.get("b").disabled


def test_change_set_block_that_raises_commits_nothing():
    with new_router() as r:
        gen = r.metrics().generation
        with pytest.raises(KeyError):
            with r.change_set() as cs:
                cs.apply("main", ROUTES_LB)
                raise KeyError("changed my mind")
        assert not cs.committed and r.metrics().generation == gen
        with pytest.raises(sy.ClosedError):
            cs.apply("main", ROUTES_LB)


def test_change_set_is_committed_once_and_by_its_own_router():
    with new_router() as r1, new_router() as r2:
        cs = r1.change_set()
        with pytest.raises(sy.InvalidArgumentError):
            r2.commit(cs)
        assert r1.commit(cs).parts == ()  # empty: publishes nothing
        with pytest.raises(sy.ClosedError):
            r1.commit(cs)
        with pytest.raises(sy.ClosedError):
            cs.remove("x")
        cs.close()


def test_a_failed_commit_may_be_retried_and_the_library_refuses_a_second():
    with new_router() as r:
        cs = r.change_set()
        cs.disable("w")
        with pytest.raises(sy.NotFoundError):
            r.commit(cs)
        assert not cs.committed
        r.apply("main", [{"id": "w", "uri": "http://a",
                          "predicates": ["Path=/w"]}])
        gen = r.metrics().generation
        r.commit(cs)  # the same set, retried
        assert cs.committed and r.metrics().generation == gen + 1
        r.enable("w")
        gen = r.metrics().generation
        # not only the binding: sy_router_commit itself refuses the set
        cs._committed = False
        with pytest.raises(sy.InvalidArgumentError,
                           match="committed already") as e:
            r.commit(cs)
        assert not isinstance(e.value, sy.ClosedError)
        assert r.metrics().generation == gen
        assert r.match(url="/w").route_id == "w"  # still enabled
        cs.close()


def test_change_set_rollback_and_instance_deltas():
    with lb_router() as r:
        r.apply("main", {"version": "2", "routes": [
            {"id": "other", "uri": "http://o:1", "predicates": ["Path=/o"]}]})
        with r.change_set() as cs:
            cs.rollback("main")  # the document before the current one
            cs.update_instances("orders", [sy.InstanceDelta.remove("o1")])
        assert cs.report.parts[0].version == "1"
        assert cs.report.parts[1].instances_removed == ("o1",)
        with r.acquire() as snap:
            assert snap.match(url="/orders/1").target().instance_id == "o2"


def test_change_set_keeps_its_router_alive():
    r = new_router()
    cs = r.change_set()
    cs.apply("main", ROUTES_LB)
    r.close()  # the C router stays until the change set is freed
    assert len(cs) == 1
    cs.close()
    assert len(cs) == 0


# ---- host data and keys ------------------------------------------------


class Pool:
    """Stands for per-route host state (connection pool, limiter)."""

    def __init__(self, tag):
        self.tag = tag


def test_host_data_survives_unchanged_routes_and_is_released_once():
    attached, detached = [], []

    def attach(route):
        pool = Pool(f"{route.id}#{len(attached) + 1}")
        attached.append(weakref.ref(pool))
        return pool

    def detach(route, pool):
        assert pool.tag.startswith(route.id + "#")
        detached.append(pool.tag)

    def doc(version, b_port):
        return {"version": str(version), "routes": [
            {"id": "a", "uri": "http://a:1", "predicates": ["Path=/a"]},
            {"id": "b", "uri": f"http://b:{b_port}",
             "predicates": ["Path=/b"]}]}

    r = new_router(route_attach=attach, route_detach=detach)
    r.apply("main", doc(1, 1))
    assert len(attached) == 2
    with r.acquire() as snap:
        assert snap.get("a").host_data.tag == "a#1"
        assert snap.match(url="/b").host_data.tag == "b#2"
        ka, kb = snap.get("a").key, snap.get("b").key
        assert ka != kb and max(ka, kb) < snap.route_key_limit
        assert snap.match(url="/a").route_key == ka

    r.apply("main", doc(2, 2))
    with r.acquire() as snap:
        assert snap.get("a").host_data.tag == "a#1"  # unchanged: same data
        assert snap.get("b").host_data.tag == "b#3"  # updated: new data
        assert snap.get("a").key == ka
    r.reclaim()
    assert detached == ["b#2"]  # the old b, once nobody can see it
    gc.collect()
    assert attached[1]() is None  # and the binding let go of it

    held = r.acquire()  # a held snapshot keeps the old data alive
    r.remove("a")
    r.reclaim()
    assert detached == ["b#2"]
    assert held.get("a").host_data.tag == "a#1"
    held.release()
    r.reclaim()
    assert detached == ["b#2", "a#1"]
    # a document no one publishes attaches nothing
    with pytest.raises(sy.ValidationError):
        r.apply("main", [{"id": "z"}])
    assert len(attached) == 3
    r.close()
    assert sorted(detached) == ["a#1", "b#2", "b#3"]
    gc.collect()
    assert all(ref() is None for ref in attached)


def test_route_attach_returning_none_gives_no_host_data():
    seen = []
    with new_router(route_attach=lambda route: None,
                    route_detach=lambda route, data: seen.append(data)) as r:
        r.apply("main", ROUTES_LB)
        assert r.match(url="/orders/1").host_data is None
        r.apply("main", [])
        r.reclaim()
        assert seen == [None]


def test_route_attach_exception_is_raised_after_the_publish():
    def attach(route):
        raise ZeroDivisionError("attach exploded")
    with new_router(route_attach=attach) as r:
        with pytest.raises(sy.CallbackAfterPublishError) as info:
            r.apply("main", ROUTES_LB)
        assert isinstance(info.value.error, ZeroDivisionError)
        assert info.value.report.diff.added == ("orders",)
        m = r.match(url="/orders/1")
        assert m.route_id == "orders" and m.host_data is None


def test_route_keys_are_reused_after_the_route_is_freed():
    with new_router() as r:
        r.apply("main", [{"id": "a", "uri": "http://a:1"},
                         {"id": "b", "uri": "http://b:1"}])
        with r.acquire() as snap:
            assert snap.route_key_limit == 2
        for i in range(20):
            r.apply("main", [{"id": "a", "uri": "http://a:1"},
                             {"id": "b", "uri": f"http://b:{i + 2}"}])
        with r.acquire() as snap:
            assert snap.route_key_limit <= 3
    assert sy.parse([{"id": "q", "uri": "http://q"}])[0].key is None


# ---- targets -----------------------------------------------------------

URL_ROUTES = [
    {"id": "plain", "uri": "http://api.internal",
     "predicates": ["Path=/plain/**"]},
    {"id": "port", "uri": "https://api.internal:8443",
     "predicates": ["Path=/port/{x}"],
     "filters": ["SetPath=/v2/{x}", "AddRequestHeader=X-A,1"]},
    {"id": "keep", "uri": "http://api.internal:81",
     "predicates": ["Path=/keep"], "filters": ["PreserveHostHeader"]},
    {"id": "v6", "uri": "http://[::1]:8080", "predicates": ["Path=/v6"]},
]
CLIENT = {"Host": "gw.example.com", "Accept": "*/*"}


def url_target(r, path):
    with r.acquire() as snap:
        return snap.match(url=path, headers=CLIENT).target()


def test_target_of_a_url_route_sends_the_upstreams_host():
    with new_router() as r:
        r.apply("main", URL_ROUTES)
        t = url_target(r, "/plain/a?q=1")
        assert t.kind is sy.UpstreamKind.URL and t.route_id == "plain"
        assert (t.scheme, t.host, t.port) == ("http", "api.internal", 80)
        assert t.host_header == "api.internal"
        assert (t.path, t.query) == ("/plain/a", "q=1")
        assert t.instance_id is None and t.service is None
        # Host is not among the headers: host_header replaces it
        assert t.headers == (("Accept", "*/*"),)
        assert t.url == "http://api.internal:80/plain/a?q=1"


def test_target_of_a_setpath_route_with_a_port():
    with new_router() as r:
        r.apply("main", URL_ROUTES)
        t = url_target(r, "/port/7")
        assert (t.scheme, t.port) == ("https", 8443)
        assert t.host_header == "api.internal:8443"
        assert t.path == "/v2/7"
        assert t.headers == (("Accept", "*/*"), ("X-A", "1"))


def test_target_with_preserve_host_header_keeps_the_clients_host():
    with new_router() as r:
        r.apply("main", URL_ROUTES)
        t = url_target(r, "/keep")
        assert t.host_header == "gw.example.com" and t.port == 81
        assert url_target(r, "/v6").host_header == "[::1]:8080"
        assert url_target(r, "/v6").url == "http://[::1]:8080/v6"


def test_target_of_an_lb_route_names_the_chosen_instance():
    with lb_router() as r, r.acquire() as snap:
        t = snap.match(url="/orders/9").target()
        assert t.kind is sy.UpstreamKind.SERVICE
        assert (t.service, t.scheme) == ("orders", "http")
        one = t.instance_id == "o1"
        assert t.host == ("10.0.0.1" if one else "10.0.0.2")
        assert t.port == (8081 if one else 8082)
        assert t.version == "1.0" and t.zone == ("a" if one else "b")
        assert dict(t.metadata) == {"version": "1.0",
                                    "zone": "a" if one else "b"}
        assert t.host_header == f"{t.host}:{t.port}"


def test_target_refuses_answers_the_gateway_gives_itself():
    with new_router() as r:
        r.apply("main", [{"id": "st", "uri": "http://a",
                          "filters": ["SetStatus=418",
                                      "RedirectTo=302,http://else"]}])
        with r.acquire() as snap:
            m = snap.match(url="/")
            assert m.action is sy.Action.REDIRECT
            with pytest.raises(sy.InvalidArgumentError):
                m.target()


def test_target_needs_the_snapshot_of_its_match():
    with lb_router() as r:
        m = r.match(url="/orders/1")  # acquired and released inside
        with pytest.raises(sy.ClosedError):
            m.target()


def test_target_after_other_matches_still_targets_its_own_request():
    with new_router() as r:
        r.apply("main", URL_ROUTES)
        with r.acquire() as snap:
            first = snap.match(url="/port/7", headers=CLIENT)
            other = snap.match(url="/plain/x")  # reuses this thread's context
            assert first.target().path == "/v2/7"
            assert other.target().path == "/plain/x"
            box = []
            th = threading.Thread(target=lambda: box.append(first.target()))
            th.start()
            th.join()
            assert box[0].path == "/v2/7" and box[0].host_header.endswith(
                ":8443")


def test_snapshot_target_in_one_call():
    with lb_router() as r, r.acquire() as snap:
        assert snap.target(url="/nothing") is None
        assert snap.target(url="/orders/1", exclude=["o2"]).instance_id == "o1"


# ---- retries and passive health -----------------------------------------


def test_retries_never_return_an_excluded_instance():
    with lb_router() as r, r.acquire() as snap:
        for _ in range(50):
            m = snap.match(url="/orders/1")
            assert m.target(exclude=["o1"]).instance_id == "o2"
        with pytest.raises(sy.NoInstanceError) as info:
            m.target(exclude=("o2", "o1"))
        assert "tried" in info.value.message


class FakeClock:
    def __init__(self):
        self.now = 1_000_000

    def __call__(self):
        return self.now


def picks_of(r, instance_id, n=20):
    with r.acquire() as snap:
        return sum(snap.match(url="/orders/1").target().instance_id
                   == instance_id for _ in range(n))


def report(r, instance_id, outcome, n=1):
    other = "o2" if instance_id == "o1" else "o1"
    with r.acquire() as snap:
        for _ in range(n):
            t = snap.match(url="/orders/1").target(exclude=[other])
            assert t.instance_id == instance_id
            r.report_outcome(t, outcome)


def test_failing_instance_is_ejected_and_returns_after_its_time():
    clock = FakeClock()
    with lb_router(clock=clock, outlier=sy.OutlierOptions(
            consecutive_failures=3, base_ejection_ms=10_000,
            max_ejection_ms=15_000)) as r:
        report(r, "o1", "connect_failure", 2)
        report(r, "o1", sy.Outcome.SUCCESS)  # breaks the streak
        report(r, "o1", "5xx", 2)
        assert picks_of(r, "o1") > 0
        report(r, "o1", "5xx")  # third in a row
        assert r.metrics().ejections == 1
        assert picks_of(r, "o1") == 0
        r.set_instances("orders", TWO)  # carried across a publish
        assert picks_of(r, "o1") == 0
        clock.now += 9_999
        assert picks_of(r, "o1") == 0
        clock.now += 1
        assert picks_of(r, "o1") > 0  # back by itself
        # a second ejection lasts longer: 2 x 10 s, capped at 15 s
        report(r, "o1", "timeout", 3)
        clock.now += 14_999
        assert picks_of(r, "o1") == 0
        clock.now += 1
        assert picks_of(r, "o1") > 0


def test_ejections_are_capped_by_the_share_of_the_service():
    with lb_router(clock=FakeClock(),
                   outlier={"consecutive_failures": 1,
                            "max_ejected_percent": 50}) as r:
        report(r, "o1", "connect_failure")
        assert picks_of(r, "o1", 10) == 0
        report(r, "o2", "connect_failure", 3)  # over the cap
        m = r.metrics()
        assert (m.ejections, m.outcomes) == (1, 4)
        assert picks_of(r, "o2", 10) == 10


def test_disabled_outlier_detection_ignores_outcomes():
    with lb_router(outlier=sy.OutlierOptions(consecutive_failures=1,
                                             disabled=True)) as r:
        report(r, "o1", "connect_failure", 5)
        assert r.metrics().ejections == 0 and picks_of(r, "o1") > 0


def test_report_outcome_checks_its_arguments():
    with lb_router() as r, lb_router() as r2:
        with r.acquire() as snap:
            t = snap.match(url="/orders/1").target()
            with pytest.raises(ValueError):
                r.report_outcome(t, "meh")
            with pytest.raises(sy.InvalidArgumentError):
                r2.report_outcome(t, "success")
        with pytest.raises(sy.ClosedError):  # its snapshot is released
            r.report_outcome(t, "success")
        assert r.metrics().outcomes == 0


# ---- no-match reasons ----------------------------------------------------


def test_method_mismatch_is_told_from_no_route():
    with new_router() as r:
        r.apply("main", [
            {"id": "w", "uri": "http://a",
             "predicates": ["Path=/items/**", "Method=POST,PUT"]},
            {"id": "d", "uri": "http://a",
             "predicates": ["Method=DELETE", "Path=/items/{id}"]},
            {"id": "h", "uri": "http://a",
             "predicates": ["Path=/other", "Method=GET", "Header=X-Need,yes"]}])
        with r.acquire() as snap:
            res = snap.resolve(method="GET", url="/items/3")
            assert not res and res.reason is sy.NoMatchReason.METHOD
            assert res.status == 405 and res.allow == "POST, PUT, DELETE"
            assert res.allowed_methods == ("POST", "PUT", "DELETE")
            res = snap.resolve(method="GET", url="/nothing")
            assert (res.reason, res.status, res.allow) == (
                sy.NoMatchReason.NO_ROUTE, 404, "")
            # the method fails, but so does another predicate: 404
            res = snap.resolve(method="POST", url="/other")
            assert res.reason is sy.NoMatchReason.NO_ROUTE
            res = snap.resolve(method="PUT", url="/items/3")
            assert res and res.route_id == "w"
            assert res.target().host == "a"


def test_a_path_above_the_root_is_a_bad_path():
    with new_router() as r:
        r.apply("main", [{"id": "api", "uri": "http://api",
                          "predicates": ["Path=/api/**"]},
                         {"id": "admin", "uri": "http://admin",
                          "predicates": ["Path=/admin/**"]}])
        for bad in ("/..", "/api/../../admin", "/%2e%2e/api/x"):
            res = r.resolve(url=bad)
            assert res.reason is sy.NoMatchReason.BAD_PATH, bad
            assert res.status == 400
        # dot segments cannot escape a path prefix
        m = r.resolve(url="/api/../admin/users")
        assert m.route_id == "admin" and m.path == "/admin/users"
        assert r.resolve(url="/api//x").path == "/api//x"  # kept by default


# ---- router options --------------------------------------------------------

FILES = [{"id": "files", "uri": "http://files",
          "predicates": ["Path=/files/{name}"],
          "filters": ["SetPath=/store/{name}"]},
         {"id": "deep", "uri": "http://deep",
          "predicates": ["Path=/files/{a}/{b}"]}]

def test_path_options_are_checked():
    with pytest.raises(KeyError):
        sy.Router(escaped_slashes="sometimes")
    with pytest.raises(ValueError):
        sy.Router(path_normalization=7)
    for kw in ({"escaped_slashes": sy.EscapedSlashes.DECODE},
               {"path_normalization": "as-is"}, {"merge_slashes": True}):
        sy.Router(**kw).close()


def test_escaped_slashes_reject_is_a_bad_path():
    with new_router(escaped_slashes="reject") as r:
        r.apply("main", FILES)
        assert r.resolve(url="/files/a%2Fb").reason is \
            sy.NoMatchReason.BAD_PATH


def test_escaped_slashes_decode_makes_two_segments():
    with new_router(escaped_slashes="decode") as r:
        r.apply("main", FILES)
        m = r.resolve(url="/files/a%2Fb")
        assert m.route_id == "deep" and m.path == "/files/a/b"


def test_encoded_slashes_stay_encoded_by_default():
    with new_router() as r:
        r.apply("main", FILES)
        m = r.resolve(url="/files/a%2Fb")
        # kept encoded in the capture too, so SetPath cannot turn it into
        # a separator (docs/security.md)
        assert m.route_id == "files" and m.vars["name"] == "a%2Fb"
        assert m.path == "/store/a%2Fb"


def test_merge_slashes():
    with new_router() as r:
        r.apply("main", FILES)
        res = r.resolve(url="/files//a")  # an empty segment: no {name}
        assert res.reason is sy.NoMatchReason.NO_ROUTE
    with new_router(merge_slashes=True) as r:
        r.apply("main", FILES)
        assert r.resolve(url="//files//a").path == "/store/a"


def test_as_is_leaves_the_path_alone():
    with new_router(path_normalization="as_is") as r:
        r.apply("main", FILES)
        assert not r.resolve(url="/files/x/../y")  # four segments
    with new_router() as r:
        r.apply("main", FILES)
        assert r.resolve(url="/files/x/../y").path == "/store/y"


def test_escaped_slashes_decode_turns_an_encoded_climb_into_a_bad_path():
    with new_router(escaped_slashes=sy.EscapedSlashes.DECODE) as r:
        r.apply("main", FILES)
        assert r.resolve(url="/files/x%2F..%2Freport").path == "/store/report"
        res = r.resolve(url="/files/..%2F..%2F..%2Fetc")
        assert res.reason is sy.NoMatchReason.BAD_PATH


# ---- version not bumped ------------------------------------------------------


def test_changed_document_with_the_same_version_is_applied_and_reported():
    events = []
    with new_router(on_event=events.append) as r:
        r.apply("main", {"version": "7", "routes": ROUTES_LB})
        rep = r.apply("main", {"version": "7", "routes": [
            {"id": "orders", "uri": "lb://orders",
             "predicates": ["Path=/v2/orders/{id}"]}]})
        assert not rep.skipped and rep.version_not_bumped
        assert rep.diff.updated == (("orders", sy.Changed.PREDICATES),)
        assert events[-1].version_not_bumped
        assert r.match(url="/v2/orders/1").route_id == "orders"
        # the same bytes again: skipped, nothing to report
        rep = r.apply("main", {"version": "7", "routes": [
            {"id": "orders", "uri": "lb://orders",
             "predicates": ["Path=/v2/orders/{id}"]}]})
        assert rep.skipped and not rep.version_not_bumped


def test_skip_same_version_keeps_the_old_skip():
    with new_router(skip_same_version=True) as r:
        r.apply("main", {"version": "7", "routes": ROUTES_LB})
        rep = r.apply("main", {"version": "7", "routes": []})
        assert rep.skipped and not rep.version_not_bumped
        assert r.match(url="/orders/1").route_id == "orders"
        assert r.metrics().skipped_applies == 1


# ---- re-entrancy -------------------------------------------------------------


def test_writer_calls_from_an_event_handler_raise_reentrant_error():
    seen = {}

    def on_event(report):
        for name, call in (("apply", lambda: r.apply("main", [])),
                           ("upsert", lambda: r.upsert(
                               "main", {"id": "y", "uri": "http://y"})),
                           ("commit", lambda: r.change_set().commit())):
            try:
                call()
            except sy.ReentrantError as exc:
                seen[name] = exc
        seen["routes"] = r.metrics().routes  # reading is fine

    r = new_router(on_event=on_event)
    try:
        r.apply("main", ROUTES_LB)
        assert set(seen) == {"apply", "upsert", "commit", "routes"}
        assert seen["apply"].code_name == "SY_EREENTRANT"
        assert isinstance(seen["commit"], RuntimeError)
        assert seen["routes"] == 1
        r.on_event = None
        r.apply("main", [])  # and later it works
        assert r.metrics().routes == 0
    finally:
        r.close()


def test_unhandled_reentrant_error_comes_out_after_the_publish():
    r = new_router()
    r.on_event = lambda report: r.remove("orders")
    try:
        with pytest.raises(sy.CallbackAfterPublishError) as info:
            r.apply("main", ROUTES_LB)
        assert isinstance(info.value.error, sy.ReentrantError)
        assert r.metrics().routes == 1
    finally:
        r.close()


# ---- status and metrics ------------------------------------------------------

SERIES = re.compile(r"^(switchyard_[a-z_]+(?:\{[^}]*\})?) (\S+)$")


def parse_exposition(text):
    """Every sample of a Prometheus text exposition, checked line by line."""
    samples = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"# (HELP|TYPE) switchyard_", line), line
            continue
        m = SERIES.match(line)
        assert m, line
        samples[m.group(1)] = float(m.group(2))
    return samples


def test_metrics_text_parses_back():
    with new_router() as r:
        r.apply("main", {"version": "1", "routes": ROUTES_LB})
        r.apply("main", {"version": "1", "routes": ROUTES_LB})  # skipped
        with pytest.raises(sy.ParseError):
            r.apply("extra", "[{]")
        r.set_instances("orders", TWO)
        s = parse_exposition(r.metrics_text())
        assert s["switchyard_generation"] == 2
        assert s["switchyard_routes"] == 1
        assert s["switchyard_instances"] == 2
        assert s["switchyard_commits_total"] == 3
        assert s["switchyard_commits_failed_total"] == 1
        assert s["switchyard_applies_skipped_total"] == 1
        assert s['switchyard_source_applied_total{source="main"}'] == 1
        assert s['switchyard_source_failed_total{source="extra"}'] == 1
        assert s['switchyard_source_last_error_code{source="extra"}'] == 3
        m = r.metrics()
        assert (m.commits, m.failed_commits, m.skipped_applies) == (3, 1, 1)
        assert (m.services, m.instances, m.instance_updates) == (1, 2, 1)
        with r.acquire() as snap:
            assert m.fingerprint == snap.fingerprint


def test_metrics_text_grows_its_buffer():
    with sy.Router() as r:
        names = [f"source-with-a-long-name-{i:03d}" for i in range(120)]
        for name in names:
            r.add_source(name)
        text = r.metrics_text()
        assert len(text) > 8192
        s = parse_exposition(text)
        assert all(f'switchyard_source_applied_total{{source="{n}"}}' in s
                   for n in names)


def test_source_status_lists_every_source():
    with new_router() as r:
        r.apply("main", {"version": "1", "routes": ROUTES_LB})
        r.apply("main", {"version": "1", "routes": ROUTES_LB})
        main, extra = r.source_status()
        assert (main.name, main.version, main.routes) == ("main", "1", 1)
        assert main.applied and main.ok and main.last_error is None
        assert (main.applied_count, main.skipped_count) == (1, 1)
        assert main.fingerprint != 0 and main.checksum != 0
        assert main.last_apply_ms > 1_600_000_000_000
        assert (extra.name, extra.applied, extra.version) == (
            "extra", False, None)


def test_target_uses_the_match_in_place_until_the_context_is_reused():
    calls = []
    reg = sy.Registry()
    reg.add_predicate("Count", lambda args: lambda req: calls.append(1) or True)
    with sy.Router(registry=reg) as r:
        r.add_source("main")
        r.apply("main", [{"id": "a", "uri": "http://a:1",
                          "predicates": ["Path=/a", "Count=1"]}])
        with r.acquire() as snap:
            m = snap.match(url="/a")
            assert len(calls) == 1
            m.target()
            m.target(exclude=["x"])
            assert len(calls) == 1  # no second match
            snap.match(url="/a")
            assert len(calls) == 2
            assert m.target().path == "/a"
            assert len(calls) == 3  # matched again, on the same snapshot


def test_event_handler_exception_after_a_commit_carries_its_report():
    def on_event(report):
        raise LookupError("dashboard is down")
    with new_router(on_event=on_event) as r:
        with pytest.raises(sy.CallbackAfterPublishError) as info:
            with r.change_set() as cs:
                cs.apply("main", ROUTES_LB)
                cs.set_instances("orders", TWO)
        assert cs.committed
        assert [p.service for p in info.value.report.parts] == [None,
                                                               "orders"]
        assert isinstance(info.value.__cause__, LookupError)
        r.on_event = None
        with r.acquire() as snap:
            assert snap.match(url="/orders/1").target().service == "orders"


def test_route_detach_exception_with_no_caller_is_logged(caplog):
    def detach(route, data):
        raise ValueError("detach exploded")
    r = new_router(route_detach=detach)
    r.apply("main", ROUTES_LB)
    with caplog.at_level("ERROR", logger="switchyard"):
        r.close()  # frees the router: nobody to raise into
    assert any(rec.exc_info and rec.exc_info[0] is ValueError
               for rec in caplog.records)
