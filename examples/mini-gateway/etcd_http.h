/*
 * etcd_http.h - the etcd source's HTTP/1.1 client: one request per
 * connection on a libuv loop, responses parsed by http-parser, a body
 * delivered whole or (a watch stream) line by line. Also the growable
 * buffer the etcd files share and the wall clock of the trace.
 *
 * An exchange goes through three steps, each one function in etcd_http.c:
 *   connect   resolve the endpoint, open TCP, then the transport's
 *             `start` (nothing for plain HTTP; a TLS handshake later)
 *   request   the request bytes through the transport's `send`
 *   response  bytes from the socket through the transport's `receive`
 *             into the parser
 * A transport (etcd_http_transport) is the seam for TLS: it sits between
 * the socket and the HTTP bytes. NULL is plain TCP.
 *
 * Threads: everything on the loop's thread.
 */
#ifndef GW_ETCD_HTTP_H
#define GW_ETCD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

/* A growable byte buffer, NUL-terminated; etcd_buf_add returns false when
 * memory runs out (the buffer is then unchanged). */
typedef struct etcd_buf {
    char *p;
    size_t len, cap;
} etcd_buf;

bool etcd_buf_add(etcd_buf *b, const char *p, size_t n);
void etcd_buf_free(etcd_buf *b);

/* The wall clock (CLOCK_REALTIME) in microseconds: the trace's stamps,
 * comparable across processes (gw_etcd_trace). Durations use the
 * gateway's one monotonic clock, uv_hrtime. */
int64_t etcd_wall_us(void);

/* One etcd endpoint of --etcd. */
typedef struct etcd_endpoint {
    char scheme[8]; /* "http" */
    char host[256];
    char port[8];
} etcd_endpoint;

typedef struct etcd_http etcd_http;

/* What sits between the socket and the HTTP bytes (the seam for TLS).
 * Each hook returns 0 or a negative libuv error. */
typedef struct etcd_http_transport {
    /* TCP is connected: set up the session; call etcd_http_ready(h) once
     * it can carry the request (at once for plain TCP). */
    int (*start)(etcd_http *h, void *state);
    /* Send request bytes (the transport writes what it makes of them
     * with etcd_http_write). */
    int (*send)(etcd_http *h, void *state, const char *p, size_t n);
    /* Bytes came from the socket: hand the plain ones on with
     * etcd_http_deliver. */
    int (*receive)(etcd_http *h, void *state, const char *p, size_t n);
    void (*close)(void *state); /* the exchange is over */
    void *state;
} etcd_http_transport;

/* One line of a streamed body; the line may be changed in place (it is
 * the exchange's buffer, discarded once the callback returns). */
typedef void (*etcd_http_line_fn)(void *data, char *line, size_t n);
/* Exactly once per exchange unless the owner closed it first: status and
 * body of a complete response, or err on failure. */
typedef void (*etcd_http_done_fn)(void *data, int status, const char *body,
                                  size_t n, const char *err);

typedef struct etcd_http_request {
    uv_loop_t *loop;
    const etcd_endpoint *ep;
    const char *path;    /* "/v3/watch" */
    const char *body;    /* JSON */
    const char *headers; /* extra "Name: value\r\n" lines, or NULL */
    uint32_t timeout_ms; /* of silence: connecting, then between reads
                            until the answer is complete (a stream's: until
                            its head) */
    bool streaming;      /* the body goes to on_line, line by line */
    etcd_http_line_fn on_line;
    etcd_http_done_fn on_done;
    void *data;                           /* for the callbacks */
    const etcd_http_transport *transport; /* NULL: plain TCP */
} etcd_http_request;

/* POST the request; NULL when it cannot start (out of memory, bad
 * endpoint). The request's strings are copied. */
etcd_http *etcd_http_post(const etcd_http_request *req);
/* The owner is done: no more callbacks; freed once libuv lets go. NULL is
 * fine. */
void etcd_http_close(etcd_http *h);

/* The stamps of the line being delivered (inside on_line): the wall clock
 * of the read that brought its first byte and of the current read, and
 * how many reads brought it. */
void etcd_http_line_stamps(const etcd_http *h, int64_t *first_us,
                           int64_t *last_us, uint32_t *reads);

/* For transports: write bytes to the socket; the session is ready;
 * plain bytes received. */
int etcd_http_write(etcd_http *h, const char *p, size_t n);
void etcd_http_ready(etcd_http *h);
void etcd_http_deliver(etcd_http *h, const char *p, size_t n);

#endif /* GW_ETCD_HTTP_H */
