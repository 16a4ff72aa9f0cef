"""mini-gateway end to end: the headers that belong to one hop, and the
forwarding headers, as SCG 4.3 runs them. An upstream here answers with
what it received (the request head as bytes, in the body) and with the
headers the path asks for, so each check sees both directions:
  - a header the Connection header names is hop-by-hop (RFC 9110 7.6.1):
    removed with Connection itself, on the request and on the response
    (SCG's RemoveHopByHopHeadersFilter, request and response), as are
    Proxy-Authenticate and X-Application-Context (SCG's list);
  - X-Forwarded-* and Forwarded: without --trusted-proxies none is sent
    and a client's are removed (SCG 4.3.5's RemoveXForwardedHeadersFilter
    and RemoveForwardedHeadersFilter); with it, a trusted client's get
    the gateway's entries appended, an untrusted client's are removed;
  - a chunked response's trailer fields are not forwarded (SCG 4.x's
    NettyRoutingFilter writes the body only): the body arrives whole and
    the chunked message ends cleanly."""
import json
import socket

import gwharness as h


class Upstream(h.RawUpstream):
    """Echoes each request head it read as the body; the path picks extra
    response headers (/conn: Connection naming X-Secret; /chunked: a
    chunked body with trailer fields)."""

    def serve(self, s):
        try:
            for head in self.heads(s):
                path = head.split(b" ", 2)[1]
                body = head + b"\r\n\r\n"
                if path.startswith(b"/conn"):
                    s.sendall(b"HTTP/1.1 200 OK\r\n"
                              b"Connection: keep-alive, X-Secret\r\n"
                              b"X-Secret: 1\r\nX-Kept: 2\r\n"
                              b"Proxy-Authenticate: Basic\r\n"
                              b"X-Application-Context: app:8080\r\n"
                              b"Content-Length: %d\r\n\r\n" % len(body)
                              + body)
                elif path.startswith(b"/many-trailers"):
                    s.sendall(b"HTTP/1.1 200 OK\r\n"
                              b"Transfer-Encoding: chunked\r\n\r\n"
                              b"5\r\nhello\r\n0\r\n" + b"".join(
                                  b"X-T%d: %d\r\n" % (i, i)
                                  for i in range(200)) + b"\r\n")
                elif path.startswith(b"/chunked"):
                    s.sendall(b"HTTP/1.1 200 OK\r\n"
                              b"Transfer-Encoding: chunked\r\n"
                              b"Trailer: X-Checksum\r\n\r\n"
                              b"5\r\nhello\r\n6\r\n world\r\n"
                              b"0\r\nX-Checksum: abc\r\n\r\n")
                else:
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                              b"\r\n" % len(body) + body)
        except OSError:
            pass
        finally:
            s.close()


def head_lines(data):
    """The (name lowercased, value) lines of a head."""
    out = []
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        out.append((k.strip().lower().decode(), v.strip().decode()))
    return out


def values(lines, name):
    return [v for k, v in lines if k == name]


def request(port, path, extra=b""):
    """One request with Connection: close; (response head lines, the head
    the upstream received as lines, the whole response)."""
    out = h.raw(port, b"GET %s HTTP/1.1\r\nHost: front.example\r\n%s"
                b"Connection: close\r\n\r\n" % (path, extra))
    resp, _, body = out.partition(b"\r\n\r\n")
    return head_lines(out), head_lines(body), out


def routes(up):
    return json.dumps({"routes": [
        {"id": "strip", "uri": "http://127.0.0.1:%d" % up,
         "predicates": ["Path=/api/**"], "filters": ["StripPrefix=1"]},
        {"id": "up", "uri": "http://127.0.0.1:%d" % up,
         "predicates": ["Path=/**"]},
    ]})


def body(procs, c):
    up = Upstream()
    doc = procs.write_file("routes.json", routes(up.port))
    gw = procs.gateway("--routes", doc)

    # --- Connection-named headers, request side
    _, got, _ = request(gw.port, b"/plain",
                        b"Connection: X-Hop, Keep-Alive\r\nX-Hop: 1\r\n"
                        b"X-End: 2\r\nProxy-Authenticate: x\r\n")
    c.eq(values(got, "x-hop"), [], "request: a header Connection names")
    c.eq(values(got, "connection"), [], "request: Connection itself")
    c.eq(values(got, "x-end"), ["2"], "request: an end-to-end header kept")
    c.eq(values(got, "proxy-authenticate"), [],
         "request: Proxy-Authenticate (SCG's hop-by-hop list)")

    # --- Connection-named headers, response side
    lines, got, out = request(gw.port, b"/conn")
    c.ok(out.startswith(b"HTTP/1.1 200"), "response /conn: 200")
    c.eq(values(lines, "x-secret"), [],
         "response: a header the upstream's Connection names")
    c.eq(values(lines, "x-kept"), ["2"], "response: another header kept")
    c.eq(values(lines, "connection"), ["close"],
         "response: the gateway's own Connection only")
    c.eq(values(lines, "proxy-authenticate"), [],
         "response: Proxy-Authenticate removed")
    c.eq(values(lines, "x-application-context"), [],
         "response: X-Application-Context removed")

    # --- forwarding headers: the default sends none, removes the client's
    _, got, _ = request(gw.port, b"/api/x/y",
                        b"X-Forwarded-For: 10.9.9.9\r\n"
                        b"X-Forwarded-Proto: https\r\n"
                        b"X-Forwarded-Whatever: z\r\nX-Forwarded-: q\r\n"
                        b"Forwarded: for=10.9.9.9\r\n")
    fwd = [k for k, _ in got if k.startswith("x-forwarded-")
           or k == "forwarded"]
    c.eq(fwd, [], "no --trusted-proxies: no X-Forwarded-* nor Forwarded")

    # --- chunked trailers: dropped, the body and its end intact
    lines, _, out = request(gw.port, b"/chunked")
    c.ok(out.startswith(b"HTTP/1.1 200"), "chunked: 200")
    c.eq(values(lines, "trailer"), [], "chunked: no Trailer header")
    c.ok(out.endswith(b"\r\n0\r\n\r\n"), "chunked: ended by a bare last "
         "chunk (%r)" % out[-40:])
    c.ok(b"X-Checksum" not in out, "chunked: trailer field not forwarded")
    c.ok(b"hello" in out and b" world" in out, "chunked: the body")
    # more trailer fields than a head may have headers (128): the body
    # still whole, the message ended, the connection kept
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
    s.sendall(b"GET /many-trailers HTTP/1.1\r\nHost: a\r\n\r\n"
              b"GET /plain HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"
              b"\r\n")
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
    s.close()
    c.ok(out.startswith(b"HTTP/1.1 200") and
         b"5\r\nhello\r\n0\r\n\r\nHTTP/1.1 200" in out and
         b"X-T1" not in out,
         "200 trailer fields: dropped, the body and the next answer on the "
         "same connection (%r)" % out[:300])
    procs.stop_all()

    # --- --trusted-proxies: a trusted client's entries appended
    gw = procs.gateway("--routes", doc, "--trusted-proxies",
                       r"127\.0\.0\.1|10\..*")
    _, got, _ = request(gw.port, b"/api/x/y",
                        b"X-Forwarded-For: 10.9.9.9\r\n"
                        b"X-Forwarded-For: 192.0.2.1\r\n"
                        b"X-Forwarded-Proto: https\r\n"
                        b"Forwarded: for=10.1.1.1;proto=https, "
                        b"for=192.0.2.7\r\n")
    c.eq(values(got, "x-forwarded-for"), ["10.9.9.9,127.0.0.1"],
         "trusted: X-Forwarded-For, an untrusted line dropped, the client "
         "appended")
    c.eq(values(got, "x-forwarded-proto"), ["https,http"],
         "trusted: X-Forwarded-Proto appended")
    c.eq(values(got, "x-forwarded-host"), ["front.example"],
         "trusted: X-Forwarded-Host")
    c.eq(values(got, "x-forwarded-port"), ["80"], "trusted: X-Forwarded-Port")
    c.eq(values(got, "x-forwarded-prefix"), ["/api"],
         "trusted: X-Forwarded-Prefix (StripPrefix)")
    fw = values(got, "forwarded")
    c.eq(len(fw), 2, "trusted: Forwarded, a trusted entry and ours (%r)"
         % fw)
    c.eq(fw[:1], ["for=10.1.1.1;proto=https"],
         "trusted: the trusted Forwarded entry kept")
    ours = fw[-1].split(";") if fw else []
    c.eq(ours[:2], ['proto=http', 'host=front.example'],
         "trusted: our Forwarded entry, SCG's order (%r)" % fw)
    c.ok(len(ours) == 3 and ours[2].startswith('for="127.0.0.1:') and
         ours[2].endswith('"') and ours[2][15:-1].isdigit(),
         "trusted: Forwarded for= the client with its port (%r)" % fw)
    # the head's room: a long Host port, a Forwarded of 2000 short
    # entries (each its own line), many X-Forwarded-For lines
    out = h.raw(gw.port, b"GET /api/x HTTP/1.1\r\nHost: h:" + b"9" * 3000 +
                b"\r\nForwarded: " + b",".join([b"for=10.0.0.1"] * 2000) +
                b"\r\n" + b"X-Forwarded-For: 10.0.0.2\r\n" * 100 +
                b"Connection: close\r\n\r\n")
    got = head_lines(out.partition(b"\r\n\r\n")[2])
    c.ok(out.startswith(b"HTTP/1.1 200") and
         len(values(got, "forwarded")) == 2001 and
         values(got, "x-forwarded-port") == ["9" * 3000],
         "trusted: a long Host, 2000 Forwarded entries: all sent (%r)"
         % out[:120])
    _, got, _ = request(gw.port, b"/plain")
    c.eq(values(got, "x-forwarded-prefix"), [],
         "trusted: no prefix when the path is unchanged")
    c.eq(values(got, "x-forwarded-for"), ["127.0.0.1"],
         "trusted: X-Forwarded-For of a client that sent none")
    procs.stop_all()

    # --- --trusted-proxies, the client not trusted: the client's removed
    gw = procs.gateway("--routes", doc, "--trusted-proxies", r"10\..*")
    _, got, _ = request(gw.port, b"/api/x",
                        b"X-Forwarded-For: 10.9.9.9\r\n"
                        b"Forwarded: for=10.1.1.1\r\n")
    fwd = [k for k, _ in got if k.startswith("x-forwarded-")
           or k == "forwarded"]
    c.eq(fwd, [], "untrusted client: no X-Forwarded-* nor Forwarded")

    # --- a regex that does not compile: refused, located
    p = procs.start([h.binary(), "--routes", doc, "--listen",
                     "127.0.0.1:%d" % h.free_port(), "--trusted-proxies",
                     "10\\.(("], "bad.log")
    rc = p.wait(timeout=10)
    log = procs.log("bad.log")
    c.ok(rc != 0 and "--trusted-proxies" in log,
         "a bad --trusted-proxies regex: refused (rc %r, %r)"
         % (rc, log[-300:]))
    c.done(procs)


if __name__ == "__main__":
    h.run("gateway_hop", body)
