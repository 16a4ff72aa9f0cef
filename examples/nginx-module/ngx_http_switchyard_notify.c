/*
 * ngx_http_switchyard_notify.c - wakes the other workers when a change is
 * stored in the zone. The master makes one pipe per worker before it
 * forks them (init_module, again at every reload); each worker watches the
 * read end of its own pipe in its event loop and syncs when a byte
 * arrives; the worker that stored a change writes one byte to every other
 * worker's pipe. Without it a worker sees a change at its next request or
 * timer tick (SW_POLL_MS), and the request that finds it waits for the
 * apply.
 */
#include "ngx_http_switchyard.h"

#include <ngx_channel.h>

#include <fcntl.h>
#include <unistd.h>

static void sw_notify_close(void *data) {
    sw_notify_t *n = data;
    for (ngx_uint_t i = 0; i < n->count; i++) {
        if (n->fd[i][0] != -1)
            close(n->fd[i][0]);
        if (n->fd[i][1] != -1)
            close(n->fd[i][1]);
    }
    n->count = 0;
}

static ngx_int_t sw_notify_flags(ngx_fd_t fd) {
    int fl = fcntl(fd, F_GETFD);
    return fl == -1 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) == -1 ||
                   ngx_nonblocking(fd) == -1
               ? NGX_ERROR
               : NGX_OK;
}

ngx_int_t sw_notify_init(ngx_cycle_t *cycle, sw_main_conf_t *mcf) {
    ngx_core_conf_t *ccf =
        (ngx_core_conf_t *)ngx_get_conf(cycle->conf_ctx, ngx_core_module);
    ngx_pool_cleanup_t *cln;
    sw_notify_t *n;
    ngx_uint_t count;

    mcf->notify = NULL;
    /* one process (master_process off) has no one to wake */
    if (!ccf->master || ccf->worker_processes < 2)
        return NGX_OK;
    count = ngx_min((ngx_uint_t)ccf->worker_processes, SW_MAX_WORKERS);
    n = ngx_pcalloc(cycle->pool, sizeof *n);
    cln = ngx_pool_cleanup_add(cycle->pool, 0);
    if (n == NULL || cln == NULL)
        return NGX_ERROR;
    cln->handler = sw_notify_close;
    cln->data = n;
    for (ngx_uint_t i = 0; i < count; i++) {
        if (pipe(n->fd[i]) == -1) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
                          "switchyard: pipe() failed");
            return NGX_ERROR;
        }
        n->count = i + 1;
        if (sw_notify_flags(n->fd[i][0]) != NGX_OK ||
            sw_notify_flags(n->fd[i][1]) != NGX_OK) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
                          "switchyard: fcntl() on a pipe failed");
            return NGX_ERROR;
        }
    }
    mcf->notify = n;
    return NGX_OK;
}

/* A byte in this worker's pipe: drain it and sync. */
static void sw_notify_handler(ngx_event_t *ev) {
    ngx_connection_t *c = ev->data;
    u_char buf[64];
    ssize_t got;

    for (;;) {
        got = read(c->fd, buf, sizeof buf);
        if (got > 0)
            continue;
        if (got == -1 && ngx_errno == NGX_EINTR)
            continue;
        break;
    }
    if (got == 0 || (got == -1 && ngx_errno != NGX_EAGAIN)) {
        /* every write end is closed: nothing will wake this worker again;
         * the timer still polls */
        ngx_close_connection(c);
        sw_worker.notify_fd = -1;
    }
    sw_worker.slot.wakeups++;
    sw_worker_sync(ev->log);
    /* the count is published even when a request or the timer had
     * applied the change first */
    sw_zone_publish(sw_worker.zone, ngx_worker, &sw_worker.slot);
}

ngx_int_t sw_notify_watch(ngx_cycle_t *cycle, sw_notify_t *n) {
    sw_worker.notify_fd = -1;
    if (n == NULL || ngx_worker >= n->count)
        return NGX_OK;
    /* the read ends of the other workers' pipes are theirs */
    for (ngx_uint_t i = 0; i < n->count; i++)
        if (i != ngx_worker && n->fd[i][0] != -1) {
            close(n->fd[i][0]);
            n->fd[i][0] = -1;
        }
    if (ngx_add_channel_event(cycle, n->fd[ngx_worker][0], NGX_READ_EVENT,
                              sw_notify_handler) != NGX_OK)
        return NGX_ERROR;
    /* the connection owns the fd now: nginx closes it */
    sw_worker.notify_fd = n->fd[ngx_worker][0];
    n->fd[ngx_worker][0] = -1;
    return NGX_OK;
}

void sw_notify_others(sw_notify_t *n) {
    if (n == NULL)
        return;
    for (ngx_uint_t i = 0; i < n->count; i++)
        if (i != ngx_worker && n->fd[i][1] != -1) {
            /* a full pipe already holds a wake-up: EAGAIN is fine */
            ssize_t rc = write(n->fd[i][1], "!", 1);
            (void)rc;
        }
}
