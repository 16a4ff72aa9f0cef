/*
 * redis.c - a worker's connection to Redis for the shared rate limiter
 * (--redis HOST:PORT): hiredis's asynchronous client on the worker's libuv
 * loop, one connection per worker. Calls are pipelined: hiredis queues
 * every command of a loop iteration and writes them together when the
 * socket is writable. The limiter's script runs with EVALSHA; it is loaded
 * (SCRIPT LOAD) when the connection opens, calls made before its digest is
 * known send it whole (EVAL), and a NOSCRIPT answer (Redis restarted or
 * flushed its scripts) loads it again and repeats the call once.
 *
 * Every call is answered within --redis-timeout: when no reply came by
 * then, the caller hears "failed" (and fails open) and the late reply is
 * dropped. A connection that broke, was refused, or stalled (no reply for
 * a second while calls wait) is closed and opened again at most once a
 * second; meanwhile calls fail at once, without waiting.
 *
 * hiredis's own libuv adapter (hiredis/adapters/libuv.h, Debian 0.14)
 * ignores the error status of its poll handle, which libuv reports for a
 * refused connect or a reset socket (and then stops polling): hiredis would
 * never see the failure. The adapter here is the same few hooks with the
 * error handed to hiredis, which then reads the socket's error.
 */
#define _DEFAULT_SOURCE
#include "proxy.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#define GW_REDIS_MAX_CALLS 4096 /* calls waiting per connection */
#define GW_REDIS_RETRY_MS 1000  /* between connection attempts */
#define GW_REDIS_STALL_MS 1000  /* no reply that long: reconnect */

struct gw_rcall {
    gw_rcall *prev, *next; /* the connection's calls waiting, oldest first */
    struct gw_redis *r;
    gw_redis_cb cb; /* NULL once answered (timeout) or cancelled */
    void *data;
    uint64_t sent_ms, due_ms;
    bool retried; /* sent again after NOSCRIPT */
    int argc;     /* EVALSHA sha 2 KEY KEY ARG ARG ARG ARG */
    char *argv[9];
    size_t argvlen[9];
};

typedef struct gw_redis {
    gw_worker *w;
    redisAsyncContext *ac; /* NULL: not connected */
    bool connected;
    uint64_t opened_ms, retry_at_ms;
    uv_timer_t timer; /* the next call's deadline */
    gw_rcall *head, *tail;
    size_t calls;
    const char *script;
    char sha[48];  /* the script's digest once loaded, else "" */
    unsigned late; /* calls timed out, not logged yet */
    uint64_t late_logged_ms;
} gw_redis;

static uint64_t now_ms(void) {
    return gw_now_ns() / 1000000u;
}

/* ---- the libuv hooks for hiredis ---- */

typedef struct rpoll {
    uv_poll_t h;
    redisAsyncContext *ac; /* NULL once hiredis let go */
    int events;
} rpoll;

static void rp_on(uv_poll_t *h, int status, int events) {
    rpoll *p = h->data;
    if (!p->ac)
        return;
    if (status < 0) {
        /* libuv stopped the handle: let hiredis read the socket's error
         * (a pending connect checks it on write) */
        if (p->ac->c.flags & REDIS_CONNECTED)
            redisAsyncHandleRead(p->ac);
        else
            redisAsyncHandleWrite(p->ac);
        return;
    }
    if (events & UV_READABLE)
        redisAsyncHandleRead(p->ac);
    if (p->ac && (events & UV_WRITABLE))
        redisAsyncHandleWrite(p->ac);
}

static void rp_update(rpoll *p, int add, int del) {
    p->events = (p->events | add) & ~del;
    if (p->events)
        uv_poll_start(&p->h, p->events, rp_on);
    else
        uv_poll_stop(&p->h);
}
static void rp_add_read(void *d) {
    rp_update(d, UV_READABLE, 0);
}
static void rp_del_read(void *d) {
    rp_update(d, 0, UV_READABLE);
}
static void rp_add_write(void *d) {
    rp_update(d, UV_WRITABLE, 0);
}
static void rp_del_write(void *d) {
    rp_update(d, 0, UV_WRITABLE);
}
static void rp_closed(uv_handle_t *h) {
    free(h->data);
}
static void rp_cleanup(void *d) {
    rpoll *p = d;
    p->ac = NULL;
    uv_close((uv_handle_t *)&p->h, rp_closed);
}

static int rp_attach(redisAsyncContext *ac, uv_loop_t *loop) {
    rpoll *p = calloc(1, sizeof *p);
    if (!p || uv_poll_init(loop, &p->h, ac->c.fd)) {
        free(p);
        return -1;
    }
    p->h.data = p;
    p->ac = ac;
    ac->ev.data = p;
    ac->ev.addRead = rp_add_read;
    ac->ev.delRead = rp_del_read;
    ac->ev.addWrite = rp_add_write;
    ac->ev.delWrite = rp_del_write;
    ac->ev.cleanup = rp_cleanup;
    return 0;
}

/* ---- calls ---- */

static void call_unlink(gw_redis *r, gw_rcall *c) {
    if (c->prev)
        c->prev->next = c->next;
    else
        r->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        r->tail = c->prev;
    c->prev = c->next = NULL;
    r->calls--;
}

static void call_free(gw_rcall *c) {
    for (int i = 0; i < c->argc; i++)
        free(c->argv[i]);
    free(c);
}

/* Tell the caller (once). */
static void call_answer(gw_rcall *c, bool ok, int64_t a, int64_t b) {
    gw_redis_cb cb = c->cb;
    c->cb = NULL;
    if (cb)
        cb(c->data, ok, a, b);
}

static void arm_timer(gw_redis *r);
static void redis_drop(gw_redis *r, const char *why);

static void on_reply(redisAsyncContext *ac, void *reply, void *priv);

static int send_call(gw_redis *r, gw_rcall *c) {
    const char *argv[9];
    size_t len[9];
    int argc = c->argc;
    memcpy(len, c->argvlen, sizeof len);
    for (int i = 0; i < argc; i++)
        argv[i] = c->argv[i];
    if (r->sha[0]) {
        argv[0] = "EVALSHA";
        len[0] = 7;
        argv[1] = r->sha;
        len[1] = strlen(r->sha);
    } else {
        argv[0] = "EVAL";
        len[0] = 4;
        argv[1] = r->script;
        len[1] = strlen(r->script);
    }
    return redisAsyncCommandArgv(r->ac, on_reply, c, argc, argv, len) ==
                   REDIS_OK
               ? 0
               : -1;
}

static void on_script_loaded(redisAsyncContext *ac, void *reply, void *priv) {
    (void)priv;
    gw_redis *r = ac->data;
    redisReply *rep = reply;
    if (r && rep && rep->type == REDIS_REPLY_STRING &&
        rep->len < sizeof r->sha) {
        memcpy(r->sha, rep->str, rep->len);
        r->sha[rep->len] = 0;
    }
}

static void load_script(gw_redis *r) {
    redisAsyncCommand(r->ac, on_script_loaded, NULL, "SCRIPT LOAD %s",
                      r->script);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *priv) {
    gw_rcall *c = priv;
    gw_redis *r = c->r;
    redisReply *rep = reply;
    if (rep && rep->type == REDIS_REPLY_ERROR && !c->retried && ac->data &&
        strncmp(rep->str, "NOSCRIPT", 8) == 0) {
        /* the script is gone from Redis: load it and ask again, in order */
        c->retried = true;
        r->sha[0] = 0;
        load_script(r);
        if (send_call(r, c) == 0)
            return;
    }
    call_unlink(r, c);
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[0]->type == REDIS_REPLY_INTEGER &&
        rep->element[1]->type == REDIS_REPLY_INTEGER) {
        call_answer(c, true, rep->element[0]->integer,
                    rep->element[1]->integer);
    } else {
        if (c->cb) {
            atomic_fetch_add(&r->w->metrics.redis_errors, 1);
            if (rep && rep->type == REDIS_REPLY_ERROR)
                gw_log("redis: %s", rep->str);
        }
        call_answer(c, false, 0, 0);
    }
    call_free(c);
    arm_timer(r);
}

/* ---- the connection ---- */

/* The connection is gone (hiredis frees it): opened again a second
 * later; `why` logged and counted unless it was closed on purpose. */
static void gone(gw_redis *r, const redisAsyncContext *ac, const char *why) {
    if (why) {
        gw_log("redis: %s %s: %s", why, G.cfg.redis, ac->errstr);
        atomic_fetch_add(&r->w->metrics.redis_errors, 1);
    }
    r->ac = NULL;
    r->connected = false;
    r->sha[0] = 0;
    r->retry_at_ms = now_ms() + GW_REDIS_RETRY_MS;
}

static void on_connect(const redisAsyncContext *ac, int status) {
    gw_redis *r = ac->data;
    if (r && status != REDIS_OK)
        gone(r, ac, "cannot connect to");
    else if (r)
        r->connected = true;
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
    gw_redis *r = ac->data;
    if (r)
        gone(r, ac, status != REDIS_OK ? "lost the connection to" : NULL);
}

static bool redis_open(gw_redis *r) {
    uint64_t now = now_ms();
    if (now < r->retry_at_ms)
        return false;
    r->retry_at_ms = now + GW_REDIS_RETRY_MS;
    char host[256];
    int port;
    if (gw_parse_addr(G.cfg.redis, host, sizeof host, &port))
        return false;
    redisAsyncContext *ac = redisAsyncConnect(host, port);
    if (!ac)
        return false;
    if (ac->err || rp_attach(ac, &r->w->loop)) {
        gw_log("redis: cannot connect to %s: %s", G.cfg.redis,
               ac->err ? ac->errstr : "out of memory");
        atomic_fetch_add(&r->w->metrics.redis_errors, 1);
        redisAsyncFree(ac);
        return false;
    }
    ac->data = r;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    r->ac = ac;
    r->opened_ms = now;
    r->sha[0] = 0;
    load_script(r); /* queued: goes out once connected */
    return true;
}

/* Close the connection (hiredis answers every waiting call as failed). */
static void redis_drop(gw_redis *r, const char *why) {
    if (!r->ac)
        return;
    gw_log("redis: %s: closing the connection to %s", why, G.cfg.redis);
    atomic_fetch_add(&r->w->metrics.redis_errors, 1);
    redisAsyncContext *ac = r->ac;
    r->ac = NULL;
    r->connected = false;
    r->retry_at_ms = now_ms() + GW_REDIS_RETRY_MS;
    redisAsyncFree(ac); /* calls on_disconnect: r->ac is already NULL */
}

static void on_timer(uv_timer_t *t) {
    gw_redis *r = t->data;
    uint64_t now = now_ms();
    unsigned late = 0;
    for (gw_rcall *c = r->head; c; c = c->next)
        if (c->cb && c->due_ms <= now) {
            atomic_fetch_add(&r->w->metrics.redis_timeouts, 1);
            call_answer(c, false, 0, 0);
            late++;
        }
    r->late += late;
    if (r->late && now >= r->late_logged_ms + 1000) { /* a line a second */
        gw_log("redis: %u call(s) not answered within %llu ms: allowed",
               r->late, (unsigned long long)G.cfg.redis_timeout_ms);
        r->late = 0;
        r->late_logged_ms = now;
    }
    /* nothing came back for a while, or the connect hangs */
    if (r->ac && ((r->head && now - r->head->sent_ms >= GW_REDIS_STALL_MS) ||
                  (!r->connected && now - r->opened_ms >= GW_REDIS_STALL_MS)))
        redis_drop(r, "no reply");
    arm_timer(r);
}

/* The timer at the first deadline of a call not yet answered, or at the
 * stall check while calls wait for replies. */
static void arm_timer(gw_redis *r) {
    uint64_t now = now_ms(), due = UINT64_MAX;
    for (gw_rcall *c = r->head; c; c = c->next)
        if (c->cb) {
            due = c->due_ms;
            break;
        }
    if (r->head && r->head->sent_ms + GW_REDIS_STALL_MS < due)
        due = r->head->sent_ms + GW_REDIS_STALL_MS;
    if (r->ac && !r->connected && r->opened_ms + GW_REDIS_STALL_MS < due)
        due = r->opened_ms + GW_REDIS_STALL_MS;
    if (due == UINT64_MAX) {
        uv_timer_stop(&r->timer);
        return;
    }
    uv_timer_start(&r->timer, on_timer, due > now ? due - now : 0, 0);
}

gw_rcall *gw_redis_script(gw_worker *w, const char *const keys[2],
                          const char *const args[4], gw_redis_cb cb,
                          void *data) {
    gw_redis *r = w->redis;
    if (!r || r->calls >= GW_REDIS_MAX_CALLS)
        return NULL;
    if (!r->ac && !redis_open(r))
        return NULL;
    gw_rcall *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    const char *argv[9] = {"",      "",      "2",     keys[0], keys[1],
                           args[0], args[1], args[2], args[3]};
    c->argc = 9;
    for (int i = 0; i < 9; i++) {
        c->argvlen[i] = strlen(argv[i]);
        if (!(c->argv[i] = strdup(argv[i]))) {
            call_free(c);
            return NULL;
        }
    }
    c->r = r;
    c->cb = cb;
    c->data = data;
    c->sent_ms = now_ms();
    c->due_ms = c->sent_ms + G.cfg.redis_timeout_ms;
    if (send_call(r, c)) {
        call_free(c);
        return NULL;
    }
    c->prev = r->tail;
    if (r->tail)
        r->tail->next = c;
    else
        r->head = c;
    r->tail = c;
    r->calls++;
    arm_timer(r);
    return c;
}

void gw_redis_cancel(gw_rcall *c) {
    if (c)
        c->cb = NULL;
}

int gw_redis_init(gw_worker *w, const char *script) {
    gw_redis *r = calloc(1, sizeof *r);
    if (!r)
        return -1;
    r->w = w;
    r->script = script;
    uv_timer_init(&w->loop, &r->timer);
    r->timer.data = r;
    uv_unref((uv_handle_t *)&r->timer);
    w->redis = r;
    return 0;
}

static void on_timer_closed(uv_handle_t *h) {
    free(h->data);
}

void gw_redis_close(gw_worker *w) {
    gw_redis *r = w->redis;
    if (!r)
        return;
    w->redis = NULL;
    if (r->ac) {
        redisAsyncContext *ac = r->ac;
        r->ac = NULL;
        ac->data = NULL;
        redisAsyncFree(ac); /* waiting calls are answered as failed */
    }
    uv_close((uv_handle_t *)&r->timer, on_timer_closed);
}
