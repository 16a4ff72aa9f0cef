/*
 * predicate_int.h - the compiled predicate object, shared by predicate.c
 * (compiling, freeing, introspection) and predicate_eval.c (testing it
 * per request), and the matcher's inline quick tests (predicate_quick.h).
 * Nothing else sees it.
 */
#ifndef SY_PREDICATE_INT_H
#define SY_PREDICATE_INT_H

#include "base/values.h" /* sy__cidr */
#include "route/predicate.h"

struct sy__pred {
    uint8_t kind;                /* sy__pred_kind */
    bool in_arena : 1;           /* this object and pats[] live in the route's
                                    arena */
    bool trailing : 1;           /* Path */
    bool has_lo : 1, has_hi : 1; /* After / Before / Between */
    bool many : 1; /* Path, Host: more than one pattern (pats[]) */
    /* Path (Host) of one all-literal pattern (sy__pred_note_literal):
     * compared without the pattern matcher (lit_len, lit_segs, lit_src
     * below, over the fields a literal does not need) */
    bool lit : 1;
    bool lit_rest : 1; /* Path: the literals, then a last "**" */
    /* a Host of one "*.lit.lit" pattern (star_suffix), or a Path of one
     * pattern of literals then a last "**" or "{*name}" that is not a
     * lit: its text (tail_off from this object: the suffix; the source)
     * and lengths (tail_len: the suffix's; the literals' "/a/b"), so the
     * quick tests read no pattern (sy__pred_note_literal) */
    bool tail : 1;
    union {
        /* the most of any of its patterns (SY_PATTERN_VARS_MAX); read
         * with sy__pred_var_count (0 for a lit) */
        uint16_t var_count;
        uint16_t lit_segs; /* lit: its segment (label) count */
    };
    union {
        /* Path, Host: the most of any pattern (others: sy__pred_max_groups
         * works it out; 1 for a lit) */
        uint32_t max_groups;
        uint32_t name_len; /* Header, Query, Cookie, Weight */
        /* lit: the length of its text (the pattern's source, "/" + each
         * segment; the labels joined by '.') */
        uint32_t lit_len;
    };
    /* what each kind holds (a predicate is one kind: they overlap); 24
     * bytes in all (SY_PRED_OBJECT_BYTES), every route has one or more */
    union {
        struct { /* Path, Host: read them with sy__pred_pat, sy__pred_npats */
            union {
                sy__pattern **pats; /* many */
                sy__pattern *one;   /* !many: the only pattern */
            };
            union {
                uint32_t npats; /* many: the patterns (else one) */
                /* lit: the pattern's source (one->src), so that a test
                 * reads the text without the pattern: one line less a
                 * cold candidate (docs/performance.md, round 11) */
                const char *lit_src;
                /* tail: the text's offset from this object, the
                 * lengths; tail_var: a Path's {*name}'s name length
                 * (0: "**"), the name at text + tail_len + 3 */
                struct {
                    int32_t tail_off;
                    uint16_t tail_len, tail_var;
                };
            };
        };
        struct { /* Method: standard ones in the mask, others listed */
            char **others;
            uint32_t mask;
            uint32_t nothers;
        };
        struct { /* Header, Query, Cookie (re may be NULL); Weight: the
                  * group's name and the weight. The name is the entry's
                  * argument text in a route (in_arena: borrowed, next to
                  * the objects), else a copy */
            char *name;
            union {
                sy__regex *re;   /* not Weight */
                uint32_t weight; /* Weight */
            };
        };
        struct { /* After / Before / Between: lo < now < hi */
            int64_t lo, hi;
        };
        struct { /* RemoteAddr, XForwardedRemoteAddr */
            sy__cidr *cidrs;
            uint32_t ncidrs;
            int32_t trusted; /* 1..INT32_MAX */
        };
        struct { /* host factory */
            const sy_predicate_factory *hf;
            void *state;
        };
    };
};

/* The patterns of a Path or Host predicate. */
static inline size_t sy__pred_npats(const sy__pred *p) {
    return p->many ? p->npats : 1;
}

/* Pattern i (< npats) of a Path or Host predicate. */
static inline sy__pattern *sy__pred_pat(const sy__pred *p, size_t i) {
    return p->many ? p->pats[i] : p->one;
}

/* A tail predicate's text (tail). */
static inline const char *sy__pred_tail(const sy__pred *p) {
    return (const char *)((uintptr_t)(const void *)p +
                          (uintptr_t)(intptr_t)p->tail_off);
}

/* After compiling a Path (Host) predicate: set lit/lit_len/lit_segs/lit_src
 * when it is one rooted pattern of literal segments only (perhaps then a last
 * "**": lit_rest), whose source is exactly "/" + each literal (then "/" "**")
 * (one host pattern of non-empty literal labels, no leading or trailing '.',
 * whose source is exactly the labels joined by
 * '.'); else its tail when it has one; predicate.c. */
void sy__pred_note_literal(sy__pred *p);

#endif
