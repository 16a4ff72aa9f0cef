"""test_etcd_register.py - examples/mini-gateway/etcd-register.sh.

The registration helper puts an instance under a lease and keeps it alive:
the instance stays past its TTL while the helper runs, leaves within the
TTL when the helper dies without a word (SIGKILL of its process group),
and leaves at once when the helper is stopped (SIGTERM revokes the lease:
a lease of 30 s, so leaving within seconds is the revocation).
TAP on stdout.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_harness import (Driver, Etcd, Tap, _procs, route, routes_doc,
                          wait_until)

P = "/switchyard/"
SCRIPT = os.path.join(os.environ["SY_SOURCE_ROOT"],
                      "examples/mini-gateway/etcd-register.sh")
t = Tap()

etcd = Etcd().start()
etcd.put(P + "routes/api", routes_doc(1, [route("api", "/**", "lb://api")]))
d = Driver(etcd.url)
d.wait_revision(etcd.revision())


def instances():
    svcs = d.status()["etcd"]["services"]
    return {s["name"]: s["instances"] for s in svcs}.get("api", 0)


def register(iid, port, ttl=2):
    p = subprocess.Popen(
        [SCRIPT, "-e", etcd.url, "-t", str(ttl), "api", iid, "127.0.0.1",
         str(port), '"metadata": {"version": "2"}'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True)
    _procs.append(p)
    return p


p = register("a1", 9001)
line = p.stdout.readline().decode()
t.ok(line.startswith("registered " + P + "instances/api/a1 lease "),
     "the helper says what it registered", line)
t.ok(wait_until(lambda: instances() == 1, 5), "the instance is live")
m = d.match("GET", "h", "/x")
t.ok(m.get("instance") == "a1" and m.get("target") == "127.0.0.1:9001",
     "requests go to it", m)
time.sleep(3.5)  # longer than the TTL: the keep-alive holds it
t.ok(instances() == 1, "the lease is kept alive past its TTL")

start = time.monotonic()
os.killpg(p.pid, signal.SIGKILL)
p.wait(timeout=10)
gone = wait_until(lambda: instances() == 0, 8)
t.ok(gone and time.monotonic() - start <= 2 + 1.5,
     "a helper killed without a word: gone within the TTL (%.2f s)" %
     (time.monotonic() - start))

# A lease of 30 s: leaving within seconds can only be the revocation.
p = register("a2", 9002, ttl=30)
p.stdout.readline()
t.ok(wait_until(lambda: instances() == 1, 5), "registered again")
start = time.monotonic()
p.send_signal(signal.SIGTERM)
p.wait(timeout=10)
gone = wait_until(lambda: instances() == 0, 5)
t.ok(gone and time.monotonic() - start < 3.0,
     "SIGTERM revokes the lease: the instance leaves at once, long before "
     "its 30 s TTL (%.2f s)" % (time.monotonic() - start))

bad = subprocess.run([SCRIPT, "-e", etcd.url, "api", "x", "h", "port"],
                     capture_output=True, timeout=10)
t.ok(bad.returncode == 2 and b"PORT" in bad.stderr,
     "a bad port is refused", bad.stderr)
t.ok(d.quit() == 0, "driver stops cleanly")
t.done()
