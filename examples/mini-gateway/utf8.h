/*
 * utf8.h - the one judge of well-formed UTF-8 for the JSON the hosts
 * write for others to read: the mini-gateway's access log and admin
 * answers (util.c), its /metrics labels (metrics.c) and the nginx
 * module's admin answers (sw_json_str in
 * examples/nginx-module/ngx_http_switchyard_admin.c, which includes it
 * from here). Each writes a byte that is not part of a well-formed
 * sequence as \ufffd.
 */
#ifndef SWITCHYARD_EXAMPLES_UTF8_H
#define SWITCHYARD_EXAMPLES_UTF8_H

#include <stddef.h>

/* The length of the well-formed UTF-8 sequence at s (n bytes on), 1 to
 * 4 (Unicode's table 3-7: no overlong form, no surrogate, nothing past
 * U+10FFFF), or 0 when the bytes there are not one. */
static inline size_t utf8_seq_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len = c >= 0xc2 && c <= 0xdf   ? 2
                 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xf0 && c <= 0xf4 ? 4
                                          : 0;
    if (!len || n < len)
        return 0;
    unsigned lo = c == 0xe0   ? 0xa0
                  : c == 0xf0 ? 0x90
                              : 0x80,
             hi = c == 0xed   ? 0x9f
                  : c == 0xf4 ? 0x8f
                              : 0xbf;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

#endif
