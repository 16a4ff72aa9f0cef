/*
 * alloc_small.h - the default allocator's arena for blocks of fewer than
 * SY_MAP_MIN bytes (alloc_small.c), used by alloc_map.c only (and by the
 * tests that check it).
 */
#ifndef SY_ALLOC_SMALL_H
#define SY_ALLOC_SMALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h> /* __GLIBC__ */

/* SY_MAP_ON: the builds where the default allocator maps its own memory
 * (this arena, and alloc_map.c's large blocks): glibc on Linux (mremap,
 * malloc_usable_size), and not under AddressSanitizer, whose allocator
 * must see every block to check its bounds. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SY_MAP_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SY_MAP_ASAN 1
#endif
#if defined(__linux__) && defined(__GLIBC__) && !defined(SY_MAP_ASAN)
#define SY_MAP_ON 1
#endif

/* Blocks of SY_MAP_MIN bytes or more are mapped one by one (alloc_map.c),
 * smaller ones come from this arena. 512 KiB: an apply of 100,000 routes
 * frees ~65 MB in blocks above it; at 128 KiB (glibc's starting
 * threshold) a re-apply of 10,000 routes faulted in fresh pages for its
 * smaller temporaries too (~40 % slower; docs/architecture.md, "Memory of
 * an apply") */
#define SY_MAP_MIN ((size_t)512 * 1024)

/* True when the arena exists in this build (SY_MAP_ON); elsewhere every
 * call below returns NULL, 0 or false. */
bool sy__small_on(void);

/* A block of at least n bytes (0 < n < SY_MAP_MIN), 16-byte aligned, or
 * NULL when no span could be mapped (the caller falls back to libc). */
void *sy__small_alloc(size_t n);

/* The usable size of p when it is the arena's (its class's size), else 0
 * (p is libc's or a mapping of alloc_map.c, or NULL). */
size_t sy__small_size(const void *p);

/* The size of the class that serves n bytes (n < SY_MAP_MIN). */
size_t sy__small_class_size(size_t n);

/* Free p when it is the arena's and say so; false (nothing done) when it
 * is not. */
bool sy__small_free(void *p);

/* The default allocator's one lock: the arena's, which alloc_map.c's
 * table of mappings shares; held over fork() so that a child never
 * inherits it locked. Only where SY_MAP_ON. */
void sy__alloc_lock(void);
void sy__alloc_unlock(void);

/* An open-addressing table from addresses to a word, in memory mapped
 * directly (never libc's heap): the arena's spans by unit, alloc_map.c's
 * mappings with their lengths. Keys 0 and 1 are reserved (empty,
 * deleted). Under sy__alloc_lock. */
typedef struct sy__addr_entry {
    uintptr_t key;
    uintptr_t val;
} sy__addr_entry;
typedef struct sy__addr_tab {
    sy__addr_entry *e;
    size_t cap, used; /* used: live and deleted entries */
} sy__addr_tab;

/* The entry of `key`, or NULL. */
sy__addr_entry *sy__addr_tab_find(const sy__addr_tab *t, uintptr_t key);
/* Room for `more` new keys (the table rebuilt without its deleted entries
 * when it would pass 3/4 full); false when out of memory. */
bool sy__addr_tab_room(sy__addr_tab *t, size_t more);
/* Add `key` (absent; room made first). */
void sy__addr_tab_put(sy__addr_tab *t, uintptr_t key, uintptr_t val);
/* Delete an entry that find returned. */
void sy__addr_tab_delete(sy__addr_entry *e);

typedef struct sy__small_stats {
    size_t spans;      /* mapped spans, kept ones included */
    size_t span_bytes; /* their mapped bytes */
    size_t kept;       /* empty spans kept resident for reuse */
    size_t lazy;       /* empty spans whose pages the system may take */
    size_t blocks;     /* blocks handed out and not yet freed */
} sy__small_stats;

void sy__small_stats_get(sy__small_stats *out);

#endif
