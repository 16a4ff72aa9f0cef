/* head_scan.h - the fast path for a plainly common request head (see
 * head_scan.c): what http-parser would report for it, in one pass. */
#ifndef GW_HEAD_SCAN_H
#define GW_HEAD_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>
#include <switchyard.h>

/* What http_parser_execute reports for a request head, as its callbacks
 * (url, header name/value pairs) and its struct's fields after
 * on_headers_complete (method, http_minor with http_major 1, flags,
 * content_length: ULLONG_MAX when the head has none). */
typedef struct gw_head_req {
    unsigned method;     /* enum http_method */
    unsigned http_minor; /* 0 or 1 */
    unsigned flags;      /* F_CONTENTLENGTH, F_CONNECTION_KEEP_ALIVE */
    uint64_t content_length;
    const char *url;
    size_t url_len;
    size_t nh;       /* headers written to the caller's array */
    size_t head_len; /* bytes through the blank line's LF */
} gw_head_req;

/* Scans the request head at buf[0..len). True when the whole head is
 * there, no longer than max_head bytes (nor than HTTP_MAX_HEADER_SIZE - 1,
 * see head_scan.c), with at most max_hdrs headers, of
 * the plainly common form head_scan.c lists, and the message leaves the
 * connection open (http_should_keep_alive): then *out and hdrs hold what
 * http-parser would have reported. False for anything else, *out and
 * hdrs then undefined: the caller hands the same bytes to http-parser. */
bool gw_head_scan_request(const char *buf, size_t len, size_t max_head,
                          sy_header *hdrs, size_t max_hdrs, gw_head_req *out);

/* The same for a response head: a status 200-599 but 204 and 304, a
 * Content-Length always (no body read to the connection's end), no
 * Transfer-Encoding, the connection left open. */
typedef struct gw_head_resp {
    unsigned status;
    unsigned http_minor;
    unsigned flags;
    uint64_t content_length;
    size_t nh;
    size_t head_len;
} gw_head_resp;

bool gw_head_scan_response(const char *buf, size_t len, size_t max_head,
                           sy_header *hdrs, size_t max_hdrs, gw_head_resp *out);

/* The caller's side of gw_fast_execute_response: its on_message_begin sets
 * mid, its on_message_complete sets mid to !http_should_keep_alive (where
 * http-parser stops parsing the connection); zeroed with http_parser_init. */
typedef struct gw_fast_msg {
    bool mid; /* http-parser is inside a message of its own */
    /* true only during on_headers_complete of a head scanned here: each
     * header's line is then "name:" OWS value "\r\n" as its slices show
     * (the value ends at the CR), the lines one after another */
    bool lines;
    uint64_t left; /* body bytes still to come of a message read here */
    /* when set: a scanned head's headers, all at once, in place of
     * on_header_field and on_header_value a header (non-zero: an error) */
    int (*on_headers)(http_parser *p, const sy_header *hdrs, size_t n);
} gw_fast_msg;

/* As http_parser_execute(p, s, data, len) on a response parser: the same
 * callbacks with the same arguments (f->on_headers aside), the same return and
 * the same fields (method aside) and errno, for a plainly common head
 * (gw_head_scan_response) and its body read here; everything else read by
 * http_parser_execute itself. On a callback's error the offset returned
 * may differ from http-parser's (the connection is given up then). */
size_t gw_fast_execute_response(http_parser *p, const http_parser_settings *s,
                                gw_fast_msg *f, const char *data, size_t len);

/* http-parser's head (the fast scan's never has this): each value's
 * trailing spaces and tabs cut off, as the leading ones are (RFC 9110
 * 5.5). Kept before, a valid "traceparent: ... " started a new trace. */
void gw_head_trim_values(sy_header *hdrs, size_t n);

#endif
