/*
 * pattern_elem.c - owns one element (segment or label) of a path or host
 * pattern: compiling a glob or regex segment into its element, the
 * pattern's variable list, compile errors with their offset, and matching
 * one segment against one element. pattern.c (paths) and pattern_host.c
 * (hosts) both stand on it; it calls neither.
 */
#include "route/pattern_int.h"

#include "base/budget.h"

#include <stdio.h>

int sy__pat_error(sy_error *err, int code, size_t off, const char *msg) {
    sy__error_set(err, code, "", "%s", msg);
    if (err)
        err->offset = off;
    return code;
}

/* ------------------------------------------------------------------ */
/* Compiling path patterns                                              */
/* ------------------------------------------------------------------ */

int sy__pat_set_nvars(sy__pattern *p, sy__pelem *el, size_t off,
                      sy_error *err) {
    if (p->nvars - el->var > UINT16_MAX)
        return sy__pat_error(err, SY_EPATTERN, off,
                             "too many variables in one segment");
    el->nvars = (uint16_t)(p->nvars - el->var);
    return SY_OK;
}

int sy__pat_add_var(sy__pattern *p, sy_str name, size_t off, bool unique,
                    sy_error *err) {
    for (uint32_t i = 0; unique && i < p->nvars; i++) {
        if (sy__str_eq(p->vars[i], name.ptr, name.len)) {
            char msg[160];
            snprintf(msg, sizeof msg, "duplicate variable name '%.*s'",
                     (int)(name.len > 100 ? 100 : name.len), name.ptr);
            return sy__pat_error(err, SY_EPATTERN, off, msg);
        }
    }
    if (p->nvars >= SY_PATTERN_VARS_MAX)
        return sy__pat_error(err, SY_EPATTERN, off,
                             "more than 65535 variables in one pattern");
    p->vars[p->nvars++] = name;
    return SY_OK;
}

static void put_literal(sy__buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
            (c >= 'A' && c <= 'Z')) {
            sy__buf_putc(b, (char)c);
        } else {
            char e[6] = {'\\', 'x', '{', hex[c >> 4], hex[c & 15], '}'};
            sy__buf_append(b, e, sizeof e);
        }
    }
}

static void note_groups(sy__pattern *p, const pcre2_code *re) {
    uint32_t g = sy__re_capture_count(re) + 1;
    if (g > p->max_groups)
        p->max_groups = g;
}

/* Spring compiles every regex of a pattern with Pattern.DOTALL. */
#define SY_PAT_RE_FLAGS (SY_RE_WHOLE | PCRE2_DOTALL)

static const char no_groups_msg[] =
    "capturing groups are not allowed in {name:regex}; use (?:...)";

int sy__pat_compile_whole(sy__pattern *p, sy__re_env *env, sy__pelem *el,
                          const tok *t, sy_error *err) {
    int ec = 0;
    size_t eo = 0;
    el->re = NULL; /* the offset's place (not read again) */
    el->kind = PE_REGEX;
    el->whole = true;
    el->re = sy__re_env_compile(env, p->src + t->roff, t->rlen, SY_PAT_RE_FLAGS,
                                &ec, &eo);
    if (!el->re)
        return sy__re_error(err, "", ec, t->roff + eo);
    /* Spring: "No capture groups allowed in the constraint regex" */
    if (sy__re_capture_count(el->re))
        return sy__pat_error(err, SY_EPATTERN, t->roff, no_groups_msg);
    note_groups(p, el->re);
    return SY_OK;
}

int sy__pat_compile_mixed(sy__pattern *p, sy__re_env *env, sy__pelem *el,
                          const tok *t, size_t nt, sy_error *err) {
    const char *s = p->src;
    int ec = 0;
    size_t eo = 0;
    uint32_t off = el->offset; /* re takes its place */
    el->re = NULL;
    el->kind = PE_REGEX;
    for (size_t i = 0; i < nt; i++) {
        if (t[i].kind != T_RVAR)
            continue;
        pcre2_code *re = sy__re_env_compile(env, s + t[i].roff, t[i].rlen,
                                            SY_PAT_RE_FLAGS, &ec, &eo);
        if (!re)
            return sy__re_error(err, "", ec, t[i].roff + eo);
        uint32_t groups = sy__re_capture_count(re);
        pcre2_code_free(re);
        if (groups)
            return sy__pat_error(err, SY_EPATTERN, t[i].roff, no_groups_msg);
    }
    sy__buf b;
    sy__buf_init(&b, env->a);
    for (size_t i = 0; i < nt; i++) {
        switch (t[i].kind) {
        case T_LIT: put_literal(&b, s + t[i].off, t[i].len); break;
        case T_Q: /* one UTF-8 character (or one stray byte) */
            sy__buf_puts(&b, "(?:[^\\x80-\\xbf][\\x80-\\xbf]*|[\\x80-\\xbf])");
            break;
        case T_STAR: sy__buf_puts(&b, ".*"); break;
        case T_VAR: sy__buf_puts(&b, "(.*)"); break;
        case T_RVAR:
            sy__buf_putc(&b, '(');
            sy__buf_append(&b, s + t[i].roff, t[i].rlen);
            sy__buf_putc(&b, ')');
            break;
        case T_REST: break; /* rejected before */
        }
    }
    if (b.failed) {
        sy__buf_free(&b);
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    }
    el->re = sy__re_env_compile(env, b.ptr, b.len, SY_PAT_RE_FLAGS, &ec, &eo);
    sy__buf_free(&b);
    if (!el->re)
        return sy__re_error(err, "", ec, off);
    if (sy__re_capture_count(el->re) != el->nvars)
        return sy__pat_error(err, SY_EPATTERN, off,
                             "a regex changes the groups of its segment");
    note_groups(p, el->re);
    return SY_OK;
}

static void put_cap(sy__capture *caps, size_t *nc, sy_str name, sy_str v) {
    if (caps) {
        caps[*nc].name = name;
        caps[*nc].value = v;
        (*nc)++;
    }
}

bool sy__pat_elem_match(const sy__pattern *p, const sy__pelem *el, sy_str seg,
                        bool last, sy__capture *caps, size_t *nc,
                        pcre2_match_data *md) {
    switch ((pe_kind)el->kind) {
    case PE_LITERAL:
        return seg.len == el->len &&
               (seg.len == 0 ||
                memcmp(seg.ptr, p->src + el->offset, seg.len) == 0);
    case PE_STAR: return seg.len > 0 || last;
    case PE_VAR:
        if (seg.len == 0)
            return false;
        put_cap(caps, nc, p->vars[el->var], seg);
        return true;
    case PE_REGEX: break;
    case PE_MULTI: return false;
    }
    /* Spring: only a last regex element without variables may match an
     * empty segment (Spring's "/" + "****" matches "/") */
    if (!md || (seg.len == 0 && (!last || el->nvars)))
        return false;
    /* under the request's budget (budget.h) */
    int rc = sy__re_match(el->re, (PCRE2_SPTR)(seg.len ? seg.ptr : ""), seg.len,
                          0, 0, md, sy__pat_mctx(p), SY_RE_MATCH_LIMIT);
    if (rc < 0)
        return false;
    if (el->whole) {
        put_cap(caps, nc, p->vars[el->var], seg);
        return true;
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    uint32_t oc = pcre2_get_ovector_count(md);
    for (uint32_t v = 0; v < el->nvars; v++) {
        uint32_t g = v + 1;
        sy_str val = {"", 0};
        if (g < oc && ov[2 * g] != PCRE2_UNSET)
            val = (sy_str){seg.ptr + ov[2 * g], ov[2 * g + 1] - ov[2 * g]};
        put_cap(caps, nc, p->vars[el->var + v], val);
    }
    return true;
}

/* "{*x}": "/" + each segment of [b, e), or "" for none. */
int sy__pat_compile_glob(sy__pattern *p, sy__re_env *env, sy__pelem *el,
                         const tok *t, size_t nt, sy_error *err) {
    if (nt == 1 && t[0].kind == T_STAR) {
        el->kind = PE_STAR;
        return SY_OK;
    }
    if (nt == 1 && t[0].kind == T_VAR) {
        el->kind = PE_VAR;
        return SY_OK;
    }
    if (nt == 1 && t[0].kind == T_RVAR)
        return sy__pat_compile_whole(p, env, el, &t[0], err);
    return sy__pat_compile_mixed(p, env, el, t, nt, err);
}
