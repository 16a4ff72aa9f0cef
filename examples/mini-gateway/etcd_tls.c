/*
 * etcd_tls.c - TLS to etcd for https:// endpoints (OpenSSL): one SSL_CTX
 * per source, built from --etcd-cacert (the CA that signs the members'
 * certificates; the system's CAs without it), --etcd-cert and --etcd-key
 * (the client's certificate, for members started with
 * --client-cert-auth); one SSL session per exchange, as the HTTP client's
 * transport (etcd_http.h): bytes from the socket go into a memory BIO, the
 * session's output is written to the socket, the plain bytes are handed
 * to the HTTP parser. The member's certificate must be valid for the
 * endpoint's host (its IP address or name). No crypto of our own.
 *
 * Certificates are rotated without a restart: before each exchange the
 * three files are stat()ed, and when one changed (its modification time,
 * size or inode: rewritten or replaced by a rename) the context is built
 * again from them; a build that fails (a key that does not match its
 * certificate yet, half a rotation) keeps the previous context and says
 * why, and the next change of a file tries again. Sessions under way keep
 * the context they began with (OpenSSL counts its references).
 */
#include "etcd_source_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifdef GW_HAVE_OPENSSL
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* What a file was when the context was built from it. */
typedef struct file_stamp {
    bool exists;
    struct timespec mtime;
    off_t size;
    ino_t ino;
} file_stamp;

/* The source's TLS state (gw_etcd.tls): the context and its files
 * (copies of the options' names: cacert, cert, key; NULL when not given). */
typedef struct tls_state {
    SSL_CTX *ctx;
    char *file[3];
    file_stamp stamp[3];
} tls_state;

typedef struct tls_conn {
    etcd_http_transport t; /* t.state is this */
    gw_etcd *e;
    SSL *ssl;
    BIO *net_in;  /* what came from the socket, for the session to read */
    BIO *net_out; /* what the session wrote, for the socket */
    bool ready;
    char host[256];
} tls_conn;

static void tls_log(gw_etcd *e, const char *what, const char *host) {
    char buf[256] = "";
    unsigned long code = ERR_get_error();
    if (code)
        ERR_error_string_n(code, buf, sizeof buf);
    ERR_clear_error();
    char msg[700];
    snprintf(msg, sizeof msg, "TLS with %s: %s%s%s", host, what,
             buf[0] ? ": " : "", buf);
    size_t n = strlen(msg) < sizeof e->tls_error ? strlen(msg)
                                                 : sizeof e->tls_error - 1;
    memcpy(e->tls_error, msg, n);
    e->tls_error[n] = 0;
    if (e->opts.on_log)
        e->opts.on_log(e->opts.data, GW_ETCD_LOG_WARN, msg);
    else
        fprintf(stderr, "etcd: %s\n", msg);
}

/* Write what the session produced to the socket. */
static int flush_out(etcd_http *h, tls_conn *c) {
    char buf[16384];
    int n;
    while ((n = BIO_read(c->net_out, buf, sizeof buf)) > 0) {
        int rc = etcd_http_write(h, buf, (size_t)n);
        if (rc)
            return rc;
    }
    return 0;
}

/* Drive the handshake; once done, the request may go. */
static int handshake(etcd_http *h, tls_conn *c) {
    int r = SSL_do_handshake(c->ssl);
    int rc = flush_out(h, c);
    if (rc)
        return rc;
    if (r == 1) {
        c->ready = true;
        etcd_http_ready(h);
        return 0;
    }
    int err = SSL_get_error(c->ssl, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
        return 0;
    long v = SSL_get_verify_result(c->ssl);
    tls_log(c->e,
            v != X509_V_OK ? X509_verify_cert_error_string(v)
                           : "handshake failed",
            c->host);
    return UV_EPROTO;
}

static int tls_start(etcd_http *h, void *state) {
    return handshake(h, state);
}

static int tls_send(etcd_http *h, void *state, const char *p, size_t n) {
    tls_conn *c = state;
    if (n && SSL_write(c->ssl, p, (int)n) <= 0) {
        tls_log(c->e, "write failed", c->host);
        return UV_EPROTO;
    }
    return flush_out(h, c);
}

static int tls_receive(etcd_http *h, void *state, const char *p, size_t n) {
    tls_conn *c = state;
    if (BIO_write(c->net_in, p, (int)n) != (int)n)
        return UV_ENOMEM;
    if (!c->ready) {
        int rc = handshake(h, c);
        if (rc || !c->ready)
            return rc;
    }
    char buf[16384];
    for (;;) {
        int r = SSL_read(c->ssl, buf, sizeof buf);
        if (r > 0) {
            etcd_http_deliver(h, buf, (size_t)r);
            continue;
        }
        int err = SSL_get_error(c->ssl, r);
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_ZERO_RETURN)
            break;
        tls_log(c->e, "read failed", c->host);
        return UV_EPROTO;
    }
    return flush_out(h, c); /* e.g. an answer to a key update */
}

static void tls_close(void *state) {
    tls_conn *c = state;
    SSL_free(c->ssl); /* and its BIOs */
    free(c);
}

static void tls_reload_if_changed(gw_etcd *e);

const etcd_http_transport *etcd_transport(gw_etcd *e, const etcd_endpoint *ep) {
    if (strcmp(ep->scheme, "https") != 0 || !e->tls)
        return NULL;
    tls_reload_if_changed(e);
    tls_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->e = e;
    snprintf(c->host, sizeof c->host, "%s", ep->host);
    c->ssl = SSL_new(((tls_state *)e->tls)->ctx);
    c->net_in = BIO_new(BIO_s_mem());
    c->net_out = BIO_new(BIO_s_mem());
    if (!c->ssl || !c->net_in || !c->net_out) {
        BIO_free(c->net_in);
        BIO_free(c->net_out);
        SSL_free(c->ssl);
        free(c);
        return NULL;
    }
    SSL_set_bio(c->ssl, c->net_in, c->net_out);
    SSL_set_connect_state(c->ssl);
    /* the member's certificate must name the endpoint's host */
    X509_VERIFY_PARAM *param = SSL_get0_param(c->ssl);
    if (!X509_VERIFY_PARAM_set1_ip_asc(param, ep->host)) {
        SSL_set_tlsext_host_name(c->ssl, ep->host);
        SSL_set1_host(c->ssl, ep->host);
    }
    c->t =
        (etcd_http_transport){tls_start, tls_send, tls_receive, tls_close, c};
    return &c->t;
}

/* A context from the files (cacert, cert, key), or NULL with err. */
static SSL_CTX *build_ctx(char *const file[3], char *err, size_t cap) {
    const char *cacert = file[0], *cert = file[1], *key = file[2];
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    const char *what = NULL;
    if (!ctx)
        what = "out of memory";
    else if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION))
        what = "TLS 1.2";
    else if (cacert ? !SSL_CTX_load_verify_locations(ctx, cacert, NULL)
                    : !SSL_CTX_set_default_verify_paths(ctx))
        what = cacert ? cacert : "the system's CAs";
    else if (cert && !SSL_CTX_use_certificate_chain_file(ctx, cert))
        what = cert;
    else if (key && (!SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) ||
                     !SSL_CTX_check_private_key(ctx)))
        what = key;
    if (what) {
        char buf[256] = "";
        ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
        ERR_clear_error();
        snprintf(err, cap, "TLS: %s: %s", what, buf);
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    return ctx;
}

/* The stamps of the files now. */
static void stamp_files(char *const files[3], file_stamp out[3]) {
    for (int i = 0; i < 3; i++) {
        struct stat st;
        out[i] = (file_stamp){0};
        if (files[i] && stat(files[i], &st) == 0)
            out[i] = (file_stamp){true, st.st_mtim, st.st_size, st.st_ino};
    }
}

static bool same_stamps(const file_stamp a[3], const file_stamp b[3]) {
    for (int i = 0; i < 3; i++)
        if (a[i].exists != b[i].exists || a[i].size != b[i].size ||
            a[i].ino != b[i].ino || a[i].mtime.tv_sec != b[i].mtime.tv_sec ||
            a[i].mtime.tv_nsec != b[i].mtime.tv_nsec)
            return false;
    return true;
}

/* A file of the context changed since it was built: build it again (the
 * previous one stays when that fails). */
static void tls_reload_if_changed(gw_etcd *e) {
    tls_state *ts = e->tls;
    file_stamp now[3];
    stamp_files(ts->file, now);
    if (same_stamps(now, ts->stamp))
        return;
    memcpy(ts->stamp, now, sizeof now); /* tried once per change */
    char err[300], msg[400];
    SSL_CTX *ctx = build_ctx(ts->file, err, sizeof err);
    if (ctx) {
        SSL_CTX_free(ts->ctx); /* its sessions under way hold it */
        ts->ctx = ctx;
        snprintf(msg, sizeof msg,
                 "TLS: --etcd-cacert/--etcd-cert/--etcd-key changed on disk: "
                 "reloaded");
    } else {
        snprintf(msg, sizeof msg,
                 "%s (a file changed on disk; the previous certificates stay "
                 "in use until the next change)",
                 err);
    }
    if (e->opts.on_log)
        e->opts.on_log(e->opts.data, ctx ? GW_ETCD_LOG_INFO : GW_ETCD_LOG_WARN,
                       msg);
    else
        fprintf(stderr, "etcd: %s\n", msg);
}

int etcd_tls_init(gw_etcd *e, char *err, size_t cap) {
    bool https = false;
    for (size_t i = 0; i < e->ep_count; i++)
        https |= strcmp(e->eps[i].scheme, "https") == 0;
    const gw_etcd_options *o = &e->opts;
    if (!https) {
        if (o->cacert || o->cert || o->key) {
            snprintf(err, cap,
                     "--etcd-cacert/--etcd-cert/--etcd-key given "
                     "but no https:// endpoint in --etcd");
            return -1;
        }
        return 0;
    }
    /* TLS options are the cluster's: an http:// endpoint beside https://
     * ones would be spoken to in the clear, without the client
     * certificate (and with the password, under --etcd-user) */
    for (size_t i = 0; (o->cacert || o->cert || o->key) && i < e->ep_count; i++)
        if (strcmp(e->eps[i].scheme, "https") != 0) {
            snprintf(err, cap,
                     "http://%s:%s is not https:// and "
                     "--etcd-cacert/--etcd-cert/--etcd-key are for every "
                     "endpoint (it would get no TLS)",
                     e->eps[i].host, e->eps[i].port);
            return -1;
        }
    if (!o->cert != !o->key) {
        snprintf(err, cap, "--etcd-cert and --etcd-key go together");
        return -1;
    }
    tls_state *ts = calloc(1, sizeof *ts);
    e->tls = ts; /* etcd_tls_free frees what is there */
    const char *given[3] = {o->cacert, o->cert, o->key};
    for (int i = 0; ts && i < 3; i++)
        if (given[i] && !(ts->file[i] = strdup(given[i])))
            ts = NULL;
    if (!ts) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    stamp_files(ts->file, ts->stamp);
    ts->ctx = build_ctx(ts->file, err, cap);
    return ts->ctx ? 0 : -1;
}

void etcd_tls_free(gw_etcd *e) {
    tls_state *ts = e->tls;
    if (ts) {
        SSL_CTX_free(ts->ctx);
        for (int i = 0; i < 3; i++)
            free(ts->file[i]);
    }
    free(ts);
    e->tls = NULL;
}

#else /* built without OpenSSL */

const etcd_http_transport *etcd_transport(gw_etcd *e, const etcd_endpoint *ep) {
    (void)e;
    (void)ep;
    return NULL;
}

int etcd_tls_init(gw_etcd *e, char *err, size_t cap) {
    for (size_t i = 0; i < e->ep_count; i++)
        if (strcmp(e->eps[i].scheme, "https") == 0) {
            snprintf(err, cap, "built without OpenSSL: no https:// to etcd");
            return -1;
        }
    if (e->opts.cacert || e->opts.cert || e->opts.key) {
        snprintf(err, cap, "built without OpenSSL: no --etcd-cacert");
        return -1;
    }
    return 0;
}

void etcd_tls_free(gw_etcd *e) {
    (void)e;
}

#endif
