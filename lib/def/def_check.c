/*
 * def_check.c - the checks of an entry's arguments: each value by its
 * field's type, the cross-field rules of particular factories, and the
 * errors they name (at the entry for a shortcut, at the argument for the
 * object form). Used by the general reading of entries (def_entry.c) and
 * the common reading of built-in shortcuts (def_shortcut.c).
 */
#include "base/values.h"
#include "def/def_build.h"

int sy__def_arg_error(const sy__entry_ctx *ec, int code, const char *key,
                      const char *reason, sy_error *err) {
    char p[256];
    if (ec->shortcut) {
        return sy__error_set(err, code, ec->path, "%s: %s: %s", ec->name, key,
                             reason);
    }
    sy__def_path(p, sizeof p, "%s.args.%s", ec->path, key);
    return sy__error_set(err, code, p, "%s: %s: %s", ec->name, key, reason);
}

/* A header field's value as written: a control byte but HTAB (a CR LF
 * would end the header and begin another) is refused. */
static bool field_value(const char *v, const char **why) {
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f) {
            *why = "a header value must not contain CR, LF or other control "
                   "characters (HTAB aside)";
            return false;
        }
    return true;
}

/* Validate one value by its field type. */
int sy__def_check_value(const sy__field_spec *f, const sy__entry_ctx *ec,
                        const char *v, sy_error *err) {
    const char *why = NULL;
    int64_t iv;
    bool ok = true;
    int code = SY_EARG;
    switch (f->type) {
    case SY_FT_STRING:
    case SY_FT_REGEX:
    case SY_FT_PATH_PATTERN:
    case SY_FT_HOST_PATTERN: break;
    case SY_FT_NONEMPTY:
        if (!*v)
            return sy__def_arg_error(ec, SY_EMISSING, f->name,
                                     "must not be empty", err);
        break;
    case SY_FT_INT:
    case SY_FT_UINT:
    case SY_FT_POSINT: {
        int64_t lo =
            f->type == SY_FT_INT ? INT32_MIN : (f->type == SY_FT_UINT ? 0 : 1);
        if (!sy__value_int64(v, INT64_MIN, INT64_MAX, &iv, &why)) {
            ok = false;
            if (strcmp(why, "integer out of range") == 0)
                code = SY_ERANGE;
        } else if (iv < lo || iv > INT32_MAX) {
            ok = false;
            code = SY_ERANGE;
            why = lo == 0   ? "must be an integer from 0 to 2147483647"
                  : lo == 1 ? "must be an integer from 1 to 2147483647"
                            : "out of the 32-bit integer range";
        }
        break;
    }
    case SY_FT_BOOL: ok = sy__value_bool(v, NULL, &why); break;
    case SY_FT_DURATION: ok = sy__value_duration_ms(v, NULL, &why); break;
    case SY_FT_SIZE: ok = sy__value_size(v, NULL, &why); break;
    case SY_FT_DATETIME: ok = sy__value_datetime_ms(v, NULL, &why); break;
    case SY_FT_CIDR: ok = sy__value_cidr(v, NULL, &why); break;
    case SY_FT_STATUS: {
        int st;
        ok = sy__value_status(v, &st, &why);
        if (!ok && strstr(why, "out of range"))
            code = SY_ERANGE;
        break;
    }
    case SY_FT_METHOD:
    case SY_FT_HEADER_NAME: ok = sy__value_token(v, &why); break;
    case SY_FT_HOST:
    case SY_FT_FIELD_VALUE:
        if (f->type == SY_FT_HOST && !*v)
            return sy__def_arg_error(ec, SY_EMISSING, f->name,
                                     "must not be empty", err);
        ok = field_value(v, &why);
        break;
    case SY_FT_PATH_TEXT:
        for (const unsigned char *p = (const unsigned char *)v; ok && *p; p++)
            ok = *p > 0x20 && *p < 0x7f;
        why = "a path must not contain spaces, control characters or "
              "non-ASCII bytes (percent-encode them: %20, %C3%A9)";
        break;
    case SY_FT_KEYVALUE: {
        const char *colon = strchr(v, ':');
        if (!colon || colon == v) {
            ok = false;
            why = "expected Name:Value";
        } else {
            char name[256];
            size_t n = (size_t)(colon - v);
            ok = n < sizeof name;
            why = "header name too long";
            if (ok) {
                memcpy(name, v, n);
                name[n] = '\0';
                ok =
                    sy__value_token(name, &why) && field_value(colon + 1, &why);
            }
        }
        break;
    }
    case SY_FT_STRATEGY:
        ok = strcmp(v, "RETAIN_FIRST") == 0 || strcmp(v, "RETAIN_LAST") == 0 ||
             strcmp(v, "RETAIN_UNIQUE") == 0;
        why = "expected RETAIN_FIRST, RETAIN_LAST or RETAIN_UNIQUE";
        break;
    case SY_FT_STRIP_MODE:
        ok = strcmp(v, "NEVER_STRIP") == 0 || strcmp(v, "AS_IN_REQUEST") == 0 ||
             strcmp(v, "ALWAYS_STRIP") == 0;
        why = "expected NEVER_STRIP, AS_IN_REQUEST or ALWAYS_STRIP";
        break;
    case SY_FT_URL:
        if (!*v)
            return sy__def_arg_error(ec, SY_EMISSING, f->name,
                                     "must not be empty", err);
        for (const unsigned char *p = (const unsigned char *)v; *p; p++)
            if (*p <= 0x20 || *p == 0x7f) {
                ok = false;
                why = "a URL must not contain spaces or control characters";
                break;
            }
        break;
    }
    if (!ok)
        return sy__def_arg_error(ec, code, f->name, why, err);
    return 0;
}

/* Cross-field rules of particular factories. */
int sy__def_check_rules(const sy__def_entry *e, const sy__entry_ctx *ec,
                        sy_error *err) {
    if (!sy__def_spec(e))
        return 0;
    if (sy__def_spec(e)->id == SY_P_BETWEEN) {
        int64_t a = 0, b = 0;
        sy__value_datetime_ms(sy__def_arg(e, "datetime1"), &a, NULL);
        sy__value_datetime_ms(sy__def_arg(e, "datetime2"), &b, NULL);
        if (a >= b)
            return sy__def_arg_error(ec, SY_EARG, "datetime2",
                                     "must be later than datetime1", err);
    }
    if (sy__def_spec(e)->id == SY_F_REDIRECT_TO) {
        int st = 0;
        sy__value_status(sy__def_arg(e, "status"), &st, NULL);
        if (st < 300 || st > 399)
            return sy__def_arg_error(ec, SY_ERANGE, "status",
                                     "a redirect status must be 3xx", err);
    }
    return 0;
}

int sy__def_entry_checks(const sy__def_entry *e, const char *path,
                         sy_error *err) {
    const sy__factory_spec *spec = sy__def_spec(e);
    sy__entry_ctx ec = {path, true, spec->name, spec};
    for (size_t i = 0, f = 0; i < e->arg_count; i++) {
        while (e->args[i].key != spec->fields[f].name) /* field order */
            f++;
        int rc =
            sy__def_check_value(&spec->fields[f], &ec, e->args[i].value, err);
        if (rc)
            return rc;
    }
    return sy__def_check_rules(e, &ec, err);
}
