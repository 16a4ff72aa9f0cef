/*
 * ngx_http_switchyard_state.c - the state file (switchyard_state): every
 * stored document, written to FILE.tmp.<pid> and renamed over FILE under
 * the zone's mutex and an flock of FILE.lock (held by the admin location
 * from reading what another nginx wrote to its own write, so that two
 * generations of a binary upgrade storing a change at the same instant
 * each write on the other's: no write is lost) after each accepted
 * change; read into a new zone (the
 * first start, a restart, a binary upgrade, a zone of another size); and
 * followed: one worker looks at the file every second, and takes what
 * another nginx wrote into it (the old workers of a binary upgrade, which
 * serve alongside the new ones until WINCH). Text header lines with the
 * byte counts, then the raw bytes:
 *   switchyard-state <version> <generation>
 *   doc <kind> <base hex> <name bytes> <source bytes> <data bytes> <us>
 *       <flags> (SW_DOC_INSERTED, SW_DOC_INSERT_NOW; absent in files
 *       written before them)
 *   <name><source><data>
 *   end
 * Version 2: route changes are keyed by (source, id), so the file may
 * hold two of one route id (a removal from one source, an upsert into
 * another). Version 1 (the modules before): keyed by id alone, a reader
 * of version 1 would keep only the last of the two. A file is written as
 * version 1 when no route id has changes in two sources (what those
 * modules read right: a binary upgrade's old generation follows it), as 2
 * otherwise (which they refuse, logged, rather than misread). Both are
 * read; another version is refused, naming the file and the line.
 */
#include "ngx_http_switchyard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define SW_STATE_FOLLOW_TICKS (1000 / SW_POLL_MS)

/* What the zone last wrote or read: another writer changes it. */
static void sw_state_stamp(sw_shm_t *sh, const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) {
        sh->state_ino = (uint64_t)st.st_ino;
        sh->state_size = (uint64_t)st.st_size;
        sh->state_mtime_ns =
            (uint64_t)st.st_mtim.tv_sec * 1000000000ULL + st.st_mtim.tv_nsec;
    }
}

static bool sw_state_changed(sw_shm_t *sh, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0)
        return false;
    return sh->state_ino != (uint64_t)st.st_ino ||
           sh->state_size != (uint64_t)st.st_size ||
           sh->state_mtime_ns != (uint64_t)st.st_mtim.tv_sec * 1000000000ULL +
                                     (uint64_t)st.st_mtim.tv_nsec;
}

static ngx_int_t sw_write_all(ngx_fd_t fd, const u_char *p, size_t len) {
    while (len) {
        ssize_t n = ngx_write_fd(fd, (void *)p, len);
        if (n <= 0)
            return NGX_ERROR;
        p += n;
        len -= (size_t)n;
    }
    return NGX_OK;
}

ngx_fd_t sw_state_lock(sw_main_conf_t *mcf, ngx_log_t *log) {
    u_char path[NGX_MAX_PATH + 8];
    ngx_fd_t fd;

    if (mcf->state_path.len == 0 || mcf->state_path.len + 6 > sizeof path)
        return NGX_INVALID_FILE;
    ngx_sprintf(path, "%V.lock%Z", &mcf->state_path);
    fd = ngx_open_file(path, NGX_FILE_RDWR, NGX_FILE_CREATE_OR_OPEN,
                       NGX_FILE_DEFAULT_ACCESS);
    if (fd == NGX_INVALID_FILE) {
        ngx_log_error(NGX_LOG_ERR, log, ngx_errno,
                      "switchyard: cannot open the state file's lock \"%s\": "
                      "a change stored by another nginx at the same instant "
                      "may be lost",
                      path);
        return NGX_INVALID_FILE;
    }
    while (flock(fd, LOCK_EX) == -1) {
        if (ngx_errno == NGX_EINTR)
            continue;
        ngx_log_error(NGX_LOG_ERR, log, ngx_errno,
                      "switchyard: flock \"%s\" failed", path);
        ngx_close_file(fd);
        return NGX_INVALID_FILE;
    }
    return fd;
}

void sw_state_unlock(ngx_fd_t fd) {
    if (fd != NGX_INVALID_FILE)
        ngx_close_file(fd); /* releases the flock */
}

static int sw_doc_name_cmp(const void *a, const void *b) {
    const sw_shm_doc_t *x = *(sw_shm_doc_t *const *)a,
                       *y = *(sw_shm_doc_t *const *)b;
    int c = ngx_memcmp(x->name, y->name, ngx_min(x->name_len, y->name_len));
    return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* The version a file of the zone's documents is written as: 2 when a
 * route id has changes stored for two sources (a version 1 reader keys
 * them by id and would keep one; the zone keeps one per (source, id), so
 * two of one id are of two sources), 1 otherwise. The route changes
 * sorted by id, neighbours compared: n log n under the mutex, not n^2;
 * 2, which this module reads right, when there is no memory to sort. */
static ngx_uint_t sw_state_version_locked(sw_zone_ctx_t *z) {
    sw_shm_doc_t **v, *d;
    size_t n = 0, k = 0;
    ngx_uint_t version = 1;

    for (d = z->sh->docs; d; d = d->next)
        n += SW_IS_ROUTE_OP(d->kind);
    if (n < 2)
        return 1;
    v = malloc(n * sizeof *v);
    if (v == NULL)
        return 2;
    for (d = z->sh->docs; d; d = d->next)
        if (SW_IS_ROUTE_OP(d->kind))
            v[k++] = d;
    qsort(v, n, sizeof *v, sw_doc_name_cmp);
    for (k = 1; k < n && version == 1; k++)
        if (sw_doc_name_cmp(&v[k - 1], &v[k]) == 0)
            version = 2;
    free(v);
    return version;
}

ngx_int_t sw_state_write_locked(sw_zone_ctx_t *z, sw_main_conf_t *mcf,
                                ngx_log_t *log) {
    u_char tmp[NGX_MAX_PATH + 8], line[256], *e;
    sw_shm_doc_t *d;
    ngx_fd_t fd;
    ngx_int_t rc;
    size_t n = 0;

    if (mcf->state_path.len == 0)
        return NGX_OK;
    if (mcf->state_path.len + 32 > sizeof tmp) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "switchyard: state file name too long");
        return NGX_ERROR;
    }
    ngx_sprintf(tmp, "%V.tmp.%P%Z", &mcf->state_path, ngx_pid);
    fd = ngx_open_file(tmp, NGX_FILE_WRONLY, NGX_FILE_TRUNCATE,
                       NGX_FILE_DEFAULT_ACCESS);
    if (fd == NGX_INVALID_FILE) {
        ngx_log_error(NGX_LOG_ERR, log, ngx_errno,
                      "switchyard: state file: " ngx_open_file_n
                      " \"%s\" failed: admin changes will not survive a "
                      "restart",
                      tmp);
        return NGX_ERROR;
    }
    e = ngx_sprintf(line, "switchyard-state %ui %uL\n",
                    sw_state_version_locked(z), z->sh->generation);
    rc = sw_write_all(fd, line, e - line);
    /* in replay order (sw_shm_doc_t.order, then seq): a reader links
     * them in this order, so its seq is their replay order. Sorted once
     * (n log n under the mutex); without memory for that, n passes */
    sw_shm_doc_t **v = sw_docs_replay_order(z->sh->docs, &n);
    d = NULL;
    for (size_t k = 0; rc == NGX_OK && k < n; k++) {
        d = v ? v[k] : sw_docs_replay_next(z->sh->docs, d);
        /* the flags field: a reader of state files before it reads the
         * first six and links the route changes in file order */
        e = ngx_sprintf(line, "doc %ui %016uxL %uz %uz %uz %uL %ui\n", d->kind,
                        d->base, d->name_len, d->source_len, d->len,
                        d->changed_us, d->flags);
        if (sw_write_all(fd, line, e - line) != NGX_OK ||
            sw_write_all(fd, d->name, d->name_len) != NGX_OK ||
            sw_write_all(fd, d->source, d->source_len) != NGX_OK ||
            sw_write_all(fd, d->data, d->len) != NGX_OK ||
            sw_write_all(fd, (u_char *)"\n", 1) != NGX_OK)
            rc = NGX_ERROR;
    }
    free(v);
    if (rc == NGX_OK)
        rc = sw_write_all(fd, (u_char *)"end\n", 4);
    if (ngx_close_file(fd) == NGX_FILE_ERROR)
        rc = NGX_ERROR;
    if (rc == NGX_OK &&
        ngx_rename_file(tmp, mcf->state_path.data) == NGX_FILE_ERROR)
        rc = NGX_ERROR;
    if (rc != NGX_OK) {
        ngx_log_error(NGX_LOG_ERR, log, ngx_errno,
                      "switchyard: cannot write the state file \"%V\": admin "
                      "changes will not survive a restart",
                      &mcf->state_path);
        ngx_delete_file(tmp);
        return NGX_ERROR;
    }
    sw_state_stamp(z->sh, (char *)mcf->state_path.data);
    return NGX_OK;
}

/* At a worker's start (worker 0, once it runs as the workers' user):
 * can it rename a new file over FILE in FILE's directory and open
 * FILE.lock for writing? If not, every accepted change would log an error
 * and none would survive a restart: said once per start, not first found
 * at a PUT. */
void sw_state_check_access(sw_main_conf_t *mcf, ngx_log_t *log) {
    u_char dir[NGX_MAX_PATH + 8], lock[NGX_MAX_PATH + 8], *slash;
    const char *what = NULL, *path = NULL, *so = NULL;

    if (mcf->state_path.len == 0 || mcf->state_path.len + 6 > sizeof dir)
        return;
    ngx_sprintf(dir, "%V%Z", &mcf->state_path);
    ngx_sprintf(lock, "%V.lock%Z", &mcf->state_path);
    slash = (u_char *)strrchr((char *)dir, '/'); /* a full name */
    if (slash == NULL)
        return;
    slash[slash == dir] = '\0'; /* "/" stays for a file in the root */
    if (access((char *)dir, W_OK | X_OK) != 0) {
        what = "its directory";
        path = (char *)dir;
        so = "admin changes will not survive a restart";
    } else if (access((char *)lock, F_OK) == 0 &&
               access((char *)lock, R_OK | W_OK) != 0) {
        what = "its lock file";
        path = (char *)lock;
        so = "a change stored by another nginx (a binary upgrade) at the "
             "same instant may be lost";
    }
    if (what)
        ngx_log_error(NGX_LOG_ERR, log, ngx_errno,
                      "switchyard: switchyard_state \"%V\": the worker "
                      "processes cannot write %s \"%s\": %s (give the "
                      "workers' user write access)",
                      &mcf->state_path, what, path, so);
}

/* The file's bytes (malloc, NUL-terminated), or NULL (logged unless the
 * file does not exist). */
static u_char *sw_state_load(sw_main_conf_t *mcf, ngx_log_t *log,
                             size_t *size) {
    ngx_file_t file;
    ngx_file_info_t fi;
    u_char *buf;

    ngx_memzero(&file, sizeof file);
    file.name = mcf->state_path;
    file.log = log;
    file.fd =
        ngx_open_file(mcf->state_path.data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (file.fd == NGX_INVALID_FILE) {
        if (ngx_errno != NGX_ENOENT)
            ngx_log_error(NGX_LOG_ERR, log, ngx_errno,
                          "switchyard: cannot open the state file \"%V\"",
                          &mcf->state_path);
        return NULL;
    }
    if (ngx_fd_info(file.fd, &fi) == NGX_FILE_ERROR) {
        ngx_close_file(file.fd);
        return NULL;
    }
    *size = (size_t)ngx_file_size(&fi);
    buf = malloc(*size + 1);
    if (buf == NULL || ngx_read_file(&file, buf, *size, 0) != (ssize_t)*size) {
        ngx_log_error(NGX_LOG_ERR, log, ngx_errno,
                      "switchyard: cannot read the state file \"%V\"",
                      &mcf->state_path);
        ngx_close_file(file.fd);
        free(buf);
        return NULL;
    }
    ngx_close_file(file.fd);
    buf[*size] = '\0';
    return buf;
}

/* Does the zone hold this change of its key (sw_doc_same_key), or a
 * later one? */
static bool sw_state_held_locked(sw_zone_ctx_t *z, ngx_uint_t kind,
                                 ngx_str_t *name, ngx_str_t *source,
                                 uint64_t changed_us) {
    for (sw_shm_doc_t *d = z->sh->docs; d; d = d->next)
        if (sw_doc_same_key(d, kind, name, source))
            return d->changed_us >= changed_us;
    return false;
}

/* Why a state file is not read (whole), and where: its line (1: the
 * header). */
typedef struct {
    const char *why;
    ngx_uint_t line;
    ngx_uint_t version;
} sw_state_bad_t;

static ngx_int_t sw_state_bad(sw_state_bad_t *bad, const u_char *buf,
                              const u_char *at, const char *why) {
    bad->why = why;
    bad->line = 1;
    for (const u_char *q = buf; q < at; q++)
        bad->line += *q == '\n';
    return -1;
}

/* Link the file's documents into the zone (only the ones it does not hold
 * when `only_new`); the count linked, or -1 for a file of another version
 * or a damaged one (*bad says why and where). */
static ngx_int_t sw_state_apply_locked(sw_zone_ctx_t *z, sw_main_conf_t *mcf,
                                       u_char *buf, size_t size, bool only_new,
                                       sw_state_bad_t *bad, ngx_log_t *log) {
    u_char *p = (u_char *)ngx_strchr(buf, '\n'), *end = buf + size;
    ngx_int_t count = 0;
    unsigned version = 0;
    int at = 0;

    if (p == NULL ||
        sscanf((char *)buf, "switchyard-state %u %*u%n", &version, &at) != 1 ||
        buf + at != p)
        return sw_state_bad(bad, buf, buf,
                            "not a switchyard state file (its first line is "
                            "not \"switchyard-state VERSION GENERATION\")");
    bad->version = version;
    if (version != 1 && version != 2)
        return sw_state_bad(bad, buf, buf,
                            "a state file of another version (this module "
                            "reads versions 1 and 2)");
    p++;
    while (p < end && ngx_strncmp(p, "doc ", 4) == 0) {
        unsigned kind;
        unsigned long long base, changed;
        size_t nl, sl, dl;
        ngx_int_t iflags = 0;
        u_char *eol = (u_char *)ngx_strchr(p, '\n');
        if (eol == NULL ||
            sscanf((char *)p, "doc %u %llx %zu %zu %zu %llu%n", &kind, &base,
                   &nl, &sl, &dl, &changed, &at) != 6 ||
            /* flags, on the same line: absent from the files of modules
             * before them (route changes replayed in file order, as those
             * did) */
            (p + at < eol &&
             (p[at] != ' ' ||
              (iflags = ngx_atoi(p + at + 1, eol - p - at - 1)) ==
                  NGX_ERROR)) ||
            kind > SW_DOC_ROUTE_REMOVE || nl == 0 || nl > 255 || sl > 255 ||
            (size_t)(end - eol - 1) < nl + sl + dl + 1)
            return sw_state_bad(bad, buf, p, "a damaged document line");
        p = eol + 1;
        ngx_str_t name = {nl, p}, source = {sl, p + nl};
        if (!only_new ||
            !sw_state_held_locked(z, kind, &name, &source, changed)) {
            sw_shm_doc_t *d =
                sw_zone_prepare_locked(z, kind, &name, &source, dl);
            if (d == NULL) {
                ngx_log_error(NGX_LOG_ERR, log, 0,
                              "switchyard: zone \"%V\" too small for the "
                              "state file \"%V\"",
                              &mcf->zone->shm.name, &mcf->state_path);
                return count;
            }
            ngx_memcpy(d->data, p + nl + sl, dl);
            d->base = base;
            d->changed_us = changed;
            d->flags =
                (ngx_uint_t)iflags & (SW_DOC_INSERTED | SW_DOC_INSERT_NOW);
            d->origin = SW_ORIGIN_STATE;
            /* another nginx's change, into the running zone: replayed
             * here as it was taken there (in place, or inserted) */
            if (only_new && kind == SW_DOC_ROUTE)
                sw_zone_route_order_locked(z, d,
                                           !(d->flags & SW_DOC_INSERT_NOW));
            sw_zone_link_locked(z, d);
            count++;
        }
        p += nl + sl + dl + 1;
    }
    if (p < end && ngx_strncmp(p, "end\n", 4) != 0)
        return sw_state_bad(bad, buf, p, "neither a document nor \"end\"");
    return count;
}

static void sw_state_refused(sw_main_conf_t *mcf, const sw_state_bad_t *bad,
                             ngx_log_t *log) {
    const char *so =
        bad->line == 1 ? "the file is not read" : "what follows is not read";

    if (bad->line == 1 && bad->version > 2) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "switchyard: state file \"%V\", line 1: version %ui, %s: "
                      "%s",
                      &mcf->state_path, bad->version, bad->why, so);
    } else {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "switchyard: state file \"%V\", line %ui: %s: %s",
                      &mcf->state_path, bad->line, bad->why, so);
    }
}

void sw_state_read(sw_zone_ctx_t *z, sw_main_conf_t *mcf, ngx_log_t *log) {
    sw_state_bad_t bad = {NULL, 0, 0};
    u_char *buf;
    size_t size;
    ngx_int_t n;

    if (mcf == NULL || mcf->state_path.len == 0)
        return;
    buf = sw_state_load(mcf, log, &size);
    if (buf == NULL)
        return;
    ngx_shmtx_lock(&z->shpool->mutex);
    n = sw_state_apply_locked(z, mcf, buf, size, false, &bad, log);
    sw_state_stamp(z->sh, (char *)mcf->state_path.data);
    ngx_shmtx_unlock(&z->shpool->mutex);
    free(buf);
    if (n < 0) {
        sw_state_refused(mcf, &bad, log);
    } else if (n > 0) {
        ngx_log_error(NGX_LOG_NOTICE, log, 0,
                      "switchyard: %i stored documents read from \"%V\"", n,
                      &mcf->state_path);
    }
}

ngx_int_t sw_state_follow_locked(ngx_log_t *log) {
    sw_state_bad_t bad = {NULL, 0, 0};
    sw_main_conf_t *mcf = sw_worker.mcf;
    sw_zone_ctx_t *z = sw_worker.zone;
    u_char *buf;
    size_t size;
    ngx_int_t n;

    if (mcf == NULL || mcf->state_path.len == 0 ||
        z->sh->epoch != sw_worker.epoch ||
        !sw_state_changed(z->sh, (char *)mcf->state_path.data))
        return 0;
    buf = sw_state_load(mcf, log, &size);
    if (buf == NULL)
        return 0;
    n = sw_state_apply_locked(z, mcf, buf, size, true, &bad, log);
    sw_state_stamp(z->sh, (char *)mcf->state_path.data);
    free(buf);
    /* said once per file written (the stamp): what another nginx wrote
     * and this one cannot read */
    if (n < 0)
        sw_state_refused(mcf, &bad, log);
    if (n > 0)
        ngx_log_error(NGX_LOG_NOTICE, log, 0,
                      "switchyard: %i changes taken from the state file "
                      "\"%V\" written by another nginx (a binary upgrade's "
                      "other generation)",
                      n, &mcf->state_path);
    return n > 0 ? n : 0;
}

void sw_state_follow(ngx_log_t *log) {
    sw_main_conf_t *mcf = sw_worker.mcf;
    ngx_int_t n;

    /* one worker looks, once a second (the stat without the mutex) */
    if (mcf == NULL || mcf->state_path.len == 0 || ngx_worker != 0 ||
        sw_worker.ticks % SW_STATE_FOLLOW_TICKS != 0 ||
        !sw_state_changed(sw_worker.zone->sh, (char *)mcf->state_path.data))
        return;
    sw_zone_lock(sw_worker.zone);
    n = sw_state_follow_locked(log);
    sw_zone_unlock(sw_worker.zone);
    if (n > 0) {
        sw_notify_others(mcf->notify);
        sw_worker_sync(log);
    }
}
