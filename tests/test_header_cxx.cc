// test_header_cxx.cc - include/switchyard.h from C++ (its extern "C"
// says C++ hosts may include it): the header and its three INIT macros
// compile as C++11 with -Wall -Wextra -pedantic -Werror, and the macros
// give what they give in C: the size set, everything else zero.
// Compiled and run by tests/meson.build (test 'header_cxx') when a C++
// compiler is installed; it links nothing of the library.
#include "switchyard.h"

#include <cstdio>

int main() {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    sy_parse_options p = SY_PARSE_OPTIONS_INIT;
    sy_request r = SY_REQUEST_INIT;
    o = SY_ROUTER_OPTIONS_INIT; // also as a value, not only an initializer
    int bad = 0;
    if (o.size != sizeof o || o.allocator || o.lenient || o.history ||
        o.on_log || o.host_runs || o.policy_store || o.policy_breakers)
        bad |= 1;
    if (p.size != sizeof p || p.lenient || p.allocator || p.registry ||
        p.host_runs || p.limits.max_routes)
        bad |= 2;
    if (r.size != sizeof r || r.content_length != -1 || r.headers ||
        r.header_count || r.now_ms || r.seed || r.principal.len)
        bad |= 4;
    if (bad)
        std::printf("INIT macros wrong from C++: %d\n", bad);
    return bad;
}
