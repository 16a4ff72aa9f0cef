/*
 * redis.c - a worker's connection to Redis for the shared rate limiter
 * (--redis HOST:PORT or unix:PATH): hiredis's asynchronous client on the
 * worker's libuv loop, one connection per worker.
 *
 * Calls are batched and pipelined. A call is kept until the loop is about
 * to wait for events (a uv_prepare handle); then the calls of that loop
 * iteration on one bucket (same keys and arguments) go as ONE script call,
 * in the order they were made, and the commands of the iteration are
 * written together, at once:
 *
 *   iteration: req A (bucket X), req B (X), req C (Y), req D (X)
 *   sent:      EVALSHA batch 2 X.tokens X.timestamp rate cap "" req 3
 *              EVALSHA scg   2 Y.tokens Y.timestamp rate cap "" req
 *   replies:   {3, leftD}                              {okC, leftC}
 *
 * (the batch's reply: how many of its draws were allowed, the first ones,
 * and the tokens left after the last; each caller hears the reply and its
 * place in the batch, and the library gives it its own allowed/remaining.)
 *
 * While script commands are in flight on a connection that is up, the
 * calls made meanwhile are kept (the prepare handle sends nothing) until
 * the last reply came: they then go as the next write, in bigger batches.
 * A script call costs Redis ~77,000 instructions whatever it carries (the
 * five redis.call of the bucket, KEYS and ARGV tables, the reply), a draw
 * in a batch ~300: under load this halves Redis's work a request, for a
 * wait of at most the replies in flight. The order of the draws on a
 * bucket is kept; a kept call still fails open at its own deadline.
 *
 * A call alone on its bucket runs the library's script (SCG's token
 * bucket, sy_ratelimit_redis_script); N calls on one bucket run the
 * library's batch script (sy_ratelimit_redis_batch_script): the same draws
 * one after the other, at one reading of
 * Redis's clock, so the bucket is left as N runs of SCG's script in that
 * second leave it, and each request gets its own allowed/remaining. Redis
 * runs a script atomically: SCG instances and other gateways drawing from
 * the same keys see the bucket before or after the whole batch.
 *
 * Both scripts run with EVALSHA; they are loaded (SCRIPT LOAD) when the
 * connection opens, calls made before a digest is known send the script
 * whole (EVAL), and a NOSCRIPT answer (Redis restarted or flushed its
 * scripts) loads them again and repeats the call once.
 *
 * Every call is answered within --redis-timeout: when no reply came by
 * then, the caller hears "failed" (and fails open) and the late reply is
 * dropped. A connection that broke, was refused, or stalled (no reply for
 * a second while commands are in flight) is closed and opened again at most
 * once a second; meanwhile calls fail at once, without waiting.
 *
 * With --redis-password-file, every connection's first command is AUTH
 * (AUTH user password with --redis-user, a Redis 6 ACL user), queued
 * before the scripts' SCRIPT LOAD: Redis answers in order, so no script
 * call runs unauthenticated. A refused AUTH (WRONGPASS, or an error
 * naming no password configured) or a NOAUTH answer (Redis wants a
 * password and none was given) closes the connection: the calls fail
 * open, as SCG's limiter does while Redis is unusable, and the
 * connection is opened (and AUTH sent) again a second later. A refusal
 * is counted (gateway_rate_limit_redis_auth_failures_total and
 * _errors_total), shown in /status ("redis") and logged with Redis's
 * reason: a worker's first, a new reason at once, the same one again at
 * most once a minute (a line a second per worker told nothing new). The
 * password is never logged nor shown.
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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GW_REDIS_MAX_CALLS 4096 /* calls waiting per connection */
#define GW_REDIS_MAX_BATCH 512  /* calls one command carries at most */
#define GW_REDIS_RETRY_MS 1000  /* between connection attempts */
#define GW_REDIS_STALL_MS 1000  /* no reply that long: reconnect */
#define GW_RCALL_SMALL 256      /* buf bytes of a call block kept for reuse */
#define GW_RCALL_KEEP 256       /* call blocks kept per connection */
#define GW_REDIS_AUTH_LOG_MS 60000 /* the same AUTH refusal logged again */
/* (and the same connection failure: a Redis down is tried once a second
 * a worker, logged at its first failure, then once a minute with the
 * count, and when a connection is made again) */

/* One request's call: KEYS[1], KEYS[2], ARGV[1..4], copied into buf. */
struct gw_rcall {
    gw_rcall *prev, *next; /* the connection's calls, oldest first */
    gw_rcall *pnext;       /* not sent yet: the next such call */
    gw_rcall *bnext;       /* in a flush: the next call of its batch */
    gw_rcall *blast;       /* in a flush, a batch's first call: its last */
    size_t bn;             /* in a flush, a batch's first call: its size */
    struct gw_redis *r;
    gw_redis_cb cb; /* NULL once answered (timeout) or cancelled */
    void *data;
    uint64_t sent_ms, due_ms;
    uint32_t hash; /* of buf */
    bool small;    /* buf has GW_RCALL_SMALL bytes: kept for reuse */
    uint16_t len[6];
    size_t blen;
    char buf[]; /* the six strings, each NUL-ended */
};

/* One command: the library's script for one call, the batch script for
 * several calls on one bucket. */
typedef struct gw_rcmd {
    struct gw_redis *r;
    bool retried; /* sent again after NOSCRIPT */
    size_t n;
    gw_rcall *calls[];
} gw_rcmd;

typedef struct gw_script {
    const char *text;
    char sha[48]; /* the script's digest once loaded, else "" */
} gw_script;

typedef struct gw_redis {
    gw_worker *w;
    redisAsyncContext *ac; /* NULL: not connected */
    bool connected;
    uint64_t opened_ms, retry_at_ms;
    uv_timer_t timer;     /* the next call's deadline */
    uint64_t timer_due;   /* when it fires; UINT64_MAX: stopped */
    uv_prepare_t prepare; /* sends the calls of a loop iteration */
    int handles;          /* open; r is freed when the last one closed */
    gw_rcall *head, *tail;
    gw_rcall *phead, *ptail; /* not sent yet, in order */
    size_t calls;
    unsigned inflight;    /* script commands sent, not answered yet */
    uint64_t reply_ms;    /* the last reply, or the send that began a wait */
    gw_script scripts[2]; /* the library's, the batch one */
    gw_rcall **tab;       /* a flush's batches by bucket */
    size_t tabcap;
    gw_buf cmd;      /* a command being formatted (send_cmd) */
    gw_rcall *spare; /* call blocks of GW_RCALL_SMALL kept for reuse */
    unsigned nspare;
    unsigned late; /* calls timed out, not logged yet */
    uint64_t late_logged_ms;
    char auth_logged[128];   /* the last AUTH refusal logged */
    uint64_t auth_logged_ms; /* when */
    unsigned auth_unlogged;  /* refusals since, not logged */
    char down_logged[192];   /* the last connection failure logged */
    uint64_t down_logged_ms; /* when */
    unsigned down_unlogged;  /* failures since, not logged */
    unsigned down;           /* failures since the last connection */
} gw_redis;

/* What the workers' connections last heard of AUTH, for /status. */
enum { AUTH_NONE, AUTH_PENDING, AUTH_OK, AUTH_REFUSED };
static pthread_mutex_t auth_mu = PTHREAD_MUTEX_INITIALIZER;
static int auth_state = AUTH_PENDING;
static char auth_error[160]; /* Redis's reason, the last refusal */

static uint64_t now_ms(void) {
    return gw_now_ns() / 1000000u;
}

/* ---- the libuv hooks for hiredis ---- */

typedef struct rpoll {
    uv_poll_t h;
    redisAsyncContext *ac; /* NULL once hiredis let go */
    int events;            /* what hiredis wants */
    int polled;            /* what the handle polls */
    bool defer;            /* a flush: events given to the handle after */
} rpoll;

static void rp_on(uv_poll_t *h, int status, int events) {
    rpoll *p = h->data;
    if (!p->ac)
        return;
    if (status < 0) {
        /* libuv stopped the handle: let hiredis read the socket's error
         * (a pending connect checks it on write) */
        p->polled = 0;
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

/* Only a change goes to libuv: each uv_poll_start takes the socket out of
 * epoll and puts it back (two system calls), and hiredis asks for reading
 * again after every read and write. */
static void rp_sync(rpoll *p) {
    if (!p->ac || p->events == p->polled)
        return;
    p->polled = p->events;
    if (p->events)
        uv_poll_start(&p->h, p->events, rp_on);
    else
        uv_poll_stop(&p->h);
}

static void rp_update(rpoll *p, int add, int del) {
    p->events = (p->events | add) & ~del;
    if (!p->defer)
        rp_sync(p);
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

/* A call block for blen bytes of strings: a kept one when they fit (a
 * malloc and a free a request less), else its own. */
static gw_rcall *call_alloc(gw_redis *r, size_t blen) {
    bool small = blen <= GW_RCALL_SMALL;
    gw_rcall *c = small ? r->spare : NULL;
    if (c) {
        r->spare = c->next;
        r->nspare--;
    } else {
        c = malloc(sizeof *c + (small ? GW_RCALL_SMALL : blen));
        if (!c)
            return NULL;
    }
    memset(c, 0, sizeof *c);
    c->small = small;
    return c;
}

static void call_free(gw_redis *r, gw_rcall *c) {
    if (!c->small || r->nspare >= GW_RCALL_KEEP) {
        free(c);
        return;
    }
    c->next = r->spare;
    r->spare = c;
    r->nspare++;
}

/* Tell the caller (once). */
static void call_answer(gw_rcall *c, bool ok, int64_t a, int64_t b,
                        size_t draw) {
    gw_redis_cb cb = c->cb;
    c->cb = NULL;
    if (cb)
        cb(c->data, ok, a, b, draw);
}

/* Answer c as failed (fail open) and let it go. */
static void call_fail(gw_redis *r, gw_rcall *c) {
    call_unlink(r, c);
    call_answer(c, false, 0, 0, 0);
    call_free(r, c);
}

static bool same_bucket(const gw_rcall *a, const gw_rcall *b) {
    return a->hash == b->hash && a->blen == b->blen &&
           memcmp(a->buf, b->buf, a->blen) == 0;
}

static void arm_timer(gw_redis *r);
static void redis_drop(gw_redis *r, const char *why);

static void on_reply(redisAsyncContext *ac, void *reply, void *priv);

/* One bulk string of a command: "$len\r\nbytes\r\n". */
static void resp_arg(gw_buf *b, const char *s, size_t len) {
    gw_buf_add(b, "$", 1);
    gw_buf_addu(b, len);
    gw_buf_add(b, "\r\n", 2);
    gw_buf_add(b, s, len);
    gw_buf_add(b, "\r\n", 2);
}

/* The command of m, in the protocol's own form, written here: hiredis's
 * argv formatting (a sdscatfmt an argument) cost ~5,000 instructions a
 * command. */
static int send_cmd(gw_redis *r, gw_rcmd *m) {
    const gw_rcall *c = m->calls[0];
    const gw_script *s = &r->scripts[m->n > 1];
    gw_buf *b = &r->cmd;
    b->len = 0;
    gw_buf_add(b, m->n > 1 ? "*10\r\n" : "*9\r\n", m->n > 1 ? 5 : 4);
    if (s->sha[0]) {
        resp_arg(b, "EVALSHA", 7);
        resp_arg(b, s->sha, strlen(s->sha));
    } else {
        resp_arg(b, "EVAL", 4);
        resp_arg(b, s->text, strlen(s->text));
    }
    resp_arg(b, "2", 1);
    const char *p = c->buf;
    for (int i = 0; i < 6; i++) {
        resp_arg(b, p, c->len[i]);
        p += c->len[i] + 1;
    }
    if (m->n > 1) {
        char nbuf[24];
        int k = snprintf(nbuf, sizeof nbuf, "%zu", m->n);
        resp_arg(b, nbuf, (size_t)k);
    }
    if (b->failed) {
        gw_buf_free(b); /* empty again for the next command */
        return -1;
    }
    return redisAsyncFormattedCommand(r->ac, on_reply, m, b->p, b->len) ==
                   REDIS_OK
               ? 0
               : -1;
}

static void auth_refused(gw_redis *r, const char *reason);
static void auth_set(int state, const char *reason);

static bool is_noauth(const redisReply *rep) {
    return rep && rep->type == REDIS_REPLY_ERROR &&
           strncmp(rep->str, "NOAUTH", 6) == 0;
}

static void on_script_loaded(redisAsyncContext *ac, void *reply, void *priv) {
    gw_redis *r = ac->data;
    redisReply *rep = reply;
    if (r && ac == r->ac && is_noauth(rep)) { /* the connection's first */
        auth_refused(r, rep->str);
        return;
    }
    if (r && ac == r->ac && rep && rep->type == REDIS_REPLY_STRING &&
        !G.cfg.redis_password)
        auth_set(AUTH_NONE, NULL); /* (again, after a NOAUTH) */
    if (r && ac == r->ac && rep && rep->type == REDIS_REPLY_STRING &&
        r->down) { /* Redis answers again (a connect alone may not: a
                    * stopped Redis's kernel still accepts) */
        gw_log("redis: %s answers again, after %u failure(s)", G.cfg.redis,
               r->down);
        r->down = 0;
        r->down_logged[0] = 0; /* the next outage's first line at once */
        r->down_unlogged = 0;
    }
    gw_script *s = r ? &r->scripts[priv != NULL] : NULL;
    if (s && rep && rep->type == REDIS_REPLY_STRING &&
        rep->len < sizeof s->sha) {
        memcpy(s->sha, rep->str, rep->len);
        s->sha[rep->len] = 0;
    }
}

/* Both scripts: the digests are known once Redis answered (calls made
 * meanwhile send the text). */
static void load_scripts(gw_redis *r) {
    for (int i = 0; i < 2; i++) {
        r->scripts[i].sha[0] = 0;
        redisAsyncCommand(r->ac, on_script_loaded, i ? r : NULL,
                          "SCRIPT LOAD %s", r->scripts[i].text);
    }
}

/* The reply's two integers (both scripts answer two). */
static bool reply_pair(const redisReply *rep, int64_t *a, int64_t *b) {
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2)
        return false;
    const redisReply *x = rep->element[0], *y = rep->element[1];
    if (x->type != REDIS_REPLY_INTEGER || y->type != REDIS_REPLY_INTEGER)
        return false;
    *a = x->integer;
    *b = y->integer;
    return true;
}

static void on_reply(redisAsyncContext *ac, void *reply, void *priv) {
    gw_rcmd *m = priv;
    gw_redis *r = m->r;
    redisReply *rep = reply;
    if (rep && rep->type == REDIS_REPLY_ERROR && !m->retried && ac->data &&
        ac == r->ac && strncmp(rep->str, "NOSCRIPT", 8) == 0) {
        /* the scripts are gone from Redis: load them and ask again, in
         * order */
        m->retried = true;
        load_scripts(r);
        if (send_cmd(r, m) == 0)
            return; /* still in flight */
    }
    if (ac->data && ac == r->ac && is_noauth(rep))
        auth_refused(r, rep->str); /* closed once this callback returns */
    if (r->inflight)
        r->inflight--;
    r->reply_ms = now_ms(); /* the stall check counts from here */
    bool logged = false;
    int64_t a = 0, b = 0;
    bool ok = reply_pair(rep, &a, &b);
    for (size_t i = 0; i < m->n; i++) {
        gw_rcall *c = m->calls[i];
        call_unlink(r, c);
        if (ok) {
            call_answer(c, true, a, b, i);
        } else {
            if (c->cb) {
                atomic_fetch_add(&r->w->metrics.redis_errors, 1);
                if (rep && rep->type == REDIS_REPLY_ERROR && !logged &&
                    !is_noauth(rep)) /* (logged by auth_refused) */
                    gw_log("redis: %s", rep->str);
                logged = true;
            }
            call_answer(c, false, 0, 0, i);
        }
        call_free(r, c);
    }
    free(m);
    arm_timer(r);
}

/* Send the calls made since the last flush: the calls on one bucket go
 * together, in the order they were made, in one command (the batch
 * script), a call alone with the library's script. */
static void flush_once(gw_redis *r) {
    gw_rcall *c = r->phead, *next;
    size_t n = 0;
    r->phead = r->ptail = NULL; /* calls made from here on: next round */
    for (gw_rcall *x = c; x; x = x->pnext)
        n++;
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    if (cap > r->tabcap) {
        gw_rcall **t = realloc(r->tab, cap * sizeof *t);
        if (t) {
            r->tab = t;
            r->tabcap = cap;
        }
    }
    bool table = r->ac && cap <= r->tabcap;
    if (table)
        memset(r->tab, 0, cap * sizeof *r->tab);
    gw_rcall *first = NULL, *last = NULL; /* each batch's first call */
    for (; c; c = next) {
        next = c->pnext;
        if (!c->cb) { /* cancelled or timed out before it went */
            call_unlink(r, c);
            call_free(r, c);
            continue;
        }
        c->bnext = NULL;
        c->blast = c;
        c->bn = 1;
        c->pnext = NULL;
        if (table) {
            size_t k = c->hash & (cap - 1);
            while (r->tab[k] && !same_bucket(r->tab[k], c))
                k = (k + 1) & (cap - 1);
            gw_rcall *b = r->tab[k];
            if (b && b->bn < GW_REDIS_MAX_BATCH) {
                b->blast->bnext = c;
                b->blast = c;
                b->bn++;
                continue;
            }
            r->tab[k] = c; /* a new batch (or the full one's successor) */
        }
        if (last)
            last->pnext = c;
        else
            first = c;
        last = c;
    }
    for (gw_rcall *b = first; b; b = next) {
        next = b->pnext;
        gw_rcmd *m =
            r->ac ? malloc(sizeof *m + b->bn * sizeof(gw_rcall *)) : NULL;
        if (m) {
            m->r = r;
            m->retried = false;
            m->n = 0;
            for (gw_rcall *x = b; x; x = x->bnext)
                m->calls[m->n++] = x;
            if (send_cmd(r, m) == 0) {
                if (r->inflight++ == 0)
                    r->reply_ms = now_ms(); /* a wait begins */
                continue;
            }
            free(m);
        }
        for (gw_rcall *x = b, *xn; x; x = xn) { /* fail open at once */
            xn = x->bnext;
            call_fail(r, x);
        }
    }
}

/* Before the loop waits for events: the calls of this iteration go out,
 * written at once when the connection is up (the socket is not polled for
 * writing unless the write was short). */
static void on_prepare(uv_prepare_t *h) {
    gw_redis *r = h->data;
    if (!r->phead || (r->inflight && r->connected))
        return; /* the calls wait for the replies in flight (above) */
    rpoll *p = r->ac && r->connected ? r->ac->ev.data : NULL;
    if (p)
        p->defer = true;
    while (r->phead) /* failed calls' callers may call again */
        flush_once(r);
    if (p && p->ac && (p->events & UV_WRITABLE))
        redisAsyncHandleWrite(p->ac); /* may drop the connection: p stays
                                         until its handle closed */
    if (p) {
        p->defer = false;
        rp_sync(p);
    }
    while (r->phead) /* calls made by callers the drop answered */
        flush_once(r);
    arm_timer(r);
}

/* ---- the connection ---- */

/* A connection refused or lost: counted; logged unless it is the one
 * logged last, within the minute (then counted for the next line). */
static void down_log(gw_redis *r, const char *why, const char *err) {
    char msg[sizeof r->down_logged];
    snprintf(msg, sizeof msg, "%s %s: %s", why, G.cfg.redis, err);
    atomic_fetch_add(&r->w->metrics.redis_errors, 1);
    r->down++;
    uint64_t now = now_ms();
    if (!strcmp(msg, r->down_logged) && r->down_logged_ms &&
        now - r->down_logged_ms < GW_REDIS_AUTH_LOG_MS) {
        r->down_unlogged++;
        return;
    }
    if (r->down_unlogged && !strcmp(msg, r->down_logged))
        gw_log("redis: %s (%u time(s) more since; rate limits fail open)", msg,
               r->down_unlogged);
    else
        gw_log("redis: %s", msg);
    snprintf(r->down_logged, sizeof r->down_logged, "%s", msg);
    r->down_logged_ms = now;
    r->down_unlogged = 0;
}

/* The connection is gone (hiredis frees it): opened again a second
 * later; `why` logged and counted unless it was closed on purpose. */
static void gone(gw_redis *r, const redisAsyncContext *ac, const char *why) {
    if (why)
        down_log(r, why, ac->errstr);
    r->ac = NULL;
    r->connected = false;
    r->scripts[0].sha[0] = r->scripts[1].sha[0] = 0;
    r->retry_at_ms = now_ms() + GW_REDIS_RETRY_MS;
}

static void on_connect(const redisAsyncContext *ac, int status) {
    gw_redis *r = ac->data;
    if (r && status != REDIS_OK) {
        gone(r, ac, "cannot connect to");
    } else if (r) {
        r->connected = true; /* Redis answering: on_script_loaded */
    }
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
    gw_redis *r = ac->data;
    if (r)
        gone(r, ac, status != REDIS_OK ? "lost the connection to" : NULL);
}

/* ---- AUTH ---- */

static void auth_set(int state, const char *reason) {
    pthread_mutex_lock(&auth_mu);
    auth_state = state;
    if (reason)
        snprintf(auth_error, sizeof auth_error, "%s", reason);
    pthread_mutex_unlock(&auth_mu);
}

/* Redis refused the connection's AUTH, or wants one (NOAUTH): counted,
 * kept for /status, logged (a repeat of the last reason at most once a
 * minute), and the connection closed (freed once the reply's callback
 * returned; hiredis answers the calls queued behind as failed: they fail
 * open); opened again a second later. */
static void auth_refused(gw_redis *r, const char *reason) {
    char why[128];
    /* Redis's reasons name no password; should one ever echo it back */
    if (G.cfg.redis_password && strstr(reason, G.cfg.redis_password))
        snprintf(why, sizeof why,
                 "(Redis's reason withheld: it holds the "
                 "password)");
    else
        snprintf(why, sizeof why, "%s", reason);
    atomic_fetch_add(&r->w->metrics.redis_auth_failures, 1);
    atomic_fetch_add(&r->w->metrics.redis_errors, 1);
    auth_set(AUTH_REFUSED, why);
    uint64_t now = now_ms();
    if (strcmp(why, r->auth_logged) || !r->auth_logged_ms ||
        now - r->auth_logged_ms >= GW_REDIS_AUTH_LOG_MS) {
        char more[64] = "";
        if (r->auth_unlogged && !strcmp(why, r->auth_logged))
            snprintf(more, sizeof more, " (%u time(s) more since)",
                     r->auth_unlogged);
        if (!G.cfg.redis_password)
            gw_log("redis: %s wants a password (%s): give "
                   "--redis-password-file (and --redis-user for an ACL "
                   "user); rate limits fail open until then%s",
                   G.cfg.redis, why, more);
        else
            gw_log("redis: AUTH to %s%s%s refused (%s): rate limits fail "
                   "open, AUTH again in a second%s",
                   G.cfg.redis, G.cfg.redis_user ? " as " : "",
                   G.cfg.redis_user ? G.cfg.redis_user : "", why, more);
        snprintf(r->auth_logged, sizeof r->auth_logged, "%s", why);
        r->auth_logged_ms = now;
        r->auth_unlogged = 0;
    } else {
        r->auth_unlogged++;
    }
    redisAsyncContext *ac = r->ac;
    r->ac = NULL;
    r->connected = false;
    r->scripts[0].sha[0] = r->scripts[1].sha[0] = 0;
    r->retry_at_ms = now + GW_REDIS_RETRY_MS;
    redisAsyncFree(ac); /* in a callback: once it returned */
}

static void on_auth(redisAsyncContext *ac, void *reply, void *priv) {
    (void)priv;
    gw_redis *r = ac->data;
    redisReply *rep = reply;
    if (!r || ac != r->ac || !rep)
        return; /* closed: the close said why */
    if (rep->type == REDIS_REPLY_ERROR)
        auth_refused(r, rep->str);
    else
        auth_set(AUTH_OK, NULL);
}

/* AUTH first, when a password is given: queued before anything else. */
static void send_auth(gw_redis *r) {
    const char *argv[3] = {"AUTH"};
    size_t len[3] = {4}, n = 1;
    if (G.cfg.redis_user) {
        argv[n] = G.cfg.redis_user;
        len[n++] = strlen(G.cfg.redis_user);
    }
    argv[n] = G.cfg.redis_password;
    len[n++] = strlen(G.cfg.redis_password);
    redisAsyncCommandArgv(r->ac, on_auth, NULL, (int)n, argv, len);
}

void gw_redis_status_json(gw_buf *b) {
    uint64_t calls = 0, errors = 0, timeouts = 0, auth_failures = 0;
    for (int w = 0; w < G.nworkers; w++) {
        gw_wmetrics *m = &G.workers[w].metrics;
        calls += atomic_load(&m->redis_calls);
        errors += atomic_load(&m->redis_errors);
        timeouts += atomic_load(&m->redis_timeouts);
        auth_failures += atomic_load(&m->redis_auth_failures);
    }
    static const char *const names[] = {"none", "pending", "ok", "refused"};
    pthread_mutex_lock(&auth_mu);
    int st = auth_state;
    char err[sizeof auth_error];
    memcpy(err, auth_error, sizeof err);
    pthread_mutex_unlock(&auth_mu);
    if (st == AUTH_PENDING && !G.cfg.redis_password && !err[0])
        st = AUTH_NONE; /* no password and no NOAUTH heard */
    gw_buf_adds(b, "{\"address\":");
    gw_buf_json_str(b, G.cfg.redis, strlen(G.cfg.redis));
    gw_buf_adds(b, ",\"user\":");
    if (G.cfg.redis_user)
        gw_buf_json_str(b, G.cfg.redis_user, strlen(G.cfg.redis_user));
    else
        gw_buf_adds(b, "null");
    gw_buf_printf(b, ",\"password\":%s,\"auth\":\"%s\",\"auth_error\":",
                  G.cfg.redis_password ? "true" : "false", names[st]);
    if (err[0])
        gw_buf_json_str(b, err, strlen(err));
    else
        gw_buf_adds(b, "null");
    gw_buf_printf(b,
                  ",\"auth_failures\":%llu,\"calls\":%llu,\"errors\":%llu,"
                  "\"timeouts\":%llu}",
                  (unsigned long long)auth_failures, (unsigned long long)calls,
                  (unsigned long long)errors, (unsigned long long)timeouts);
}

static bool redis_open(gw_redis *r) {
    uint64_t now = now_ms();
    if (now < r->retry_at_ms)
        return false;
    r->retry_at_ms = now + GW_REDIS_RETRY_MS;
    char host[256];
    int port;
    redisAsyncContext *ac;
    if (strncmp(G.cfg.redis, "unix:", 5) == 0) /* Redis on this host */
        ac = redisAsyncConnectUnix(G.cfg.redis + 5);
    else if (gw_parse_addr(G.cfg.redis, host, sizeof host, &port))
        return false;
    else
        ac = redisAsyncConnect(host, port);
    if (!ac)
        return false;
    if (ac->err || rp_attach(ac, &r->w->loop)) {
        down_log(r, "cannot connect to",
                 ac->err ? ac->errstr : "out of memory");
        redisAsyncFree(ac);
        return false;
    }
    ac->data = r;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    r->ac = ac;
    r->inflight = 0; /* the last connection's were answered as it closed */
    r->opened_ms = now;
    if (G.cfg.redis_password)
        send_auth(r); /* queued first: answered before any other */
    load_scripts(r);  /* queued: go out once connected */
    return true;
}

/* Close the connection (hiredis answers every waiting call as failed). */
static void redis_drop(gw_redis *r, const char *why) {
    if (!r->ac)
        return;
    down_log(r, "closing the connection to", why);
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
            call_answer(c, false, 0, 0, 0);
            late++;
        }
    r->late += late;
    /* the calls not sent yet that have no caller any more (timed out
     * while held behind the commands in flight, or cancelled) let go now:
     * while Redis is silent they would pile up to GW_REDIS_MAX_CALLS */
    gw_rcall *pc = r->phead, *pnext, *plast = NULL;
    r->phead = NULL;
    for (; pc; pc = pnext) {
        pnext = pc->pnext;
        if (!pc->cb) {
            call_unlink(r, pc);
            call_free(r, pc);
            continue;
        }
        pc->pnext = NULL;
        if (plast)
            plast->pnext = pc;
        else
            r->phead = pc;
        plast = pc;
    }
    r->ptail = plast;
    if (r->late && now >= r->late_logged_ms + 1000) { /* a line a second */
        gw_log("redis: %u call(s) not answered within %llu ms: allowed",
               r->late, (unsigned long long)G.cfg.redis_timeout_ms);
        r->late = 0;
        r->late_logged_ms = now;
    }
    /* nothing came back for a while, or the connect hangs */
    if (r->ac && ((r->connected && r->inflight &&
                   now - r->reply_ms >= GW_REDIS_STALL_MS) ||
                  (!r->connected && now - r->opened_ms >= GW_REDIS_STALL_MS)))
        redis_drop(r, "no reply");
    arm_timer(r);
}

/* The timer at the first deadline of a call not yet answered, or at the
 * stall check while commands wait for replies on a connection. Never at
 * 0 ms: libuv (1.44) runs a timer started again with 0 from its own
 * callback in the same pass, without polling or running the prepare
 * handle, so a deadline that stays in the past would spin forever. */
static void arm_timer(gw_redis *r) {
    uint64_t now = now_ms(), due = UINT64_MAX;
    for (gw_rcall *c = r->head; c; c = c->next)
        if (c->cb) {
            due = c->due_ms;
            break;
        }
    if (r->ac && r->connected && r->inflight &&
        r->reply_ms + GW_REDIS_STALL_MS < due)
        due = r->reply_ms + GW_REDIS_STALL_MS;
    if (r->ac && !r->connected && r->opened_ms + GW_REDIS_STALL_MS < due)
        due = r->opened_ms + GW_REDIS_STALL_MS;
    r->timer_due = due;
    if (due == UINT64_MAX) {
        uv_timer_stop(&r->timer);
        return;
    }
    uv_timer_start(&r->timer, on_timer, due > now ? due - now : 1, 0);
}

gw_rcall *gw_redis_script(gw_worker *w, const char *const keys[2],
                          const char *const args[4], gw_redis_cb cb,
                          void *data) {
    gw_redis *r = w->redis;
    if (!r || r->calls >= GW_REDIS_MAX_CALLS)
        return NULL;
    if (!r->ac && !redis_open(r))
        return NULL;
    const char *str[6] = {keys[0], keys[1], args[0], args[1], args[2], args[3]};
    size_t len[6], blen = 0;
    for (int i = 0; i < 6; i++) {
        len[i] = strlen(str[i]);
        if (len[i] > UINT16_MAX)
            return NULL;
        blen += len[i] + 1;
    }
    gw_rcall *c = call_alloc(r, blen);
    if (!c)
        return NULL;
    char *p = c->buf;
    for (int i = 0; i < 6; i++) {
        c->len[i] = (uint16_t)len[i];
        memcpy(p, str[i], len[i] + 1);
        p += len[i] + 1;
    }
    /* the bucket's batch in a flush: a hash of KEYS[1] (the route and the
     * key, the bucket: its other texts follow from them but across a
     * reload; same_bucket compares them all), 8 bytes a step */
    uint64_t h = blen, wd;
    size_t i = 0;
    for (; i + 8 <= len[0]; i += 8) {
        memcpy(&wd, c->buf + i, 8);
        h = (h ^ wd) * 0x9e3779b97f4a7c15ull;
    }
    for (; i < len[0]; i++)
        h = (h ^ (unsigned char)c->buf[i]) * 0x100000001b3ull;
    c->hash = (uint32_t)(h ^ (h >> 29) ^ (h >> 41));
    c->blen = blen;
    c->r = r;
    c->cb = cb;
    c->data = data;
    c->sent_ms = now_ms();
    c->due_ms = c->sent_ms + G.cfg.redis_timeout_ms;
    c->prev = r->tail;
    if (r->tail)
        r->tail->next = c;
    else
        r->head = c;
    r->tail = c;
    r->calls++;
    if (r->ptail) /* sent before the loop waits for events (on_prepare) */
        r->ptail->pnext = c;
    else
        r->phead = c;
    r->ptail = c;
    if (c->due_ms < r->timer_due)
        arm_timer(r); /* else it fires no later than this call's due */
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
    r->scripts[0].text = script;
    r->scripts[1].text = sy_ratelimit_redis_batch_script();
    r->timer_due = UINT64_MAX;
    uv_timer_init(&w->loop, &r->timer);
    r->timer.data = r;
    uv_unref((uv_handle_t *)&r->timer);
    uv_prepare_init(&w->loop, &r->prepare);
    r->prepare.data = r;
    uv_prepare_start(&r->prepare, on_prepare);
    uv_unref((uv_handle_t *)&r->prepare);
    r->handles = 2;
    w->redis = r;
    return 0;
}

static void on_handle_closed(uv_handle_t *h) {
    gw_redis *r = h->data;
    if (--r->handles == 0) {
        free(r->tab);
        gw_buf_free(&r->cmd);
        while (r->spare) {
            gw_rcall *c = r->spare;
            r->spare = c->next;
            free(c);
        }
        free(r);
    }
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
    while (r->phead) /* and those not sent yet */
        flush_once(r);
    uv_close((uv_handle_t *)&r->timer, on_handle_closed);
    uv_close((uv_handle_t *)&r->prepare, on_handle_closed);
}
