"""mini-gateway end to end: Spring Cloud Gateway's application.yml served
as it is.

A .yml route file goes through the converter of `switchyard convert`
(examples/cli/scg_convert.c): asserted that its routes serve (shortcut and
expanded forms), default-filters apply, a placeholder resolves from the
environment, an edit of the file is applied, a broken edit is refused with
FILE:LINE (in /status) while the old routes keep serving, and an unresolved placeholder
at start is a located startup error.
"""
import json
import os
import subprocess

import gwharness as h

YML = """\
spring:
  cloud:
    gateway:
      default-filters:
        - AddResponseHeader=X-Gateway, scg-yml
      routes:
        - id: greet
          uri: ${GREET_URI}
          predicates:
            - Path=/greet/**
          filters:
            - StripPrefix=1
          metadata:
            response-timeout: 5000
        - id: tagged
          uri: http://127.0.0.1:%(port)d
          predicates:
            - name: Path
              args:
                patterns:
                  - /tag/{name}
          filters:
            - name: SetPath
              args:
                template: /tagged/{name}
            - AddRequestHeader=X-Tag, %(tag)s
"""


def body(procs, c):
    _, bport = procs.backend("b1")
    os.environ["GREET_URI"] = "http://127.0.0.1:%d" % bport
    path = procs.write_file("edge.yml", YML % {"port": bport, "tag": "one"})
    gw = procs.gateway("--routes", path)
    st, hd, data = gw.request("GET", "/greet/hello")
    c.eq(st, 200, "a shortcut route of the YAML file serves")
    c.eq(json.loads(data)["path"], "/hello", "its StripPrefix applied")
    c.eq(hd.get("x-gateway"), "scg-yml", "default-filters apply")
    c.eq(gw.source("edge")["routes"], 2, "the source is named after the file")
    st, _, data = gw.request("GET", "/tag/x")
    c.eq(st, 200, "an expanded-form route serves")
    c.eq(json.loads(data)["path"], "/tagged/x", "its SetPath applied")
    c.eq(h.echoed_header(data, "X-Tag"), "one", "its header added")

    procs.write_file("edge.yml", YML % {"port": bport, "tag": "two"})
    h.wait_for(lambda: h.echoed_header(gw.request("GET", "/tag/x")[2],
                                 "X-Tag") == "two", "the edit applied")
    c.ok(True, "an edit of the YAML file is applied")

    procs.write_file("edge.yml", YML.replace("${GREET_URI}", "${NOPE_URI}")
                     % {"port": bport, "tag": "three"})
    h.wait_for(lambda: (gw.source("edge")["error"] or {}).get("message"),
               "the broken edit's error in /status")
    msg = gw.source("edge")["error"]["message"]
    c.ok(msg.startswith(path + ":8: ") and "${NOPE_URI}" in msg,
         "an unresolved placeholder is refused with FILE:LINE, in /status "
         "(%s)" % msg)
    st, _, data = gw.request("GET", "/tag/x")
    c.eq((st, h.echoed_header(data, "X-Tag")), (200, "two"),
         "the old routes keep serving")

    bad = procs.write_file("bad.yml", YML.replace("${GREET_URI}",
                                                  "${NOPE_URI}")
                           % {"port": bport, "tag": "x"})
    del os.environ["GREET_URI"]
    r = subprocess.run([h.binary(), "--routes", bad, "--listen",
                        "127.0.0.1:%d" % h.free_port(), "--admin", "off"],
                       capture_output=True, timeout=10)
    err = r.stderr.decode()
    c.ok(r.returncode != 0 and (bad + ":8: ") in err and "NOPE_URI" in err,
         "at start an unresolved placeholder is a located error (%r)" % err)


h.run("gateway_scg", body)
