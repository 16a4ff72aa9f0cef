/*
 * access_log.c - what the gateway remembers of each request it served:
 * the access log (--access-log FILE, or - for stdout: one JSON line per
 * request, written whole in one call, so worker threads never interleave;
 * reopened on SIGUSR1, lines it cannot take counted) and a bounded ring
 * of the last GW_RECENT_MAX requests taken (method, host, path, query,
 * headers) that the admin dry run replays through a changed document
 * (admin_ops.c).
 *
 *   {"time":"2026-01-02T03:04:05.678Z","method":"GET","path":"/a",
 *    "query":"x=1","host":"h","remote_addr":"127.0.0.1","status":200,
 *    "route":"r","source":"s","upstream":"lb://svc","forwarded_to":null,
 *    "instance":"svc-1",
 *    "version":"2","bytes_in":0,"bytes":312,"cut":false,
 *    "duration_ms":1.234,
 *    "upstream_ms":0.9,"retries":0,"rate_limited":false,"fallback":false,
 *    "breaker":null,
 *    "trace_id":"4bf9...","span_id":"00f0...","parent_id":"b7ad..."}
 */
#define _DEFAULT_SOURCE
#include "proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static FILE *log_file;
static bool log_own;
static const char *log_path; /* argv's, for a reopen */

int gw_access_log_open(const char *path) {
    if (!path)
        return 0;
    if (strcmp(path, "-") == 0) {
        log_file = stdout;
    } else {
        log_path = path;
        log_file = fopen(path, "a");
        if (!log_file) { /* named: perror("") said only the errno's text */
            fprintf(stderr,
                    "mini-gateway: --access-log '%s': %s; the gateway does "
                    "not start\n",
                    path, strerror(errno));
            return -1;
        }
        log_own = true;
    }
    setvbuf(log_file, NULL, _IOLBF, 1u << 16); /* a line is one write */
    return 0;
}

/* SIGUSR1 (main.c): the file opened again by its name, after a rotation
 * renamed it, under the stream's lock (a worker's line goes to the old
 * file or the new, whole); its descriptor replaced in place, so the
 * workers' stream stays the same. A failure keeps the old file. Before,
 * SIGUSR1 ended the gateway at once (its default action). */
int gw_access_log_reopen(char *msg, size_t cap) {
    if (!log_own) {
        snprintf(msg, cap, "no access log file to reopen%s",
                 log_file ? " (it is standard output)" : "");
        return -1;
    }
    int fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        snprintf(msg, cap,
                 "--access-log '%s': %s; still writing to the "
                 "file it had open",
                 log_path, strerror(errno));
        return -1;
    }
    flockfile(log_file);
    fflush(log_file);
    int rc = dup2(fd, fileno(log_file));
    funlockfile(log_file);
    int err = errno;
    close(fd);
    if (rc < 0) {
        snprintf(msg, cap,
                 "--access-log '%s': %s; still writing to the "
                 "file it had open",
                 log_path, strerror(err));
        return -1;
    }
    snprintf(msg, cap, "--access-log '%s' reopened", log_path);
    return 0;
}

/* Lines the log could not take (a write error: a full disk, a closed
 * pipe; or no memory for the line): counted for /metrics, the first
 * logged. They were dropped and nothing said. */
static atomic_ullong log_lost;

uint64_t gw_access_log_lost(void) {
    return atomic_load_explicit(&log_lost, memory_order_relaxed);
}

static void log_write(const gw_buf *b) {
    int err = ENOMEM;
    if (!b->failed) {
        flockfile(log_file);
        size_t w = fwrite_unlocked(b->p, 1, b->len, log_file);
        bool bad = w != b->len || ferror_unlocked(log_file);
        err = errno;
        if (bad)
            clearerr_unlocked(log_file);
        funlockfile(log_file);
        if (!bad)
            return;
    }
    if (atomic_fetch_add_explicit(&log_lost, 1, memory_order_relaxed) == 0)
        gw_log("access log: a line could not be written (%s): lines are "
               "lost, counted in gateway_access_log_lost_total",
               strerror(err));
}

void gw_access_log_close(void) {
    if (log_own && log_file)
        fclose(log_file);
    log_file = NULL;
    log_own = false;
}

/* ---- the ring of recent requests ---- */

/* A ring slot holds its request packed from the slot's start: the five
 * strings, then each header as its two lengths, name and value. A request
 * writes one or two cache lines of its slot where a gw_recent's fields,
 * each at its own offset in ~3 KB, took ~8 scattered lines: with 256 slots
 * those lines are cold when their turn comes, and their misses cost ~5 %
 * of a proxied request's CPU. gw_recent_copy unpacks a slot into the
 * gw_recent the admin's dry run reads; every string is cut where put()
 * cut it before (its gw_recent field's size less its NUL), so the copy is
 * the same. */
enum { F_METHOD, F_HOST, F_PATH, F_QUERY, F_REMOTE, F_N };
#define HDR_DATA (sizeof((gw_recent *)0)->hbuf)
#define SLOT_DATA                                                              \
    (sizeof((gw_recent *)0)->method + sizeof((gw_recent *)0)->host +           \
     sizeof((gw_recent *)0)->path + sizeof((gw_recent *)0)->query +            \
     sizeof((gw_recent *)0)->remote + HDR_DATA + 4 * GW_RECENT_HEADERS)
/* No lock over the ring: a request claims the next request number with
 * one atomic add (its slot is that number modulo GW_RECENT_MAX) and
 * writes its slot under the slot's own flag; the admin's copy takes all
 * the flags. A slot says which request it holds (no: its number + 1, 0
 * never written), so the copy orders them. ~80 instructions a request
 * less than one mutex over the ring (its lock, unlock and once). */
typedef struct slot {
    _Alignas(64) atomic_uint busy;
    uint16_t len[F_N], nh, nh_all; /* headers kept, headers the request had */
    uint64_t no;
    char data[SLOT_DATA];
} slot;

static slot ring[GW_RECENT_MAX];
static _Atomic uint64_t ring_claimed; /* requests remembered so far */

static void slot_take(slot *e) {
    for (unsigned spins = 0;
         atomic_exchange_explicit(&e->busy, 1, memory_order_acquire);)
        if (++spins % 64 == 0)
            sched_yield(); /* its holder was switched out */
}

static void slot_drop(slot *e) {
    atomic_store_explicit(&e->busy, 0, memory_order_release);
}

/* s at data + *o, cut to cap - 1 bytes (the gw_recent field's room);
 * its length kept as cap when it was cut (a byte past the room), so a
 * string exactly as long as the room reads whole (unpack). */
static void put(slot *e, size_t *o, int f, sy_str s, size_t cap) {
    size_t n = s.len < cap - 1 ? s.len : cap - 1;
    if (n)
        memcpy(e->data + *o, s.ptr, n);
    e->len[f] = (uint16_t)(s.len < cap ? s.len : cap);
    *o += n;
}

static void remember(const gw_request *q) {
    const sy_request *r = q->forwards ? &q->client_req : &q->sreq;
    const gw_recent *k = NULL; /* for the fields' sizes only */
    uint64_t no =
        atomic_fetch_add_explicit(&ring_claimed, 1, memory_order_relaxed);
    slot *e = &ring[no % GW_RECENT_MAX];
    slot_take(e);
    if (e->no > no) { /* lapped: a later request has written the slot */
        slot_drop(e);
        return;
    }
    e->no = no + 1;
    size_t o = 0;
    put(e, &o, F_METHOD, r->method, sizeof k->method);
    put(e, &o, F_HOST, r->host, sizeof k->host);
    put(e, &o, F_PATH, r->path, sizeof k->path);
    put(e, &o, F_QUERY, r->query, sizeof k->query);
    put(e, &o, F_REMOTE, r->remote_addr, sizeof k->remote);
    size_t hb = 0; /* the headers' bytes as gw_recent's hbuf counts them */
    e->nh = 0;
    e->nh_all = (uint16_t)r->header_count; /* at most GW_MAX_HEADERS */
    for (size_t i = 0; i < r->header_count && e->nh < GW_RECENT_HEADERS; i++) {
        sy_header h = r->headers[i];
        if (hb + h.name.len + h.value.len + 2 > HDR_DATA)
            break;
        uint16_t nl = (uint16_t)h.name.len, vl = (uint16_t)h.value.len;
        memcpy(e->data + o, &nl, 2);
        memcpy(e->data + o + 2, &vl, 2);
        o += 4;
        if (nl)
            memcpy(e->data + o, h.name.ptr, nl);
        o += nl;
        if (vl)
            memcpy(e->data + o, h.value.ptr, vl);
        o += vl;
        hb += (size_t)nl + vl;
        e->nh++;
    }
    slot_drop(e);
}

/* A slot as the gw_recent it stands for. */
static void unpack(const slot *e, gw_recent *d) {
    char *dst[F_N] = {d->method, d->host, d->path, d->query, d->remote};
    const size_t room[F_N] = {sizeof d->method, sizeof d->host, sizeof d->path,
                              sizeof d->query, sizeof d->remote};
    size_t o = 0;
    /* cut: headers left out, or a string longer than its room (put() kept
     * its length as the room's size; one exactly as long as the room is
     * whole: it was counted cut before). A flag set as each field is
     * written cost ~30 instructions a request; this costs none there. */
    d->cut = e->nh < e->nh_all;
    for (int f = 0; f < F_N; f++) {
        size_t n = e->len[f] < room[f] ? e->len[f] : room[f] - 1;
        d->cut |= e->len[f] == room[f];
        memcpy(dst[f], e->data + o, n);
        dst[f][n] = '\0';
        o += n;
    }
    size_t hb = 0;
    d->nh = e->nh;
    for (size_t i = 0; i < e->nh; i++) {
        uint16_t nl, vl;
        memcpy(&nl, e->data + o, 2);
        memcpy(&vl, e->data + o + 2, 2);
        o += 4;
        d->hname[i] = (uint16_t)hb;
        d->hname_len[i] = nl;
        memcpy(d->hbuf + hb, e->data + o, (size_t)nl + vl);
        d->hval[i] = (uint16_t)(hb + nl);
        d->hval_len[i] = vl;
        hb += (size_t)nl + vl;
        o += (size_t)nl + vl;
    }
}

static int by_no(const void *a, const void *b) {
    uint64_t x = ring[*(const uint16_t *)a].no,
             y = ring[*(const uint16_t *)b].no;
    return (x > y) - (x < y);
}

size_t gw_recent_copy(gw_recent *out, size_t max) {
    /* Every slot's flag held (a request holds one at a time: no
     * deadlock), the ring is one moment's, as under the one mutex: each
     * slot holds its last request written (a request that has claimed a
     * slot but not yet written it comes after this copy). */
    uint16_t order[GW_RECENT_MAX];
    size_t held = 0;
    for (size_t i = 0; i < GW_RECENT_MAX; i++) {
        slot_take(&ring[i]);
        if (ring[i].no)
            order[held++] = (uint16_t)i;
    }
    qsort(order, held, sizeof *order, by_no);
    size_t n = held < max ? held : max;
    for (size_t i = 0; i < n; i++) /* the last n, oldest first */
        unpack(&ring[order[held - n + i]], &out[i]);
    for (size_t i = 0; i < GW_RECENT_MAX; i++)
        slot_drop(&ring[i]);
    return n;
}

void gw_recent_request(const gw_recent *e, sy_header *hs, sy_request *r) {
    *r = (sy_request)SY_REQUEST_INIT;
    r->method = (sy_str){e->method, strlen(e->method)};
    r->scheme = (sy_str){"http", 4};
    r->host = (sy_str){e->host, strlen(e->host)};
    r->path = (sy_str){e->path, strlen(e->path)};
    r->query = (sy_str){e->query, strlen(e->query)};
    r->remote_addr = (sy_str){e->remote, strlen(e->remote)};
    for (size_t i = 0; i < e->nh; i++)
        hs[i] = (sy_header){{e->hbuf + e->hname[i], e->hname_len[i]},
                            {e->hbuf + e->hval[i], e->hval_len[i]}};
    r->headers = hs;
    r->header_count = e->nh;
}

/* ---- the access log ---- */

/* ,"name": and s as a JSON string, or null: the key's text is a literal,
 * appended whole (no printf a field) */
#define str_field(b, name, s, n)                                               \
    field((b), ",\"" name "\":", sizeof(",\"" name "\":") - 1, (s), (n))
static void field(gw_buf *b, const char *key, size_t kl, const char *s,
                  size_t n) {
    gw_buf_add(b, key, kl);
    if (s)
        gw_buf_json_utf8(b, s, n);
    else
        gw_buf_add(b, "null", 4);
}

/* ns as milliseconds with three decimals, as printf's "%.3f" of ns / 1e6
 * writes them: below 2^50 ns (13 days) the double is within 1e-9 ms of
 * the true value, which is at least 1e-6 ms from a rounding boundary
 * unless it lies on one (ns ending in 500: printf then rounds the
 * double's binary value, so printf writes that case, and longer ones) */
static void add_ms(gw_buf *b, uint64_t ns) {
    if (ns % 1000 == 500 || ns >= (1ull << 50)) {
        gw_buf_printf(b, "%.3f", (double)ns / 1e6);
        return;
    }
    uint64_t us = (ns + 500) / 1000;
    char d[24];
    size_t n = gw_u64_text(d, us / 1000);
    d[n] = '.';
    d[n + 1] = (char)('0' + us / 100 % 10);
    d[n + 2] = (char)('0' + us / 10 % 10);
    d[n + 3] = (char)('0' + us % 10);
    gw_buf_add(b, d, n + 4);
}

/* The state of the route's circuit breaker (policy.c) now, or NULL: the
 * client's route's (whose breaker sent it to a fallback), else the
 * route that answered. */
static const char *breaker_state(const gw_request *q) {
    static const char *const names[] = {"closed", "open", "half_open"};
    const gw_route_data *rd =
        q->forwards && q->client_rd && q->client_rd->breaker ? q->client_rd
                                                             : q->rd;
    if (!rd || !rd->breaker)
        return NULL;
    sy_breaker_info bi;
    if (sy_policy_store_breaker(sy_router_policy_store(G.router), rd->breaker,
                                &bi, NULL))
        return "closed"; /* no call recorded yet */
    return (unsigned)bi.state < 3 ? names[bi.state] : NULL;
}

/* Now as 2026-01-02T03:04:05.678Z, its length. The text up to the
 * seconds is made once a second a thread (gmtime_r and strftime cost
 * ~1,000 instructions), the milliseconds each time. */
static size_t time_stamp(char *when, size_t cap) {
    static _Thread_local time_t secs_done;
    static _Thread_local char secs_text[32];
    static _Thread_local size_t secs_len;
    int64_t ms = gw_wall_ms();
    time_t secs = (time_t)(ms / 1000);
    int msec = (int)(ms % 1000);
    if (ms < 0) { /* before 1970: as it always was */
        struct tm tm;
        gmtime_r(&secs, &tm);
        size_t wl = strftime(when, cap, "%Y-%m-%dT%H:%M:%S", &tm);
        return wl + (size_t)snprintf(when + wl, cap - wl, ".%03dZ", msec);
    }
    if (!secs_len || secs != secs_done) {
        struct tm tm;
        gmtime_r(&secs, &tm);
        secs_len =
            strftime(secs_text, sizeof secs_text, "%Y-%m-%dT%H:%M:%S", &tm);
        secs_done = secs;
    }
    memcpy(when, secs_text, secs_len);
    char *p = when + secs_len;
    p[0] = '.';
    p[1] = (char)('0' + msec / 100);
    p[2] = (char)('0' + msec / 10 % 10);
    p[3] = (char)('0' + msec % 10);
    p[4] = 'Z';
    p[5] = '\0';
    return secs_len + 5;
}

void gw_access_log_refused(const char *peer, int status, uint64_t bytes) {
    if (!log_file)
        return;
    char when[40];
    time_stamp(when, sizeof when);
    gw_buf b = {0};
    gw_buf_printf(&b,
                  "{\"time\":\"%s\",\"method\":null,\"path\":null,"
                  "\"query\":null,\"host\":null",
                  when);
    str_field(&b, "remote_addr", peer, strlen(peer));
    gw_buf_printf(
        &b,
        ",\"status\":%d,\"route\":null,\"source\":null,"
        "\"upstream\":null,\"forwarded_to\":null,\"instance\":null,"
        "\"version\":null,"
        "\"bytes_in\":0,\"bytes\":%llu,\"cut\":false,\"duration_ms\":0.000,"
        "\"upstream_ms\":null,\"retries\":0,\"rate_limited\":false,"
        "\"fallback\":false,\"breaker\":null,\"trace_id\":null,"
        "\"span_id\":null,\"parent_id\":null}\n",
        status, (unsigned long long)bytes);
    log_write(&b);
    gw_buf_free(&b);
}

void gw_recent_remember(gw_request *q) {
    if (G.cfg.admin_port > 0) /* else no dry run can read the ring */
        remember(q);
    q->remembered = true;
}

void gw_access_log(gw_request *q) {
    if (!q->remembered)
        gw_recent_remember(q);
    if (!log_file)
        return;
    uint64_t now = gw_loop_ns(q->w);
    char when[48];
    size_t wl = time_stamp(when, sizeof when);

    /* the client's request and route; after a forward (a forward: route,
     * a fallback) the route that answered is forwarded_to */
    const sy_request *r = q->forwards ? &q->client_req : &q->sreq;
    const char *first = q->forwards ? q->client_route_id : q->route_id;
    const char *route = first && first[0] ? first : NULL;
    const char *to =
        q->forwards && q->route_id && q->route_id[0] ? q->route_id : NULL;
    const char *source = NULL, *upstream = NULL;
    if (route && q->snap) {
        const sy_route *rt = sy_snapshot_find_route(q->snap, route, &source);
        upstream = rt ? sy_route_uri(rt) : NULL;
    }
    const char *version = q->instance[0] ? q->health.version : NULL;
    gw_buf b = {0};
    gw_buf_reserve(&b, 640); /* most lines: one allocation */
    gw_buf_adds(&b, "{\"time\":\"");
    gw_buf_add(&b, when, wl);
    gw_buf_adds(&b, "\"");
    str_field(&b, "method", r->method.ptr, r->method.len);
    str_field(&b, "path", r->path.ptr, r->path.len);
    str_field(&b, "query", r->query.ptr, r->query.len);
    str_field(&b, "host", r->host.ptr, r->host.len);
    str_field(&b, "remote_addr", q->c->peer, q->c->peer_len);
    if (q->status >= 0) {
        gw_buf_adds(&b, ",\"status\":");
        gw_buf_addu(&b, (uint64_t)q->status);
    } else {
        gw_buf_printf(&b, ",\"status\":%d", q->status);
    }
    str_field(&b, "route", route, route ? strlen(route) : 0);
    str_field(&b, "source", source, source ? strlen(source) : 0);
    str_field(&b, "upstream", upstream, upstream ? strlen(upstream) : 0);
    str_field(&b, "forwarded_to", to, to ? strlen(to) : 0);
    str_field(&b, "instance", q->instance[0] ? q->instance : NULL,
              strlen(q->instance));
    str_field(&b, "version", version, version ? strlen(version) : 0);
    gw_buf_adds(&b, ",\"bytes_in\":");
    gw_buf_addu(&b, q->body_bytes);
    gw_buf_adds(&b, ",\"bytes\":");
    gw_buf_addu(&b, q->bytes_out);
    gw_buf_adds(&b, q->cut ? ",\"cut\":true" : ",\"cut\":false");
    gw_buf_adds(&b, ",\"duration_ms\":");
    add_ms(&b, now - q->t_start_ns);
    if (q->t_sent_ns) {
        gw_buf_adds(&b, ",\"upstream_ms\":");
        add_ms(&b, now - q->t_sent_ns);
    } else {
        gw_buf_adds(&b, ",\"upstream_ms\":null");
    }
    int retries = q->attempts > 1 ? q->attempts - 1 : 0;
    if ((int)q->retries_done > retries)
        retries = (int)q->retries_done; /* a Retry filter's */
    gw_buf_adds(&b, ",\"retries\":");
    gw_buf_addu(&b, (uint64_t)retries);
    if (q->rate_limited)
        gw_buf_adds(&b, ",\"rate_limited\":true");
    else
        gw_buf_adds(&b, ",\"rate_limited\":false");
    if (q->fb_kind)
        gw_buf_adds(&b, ",\"fallback\":true");
    else
        gw_buf_adds(&b, ",\"fallback\":false");
    const char *breaker = breaker_state(q);
    str_field(&b, "breaker", breaker, breaker ? strlen(breaker) : 0);
    str_field(&b, "trace_id", q->trace.trace_id, strlen(q->trace.trace_id));
    str_field(&b, "span_id", q->trace.span_id, strlen(q->trace.span_id));
    str_field(&b, "parent_id",
              q->trace.parent_id[0] ? q->trace.parent_id : NULL,
              strlen(q->trace.parent_id));
    gw_buf_adds(&b, "}\n");
    log_write(&b);
    gw_buf_free(&b);
}
