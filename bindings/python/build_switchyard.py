#!/usr/bin/env python3
"""Generate the C source of switchyard's cffi extension (API mode, out-of-line).

Usage: build_switchyard.py HEADER OUTPUT.c

The cdef is derived from include/switchyard.h itself, so the binding always
mirrors the header: preprocessor lines are dropped (cffi cannot parse macros
or attributes; SY_API expands to nothing outside the library build), the
C++ guards are removed, and the few macros the binding needs are re-declared
as integer constants. The generated C is compiled by Meson into
switchyard._native and linked against libswitchyard.
"""
from __future__ import annotations

import re
import sys

import cffi

# Callbacks implemented in Python (switchyard/_callbacks.py) through
# @ffi.def_extern. Each receives a `void *data` that is a cffi handle.
EXTERN_PYTHON = r"""
extern "Python" {
    void _sy_py_on_log(void *data, sy_log_level level, const char *message);
    void _sy_py_on_event(void *data, const sy_report *report);
    void _sy_py_on_retired_held(void *data, uint64_t generation,
                                uint64_t age_ms);
    int64_t _sy_py_clock_ms(void *data);
    uint64_t _sy_py_random(void *data);
    int _sy_py_load(void *data, const char *source, sy_loaded *out,
                    sy_error *err);
    void _sy_py_release_loaded(void *data, const char *bytes);
    int _sy_py_explain(void *data, const sy_route *route, bool matched,
                       int failed_predicate, const char *failed_name);
    int _sy_py_shadow(void *data, const sy_shadow *shadow);
    int _sy_py_pred_compile(void *data, const sy_kv *args, size_t arg_count,
                            void **state, sy_error *err);
    bool _sy_py_pred_test(void *state, const sy_request *req);
    void _sy_py_pred_free(void *data, void *state);
    int _sy_py_filter_validate(void *data, const sy_kv *args,
                               size_t arg_count, sy_error *err);
    void *_sy_py_route_attach(void *data, const sy_route *route);
    void _sy_py_route_detach(void *data, const sy_route *route,
                             void *host_data);
    int _sy_py_key_resolve(void *data, const sy_request *req,
                           const sy_route *route, char *buf, size_t cap,
                           size_t *len);
}
"""

# The mini-gateway's own readers, compiled into the extension from
# examples/mini-gateway (the C tool links the same files), so that
# `python3 -m switchyard check --host gateway` refuses exactly what the
# gateway refuses: a route's cors metadata (cors_parse.c) and the filters
# it runs itself (host_filters.c).
GATEWAY_CDEF = r"""
typedef struct gw_cors gw_cors;
gw_cors *gw_cors_parse(const char *json, char *err, size_t cap);
void gw_cors_free(gw_cors *c);
int gw_host_filters_register(sy_registry *reg, sy_error *err);
int gw_host_filters_refuse(sy_registry *reg, const char *host, sy_error *err);
"""

# Macros of the header that the binding uses, as plain integer constants.
EXTRA_CONSTANTS = r"""
#define SY_VERSION_MAJOR ...
#define SY_VERSION_MINOR ...
#define SY_VERSION_PATCH ...
#define SY_VERSION_NUMBER ...
"""


def header_to_cdef(text: str) -> str:
    """Turn switchyard.h into something cffi's cdef() accepts."""
    # Join macro continuation lines so multi-line #defines vanish whole.
    text = re.sub(r"\\\n", " ", text)
    # C++ guards: '#ifdef __cplusplus ... #endif' blocks go entirely.
    text = re.sub(r"#ifdef __cplusplus\n.*?#endif\n", "", text, flags=re.S)
    # The export-macro block is '#if ... #else ... #endif': drop it whole.
    text = re.sub(r"#if defined\(SY_BUILDING_LIBRARY\).*?#endif\n", "",
                  text, flags=re.S)
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        out.append(line)
    text = "\n".join(out)
    text = re.sub(r"\bSY_API\b", "", text)
    # cffi's constant parser does not know the 'u' suffix.
    text = re.sub(r"\b(\d+)[uU]\b", r"\1", text)
    return text


def make_ffi(header_path: str) -> cffi.FFI:
    with open(header_path, encoding="utf-8") as f:
        header = f.read()
    ffi = cffi.FFI()
    ffi.cdef(header_to_cdef(header) + EXTRA_CONSTANTS + GATEWAY_CDEF +
             EXTERN_PYTHON)
    ffi.set_source("switchyard._native",
                   '#include "switchyard.h"\n#include "cors_parse.h"\n'
                   '#include "host_filters.h"\n')
    return ffi


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    ffi = make_ffi(argv[1])
    ffi.emit_c_code(argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
