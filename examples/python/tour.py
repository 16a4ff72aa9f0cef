#!/usr/bin/python3
"""A tour of switchyard's Python bindings.

Run it against a build tree:

    meson setup build -Dpython=true && ninja -C build
    PYTHONPATH=build/bindings/python /usr/bin/python3 examples/python/tour.py

(Without PYTHONPATH the script looks for build*/bindings/python itself.)
"""
from __future__ import annotations

import glob
import logging
import os
import sys
import threading

try:
    import switchyard as sy
except ImportError:  # running from the source tree: find a build directory
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for candidate in sorted(glob.glob(os.path.join(root, "build*", "bindings", "python"))):
        if glob.glob(os.path.join(candidate, "switchyard", "_native*.so")):
            sys.path.insert(0, candidate)
            break
    import switchyard as sy

ROUTES = {
    "version": "1",
    "routes": [
        {"id": "orders", "uri": "lb://orders",
         "predicates": ["Path=/api/orders/{id}", "Method=GET"],
         "filters": ["StripPrefix=1", "AddRequestHeader=X-Order-Id,{id}"],
         "metadata": {"version-fallback": "latest"}},
        {"id": "tenants", "uri": "https://users.internal:8443",
         "predicates": ["Host={tenant}.example.com", "Path=/users/{*rest}"],
         "filters": ["SetPath=/v2/{tenant}/users{rest}", "Retry=3"]},
        {"id": "docs", "uri": "no://op", "predicates": ["Path=/docs/**"],
         "filters": ["RedirectTo=302,https://docs.example.com"]},
    ],
}


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout,
                        format="  log %(name)s %(levelname)s: %(message)s")
    print(f"switchyard {sy.version()}")

    # 1. Parse and validate a document on its own; errors carry a JSON path.
    doc = sy.parse(ROUTES)
    print(f"parsed version {doc.version}: {[r.id for r in doc]}")
    try:
        sy.parse({"routes": [{"id": "bad", "uri": "http://x", "predicates": [
            {"name": "Header", "args": {"header": "X", "regexp": "[0-9"}}]}]})
    except sy.RegexError as e:
        print(f"invalid: {e.code_name} at {e.path}: {e.message}")

    # 2. A router: sources, applies, events.
    events: list[sy.Report] = []
    with sy.Router(on_event=events.append) as router:
        router.add_source("public")
        router.add_source("ops")  # routes owned by the operators
        report = router.apply("public", ROUTES)
        print(f"applied generation {report.generation}, added {list(report.diff.added)}")
        print(f"same version again skipped: {router.apply('public', ROUTES).skipped}")

        # 3. Instances for lb:// routes, then match + select.
        router.set_instances("orders", [
            sy.Instance("o1", "10.0.0.1", 8080, metadata={"version": "1.9"}),
            sy.Instance("o2", "10.0.0.2", 8080, metadata={"version": "1.10"}),
        ])
        with router.acquire() as snap:
            m = snap.match(method="GET", url="http://shop/api/orders/42?expand=items")
            assert m is not None
            print(f"{m.route_id}: vars={dict(m.vars)} upstream path={m.path}?{m.query}")
            print(f"  headers={list(m.headers)}")
            sel = snap.select(method="GET", url="/api/orders/42")
            print(f"  instance {sel.id} {sel.scheme}://{sel.host}:{sel.port} (latest version)")
            m = snap.match(url="http://acme.example.com/users/7/profile")
            print(f"{m.route_id}: path={m.path} host filters={[f.name for f in m.host_filters]}")
            m = snap.match(url="/docs/intro")
            print(f"{m.route_id}: {m.action.name} {m.status} -> {m.redirect}")
            print("explain POST /api/orders/1:")
            for step in snap.explain(method="POST", url="/api/orders/1"):
                why = "matched" if step.matched else f"{step.failed_name} failed"
                print(f"  {step.route_id}: {why}")

        # 4. One-route changes and a diff between snapshots.
        before = router.acquire()
        router.upsert("ops", {"id": "health", "uri": "http://health:80",
                              "predicates": ["Path=/health"]})
        router.disable("docs")
        with router.acquire() as after:
            print(f"diff: {sy.diff(before, after).to_dict()}")
        before.release()

        # 5. Readers on threads while the writer publishes.
        misses = []

        def reader(n: int) -> None:
            for _ in range(200):
                with router.acquire() as s:
                    if s.match(url="/health") is None:
                        misses.append(n)
        threads = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        # A document replaces its own source's routes; "health" lives in
        # another source, so readers never miss it.
        for v in range(2, 30):
            routes = dict(ROUTES, version=str(v))
            router.apply("public", routes)
        for t in threads:
            t.join()
        assert not misses, f"readers missed /health {len(misses)} times"
        print("4 reader threads matched /health 800 times during 28 applies")
        print(f"metrics: {router.metrics()}")
        print(f"{len(events)} events delivered")

        # 6. Exceptions raised in callbacks surface from the call.
        def broken_loader(source: str) -> str:
            raise RuntimeError("config centre unreachable")
        router.add_source("pulled")
        router.set_loader("pulled", broken_loader)
        try:
            router.notify("pulled")
        except RuntimeError as e:
            print(f"notify raised the loader's exception: {e}")


if __name__ == "__main__":
    main()
