"""The cdef derived from include/switchyard.h (build_switchyard.py) keeps
up with the header: every declared call is reachable, the 0.2 structs
(sy_router_options with its nested sy_outlier_options, sy_target,
sy_source_status, sy_metrics) have every member, and the enums' values
are the header's."""
from __future__ import annotations

import re

from conftest import SOURCE_ROOT
from switchyard._native import ffi, lib

HEADER = (SOURCE_ROOT / "include" / "switchyard.h").read_text()


def test_every_declared_call_is_in_the_extension():
    names = set(re.findall(r"\bSY_API\b[^;{(]*?\b(sy_\w+)\s*\(", HEADER))
    assert {"sy_router_commit", "sy_match_target", "sy_match_ctx_nomatch",
            "sy_router_report_outcome", "sy_router_metrics_text",
            "sy_router_source_status", "sy_route_host_data",
            "sy_snapshot_route_key_limit"} <= names
    missing = sorted(n for n in names if not hasattr(lib, n))
    assert missing == []


def members(struct: str) -> set:
    return {name for name, _ in ffi.typeof(struct).fields}


def test_new_struct_members_are_declared():
    assert {"route_attach", "route_detach", "skip_same_version",
            "path_normalization", "merge_slashes", "escaped_slashes",
            "outlier"} <= members("sy_router_options")
    outlier = dict(ffi.typeof("sy_router_options").fields)["outlier"]
    assert outlier.type is ffi.typeof("sy_outlier_options")
    assert members("sy_outlier_options") == {
        "consecutive_failures", "base_ejection_ms", "max_ejection_ms",
        "max_ejected_percent", "disabled"}
    assert {"host_header", "instance_id", "zone", "metadata_count",
            "health"} <= members("sy_target")
    assert {"last_error", "applied_count", "fingerprint"} <= members(
        "sy_source_status")
    assert {"commits", "ejections", "outcomes", "fingerprint"} <= members(
        "sy_metrics")


def test_enum_values_are_the_headers():
    for name, value in re.findall(r"\b(SY_(?:E[A-Z]+|NOMATCH_[A-Z_]+|"
                                  r"OUTCOME_[A-Z0-9_]+|PATH_[A-Z_]+|"
                                  r"SLASHES_[A-Z]+))\s*=\s*(-?\d+)", HEADER):
        assert getattr(lib, name) == int(value), name
    assert lib.SY_EREENTRANT == -21 and lib.SY_OUTCOME_5XX == 2


def test_python_enums_mirror_the_c_enums():
    import switchyard as sy
    pairs = [(sy.NoMatchReason, "SY_NOMATCH_"), (sy.PathNormalization,
                                                 "SY_PATH_"),
             (sy.EscapedSlashes, "SY_SLASHES_")]
    for cls, prefix in pairs:
        for member in cls:
            assert getattr(lib, prefix + member.name) == member, member
    assert [int(o) for o in (sy.Outcome.SUCCESS, sy.Outcome.CONNECT_FAILURE,
                             sy.Outcome.HTTP_5XX, sy.Outcome.TIMEOUT)] == [
        lib.SY_OUTCOME_SUCCESS, lib.SY_OUTCOME_CONNECT_FAILURE,
        lib.SY_OUTCOME_5XX, lib.SY_OUTCOME_TIMEOUT]
    for code in range(-22, 0):
        assert sy.code_name(code) != f"SY_E{code}", code
