/*
 * select.h - instance selection for a matched lb:// route (select.c):
 * the route's selection settings and the request's headers go to the
 * service module, which chooses.
 */
#ifndef SY_SELECT_H
#define SY_SELECT_H

#include "request/match.h"
#include "service/service.h"

/*
 * Choose an instance for match `m` (an lb:// route), skipping the
 * instances whose ids are in `exclude` and, while others remain, the ones
 * ejected by passive health. *pick (may be NULL) gets the chosen instance,
 * its version, zone and Host header, and the handle
 * sy_router_report_outcome takes (borrowed from the snapshot).
 */
int sy__select_for_match(const sy_match *m, const char *const *exclude,
                         size_t exclude_count, sy_selection *out,
                         sy__pick *pick, sy_error *err);

#endif
