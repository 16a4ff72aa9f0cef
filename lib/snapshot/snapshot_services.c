/*
 * snapshot_services.c - the services and instances a snapshot holds, with
 * each instance's passive health, for status pages and consoles
 * (sy_snapshot_service_count and the calls after it in switchyard.h).
 */
#include "snapshot/snapshot.h"
#include "snapshot/snapshot_layout.h"

#include "service/service.h"

size_t sy_snapshot_service_count(const sy_snapshot *h) {
    return h ? sy__snapshot_from_handle(h)->service_count : 0;
}

static const struct sy__service *service_at(const sy_snapshot *h, size_t i) {
    const sy_snapshot *s = h ? sy__snapshot_from_handle(h) : NULL;
    return s && i < s->service_count ? s->services[i] : NULL;
}

const char *sy_snapshot_service_name(const sy_snapshot *h, size_t i) {
    const struct sy__service *svc = service_at(h, i);
    return svc ? sy__service_name(svc) : NULL;
}

size_t sy_snapshot_instance_count(const sy_snapshot *h, size_t service) {
    const struct sy__service *svc = service_at(h, service);
    return svc ? sy__service_count(svc) : 0;
}

int sy_snapshot_instance_health(const sy_snapshot *h, size_t service, size_t i,
                                sy_instance_health *out) {
    const struct sy__service *svc = service_at(h, service);
    const sy_instance *in = svc ? sy__service_instance(svc, i) : NULL;
    if (!in || !out)
        return SY_EINVAL;
    out->instance = in;
    sy__service_health_of(svc, i, &out->consecutive_failures, &out->ejections,
                          &out->ejected_until_ms);
    return SY_OK;
}
