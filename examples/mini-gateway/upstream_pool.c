/*
 * upstream_pool.c - where a worker keeps its upstream connections: the
 * list of every open one (closed all at shutdown), and the keep-alive
 * pools (one per host:port, kept in the route's host data; upstream.c
 * finds them, takes and gives back their connections), dropped with the
 * route.
 */
#include "proxy.h"

#include <stdlib.h>
#include <string.h>

void gw_upconn_list_add(gw_upconn *u) {
    gw_worker *w = u->w;
    u->lnext = w->upconn_list;
    if (u->lnext)
        u->lnext->lprev = u;
    w->upconn_list = u;
}

void gw_upconn_unlist(gw_upconn *u) {
    gw_worker *w = u->w;
    if (u->lprev)
        u->lprev->lnext = u->lnext;
    else if (w->upconn_list == u)
        w->upconn_list = u->lnext;
    if (u->lnext)
        u->lnext->lprev = u->lprev;
    u->lnext = u->lprev = NULL;
}

void gw_pool_unlink(gw_upconn *u) {
    gw_pool *p = u->pool;
    u->pool = NULL;
    if (!p)
        return;
    if (p->pipe == u)
        p->pipe = NULL;
    for (gw_upconn **pp = &p->idle; *pp; pp = &(*pp)->next_idle)
        if (*pp == u) {
            *pp = u->next_idle;
            p->idle_count--;
            break;
        }
    u->next_idle = NULL;
}

void gw_pools_drop(gw_worker *w, gw_route_data *rd) {
    gw_pool *p = rd->pools[w->index];
    rd->pools[w->index] = NULL;
    while (p) {
        gw_pool *next = p->next;
        while (p->idle) {
            gw_upconn *u = p->idle;
            p->idle = u->next_idle;
            u->next_idle = NULL;
            u->pool = NULL;
            if (!atomic_load(&G.workers_gone))
                gw_upstream_close(u);
        }
        free(p->host);
        free(p);
        p = next;
    }
}

void gw_upstream_close_all(gw_worker *w) {
    gw_upconn *u = w->upconn_list;
    while (u) {
        gw_upconn *next = u->lnext;
        gw_upstream_close(u);
        u = next;
    }
}
