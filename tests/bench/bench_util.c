/* bench_util.c - helpers for switchyard-bench (see bench_util.h). */
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#ifndef SY_BENCH_BUILDTYPE
#define SY_BENCH_BUILDTYPE "unknown"
#endif
#ifndef SY_BENCH_OPTIMIZATION
#define SY_BENCH_OPTIMIZATION "?"
#endif

uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, size_t n) {
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double bench_quantile(const double *v, size_t n, double q) {
    if (n == 0)
        return 0;
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

void *bench_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "switchyard-bench: out of memory\n");
        exit(3);
    }
    return p;
}

static void *xrealloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    if (!p) {
        fprintf(stderr, "switchyard-bench: out of memory\n");
        exit(3);
    }
    return p;
}

void bench_buf_printf(bench_buf *b, const char *fmt, ...) {
    for (;;) {
        size_t room = b->cap - b->len;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->ptr ? b->ptr + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            fprintf(stderr, "switchyard-bench: bad format\n");
            exit(3);
        }
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len <= (size_t)n)
            cap *= 2;
        b->ptr = xrealloc(b->ptr, cap);
        b->cap = cap;
    }
}

void bench_buf_free(bench_buf *b) {
    free(b->ptr);
    b->ptr = NULL;
    b->len = b->cap = 0;
}

static char *keep(bench_reqs *rs, char *p) {
    if (rs->nstrings == rs->capstrings) {
        rs->capstrings = rs->capstrings ? rs->capstrings * 2 : 256;
        rs->strings =
            xrealloc(rs->strings, rs->capstrings * sizeof *rs->strings);
    }
    rs->strings[rs->nstrings++] = p;
    return p;
}

/* A request's strings are slices of its own HTTP/1.1 head, one block of
 * text as a host's read buffer holds it ("GET /p HTTP/1.1\r\nHost: h\r\n
 * Name: value\r\n...\r\n\r\n"): what the mini-gateway and the nginx module
 * hand the library (head_scan.c's slices of the client's buffer, nginx's of
 * r->header_in), so a cold lookup reads the few lines of one head, not one
 * allocation a string. The header array (a host's: in its connection
 * object) is an allocation of its own. */
sy_request *bench_reqs_add(bench_reqs *rs, const char *method, const char *host,
                           const char *path, const char *const *headers,
                           size_t header_count) {
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? rs->cap * 2 : 256;
        rs->reqs = xrealloc(rs->reqs, rs->cap * sizeof *rs->reqs);
    }
    sy_request init = SY_REQUEST_INIT;
    sy_request *r = &rs->reqs[rs->n++];
    *r = init;
    size_t size = strlen(method) + strlen(path) + 16 + 2;
    if (host)
        size += strlen(host) + 8;
    for (size_t i = 0; i < header_count; i++)
        size += strlen(headers[2 * i]) + strlen(headers[2 * i + 1]) + 4;
    char *head = keep(rs, bench_xmalloc(size + 1)), *p = head;
#define HEAD_PUT(s, n) (memcpy(p, s, n), p += (n))
#define HEAD_STR(field, s)                                                     \
    do {                                                                       \
        size_t n_ = strlen(s);                                                 \
        (field) = (sy_str){p, n_};                                             \
        HEAD_PUT(s, n_);                                                       \
    } while (0)
    HEAD_STR(r->method, method);
    HEAD_PUT(" ", 1);
    const char *q = strchr(path, '?');
    HEAD_STR(r->path, path);
    if (q) {
        r->path.len = (size_t)(q - path);
        r->query = (sy_str){r->path.ptr + r->path.len + 1, strlen(q + 1)};
    }
    HEAD_PUT(" HTTP/1.1\r\n", 11);
    if (host) {
        HEAD_PUT("Host: ", 6);
        HEAD_STR(r->host, host);
        HEAD_PUT("\r\n", 2);
    }
    sy_header *h = NULL;
    if (header_count)
        h = (sy_header *)(void *)keep(rs,
                                      bench_xmalloc(header_count * sizeof *h));
    for (size_t i = 0; i < header_count; i++) {
        HEAD_STR(h[i].name, headers[2 * i]);
        HEAD_PUT(": ", 2);
        HEAD_STR(h[i].value, headers[2 * i + 1]);
        HEAD_PUT("\r\n", 2);
    }
    HEAD_PUT("\r\n", 3); /* and the NUL */
#undef HEAD_STR
#undef HEAD_PUT
    r->headers = h;
    r->header_count = header_count;
    r->scheme = (sy_str){"http", 4};
    r->remote_addr = (sy_str){"10.1.2.3", 8};
    r->now_ms = 1700000000000;
    r->seed = (uint64_t)rs->n * 0x9e3779b97f4a7c15ull;
    return r;
}

void bench_reqs_free(bench_reqs *rs) {
    for (size_t i = 0; i < rs->nstrings; i++)
        free(rs->strings[i]);
    free(rs->strings);
    free(rs->reqs);
    memset(rs, 0, sizeof *rs);
}

uint64_t bench_rand(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

char *bench_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    bench_buf b = {0};
    char chunk[65536];
    size_t n;
    bench_buf_printf(&b, "%s", "");
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b.cap - b.len <= n) {
            b.cap = (b.cap + n) * 2;
            b.ptr = xrealloc(b.ptr, b.cap);
        }
        memcpy(b.ptr + b.len, chunk, n);
        b.len += n;
        b.ptr[b.len] = '\0';
    }
    fclose(f);
    *len = b.len;
    return b.ptr;
}

static uint64_t proc_kb(const char *file, const char *key) {
    FILE *f = fopen(file, "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t kb = 0;
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            kb = strtoull(line + klen + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb;
}

uint64_t bench_rss_bytes(void) {
    return proc_kb("/proc/self/status", "VmRSS") * 1024;
}

uint64_t bench_lazyfree_bytes(void) {
    return proc_kb("/proc/self/smaps_rollup", "LazyFree") * 1024;
}

uint64_t bench_anon_huge_bytes(void) {
    return proc_kb("/proc/self/smaps_rollup", "AnonHugePages") * 1024;
}

static void cpu_model(char *out, size_t cap, int *cpus) {
    snprintf(out, cap, "unknown");
    *cpus = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    bool have = false;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "processor", 9) == 0)
            (*cpus)++;
        if (!have && strncmp(line, "model name", 10) == 0) {
            const char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ' || *c == '\t')
                    c++;
                snprintf(out, cap, "%s", c);
                out[strcspn(out, "\n")] = '\0';
                have = true;
            }
        }
    }
    fclose(f);
}

void bench_print_machine(void) {
    char model[256];
    int cpus;
    cpu_model(model, sizeof model, &cpus);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    printf("# switchyard-bench, libswitchyard %s\n", sy_version());
    printf("# cpu: %s\n", model);
    printf("# cores: %ld online (%d listed in /proc/cpuinfo)\n", online, cpus);
    struct utsname u;
    if (uname(&u) == 0)
        printf("# os: %s %s %s\n", u.sysname, u.release, u.machine);
#if defined(__clang__)
    printf("# compiler: clang %s\n", __clang_version__);
#elif defined(__GNUC__)
    printf("# compiler: gcc %s\n", __VERSION__);
#else
    printf("# compiler: unknown\n");
#endif
    printf("# build: buildtype=%s optimization=%s%s\n", SY_BENCH_BUILDTYPE,
           SY_BENCH_OPTIMIZATION,
#ifdef NDEBUG
           " NDEBUG"
#else
           ""
#endif
    );
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        char line[128];
        if (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = '\0';
            printf("# loadavg at start: %s\n", line);
        }
        fclose(f);
    }
    time_t now = time(NULL);
    struct tm tm;
    char when[64];
    if (gmtime_r(&now, &tm) &&
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm))
        printf("# date: %s\n", when);
    printf("# format: name routes value unit; values are medians of "
           "repetitions\n");
    fflush(stdout);
}
