"""Shared fixtures: the example documents and a fresh router per test."""
from __future__ import annotations

import os
import pathlib
from typing import Iterator

import pytest

import switchyard as sy

SOURCE_ROOT = pathlib.Path(os.environ.get(
    "SY_SOURCE_ROOT", pathlib.Path(__file__).resolve().parents[3]))
DATA = pathlib.Path(os.environ.get("SY_TEST_DATA", SOURCE_ROOT / "tests" / "data"))

GATEWAY = {
    "version": "1",
    "routes": [
        {"id": "orders", "uri": "lb://orders", "order": 1,
         "predicates": ["Path=/api/orders/{id}", "Method=GET,HEAD"],
         "filters": ["StripPrefix=1", "AddRequestHeader=X-Order-Id,{id}"],
         "metadata": {"version-fallback": "latest", "owner": "team-a"}},
        {"id": "users", "uri": "https://users.internal:8443",
         "predicates": ["Host={tenant}.example.com", "Path=/users/{*rest}"],
         "filters": ["SetPath=/v2/{tenant}/users{rest}",
                     "AddResponseHeader=X-Tenant,{tenant}", "Retry=3"]},
        {"id": "docs", "uri": "no://op", "predicates": ["Path=/docs/**"],
         "filters": ["RedirectTo=302,https://docs.example.com"]},
        {"id": "upload", "uri": "http://upload:80",
         "predicates": ["Path=/upload"],
         "filters": [{"name": "RequestSize", "args": {"maxSize": "1KB"}}]},
        {"id": "off", "uri": "http://off:80", "predicates": ["Path=/off"],
         "metadata": {"status": "disabled"}},
        {"id": "fallback", "uri": "http://fallback:80", "order": 100},
    ],
}


@pytest.fixture
def data() -> pathlib.Path:
    return DATA


@pytest.fixture
def gateway() -> dict:
    return GATEWAY


@pytest.fixture
def router() -> Iterator[sy.Router]:
    with sy.Router() as r:
        r.add_source("main")
        r.apply("main", GATEWAY)
        yield r
