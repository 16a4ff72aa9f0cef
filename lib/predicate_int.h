/*
 * predicate_int.h - the compiled predicate object, shared by predicate.c
 * (compiling, freeing, introspection) and predicate_eval.c (testing it
 * per request). Nothing else sees it.
 */
#ifndef SY_PREDICATE_INT_H
#define SY_PREDICATE_INT_H

#include "predicate.h"
#include "values.h" /* sy__cidr */

struct sy__pred {
    uint8_t kind;                /* sy__pred_kind */
    bool in_arena : 1;           /* this object and pats[] live in the route's
                                    arena */
    bool trailing : 1;           /* Path */
    bool has_lo : 1, has_hi : 1; /* After / Before / Between */
    bool many : 1; /* Path, Host: more than one pattern (pats[]) */
    /* the most of any of its patterns (SY_PATTERN_VARS_MAX) */
    uint16_t var_count;
    uint32_t max_groups;
    /* what each kind holds (a predicate is one kind: they overlap); 32
     * bytes in all (SY_PRED_OBJECT_BYTES), every route has one or more */
    union {
        struct { /* Path, Host: read them with sy__pred_pat */
            union {
                sy__pattern **pats; /* many */
                sy__pattern *one;   /* !many: the only pattern */
            };
            uint32_t npats;
            /* Path (Host) of one all-literal pattern (sy__pred_note_literal):
             * the length of its text (the pattern's source, "/" + each
             * segment; the labels joined by '.') and its segment (label)
             * count, compared without the pattern matcher; lit: set */
            uint32_t lit_len;
            uint16_t lit_segs;
            bool lit;
            bool lit_rest; /* Path: the literals, then a last "**" */
        };
        struct { /* Method: standard ones in the mask, others listed */
            uint32_t mask;
            char **others;
            size_t nothers;
        };
        struct { /* Header, Query, Cookie (re may be NULL); Weight: the
                  * group's name and the weight */
            char *name;
            sy__regex *re;
            uint32_t name_len;
            uint32_t weight;
        };
        struct { /* After / Before / Between: lo < now < hi */
            int64_t lo, hi;
        };
        struct { /* RemoteAddr, XForwardedRemoteAddr */
            sy__cidr *cidrs;
            size_t ncidrs;
            int64_t trusted;
        };
        struct { /* host factory */
            const sy_predicate_factory *hf;
            void *state;
        };
    };
};

/* Pattern i (< npats) of a Path or Host predicate. */
static inline sy__pattern *sy__pred_pat(const sy__pred *p, size_t i) {
    return p->many ? p->pats[i] : p->one;
}

/* After compiling a Path (Host) predicate: set lit/lit_len/lit_segs when
 * it is one rooted pattern of literal segments only (perhaps then a last
 * "**": lit_rest), whose source is exactly "/" + each literal (then "/" "**")
 * (one host pattern of non-empty literal labels, no leading or trailing '.',
 * whose source is exactly the labels joined by
 * '.'); predicate_eval.c. */
void sy__pred_note_literal(sy__pred *p);

#endif
