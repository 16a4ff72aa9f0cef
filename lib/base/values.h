/*
 * values.h - parsers for the typed argument values of predicates and
 * filters (integers, booleans, durations, sizes, date-times, CIDRs, HTTP
 * statuses, methods). Used both to validate documents and to compile them.
 * Each returns true on success; on failure it writes a short reason
 * ("expected a duration such as 10ms") to *why when why is non-NULL.
 */
#ifndef SY_VALUES_H
#define SY_VALUES_H

#include "base/util.h"

bool sy__value_int64(const char *s, int64_t min, int64_t max, int64_t *out,
                     const char **why);
bool sy__value_bool(const char *s, bool *out, const char **why);
/* Milliseconds. Units: ns (rounded down), us, ms, s, m, h, d; bare number =
 * milliseconds; ISO-8601 PT..S also accepted. */
bool sy__value_duration_ms(const char *s, int64_t *out, const char **why);
/* Bytes. Units B, KB, MB, GB, TB (1024-based, as Spring's DataSize); bare
 * number = bytes. */
bool sy__value_size(const char *s, int64_t *out, const char **why);
/* Epoch milliseconds from ISO-8601 with offset (optionally followed by
 * [Zone/Id], ignored) or 'Z', or from a bare integer of epoch millis. */
bool sy__value_datetime_ms(const char *s, int64_t *out, const char **why);

typedef struct sy__cidr {
    uint8_t family; /* 4 or 6 */
    uint8_t prefix; /* bits */
    uint8_t addr[16];
} sy__cidr;
/* "10.0.0.0/8", "192.168.1.1" (/32), "::1" (/128), "2001:db8::/32". */
bool sy__value_cidr(const char *s, sy__cidr *out, const char **why);
/* Parse a textual IP (no prefix) from a slice; family 0 on failure. */
bool sy__value_ip(sy_str s, sy__cidr *out);
bool sy__cidr_contains(const sy__cidr *net, const sy__cidr *ip);

/* 100..599, or a Spring HttpStatus name (NOT_FOUND, FOUND, ...) in any
 * case, as SCG's status parser upper-cases it (SetStatus, RedirectTo,
 * CircuitBreaker's statusCodes). */
bool sy__value_status(const char *s, int *out, const char **why);
/* The same, a name read as Spring Boot's lenient enum conversion binds an
 * HttpStatus field (Retry's statuses): "bad-gateway", "BadGateway". */
bool sy__value_status_enum(const char *s, int *out, const char **why);
/* An RFC 7230 token (header names, methods): non-empty tchars only. */
bool sy__value_token(const char *s, const char **why);
/* A method token; *upper receives the upper-cased copy (caller's buffer of
 * at least strlen(s)+1 bytes). */
bool sy__value_method(const char *s, char *upper, const char **why);
/* An instance's host, the name or address a host connects to: a DNS name
 * or IPv4 address (letters, digits, '-', '.', '_'; at most 253 bytes), or
 * an IPv6 address (inet_pton's form, no %zone), bare or alone in brackets
 * ("[::1]", which the service stores as "::1"). A port, a scheme, a path
 * or spaces are refused: the gateway and nginx would fail every
 * connection to it. */
bool sy__value_host(const char *s, const char **why);
/* The path of a forward: uri or fallbackUri (after "forward:"), which the
 * host dispatches again with the request's own query and sends upstream
 * as written: "/" first (not "//"), no query or fragment, only bytes a
 * request target's path carries (RFC 3986 pchar, %XX escapes); `vars`:
 * {NAME}s too (a fallbackUri's, expanded and encoded by the host). */
bool sy__value_forward_path(const char *s, bool vars, const char **why);

#endif
