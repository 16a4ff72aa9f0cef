"""mini-gateway end to end: a refused config change costs nothing else.

  - two route files changed together, one broken: the valid one applies,
    the broken one's error shows on its source and its file in /status,
    and fixing it later applies it;
  - a valid route file written together with a broken instances file: the
    route file applies, the instances file's error shows in /status;
  - an instances file that drops a service, written together with a broken
    route file: the service loses its instances (the file's service list is
    only replaced once a commit took it);
  - a refused admin request changes nothing: a PUT of invalid JSON (or of
    a route id another source holds) to a new source answers 400 and the
    source does not appear in /status;
  - a command line whose flag would be taken and not used (a one-file
    flag given twice, a value out of its range, an --etcd-* or
    --redis-timeout without --etcd or --redis, a backend flag without
    --backend) stops the start with the flag named, exit 2.
"Together" is one tick of the gateway's file watch (see together()), and
every outcome is polled for with a deadline, never assumed after another.
"""
import json
import os
import signal
import subprocess

import gwharness as h

wait = h.wait_for  # poll until true, with a deadline


def together(gw, procs, *writes):
    """Write files (name, text) so that the gateway sees them in one tick:
    it is stopped while they are written, so their inotify events wait in
    its queue and are read in one batch when it resumes. Written while it
    runs, on a loaded machine the two writes can be more than the 20 ms
    debounce apart and land in separate ticks; the "changed together" cases
    then test nothing of the kind (and a check made once the first file
    settled can see the second one not read yet)."""
    gw.proc.send_signal(signal.SIGSTOP)
    try:
        return [procs.write_file(name, text) for name, text in writes]
    finally:
        gw.proc.send_signal(signal.SIGCONT)


def route_doc(version, port, path, tag):
    return json.dumps({"version": version, "routes": [
        {"id": "r-" + tag, "uri": "http://127.0.0.1:%d" % port,
         "predicates": ["Path=%s/**" % path],
         "filters": ["AddRequestHeader=X-Tag,%s-%s" % (tag, version)]}]})


def inst_doc(services):
    return json.dumps({"services": services})


def file_error(gw, path):
    for f in gw.status()["files"]:
        if f["path"] == path:
            return f["error"]
    raise AssertionError("no file %s in /status" % path)


def body(procs, c):
    _, bport = procs.backend("b1")
    a = procs.write_file("a.json", route_doc("1", bport, "/a", "a"))
    b = procs.write_file("b.json", route_doc("1", bport, "/b", "b"))
    x = procs.write_file("x.json", json.dumps({"version": "1", "routes": [
        {"id": "r-x", "uri": "lb://xsvc", "predicates": ["Path=/x/**"]}]}))
    one = [{"id": "x1", "host": "127.0.0.1", "port": bport}]
    inst = procs.write_file("inst.json", inst_doc({"xsvc": one, "ysvc": one}))
    gw = procs.gateway("--routes", a, "--routes", b, "--routes", x,
                       "--instances", inst)

    def tag(path):
        st, _, data = gw.request("GET", path)
        return h.echoed_header(data, "X-Tag") if st == 200 else st

    c.eq((tag("/a/1"), tag("/b/1")), ("a-1", "b-1"), "both files serve")
    c.eq(gw.request("GET", "/x/1")[0], 200, "lb://xsvc has an instance")

    # two route files changed together, one of them broken
    together(gw, procs, ("a.json", route_doc("2", bport, "/a", "a")),
             ("b.json", '{"version": "2", "routes": ['))
    wait(lambda: (file_error(gw, b) or {}).get("code") is not None,
         "b.json's error in /status")
    c.ok(wait(lambda: tag("/a/1") == "a-2", "a.json v2 applied"),
         "the valid file of the pair applies")
    c.eq(gw.source("a")["version"], "2", "source a is at version 2")
    c.eq(gw.source("a")["error"], None, "source a has no error")
    c.ok(gw.source("b")["error"] is not None,
         "source b shows its own error: %r" % gw.source("b")["error"])
    c.eq(tag("/b/1"), "b-1", "b's old routes keep serving")
    c.eq(file_error(gw, a), None, "a.json has no error")

    procs.write_file("b.json", route_doc("3", bport, "/b", "b"))
    c.ok(wait(lambda: tag("/b/1") == "b-3", "b.json fixed"),
         "the fixed file applies later")
    c.eq(file_error(gw, b), None, "b.json's error is gone once it applies")
    c.eq(gw.source("b")["error"], None, "source b's error is gone")

    # a valid route file and a broken instances file
    bad_port = [{"id": "x1", "host": "127.0.0.1", "port": "nope"}]
    together(gw, procs, ("a.json", route_doc("3", bport, "/a", "a")),
             ("inst.json", inst_doc({"xsvc": bad_port})))
    wait(lambda: file_error(gw, inst) is not None,
         "the instances file's error in /status")
    err = file_error(gw, inst)
    c.ok("port" in err["path"],
         "the instances file's error is located: %r" % err)
    c.ok(wait(lambda: tag("/a/1") == "a-3", "a.json v3 applied"),
         "a route file written with a broken instances file applies")
    c.eq(gw.request("GET", "/x/1")[0], 200, "the old instances keep serving")

    # an instances file that drops a service, with a broken route file
    together(gw, procs, ("inst.json", inst_doc({"ysvc": one})),
             ("a.json", "[{"))
    wait(lambda: file_error(gw, inst) is None, "the instances file applied")
    c.ok(wait(lambda: file_error(gw, a) is not None, "a.json's error"),
         "a.json shows its error")
    c.eq(gw.request("GET", "/x/1")[0], 503,
         "the dropped service has no instance left")
    procs.write_file("a.json", route_doc("4", bport, "/a", "a"))
    wait(lambda: tag("/a/1") == "a-4", "a.json v4 applied")
    c.eq(gw.request("GET", "/x/1")[0], 503,
         "and none comes back when the other file is fixed")

    # a refused admin request changes nothing
    before = gw.status()
    st, _, data = gw.admin_call("PUT", "/routes/newsrc", "{not json")
    c.eq(st, 400, "invalid JSON for a new source: 400 (%r)" % data)
    names = [s["name"] for s in gw.status()["sources"]]
    c.ok("newsrc" not in names, "no newsrc in /status: %r" % names)
    st, _, data = gw.admin_call("PUT", "/routes/newsrc/r-a", {
        "id": "r-a", "uri": "http://127.0.0.1:%d" % bport,
        "predicates": ["Path=/dup/**"]})
    c.eq(st, 400, "a route id of another source: 400 (%r)" % data)
    c.ok(b"already defined by source 'a'" in data, "named as such: %r" % data)
    after = gw.status()
    c.ok("newsrc" not in [s["name"] for s in after["sources"]],
         "still no newsrc in /status")
    c.eq((after["generation"], after["fingerprint"]),
         (before["generation"], before["fingerprint"]), "nothing published")
    st, _, data = gw.admin_call("PUT", "/routes/newsrc",
                                route_doc("1", bport, "/n", "n"))
    c.eq(st, 200, "a valid document for the new source: 200 (%r)" % data)
    c.eq(tag("/n/1"), "n-1", "and it serves")
    c.ok("newsrc" in [s["name"] for s in gw.status()["sources"]],
         "newsrc is in /status once it applied")

    command_line(procs, c, a, inst)


def command_line(procs, c, routes, inst):
    """Every flag given is used, or the start is refused naming it."""
    other = procs.write_file("other.json", inst_doc({"o": []}))
    dflt = procs.write_file("dflt.json", "[]")
    pw = procs.write_file("pw", "secret\n")
    cases = [
        (["--instances", inst, "--instances", other], "--instances"),
        (["--default-filters", dflt, "--default-filters", dflt],
         "--default-filters"),
        (["--admin", "127.0.0.1:1", "--admin", "off"], "--admin"),
        # port 0 turned the admin API off; a token with no admin port, or
        # an empty one (no client sends "Bearer " with nothing), not used
        (["--admin", "127.0.0.1:0"], "--admin"),
        (["--admin", "off", "--admin-token", "t"], "--admin-token"),
        (["--admin", "127.0.0.1:%d" % h.free_port(), "--admin-token", ""],
         "--admin-token"),
        (["--redis", "127.0.0.1:1", "--redis", "127.0.0.1:2"], "--redis"),
        (["--retries", "9"], "--retries"),
        (["--workers", "0"], "--workers"),
        (["--workers", "65"], "--workers"),
        (["--max-header-bytes", "100"], "--max-header-bytes"),
        (["--redis", "127.0.0.1:1", "--redis-timeout", "0"],
         "--redis-timeout"),
        (["--redis", "127.0.0.1:1", "--redis-timeout",
          "18446744073709551615"], "--redis-timeout"),
        (["--redis-timeout", "50"], "--redis-timeout"),
        # no host hiredis connects to: rate limits failed open forever
        (["--redis", "redis://127.0.0.1:6379"], "--redis"),
        (["--redis", "127.0.0.1:0"], "--redis"),
        (["--redis", "cache host:6379"], "--redis"),
        (["--etcd-prefix", "/x/"], "--etcd-prefix"),
        (["--etcd-token-renew", "500"], "--etcd-token-renew"),
        (["--etcd-trace"], "--etcd-trace"),
        # renewal is of --etcd-user's token: without it, or at 0 (read
        # as the 100 s default), the value was not used
        (["--etcd", "http://127.0.0.1:1", "--etcd-token-renew", "500"],
         "--etcd-token-renew"),
        (["--etcd", "http://127.0.0.1:1", "--etcd-user", "u",
          "--etcd-password-file", pw, "--etcd-token-renew", "0"],
         "--etcd-token-renew"),
        (["--id", "b"], "--id"),
        (["--version", "2"], "--version"),
        (["--backend", "--id", "b", "--listen", "127.0.0.1:1",
          "--routes", routes], "--routes"),
    ]
    for args, flag in cases:
        pre = [] if "--admin" in args or "--backend" in args else [
            "--admin", "off", "--listen", "127.0.0.1:%d" % h.free_port()]
        try:  # an accepted line serves (killed after 5 s)
            r = subprocess.run([h.binary()] + pre + args,
                               capture_output=True, timeout=5)
            rc, err = r.returncode, r.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            rc, err = None, "started"
        c.ok(rc == 2 and flag in err,
             "%s: refused at start naming %s (exit %s: %r)"
             % (" ".join(args), flag, rc, err[-200:]))
    # the token's variable set but empty (an unset $TOKEN in a unit file)
    try:
        r = subprocess.run([h.binary(), "--listen", "127.0.0.1:%d"
                            % h.free_port(), "--admin", "127.0.0.1:%d"
                            % h.free_port()], capture_output=True, timeout=5,
                           env=dict(os.environ, MINI_GATEWAY_ADMIN_TOKEN=""))
        rc, err = r.returncode, r.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        rc, err = None, "started"
    c.ok(rc == 2 and "MINI_GATEWAY_ADMIN_TOKEN" in err,
         "an empty MINI_GATEWAY_ADMIN_TOKEN: refused at start (exit %s: %r)"
         % (rc, err[-200:]))
    etcd_url(procs, c)
    quiet_help(c)


def quiet_help(c):
    """--help says what --quiet does as docs/mini-gateway.md does: no log
    line per applied file. It said "no access log", but the access log is
    off unless --access-log is given and --quiet leaves it on (every
    gateway of these tests runs with --quiet and --access-log works)."""
    out = subprocess.run([h.binary(), "--help"], capture_output=True,
                         timeout=5)
    text = (out.stdout + out.stderr).decode()
    line = [x for x in text.splitlines() if x.strip().startswith("--quiet")]
    c.ok(len(line) == 1 and "no access log" not in line[0]
         and "applied file" in line[0],
         "--help's --quiet line says what it does (%r)" % line)


def etcd_url(procs, c):
    """An --etcd URL is scheme://host[:port] and nothing else, and TLS
    options reach every endpoint: a user and password, a path, a query or
    a fragment in the URL were taken and not used, and an http:// endpoint
    beside https:// ones with --etcd-cacert/--etcd-cert/--etcd-key was
    spoken to in the clear, without the client certificate."""
    ca = procs.write_file("ca.pem", "not read before the URL is checked\n")
    cases = [
        (["--etcd", "http://gw:secret@127.0.0.1:1"], "user and password"),
        (["--etcd", "http://127.0.0.1:1/v3beta"], "path"),
        (["--etcd", "http://127.0.0.1:1/"], "path"),
        (["--etcd", "http://127.0.0.1:1?x=1"], "query"),
        (["--etcd", "http://127.0.0.1:1#f"], "host:port"),
        (["--etcd", "https://127.0.0.1:1,http://127.0.0.1:2",
          "--etcd-cacert", ca], "http://127.0.0.1:2"),
    ]
    # an empty first line logged in with an empty password (refused by
    # etcd at every read, seen only in /status)
    empty = procs.write_file("empty-pw", "\nsecret\n")
    cases.append((["--etcd", "http://127.0.0.1:1", "--etcd-user", "u",
                   "--etcd-password-file", empty], "first line is empty"))
    for args, what in cases:
        try:
            r = subprocess.run([h.binary(), "--admin", "off", "--listen",
                                "127.0.0.1:%d" % h.free_port()] + args,
                               capture_output=True, timeout=5)
            rc, err = r.returncode, r.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            rc, err = None, "started"
        c.ok(rc not in (None, 0) and "--etcd" in err and what in err,
             "%s: refused at start naming --etcd and %s (exit %s: %r)"
             % (" ".join(args), what, rc, err[-300:]))


h.run("gateway_config_errors", body)
