"""python3 -m switchyard: check, match, explain, diff — and, when the C
tool is built (SY_CLI), byte-for-byte the same output and exit status."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys

import pytest

import switchyard as sy
from switchyard._cli import main

from conftest import GATEWAY

INSTANCES = {"services": {"orders": [
    {"id": "o1", "host": "10.0.0.1", "port": 8080, "metadata": {"version": "1.9"}},
    {"id": "o2", "host": "10.0.0.2", "port": 8080, "metadata": {"version": "1.10"}},
    {"id": "o3", "host": "10.0.0.3", "port": 8080, "state": "down"}]}}


def _cors_route(rid, cors):
    return {"id": rid, "uri": "http://b", "predicates": [f"Path=/{rid}"],
            "metadata": {"cors": cors}}


# what the mini-gateway's cors_parse.c accepts and refuses at apply
CORS_DOC = {"version": "1", "routes": [
    _cors_route("ok", {"allowedOrigins": "https://a.com, https://b.com",
                       "allowedMethods": ["GET"], "maxAge": 10}),
    _cors_route("typo", {"allowedOrigin": "https://a.com"}),
    _cors_route("creds", {"allowCredentials": True, "allowedOrigins": "*"}),
    _cors_route("age", {"maxAge": 1.5}),
    _cors_route("list", {"allowedMethods": [1]}),
    {"id": "sec", "uri": "http://b", "predicates": ["Path=/sec"],
     "filters": ["SecureHeaders"]}]}


@pytest.fixture
def files(tmp_path):
    gw = tmp_path / "gw.json"
    gw.write_text(json.dumps(GATEWAY))
    v2 = json.loads(json.dumps(GATEWAY))
    v2["version"] = "2"
    v2["routes"][0]["uri"] = "lb://orders-v2"
    v2["routes"][0]["order"] = 3
    del v2["routes"][2]
    v2["routes"].append({"id": "new", "uri": "http://new"})
    (tmp_path / "v2.json").write_text(json.dumps(v2))
    (tmp_path / "bad.json").write_text(json.dumps({"version": "1", "routes": [
        {"id": "a", "uri": "http://x", "predicates": ["Path=/a"]},
        {"id": "b", "uri": "ftp://x"},
        {"id": "c", "uri": "http://x", "predicates": [
            {"name": "Header", "args": {"header": "X", "regexp": "[0-9"}}]}]}))
    (tmp_path / "syntax.json").write_text('[\n  {"id": "a",\n   "uri" "x"}\n]\n')
    (tmp_path / "inst.json").write_text(json.dumps(INSTANCES))
    (tmp_path / "cors.json").write_text(json.dumps(CORS_DOC))
    # a bare array with a route the library drops: cors paths name ids
    (tmp_path / "cors-array.json").write_text(json.dumps(
        [{"id": "x", "uri": "ftp://x"}] + CORS_DOC["routes"][1:3]))
    (tmp_path / "inst-num.json").write_text(json.dumps({"orders": [
        {"id": "n2", "host": "10.0.0.2", "port": 8080, "state": "UP",
         "metadata": {"version": 2}}]}))
    (tmp_path / "inst-port.json").write_text(json.dumps({"services": {"orders": [
        {"id": "p", "host": "10.0.0.2", "port": "8080"}]}}))
    return tmp_path


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out, err)
    return rc, out.getvalue(), err.getvalue()


def test_version_and_help():
    rc, out, _ = run("--version")
    assert rc == 0 and out.startswith("switchyard 0.")
    rc, out, _ = run("--help")
    assert rc == 0 and "check" in out and "diff" in out
    rc, _, err = run()
    assert rc == 2 and "usage" in err
    rc, _, err = run("frobnicate")
    assert rc == 2 and "unknown command 'frobnicate'" in err


def test_check_host_gateway_refuses_the_cors_the_gateway_refuses(files):
    cors = files / "cors.json"
    rc, out, _ = run("check", "--host", "gateway", str(cors))
    assert rc == 1
    assert out.splitlines()[:4] == [
        f"{cors}: routes[1].metadata.cors: cors: unknown key 'allowedOrigin' "
        "(allowedOrigins, allowedOriginPatterns, allowedMethods, "
        "allowedHeaders, exposedHeaders, allowCredentials, maxAge)",
        f"{cors}: routes[2].metadata.cors: cors: allowCredentials true cannot "
        "go with allowedOrigins '*' (list the origins, or use "
        "allowedOriginPatterns)",
        f"{cors}: routes[3].metadata.cors: cors: maxAge: must be a whole "
        "number of seconds",
        f"{cors}: routes[4].metadata.cors: cors: allowedMethods: must be a "
        "string or an array of strings"]
    assert f"{cors}: ok" not in out
    # a route the library dropped: the cors lines name the routes by id
    arr = files / "cors-array.json"
    rc, out, _ = run("check", "--host", "gateway", str(arr))
    assert rc == 1 and out.splitlines()[1:3] == [
        f"{arr}: route 'typo'.metadata.cors: cors: unknown key "
        "'allowedOrigin' (allowedOrigins, allowedOriginPatterns, "
        "allowedMethods, allowedHeaders, exposedHeaders, allowCredentials, "
        "maxAge)",
        f"{arr}: route 'creds'.metadata.cors: cors: allowCredentials true "
        "cannot go with allowedOrigins '*' (list the origins, or use "
        "allowedOriginPatterns)"]
    # what the gateway runs passes: its cors and its own filters
    good = files / "cors-good.json"
    good.write_text(json.dumps({"version": "1", "routes": [
        CORS_DOC["routes"][0], CORS_DOC["routes"][5]]}))
    rc, out, _ = run("check", "--host", "gateway", str(good))
    assert rc == 0 and out.startswith(f"{good}: ok, 2 routes\n")
    # without --host the metadata is the host's business: not read
    rc, out, _ = run("check", str(cors))
    assert "metadata.cors: cors:" not in out


def test_check_valid_and_invalid(files):
    rc, out, _ = run("check", str(files / "gw.json"))
    gw = files / "gw.json"
    assert rc == 0 and out == (f"{gw}: ok, 6 routes\n"
                               f"{gw}: host-run [Retry]: 'users'\n"
                               f"{gw}: host-run [https:]: 'users'\n")
    rc, out, _ = run("check", "--quiet", str(files / "gw.json"))
    assert rc == 0 and out == ""
    rc, out, _ = run("check", str(files / "bad.json"))
    bad = files / "bad.json"
    assert rc == 1
    assert out.splitlines() == [
        f"{bad}: routes[1].uri: unsupported uri scheme 'ftp' "
        "(use http, https, ws, wss, lb, forward or no)",
        f"{bad}: routes[2].predicates[0].args.regexp: "
        + out.splitlines()[1].split("args.regexp: ", 1)[1]]
    rc, out, _ = run("check", str(files / "syntax.json"))
    assert rc == 1 and "line 3, column 10: JSON syntax error" in out
    rc, _, err = run("check", str(files / "missing.json"))
    assert rc == 2 and "missing.json" in err
    rc, _, err = run("check")
    assert rc == 2 and "no file given" in err


def test_match_text_and_json(files):
    gw = str(files / "gw.json")
    rc, out, _ = run("match", "--instances", str(files / "inst.json"), gw,
                     "GET", "http://shop/api/orders/42?x=1")
    assert rc == 0
    assert out.splitlines()[0] == "route:    orders (order 1)"
    assert "var:      id = 42" in out and "request:  GET /orders/42?x=1" in out
    rc, out, _ = run("match", "--json", "--instances", str(files / "inst.json"),
                     "-H", "version: 1.9", gw, "GET", "http://shop/api/orders/7")
    o = json.loads(out)
    assert rc == 0 and o["route"] == "orders" and o["vars"] == {"id": "7"}
    assert o["instance"] == {"id": "o1", "host": "10.0.0.1", "port": 8080,
                             "scheme": "http"}
    assert ["Host", "shop"] in o["headers"]
    rc, out, _ = run("match", gw, "GET", "http://acme.example.com/users/1")
    assert "filter:   Retry (run by the host)" in out
    assert "response: add X-Tenant: acme" in out
    rc, out, _ = run("match", "--json", gw, "GET", "/docs/x")
    assert json.loads(out)["status"] == 302


def test_match_without_a_route_exits_1(files):
    doc = files / "one.json"
    doc.write_text(json.dumps([{"id": "a", "uri": "http://x", "predicates": ["Path=/a"]}]))
    rc, out, _ = run("match", str(doc), "GET", "/b")
    assert rc == 1 and out == "no route matches GET /b (the gateway answers 404)\n"
    rc, out, _ = run("match", "--json", str(doc), "GET", "/b")
    assert rc == 1 and json.loads(out) == {"route": None}


def test_match_options(files):
    doc = files / "t.json"
    doc.write_text(json.dumps([
        {"id": "new", "uri": "http://x", "predicates": ["After=2025-01-01T00:00:00Z"]},
        {"id": "lan", "uri": "http://x", "predicates": ["RemoteAddr=10.0.0.0/8"]}]))
    rc, out, _ = run("match", "--now", "2024-01-01T00:00:00Z", "--remote-addr",
                     "10.1.1.1", str(doc), "GET", "/")
    assert rc == 0 and out.startswith("route:    lan")
    rc, out, _ = run("match", "--now", "2026-01-01T00:00:00+02:00", str(doc), "GET", "/")
    assert out.startswith("route:    new")
    rc, out, _ = run("match", "--now", str(1_900_000_000_000), str(doc), "GET", "/")
    assert out.startswith("route:    new")


def test_match_usage_errors(files):
    gw = str(files / "gw.json")
    for argv in (["match", gw, "GET"], ["match", "--bogus", gw, "GET", "/"],
                 ["match", "-H", "nocolon", gw, "GET", "/"],
                 ["match", "--seed", "x", gw, "GET", "/"],
                 ["match", "--now", "yesterday", gw, "GET", "/"],
                 ["match", "--now", "0", gw, "GET", "/"],
                 ["match", "--now", "1970-01-01T00:00:00Z", gw, "GET", "/"]):
        rc, _, err = run(*argv)
        assert rc == 2 and "usage: switchyard match" in err, argv
    rc, _, err = run("match", "--now", "0", gw, "GET", "/")
    assert "--now 0 (1970-01-01T00:00:00Z)" in err
    rc, _, err = run("match", "--seed", "0", gw, "GET", "/")
    assert rc == 2 and "--seed 0 reads as no seed" in err
    for argv in (["match", gw, "G ET", "/"], ["match", gw, "GET", "shop/x"],
                 ["match", gw, "GET", "http:///x"],
                 ["match", gw, "GET", "http://shop:99999/x"],
                 ["match", gw, "GET", "/a b"], ["match", gw, "GET", "/a#b"]):
        rc, _, err = run(*argv)
        assert rc == 2 and "usage: switchyard match" in err, argv
    rc, _, err = run("match", gw, "G ET", "/")
    assert "method 'G ET' is not an HTTP method token" in err
    # methods are case-sensitive (RFC 9110 9.1), and the gateway answers
    # 'get / HTTP/1.1' 400: refused, as the C tool refuses it
    for cmd, m in (("match", "get"), ("explain", "Get"), ("match", "pOST")):
        rc, out, err = run(cmd, gw, m, "/api/orders/42")
        assert rc == 2 and out == "" and (
            "METHOD '%s' has lower-case letters: HTTP methods are "
            "case-sensitive (RFC 9110 9.1), '%s' is not '%s'"
            % (m, m, m.upper())) in err, (cmd, m, err)
    rc, _, err = run("match", gw, "GET", "http://shop:0/")
    assert "bad port '0'" in err
    # every invalid route is reported and skipped, as check lists them
    bad = str(files / "bad.json")
    rc, out, err = run("match", bad, "GET", "/a")
    assert rc == 0 and out.startswith("route:    a ")
    assert err.splitlines() == [
        f"{bad}: routes[1].uri: unsupported uri scheme 'ftp' "
        "(use http, https, ws, wss, lb, forward or no) (route skipped)",
        f"{bad}: routes[2].predicates[0].args.regexp: "
        + err.splitlines()[1].split("args.regexp: ", 1)[1]]
    assert err.endswith(" (route skipped)\n")
    rc, _, err = run("match", "--strict", bad, "GET", "/a")
    assert rc == 2 and "routes[1].uri" in err and "skipped" not in err


def test_match_lb_route_without_instance_exits_1(files):
    gw = str(files / "gw.json")
    rc, out, _ = run("match", gw, "GET", "/api/orders/7")
    assert rc == 1
    assert "instance: none (service 'orders' has no known instances; " \
        "the gateway answers 503)" in out
    rc, out, _ = run("match", "--json", gw, "GET", "/api/orders/7")
    assert rc == 1 and json.loads(out)["instance"] is None
    down = files / "down.json"
    down.write_text(json.dumps({"services": {"orders": [
        {"id": "o3", "host": "10.0.0.3", "port": 8080, "state": "down"}]}}))
    rc, out, _ = run("match", "--instances", str(down), gw, "GET",
                     "/api/orders/7")
    assert rc == 1 and "instance: none (" in out
    rc, out, _ = run("match", "--instances", str(files / "inst.json"), gw,
                     "GET", "/api/orders/7")
    assert rc == 0 and "instance: o" in out


def test_parse_instances_checks_and_converts(files):
    got = sy.parse_instances({"services": {"orders": [
        {"id": "a", "host": "h", "port": 1, "state": "UP",
         "metadata": {"version": 2}},
        {"id": "b", "host": "h", "port": 2, "weight": 3, "state": "Draining",
         "secure": True}]}})
    assert list(got) == ["orders"]
    a, b = got["orders"]
    assert (a.id, a.port, a.state, dict(a.metadata)) == (
        "a", 1, sy.InstanceState.UP, {"version": "2"})
    assert (b.weight, b.state, b.secure) == (3, sy.InstanceState.DRAINING, True)
    assert sy.parse_instances('{"users": []}') == {"users": []}
    with pytest.raises(sy.SwitchyardError) as exc:
        sy.parse_instances({"orders": [{"id": "a", "host": "h", "port": "80"}]})
    assert exc.value.path == "orders[0].port" and "not a string" in exc.value.message
    bad = files / "inst-bad.json"
    bad.write_text(json.dumps({"services": {"orders": [
        {"id": "a", "host": "h", "port": 1, "state": "healthy"}]}}))
    rc, _, err = run("match", "--instances", str(bad), str(files / "gw.json"),
                     "GET", "/api/orders/1")
    assert rc == 2 and err == (f"{bad}: services.orders[0].state: state must be "
                               "up, draining or down (any case), not 'healthy'\n")


@pytest.mark.parametrize("cmd", ["check", "match", "explain", "diff"])
def test_every_command_has_help_with_an_example(cmd):
    rc, out, _ = run(cmd, "--help")
    assert rc == 0 and out.startswith(f"usage: switchyard {cmd}")
    assert "options:" in out and "\nexample" in out
    assert f"  switchyard {cmd} " in out.split("\nexample", 1)[1]


def test_explain(files):
    gw = str(files / "gw.json")
    rc, out, _ = run("explain", gw, "POST", "/api/orders/1")
    lines = out.splitlines()
    assert rc == 0 and lines[-1] == "=> fallback"
    assert any("predicates[1] Method does not hold" in line for line in lines)
    assert any("skipped: disabled" in line for line in lines)
    rc, out, _ = run("explain", "--json", gw, "POST", "/api/orders/1")
    o = json.loads(out)
    assert o["route"] == "fallback"
    first = next(e for e in o["routes"] if e["route"] == "orders")
    assert first == {"route": "orders", "order": 1, "matched": False,
                     "failed_predicate": 1, "failed": "Method"}


def test_diff(files):
    a, b = str(files / "gw.json"), str(files / "v2.json")
    rc, out, _ = run("diff", a, b)
    assert rc == 0 and out.splitlines() == [
        "+ new", "- docs", "~ orders (uri, order)", "4 unchanged"]
    rc, out, _ = run("diff", "--json", a, b)
    assert json.loads(out) == {"added": ["new"], "removed": ["docs"],
                               "updated": [{"id": "orders", "changed": ["uri", "order"]}],
                               "reordered": [], "unchanged": 4}
    rc, _, err = run("diff", a)
    assert rc == 2 and "usage: switchyard diff" in err
    rc, _, err = run("diff", a, str(files / "syntax.json"))
    assert rc == 2 and "line 3, column 10" in err


def test_module_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "switchyard", "--version"],
                          capture_output=True, text=True, check=False,
                          env=_env())
    assert proc.returncode == 0 and proc.stdout.startswith("switchyard ")


C_TOOL = os.environ.get("SY_CLI") or shutil.which("switchyard")
if C_TOOL:
    C_TOOL = os.path.abspath(C_TOOL)


def _env():
    """This interpreter's view of the package, for a child with another cwd."""
    import switchyard
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(switchyard.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(
        [pkg_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


@pytest.mark.skipif(not C_TOOL, reason="the C switchyard tool is not built")
@pytest.mark.parametrize("argv", [
    ["--version"], ["--help"], ["nope"],
    ["check", "gw.json", "bad.json", "syntax.json"], ["check", "-q", "gw.json"],
    ["check", "--host", "gateway", "cors.json", "cors-array.json"],
    ["check", "--host", "nginx", "cors.json"],
    ["check", "missing.json"],
    ["match", "gw.json", "GET", "http://shop/api/orders/42?x=1"],
    ["match", "--json", "gw.json", "GET", "http://shop/api/orders/42?x=1"],
    ["match", "--instances", "inst.json", "gw.json", "GET", "/api/orders/1"],
    ["match", "--json", "--instances", "inst.json", "-H", "version: 2",
     "gw.json", "GET", "/api/orders/1"],
    ["match", "gw.json", "GET", "http://acme.example.com/users/1/x"],
    ["match", "--json", "gw.json", "GET", "http://acme.example.com/users/1/x"],
    ["match", "gw.json", "GET", "/docs/a"],
    ["match", "-H", "Content-Length: 5000", "gw.json", "POST", "/upload"],
    ["match", "--json", "-H", "Content-Length: 5000", "gw.json", "POST", "/upload"],
    ["match", "--seed", "5", "--now", "2024-05-01T10:00:00.250Z",
     "--remote-addr", "::1", "gw.json", "GET", "/z"],
    ["match", "bad.json", "GET", "/"], ["match", "gw.json", "GET"],
    ["match", "bad.json", "GET", "/a"], ["match", "--strict", "bad.json", "GET", "/a"],
    ["explain", "bad.json", "GET", "/a"],
    ["match", "gw.json", "G ET", "/"], ["match", "gw.json", "GET", "shop/x"],
    ["match", "gw.json", "get", "/api/orders/1"],
    ["explain", "--json", "gw.json", "Post", "/api/orders/1"],
    ["match", "gw.json", "GET", "http://[::1/x"], ["match", "gw.json", "GET", "http://h:x/"],
    ["match", "gw.json", "GET", "/a b"],
    ["match", "--json", "gw.json", "GET", "/api/orders/1"],
    ["check", "--help"], ["match", "--help"], ["explain", "-h"], ["diff", "--help"],
    ["match", "--instances", "inst-num.json", "-H", "version: 2", "gw.json", "GET", "/api/orders/1"],
    ["match", "--instances", "inst-port.json", "gw.json", "GET", "/api/orders/1"],
    ["explain", "gw.json", "POST", "/api/orders/1"],
    ["explain", "--json", "gw.json", "POST", "/api/orders/1"],
    ["diff", "gw.json", "v2.json"], ["diff", "--json", "gw.json", "v2.json"],
    ["diff", "gw.json", "syntax.json"],
    # a value given twice, or not one the tool can use, exits 2 naming it
    ["check", "--host", "nginx", "--host", "gateway", "gw.json"],
    ["match", "--remote-addr", "notanip", "gw.json", "GET", "/z"],
    ["match", "--remote-addr", "10.0.0.1:5000", "gw.json", "GET", "/z"],
    ["match", "--remote-addr", "[::1]:5000", "gw.json", "GET", "/z"],
    ["match", "--remote-addr", "[::1]", "gw.json", "GET", "/z"],
    ["match", "--remote-addr", "::1:5000", "gw.json", "GET", "/z"],
    ["match", "--remote-addr", "1.2.3.4", "--remote-addr", "1.2.3.5",
     "gw.json", "GET", "/z"],
    ["match", "--seed", "1", "--seed", "2", "gw.json", "GET", "/z"],
    # str.isdigit() took the Arabic-Indic 3 as seed 3 and let the
    # superscript 2 through to int() (a traceback); the C tool refuses both
    ["match", "--seed", "\u0663", "gw.json", "GET", "/z"],
    ["match", "--seed", "\u00b2", "gw.json", "GET", "/z"],
    # and what the C tool's strtoull took: "" as 0, -1 as 2**64-1
    *(["match", "--seed", seed, "gw.json", "GET", "/z"]
      for seed in ("", "-1", " 5", "+5", "0", "00")),
    ["explain", "--now", "0", "--now", "1", "gw.json", "GET", "/z"],
    ["match", "--instances", "inst.json", "--instances", "inst.json",
     "gw.json", "GET", "/z"],
    ["match", "--now", "2024-13-01T10:00:00Z", "gw.json", "GET", "/z"],
    ["match", "--now", "2024-02-30T10:00:00Z", "gw.json", "GET", "/z"],
    ["match", "--now", "2024-05-01T10:00:00+01:00x", "gw.json", "GET", "/z"],
    # --now in forms the C tool refuses, which Python's int() and
    # datetime.fromisoformat accepted (and ran at that time)
    *(["match", "--now", now, "gw.json", "GET", "/z"] for now in (
        "1_714_557_600_000", "1714557600000 ", "\u0663", "2024-05-01",
        "2024-05-01 10:00:00Z", "20240501T100000Z", "2024-05-01T10:00:00+0100",
        "2024-05-01T10:00:00+01", "2024-05-01T10:00Z", "99999999999999999999",
        # and forms both take, the same way
        " 1714557600000", "+1714557600000", "-5", "2024-5-1T1:0:0Z",
        "2024-05-01T10:00:00.1234567Z", "2024-05-01T10:00:00.5-02:30",
        "2024-05-01T10:00:00")),
    # epoch 0 is the library's "not given": both tools ran it at today
    *(["match", "--now", now, "gw.json", "GET", "/z"] for now in (
        "0", "-0", "", "1970-01-01T00:00:00Z", "1970-01-01T01:00:00+01:00")),
    ["match", "-H", "Content-Length: abc", "gw.json", "POST", "/upload"],
    ["match", "-H", "Content-Length: -5", "gw.json", "POST", "/upload"],
    ["match", "-H", "Content-Length: 12 ", "gw.json", "POST", "/upload"],
])
def test_same_output_as_the_c_tool(files, argv):
    c = subprocess.run([C_TOOL, *argv], cwd=files, capture_output=True,
                       text=True, check=False)
    py = subprocess.run([sys.executable, "-m", "switchyard", *argv], cwd=files,
                        capture_output=True, text=True, check=False, env=_env())
    # what differs: YAML (convert, and check of .yml files) is the C
    # tool's only, which reads it with libyaml
    c_out, c_err = (_without_yaml(c.stdout), _without_yaml(c.stderr))
    assert (py.returncode, py.stdout, py.stderr) == (c.returncode, c_out, c_err)


_C_YAML = ('"routes"}),\nor Spring Cloud Gateway\'s application.yml/.yaml/'
           '.properties as `switchyard\nconvert` makes them.\n')


def _without_yaml(text: str) -> str:
    text = text.replace(_C_YAML, '"routes"}).\n')
    return "".join(l for l in text.splitlines(True)
                   if not l.startswith("  convert "))


def test_convert_is_refused_with_where_to_find_it(files):
    py = subprocess.run([sys.executable, "-m", "switchyard", "convert", "a.yml"],
                        cwd=files, capture_output=True, text=True, check=False,
                        env=_env())
    assert py.returncode == 2
    assert "C switchyard tool" in py.stderr and py.stdout == ""


REPLAY_OLD = {"version": "1", "routes": [
    {"id": "users", "uri": "http://u:1", "predicates": ["Path=/api/users/**"]},
    {"id": "api", "uri": "http://a:1", "predicates": ["Path=/api/**"]},
    {"id": "gray", "uri": "lb://svc", "predicates": ["Path=/svc/**"],
     "metadata": {"version-default": "oldest"}},
    {"id": "gone", "uri": "http://g:1", "predicates": ["Path=/old/**"]}]}
REPLAY_NEW = {"version": "2", "routes": [
    {"id": "api", "uri": "http://a:1", "predicates": ["Path=/api/**"]},
    {"id": "users", "uri": "http://u:1", "predicates": ["Path=/api/users/**"]},
    {"id": "gray", "uri": "lb://svc", "predicates": ["Path=/svc/**"],
     "metadata": {"version-default": "2"}},
    {"id": "fresh", "uri": "http://f:1", "predicates": ["Path=/new/**"]}]}
REPLAY_FILES = {
    "plain.txt": "GET /api/users/1\nGET /api/orders\tX-A: 1\nPOST /old/x?y=1"
                 "\n# c\n\nGET http://h.example/new/a\nGET /svc/a\n",
    "nginx.log": '10.0.0.1 - - [10/Oct/2024:13:55:36 +0000] "GET /api/users/7 '
                 'HTTP/1.1" 200 5 "-" "curl/8.0"\n10.0.0.2 - - [10/Oct/2024:'
                 '13:55:37 +0000] "\\x16\\x03" 400 1 "-" "-"\n',
    "access.log": '{"method":"GET","path":"/api/users/2","query":"a=1"}\n'
                  '{"method":null,"path":null,"status":400}\n'
                  '{"method":"DELETE","path":"/old/1","query":null}\n',
    "bad.txt": "GET /a\nGET\n",
    "spaced.txt": "GET /api/users/1 HTTP/1.1\nGET /api/orders X-A: 1\n",
    # nginx's stock "main" format: combined, then X-Forwarded-For
    "main.log": '10.0.0.1 - - [10/Oct/2024:13:55:36 +0000] "GET /api/users/7 '
                'HTTP/1.1" 200 5 "-" "curl/8.0" "10.9.9.9"\n',
    # what the gateway logs for requests it answers without routing them
    "hostport.log": '{"method":"GET","path":"/api/users/2","host":'
                    '"h.example:8080"}\n{"method":"GET","path":"/api/x",'
                    '"host":"[::1]:80"}\n',
    "unrouted.log": '{"method":"GET","path":"/api/users/2","query":null}\n'
                    '{"method":"CONNECT","path":null,"status":405}\n'
                    '{"method":"OPTIONS","path":"*","status":400}\n',
}


@pytest.mark.skipif(not C_TOOL, reason="the C switchyard tool is not built")
@pytest.mark.parametrize("argv", [
    ["diff", "--requests", "plain.txt", "--instances", "inst.json", "old.json",
     "new.json"],
    ["diff", "--requests", "plain.txt", "--json", "--instances", "inst.json",
     "old.json", "new.json"],
    ["diff", "--requests", "nginx.log", "--json", "old.json", "new.json"],
    ["diff", "--requests", "access.log", "old.json", "new.json"],
    ["diff", "--requests", "unrouted.log", "old.json", "new.json"],
    ["diff", "--requests", "spaced.txt", "old.json", "new.json"],
    ["diff", "--requests", "hostport.log", "--json", "old.json", "new.json"],
    ["diff", "--requests", "main.log", "--json", "old.json", "new.json"],
    ["diff", "--requests", "bad.txt", "old.json", "new.json"],
    ["diff", "--requests", "x", "--help"],
    ["diff", "--requests", "plain.txt", "old.json"],
    ["diff", "--requests", "bad.txt", "--requests", "plain.txt", "old.json",
     "new.json"],
    ["diff", "--requests", "plain.txt", "--instances", "inst.json",
     "--instances", "inst.json", "old.json", "new.json"],
])
def test_diff_requests_as_the_c_tool(tmp_path, argv):
    import json as _json
    (tmp_path / "old.json").write_text(_json.dumps(REPLAY_OLD))
    (tmp_path / "new.json").write_text(_json.dumps(REPLAY_NEW))
    (tmp_path / "inst.json").write_text(_json.dumps({"services": {"svc": [
        {"id": "svc-1", "host": "10.0.0.1", "port": 80,
         "metadata": {"version": "1"}},
        {"id": "svc-2", "host": "10.0.0.2", "port": 80,
         "metadata": {"version": "2"}}]}}))
    for name, text in REPLAY_FILES.items():
        (tmp_path / name).write_text(text)
    c = subprocess.run([C_TOOL, *argv], cwd=tmp_path, capture_output=True,
                       text=True)
    py = subprocess.run([sys.executable, "-m", "switchyard", *argv],
                        cwd=tmp_path, capture_output=True, text=True,
                        env=_env())
    assert (py.returncode, py.stdout, py.stderr) == \
        (c.returncode, c.stdout, c.stderr)


def test_diff_requests_reads_the_user_agent_of_nginx_main(tmp_path):
    """nginx's stock "main" format adds "$http_x_forwarded_for" after the
    User-Agent: the UA is the quoted field after the referer (the last
    one was read: 10.9.9.9 as the User-Agent)."""
    import json as _json
    (tmp_path / "old.json").write_text(_json.dumps([
        {"id": "curl", "uri": "http://c:1",
         "predicates": ["Path=/api/**", "Header=User-Agent,curl/.*"]},
        {"id": "rest", "uri": "http://r:1", "predicates": ["Path=/api/**"]}]))
    (tmp_path / "new.json").write_text(_json.dumps([
        {"id": "rest", "uri": "http://r:1", "predicates": ["Path=/api/**"]}]))
    (tmp_path / "main.log").write_text(REPLAY_FILES["main.log"])
    py = subprocess.run([sys.executable, "-m", "switchyard", "diff",
                         "--requests", "main.log", "old.json", "new.json"],
                        cwd=tmp_path, capture_output=True, text=True,
                        env=_env())
    assert py.stdout.startswith("GET /api/users/7: curl -> rest"), py.stdout


def test_diff_requests_matches_the_logs_host_without_its_port(tmp_path):
    """The gateway logs the Host header as sent and matches Host routes
    without the port (strip_host_port): h.example:8080 took Host=h.example
    live, and the replay said no route on both sides."""
    import json as _json
    (tmp_path / "old.json").write_text(_json.dumps([
        {"id": "hosted", "uri": "http://x:1",
         "predicates": ["Host=h.example"]}]))
    (tmp_path / "new.json").write_text("[]")
    (tmp_path / "a.log").write_text(
        '{"method":"GET","path":"/a","host":"h.example:8080"}\n')
    py = subprocess.run([sys.executable, "-m", "switchyard", "diff",
                         "--requests", "a.log", "old.json", "new.json"],
                        cwd=tmp_path, capture_output=True, text=True,
                        env=_env())
    assert py.stdout.startswith("GET /a: hosted -> (no route)"), py.stdout


def test_diff_requests_refuses_text_after_the_url(tmp_path):
    """'GET /a X-A: 1' (a header after a space, not a tab) exits 2 naming
    the line; its header was dropped before. A trailing HTTP version is
    still read."""
    import json as _json
    (tmp_path / "old.json").write_text(_json.dumps(REPLAY_OLD))
    (tmp_path / "new.json").write_text(_json.dumps(REPLAY_NEW))
    (tmp_path / "spaced.txt").write_text(REPLAY_FILES["spaced.txt"])
    py = subprocess.run([sys.executable, "-m", "switchyard", "diff",
                         "--requests", "spaced.txt", "old.json",
                         "new.json"], cwd=tmp_path, capture_output=True,
                        text=True, env=_env())
    assert (py.returncode, py.stderr) == (2, (
        "spaced.txt:2: text after the URL (a header goes after a tab) "
        "(read as plain lines)\n"))


def test_diff_requests_skips_the_access_logs_unrouted_lines(tmp_path):
    """CONNECT (path null) and OPTIONS * (path "*") lines, which the
    gateway writes for requests it answers without routing, are skipped
    and counted; they made the replay exit 2 on a real access log."""
    import json as _json
    (tmp_path / "old.json").write_text(_json.dumps(REPLAY_OLD))
    (tmp_path / "new.json").write_text(_json.dumps(REPLAY_NEW))
    (tmp_path / "unrouted.log").write_text(REPLAY_FILES["unrouted.log"])
    py = subprocess.run([sys.executable, "-m", "switchyard", "diff",
                         "--requests", "unrouted.log", "old.json",
                         "new.json"], cwd=tmp_path, capture_output=True,
                        text=True, env=_env())
    assert py.returncode == 0, py.stderr
    assert "1 of 1 request re-routed" in py.stdout
    assert py.stderr == ("unrouted.log: 2 lines without a request skipped "
                         "(first: line 2)\n")


@pytest.mark.parametrize("argv", [
    ["diff", "old.json", "new.json"],
    ["diff", "--json", "old.json", "new.json"],
    ["diff", "--help"],
])
def test_diff_reorder_as_the_c_tool(tmp_path, argv):
    """A document that only moves routes' ranks: both tools name the moved
    route (reordered, not updated) in the same words."""
    import json as _json
    old = [{"id": i, "uri": f"http://{i}:80"} for i in "abcd"]
    new = [old[3], old[0], old[1], old[2]]
    (tmp_path / "old.json").write_text(_json.dumps(old))
    (tmp_path / "new.json").write_text(_json.dumps(new))
    c = subprocess.run([C_TOOL, *argv], cwd=tmp_path, capture_output=True,
                       text=True)
    py = subprocess.run([sys.executable, "-m", "switchyard", *argv],
                        cwd=tmp_path, capture_output=True, text=True,
                        env=_env())
    assert (py.returncode, py.stdout, py.stderr) == \
        (c.returncode, c.stdout, c.stderr)
    if argv[1] == "--json":
        assert _json.loads(c.stdout) == {
            "added": [], "removed": [], "updated": [], "reordered": ["d"],
            "unchanged": 4}
    elif argv[1] != "--help":
        assert c.stdout == "^ d (reordered)\n4 unchanged\n"
