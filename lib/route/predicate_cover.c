/*
 * predicate_cover.c - containment of compiled predicates, for the
 * shadowed-route check (snapshot/shadow.c): a Path (Host) predicate that
 * holds for every request another one holds for, and the time window of
 * After / Before / Between. Exact when it says yes; no when unsure.
 */
#include "route/predicate_int.h"

bool sy__pred_patterns_cover(const sy__pred *q, const sy__pred *b, size_t only,
                             const sy__alloc *alloc) {
    if (q->kind != b->kind || (q->kind != SY_PK_PATH && q->kind != SY_PK_HOST))
        return false;
    bool host = q->kind == SY_PK_HOST;
    size_t nb = sy__pred_npats(b), nq = sy__pred_npats(q);
    for (size_t i = 0; i < nb; i++) {
        if (only != SIZE_MAX && i != only)
            continue;
        const sy__pattern *p = sy__pred_pat(b, i);
        bool in = false;
        for (size_t j = 0; j < nq && !in; j++) {
            const sy__pattern *qp = sy__pred_pat(q, j);
            in = host
                     ? sy__pattern_covers_host(qp, p, alloc)
                     : sy__pattern_covers_path(qp, q->trailing, p, b->trailing);
        }
        if (!in)
            return false;
    }
    return true;
}

bool sy__pred_can_match_path(const sy__pred *p) {
    if (p->kind != SY_PK_PATH)
        return true;
    for (size_t i = 0; i < sy__pred_npats(p); i++)
        if (sy__pattern_can_match(sy__pred_pat(p, i)))
            return true;
    return false;
}

bool sy__pred_time_window(const sy__pred *p, int64_t *lo, int64_t *hi) {
    if (p->kind != SY_PK_TIME)
        return false;
    *lo = p->has_lo ? p->lo : INT64_MIN;
    *hi = p->has_hi ? p->hi : INT64_MAX;
    return true;
}
