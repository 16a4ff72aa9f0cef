/*
 * policy_args.h - reading the args of the stateful filters as SCG binds
 * them: Spring's relaxed names (keyResolver = key-resolver), one value per
 * field, unknown keys refused, typed values with located errors
 * ("<entry>.args.<key>"), comma lists, Spring's lenient enum names.
 */
#ifndef SY_POLICY_ARGS_H
#define SY_POLICY_ARGS_H

#include "base/util.h"

/* What the parsers of ratelimit.c, breaker.c and retry.c read. */
typedef struct sy__pargs {
    const sy_kv *args;
    size_t count;
    const char *filter; /* "Retry", ... for messages */
    const char *path;   /* the entry's JSON path */
    bool shortcut;      /* errors at the entry, the key in the message */
    sy_error *err;
    uint64_t used; /* bit i: args[i] was read (the first 64) */
} sy__pargs;

/* Spring's relaxed binding: equal when equal ignoring case, '-' and '_'. */
bool sy__parg_name_eq(const char *a, const char *b);
/* The value of the field `name` (any relaxed spelling), marked read; NULL
 * when absent. A field given twice is an error (*rc set). */
const char *sy__parg(sy__pargs *p, const char *name, int *rc);
/* Every value of the list field `name` (repeated keys, as a JSON array
 * gives them, and comma lists inside each), item by item; marked read.
 * *present: some value was given. */
int sy__parg_list(sy__pargs *p, const char *name,
                  int (*fn)(void *data, const char *item, size_t len),
                  void *data, bool *present);
/* Refuse the first arg no parser read: "unknown argument" naming the
 * known ones (`known`, for the message). */
int sy__parg_unknown(sy__pargs *p, const char *known);
/* An error at the field `key` (located as the entry's errors are). */
int sy__parg_fail(sy__pargs *p, int code, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Typed reads: 0 and *out (unchanged when absent), or an error. A
 * duration is at most 4294967295 ms (SY_ERANGE past it). */
int sy__parg_int(sy__pargs *p, const char *name, int64_t min, int64_t max,
                 int64_t *out, bool *present);
int sy__parg_bool(sy__pargs *p, const char *name, bool *out);
int sy__parg_duration(sy__pargs *p, const char *name, int64_t min_ms,
                      int64_t *out, bool *present);
int sy__parg_float(sy__pargs *p, const char *name, double min, bool min_open,
                   double max, double *out, bool *present);
int sy__parg_status(sy__pargs *p, const char *name, int *out);

/* Spring's lenient enum conversion: equal ignoring case and every
 * non-alphanumeric character. */
bool sy__parg_enum_eq(const char *text, size_t len, const char *name);
/* Split a comma list in place of a callback: calls fn for each trimmed,
 * non-empty item; stops at and returns its first non-zero result. */
int sy__parg_each(const char *list,
                  int (*fn)(void *data, const char *item, size_t len),
                  void *data);

#endif
