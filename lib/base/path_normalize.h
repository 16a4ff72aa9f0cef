/*
 * path_normalize.h - request path normalisation before matching (after
 * Envoy's normalize_path, merge_slashes and
 * path_with_escaped_slashes_action): dot segments removed per RFC 3986
 * section 5.2.4 as the decoded path reads them, a path climbing above the
 * root rejected, optional merging of repeated slashes, and a choice for
 * encoded slashes (%2F, %5C). Matching, captures and the path sent
 * upstream all use the result. No allocation but from the caller's arena.
 */
#ifndef SY_PATH_NORMALIZE_H
#define SY_PATH_NORMALIZE_H

#include "base/util.h"

/* Values chosen to equal the router options the lead adds
 * (SY_PATH_NORMALIZE / SY_PATH_AS_IS, SY_SLASHES_*). */
enum {
    SY_PN_NORMALIZE = 0, /* default */
    SY_PN_AS_IS = 1
};
enum {
    SY_PN_SLASHES_KEEP = 0,   /* default: %2F stays encoded, inside a segment */
    SY_PN_SLASHES_REJECT = 1, /* a path holding %2F or %5C is rejected */
    SY_PN_SLASHES_DECODE = 2  /* %2F and %5C become '/' separators */
};

/* All zero is the secure default: normalise, keep repeated slashes, keep
 * encoded slashes encoded. */
typedef struct sy__path_norm_opts {
    int mode;            /* SY_PN_NORMALIZE or SY_PN_AS_IS */
    bool merge_slashes;  /* "//" becomes "/" */
    int escaped_slashes; /* SY_PN_SLASHES_* */
} sy__path_norm_opts;

/* The outcomes of sy__path_normalize besides 0. */
#define SY_PN_BAD_PATH 1 /* climbs above the root, or a rejected %2F/%5C */

/*
 * Normalise the raw (percent-encoded) request path `in`. Returns 0 and
 * *out: `in` itself when nothing changes, else a slice of `scratch`;
 * SY_PN_BAD_PATH when the path must not be routed; SY_ENOMEM.
 *
 * A segment is a dot segment when its decoded text without matrix
 * parameters is "." or ".." ("%2e%2E", "..;x=1" included). Other segments
 * are copied raw, their encoding untouched. A path without a leading '/'
 * is read as if it had one.
 */
int sy__path_normalize(const sy__path_norm_opts *o, sy_str in,
                       sy__arena *scratch, sy_str *out);

#endif
