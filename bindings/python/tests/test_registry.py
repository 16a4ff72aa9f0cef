"""Host-registered predicate and filter factories written in Python."""
from __future__ import annotations

import pytest

import switchyard as sy


def make_registry(calls=None):
    reg = sy.Registry()

    def compile_tenant(args):
        fields = dict(args)
        if not fields.get("tenant"):
            raise ValueError("tenant: missing required argument")
        wanted = fields["tenant"]
        if calls is not None:
            calls.append(args)
        return lambda req: dict((k.lower(), v) for k, v in req.headers).get(
            "x-tenant") == wanted

    reg.add_predicate("Tenant", compile_tenant, shortcut_fields=["tenant"])

    def validate_audit(args):
        if dict(args).get("level") not in ("low", "high"):
            raise ValueError("level: must be low or high")

    reg.add_filter("Audit", validate_audit, shortcut_fields=["level"])
    reg.add_filter("Plain")
    return reg


def test_host_predicate_compiles_once_and_tests_per_request():
    calls = []
    reg = make_registry(calls)
    assert reg.names == ["Tenant", "Audit", "Plain"]
    with sy.Router(registry=reg) as r:
        r.add_source("s")
        r.apply("s", [
            {"id": "acme", "uri": "http://acme", "predicates": ["Tenant=acme"],
             "filters": ["Audit=high", "Plain"]},
            {"id": "other", "uri": "http://other"}])
        assert calls == [[("tenant", "acme")]]
        m = r.match(url="/", headers={"X-Tenant": "acme"})
        assert m.route_id == "acme"
        assert [f.name for f in m.host_filters] == ["Audit", "Plain"]
        assert m.host_filters[0].args == (("level", "high"),)
        assert r.match(url="/", headers={"X-Tenant": "zzz"}).route_id == "other"


def test_host_predicate_value_error_is_a_document_error():
    reg = make_registry()
    with pytest.raises(sy.SwitchyardError) as info:
        sy.parse({"routes": [{"id": "a", "uri": "http://x",
                              "predicates": [{"name": "Tenant", "args": {}}]}]},
                 registry=reg)
    assert "tenant" in info.value.message
    assert info.value.path.startswith("routes[0].predicates[0]")


def test_filter_validation_error_is_a_document_error():
    reg = make_registry()
    with pytest.raises(sy.SwitchyardError) as info:
        sy.parse([{"id": "a", "uri": "http://x", "filters": ["Audit=medium"]}],
                 registry=reg)
    assert "low or high" in info.value.message
    assert info.value.path.startswith("[0].filters[0]")


def test_exception_in_compile_propagates_from_parse():
    reg = sy.Registry()

    def compile_(args):
        raise KeyError("compile exploded")
    reg.add_predicate("Explode", compile_)
    with pytest.raises(KeyError, match="compile exploded"):
        sy.parse([{"id": "a", "uri": "http://x", "predicates": ["Explode=1"]}],
                 registry=reg)


def test_exception_in_test_propagates_from_match():
    reg = sy.Registry()

    def test(req):
        raise RuntimeError("test exploded")
    reg.add_predicate("Explode", lambda args: test)
    with sy.Router(registry=reg) as r:
        r.add_source("s")
        r.apply("s", [{"id": "a", "uri": "http://x", "predicates": ["Explode=1"]}])
        with pytest.raises(RuntimeError, match="test exploded"):
            r.match(url="/")
        with pytest.raises(RuntimeError, match="test exploded"):
            r.explain(url="/")


def test_exception_in_filter_validation_propagates():
    reg = sy.Registry()

    def validate(args):
        raise ZeroDivisionError("validate exploded")
    reg.add_filter("Bad", validate)
    with pytest.raises(ZeroDivisionError):
        sy.parse([{"id": "a", "uri": "http://x", "filters": ["Bad=1"]}],
                 registry=reg)


def test_predicate_sees_the_request():
    seen = []
    reg = sy.Registry()
    reg.add_predicate("Spy", lambda args: (lambda req: seen.append(req) or True))
    with sy.Router(registry=reg) as r:
        r.add_source("s")
        r.apply("s", [{"id": "a", "uri": "http://x", "predicates": ["Spy=1"]}])
        r.match(method="PUT", url="http://h:81/p/q?x=1", remote_addr="10.0.0.1",
                headers={"A": "b"}, seed=9, now=1234, content_length=5)
    (req,) = seen
    assert (req.method, req.host, req.path, req.query) == ("PUT", "h:81", "/p/q", "x=1")
    assert req.remote_addr == "10.0.0.1" and ("A", "b") in req.headers
    assert req.seed == 9 and req.now == 1234 and req.content_length == 5


def test_registry_is_frozen_once_used_and_names_must_be_unique():
    reg = make_registry()
    with pytest.raises(sy.SwitchyardError):
        reg.add_predicate("Tenant", lambda args: (lambda req: True))
    with pytest.raises(sy.SwitchyardError):
        reg.add_predicate("Path", lambda args: (lambda req: True))  # built-in
    sy.parse([], registry=reg)
    with pytest.raises(sy.ClosedError):
        reg.add_filter("Late")


def test_gather_list_shortcut():
    got = []
    reg = sy.Registry()
    reg.add_predicate("AnyOf", lambda args: got.append(args) or (lambda r: True),
                      shortcut_fields=["values"],
                      shortcut_type=sy.ShortcutType.GATHER_LIST)
    sy.parse([{"id": "a", "uri": "http://x", "predicates": ["AnyOf=a,b,c"]}],
             registry=reg)
    assert got == [[("values", "a"), ("values", "b"), ("values", "c")]]


@pytest.mark.parametrize("add", ["add_predicate", "add_filter"])
def test_shortcut_type_and_fields_are_checked(add):
    # accepted before: shortcut_type=7 ran as GATHER_LIST (the library
    # reads any non-DEFAULT type as a list), and shortcut_fields="tenant"
    # declared the fields t, e, n, a, n, t ("Tenant=acme" gave ("t", "acme"))
    def factory(args):
        return lambda req: True
    reg = sy.Registry()
    with pytest.raises(sy.InvalidArgumentError, match="shortcut_type"):
        getattr(reg, add)("Tenant", factory, shortcut_fields=["tenant"],
                          shortcut_type=7)
    with pytest.raises(sy.InvalidArgumentError, match="shortcut_fields"):
        getattr(reg, add)("Tenant", factory, shortcut_fields="tenant")
    with pytest.raises(sy.InvalidArgumentError, match="shortcut_fields"):
        getattr(reg, add)("Tenant", factory, shortcut_fields=["tenant", 3])
    assert reg.names == []
    getattr(reg, add)("Tenant", factory, shortcut_fields=("tenant",),
                      shortcut_type="gather_list")
    assert reg.names == ["Tenant"]


def test_more_shortcut_values_than_declared_fields_are_refused():
    # accepted and dropped before: "Tenant=acme,beta" compiled with
    # [("tenant", "acme"), ("_genkey_1", "beta")], and a compile reading
    # dict(args)["tenant"] (as docs/python.md's) matched acme alone; a
    # filter got the extra value in Match.host_filters. Built-ins refuse
    # it ("too many arguments"); so do factories that declare their fields
    reg = make_registry()
    with pytest.raises(sy.ValidationError,
                       match=r"Tenant: too many arguments \(takes at most 1: "
                             r"tenant\)") as e:
        sy.parse([{"id": "a", "uri": "http://x",
                   "predicates": ["Tenant=acme,beta"]}], registry=reg)
    assert e.value.path.endswith("predicates[0].args")
    with pytest.raises(sy.ValidationError,
                       match=r"Audit: too many arguments \(takes at most 1: "
                             r"level\)"):
        sy.parse([{"id": "a", "uri": "http://x", "predicates": ["Path=/"],
                   "filters": ["Audit=high,low"]}], registry=reg)
    # as many as declared, and factories that declare none, take them all
    free = sy.Registry()
    got = []
    free.add_predicate("Any", lambda args: got.append(args) or (lambda r: True))
    sy.parse([{"id": "a", "uri": "http://x", "predicates": ["Any=a,b"]}],
             registry=free)
    assert got == [[("_genkey_0", "a"), ("_genkey_1", "b")]]
    d = sy.parse([{"id": "a", "uri": "http://x", "predicates": ["Tenant=acme"],
                   "filters": ["Audit=high"]}], registry=reg)
    assert len(d) == 1
