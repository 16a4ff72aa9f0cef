"""parse(), Document, diff() and the error hierarchy."""
from __future__ import annotations

import json

import pytest

import switchyard as sy


def test_version_matches_header():
    assert sy.version() == sy.header_version == sy.library_version
    major, minor, patch = (int(x) for x in sy.version().split("."))
    assert sy.version_number() == major * 10000 + minor * 100 + patch


def test_parse_accepts_text_bytes_and_json_values(gateway):
    text = json.dumps(gateway)
    for doc in (text, text.encode(), bytearray(text.encode()), gateway):
        with sy.parse(doc) as d:
            assert len(d) == len(gateway["routes"])
            assert d.version == "1"


def test_parse_file_and_github_corpus(data):
    with sy.parse_file(data / "github-api-routes.json") as d:
        assert len(d) > 100
        assert d[0].id == "gh0"
        assert d.get("gh1").predicates == ("Method", "Path")
        assert d.get("nope") is None
        assert [r.id for r in d][:2] == ["gh0", "gh1"]


def test_document_properties(gateway):
    d = sy.parse(gateway)
    assert isinstance(d.fingerprint, int) and isinstance(d.checksum, int)
    assert sy.parse(json.dumps(gateway)).fingerprint == d.fingerprint
    assert sy.parse(json.dumps(gateway, indent=2)).checksum != d.checksum
    assert d.issues == ()
    assert "Document" in repr(d)
    d.close()
    d.close()  # idempotent
    assert d.closed and "closed" in repr(d)
    with pytest.raises(sy.ClosedError):
        len(d)


def test_document_without_envelope_has_no_version():
    assert sy.parse([]).version is None


def test_route_fields(gateway):
    r = sy.parse(gateway).get("orders")
    assert r.uri == "lb://orders"
    assert r.order == 1
    assert r.upstream == sy.Upstream(sy.UpstreamKind.SERVICE, "lb", "orders", 0, "")
    assert dict(r.metadata) == {"version-fallback": "latest", "owner": "team-a"}
    assert r.predicates == ("Path", "Method")
    assert r.disabled is False
    assert r.to_dict()["id"] == "orders"
    assert isinstance(r.fingerprint, int)
    with pytest.raises(TypeError):
        r.metadata["x"] = "y"  # read-only
    with pytest.raises(Exception):
        r.id = "other"  # frozen
    users = sy.parse(gateway).get("users")
    assert users.upstream.port == 8443 and users.upstream.scheme == "https"
    assert sy.parse(gateway).get("off").disabled is True


def test_bad_regex_reports_path_and_code():
    doc = {"version": "1", "routes": [
        {"id": "a", "uri": "http://x", "predicates": [
            {"name": "Header", "args": {"header": "X", "regexp": "[0-9"}}]}]}
    with pytest.raises(sy.RegexError) as info:
        sy.parse(doc)
    e = info.value
    assert isinstance(e, sy.ValidationError) and isinstance(e, sy.SwitchyardError)
    assert isinstance(e, ValueError)
    assert e.path == "routes[0].predicates[0].args.regexp"
    assert e.code == -13 and e.code_name == "SY_EREGEX"
    assert "[0-9" in e.message
    assert str(e).startswith("routes[0].predicates[0].args.regexp: ")


def test_syntax_error_has_line_and_column():
    with pytest.raises(sy.ParseError) as info:
        sy.parse('[\n  {"id": "a",\n   "uri" "x"}\n]\n')
    e = info.value
    assert (e.line, e.column) == (3, 10)
    assert e.code_name == "SY_ESYNTAX" and e.path == ""
    assert "line 3, column 10" in str(e)


@pytest.mark.parametrize("route,cls,code,path", [
    ({"id": "a", "uri": "ftp://x"}, sy.ValidationError, "SY_EURI", "routes[1].uri"),
    ({"id": "a", "uri": "http://y"}, sy.DuplicateError, "SY_EDUPLICATE", "routes[1].id"),
    ({"id": "b", "uri": "http://y", "predicates": ["Nope=1"]},
     sy.UnknownNameError, "SY_EUNKNOWN", "routes[1].predicates[0]"),
    ({"id": "b", "uri": "http://y", "predicates": ["Path=/{v}/{v}"]},
     sy.PatternError, "SY_EPATTERN", "routes[1].predicates[0]"),
    ({"id": "b", "uri": "http://y", "predicates": ["Header=X,#{1}"]},
     sy.SpelError, "SY_ESPEL", "routes[1].predicates[0]"),
    ({"uri": "http://y"}, sy.ValidationError, "SY_EMISSING", "routes[1].id"),
])
def test_validation_errors_map_to_classes(route, cls, code, path):
    doc = {"routes": [{"id": "a", "uri": "http://x"}, route]}
    with pytest.raises(cls) as info:
        sy.parse(doc)
    assert info.value.code_name == code
    assert info.value.path.startswith(path)


def test_document_shape_error_has_no_path():
    with pytest.raises(sy.ValidationError) as info:
        sy.parse('"text"')
    assert info.value.path == "" and info.value.code_name == "SY_ETYPE"


def test_lenient_parse_keeps_valid_routes_and_lists_issues():
    doc = [{"id": "a", "uri": "ftp://x"}, {"id": "b", "uri": "http://x"}]
    d = sy.parse(doc, lenient=True)
    assert [r.id for r in d] == ["b"]
    (issue,) = d.issues
    assert issue.code_name == "SY_EURI" and issue.path == "[0].uri"
    exc = issue.exception()
    assert isinstance(exc, sy.ValidationError) and exc.path == "[0].uri"


def test_lenient_parse_with_no_valid_route_is_an_empty_document():
    d = sy.parse([{"id": "a", "uri": "ftp://x"}], lenient=True)
    assert len(d) == 0 and len(d.issues) == 1


def test_limits_are_enforced():
    with pytest.raises(sy.LimitError) as info:
        sy.parse([{"id": "a", "uri": "http://x"}, {"id": "b", "uri": "http://x"}],
                 limits=sy.Limits(max_routes=1))
    assert info.value.code_name == "SY_ELIMIT"


def test_error_for_code_and_strerror():
    assert sy.error_for_code(-15) is sy.NotFoundError
    assert sy.error_for_code(-999) is sy.SwitchyardError
    assert sy.code_name(-18) == "SY_ENOINSTANCE"
    assert sy.strerror(-1)
    e = sy.NoInstanceError()
    assert e.code == -18 and e.message == sy.strerror(-18)
    assert "NoInstanceError" in repr(e)


def test_diff_documents(gateway):
    new = json.loads(json.dumps(gateway))
    routes = new["routes"]
    routes[0]["uri"] = "lb://orders-v2"
    routes[0]["order"] = 5
    del routes[2]
    routes.append({"id": "new", "uri": "http://n"})
    d = sy.diff(sy.parse(gateway), sy.parse(new))
    assert d.added == ("new",)
    assert d.removed == ("docs",)
    assert d.updated == (("orders", sy.Changed.URI | sy.Changed.ORDER),)
    assert d.updated[0][1].names() == ("uri", "order")
    assert d.unchanged == len(gateway["routes"]) - 2
    assert bool(d)
    assert d.to_dict() == {"added": ["new"], "removed": ["docs"],
                           "updated": [{"id": "orders", "changed": ["uri", "order"]}],
                           "reordered": [], "unchanged": d.unchanged}


def test_diff_accepts_json_and_identical_documents_are_empty(gateway):
    d = sy.diff(gateway, json.dumps(gateway))
    assert not d and d.unchanged == len(gateway["routes"])


def test_diff_rejects_mixed_arguments(router, gateway):
    with router.acquire() as snap, pytest.raises(TypeError):
        sy.diff(snap, gateway)


def test_shadowed_routes_name_the_routes_that_take_their_requests():
    doc = {"version": "1", "routes": [
        {"id": "api", "uri": "http://a:1", "predicates": ["Path=/api/**"]},
        {"id": "users", "uri": "http://a:1",
         "predicates": ["Path=/api/users/{id}", "Method=GET"]},
        {"id": "never", "uri": "http://a:1",
         "predicates": ["Method=GET", "Method=POST"]},
        {"id": "free", "uri": "http://a:1", "predicates": ["Path=/free"]}]}
    with sy.parse(doc) as d:
        found = d.shadowed()
    assert [(s.route_id, s.path, s.shadowed_by, s.shadowed_by_paths)
            for s in found] == [("users", "routes[1]", ("api",),
                                 ("routes[0]",)),
                                ("never", "routes[2]", (), ())]
    assert "goes to 'api'" in found[0].reason
    assert "can match no request" in found[1].reason
    router = sy.Router()
    router.add_source("s")
    router.apply("s", doc)
    with router.acquire() as snap:
        assert [s.route_id for s in snap.shadowed()] == ["users", "never"]


def test_route_timeouts_are_read_as_spring_reads_them():
    import math
    doc = sy.parse(json.dumps({"routes": [
        {"id": "a", "uri": "http://h:1",
         "metadata": {"response-timeout": -1, "connect-timeout": 250}},
        {"id": "b", "uri": "http://h:1",
         "metadata": {"connect-timeout": 0}},
        {"id": "c", "uri": "http://h:1"}]}))
    a, b, c = list(doc)
    assert a.response_timeout_ms == math.inf
    assert a.connect_timeout_ms == 250
    assert b.connect_timeout_ms == math.inf
    assert b.response_timeout_ms is None
    assert c.connect_timeout_ms is None and c.response_timeout_ms is None
    with pytest.raises(sy.SwitchyardError) as ei:
        sy.parse(json.dumps({"routes": [
            {"id": "a", "uri": "http://h:1",
             "metadata": {"connect-timeout": -3}}]}))
    assert ei.value.path == "routes[0].metadata.connect-timeout"
