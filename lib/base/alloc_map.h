/*
 * alloc_map.h - the allocator every lib/ module allocates through: the
 * resolved hooks (sy__alloc) and the library's default allocator, which
 * alloc_map.c implements (large blocks mapped directly, small ones from
 * alloc_small.c's spans). util.c's sy__malloc and friends call through it.
 */
#ifndef SY_ALLOC_MAP_H
#define SY_ALLOC_MAP_H

#include <stdbool.h>
#include <stddef.h>

#define SY_UNUSED(x) ((void)(x))

/* A resolved allocator: every member non-NULL. */
typedef struct sy__alloc {
    void *(*malloc)(void *data, size_t size);
    void *(*realloc)(void *data, void *ptr, size_t size);
    void (*free)(void *data, void *ptr);
    void *data;
} sy__alloc;

/* The library's default allocator (alloc_map.c): blocks of SY_MAP_MIN
 * bytes (alloc_small.h) or more are mapped and unmapped directly, so that
 * an apply's large temporaries go back to the system when freed, whatever
 * glibc's dynamic mmap threshold has risen to; smaller ones come from the
 * library's own spans (alloc_small.c), out of libc's heap (glibc on
 * Linux; elsewhere libc's). Blocks it returns are freed by it only (never
 * by libc's free). */
void sy__alloc_default(sy__alloc *out);
/* n zeroed bytes from `a` when it is the default allocator (a mapping
 * or libc's calloc: no page touched to clear it); SY_ALLOC_NOT_DEFAULT
 * for any other allocator (sy__calloc then clears a block itself). */
void *sy__alloc_default_calloc(const sy__alloc *a, size_t n);
#define SY_ALLOC_NOT_DEFAULT ((void *)1)
/* The one shared copy of the default allocator when `a` is it (a route
 * then points at it instead of holding its own copy), else NULL. */
const sy__alloc *sy__alloc_default_shared(const sy__alloc *a);
/* True when sy__alloc_default maps large blocks (else it is libc's). */
bool sy__alloc_maps_large(void);
/* The length of the mapping that holds p when p is a block the default
 * allocator mapped itself (one of 512 KiB or more), else 0: a caller that
 * frees a large block a share at a time (shrinking it with realloc) can
 * learn its size. */
size_t sy__alloc_mapped_len(const void *p);
/* p, a block the default allocator mapped itself, cut to its first `to`
 * bytes in place (whole pages; its room given back whatever its size, not
 * kept as realloc keeps a small block's), or with `to` 0 unmapped whole
 * (then p is gone: not kept for reuse, no kept block pushed out): true
 * when done; false, nothing done, when p is no such block or `to` is not
 * below its length. For a caller giving back a large block a part at a
 * time, so that no part unmaps more than it asked (index_step.c). */
bool sy__alloc_cut(void *p, size_t to);
/* n bytes (zeroed when asked) for a large array that lives long and is
 * read at random: an index built in one go (a lookup's TLB misses at
 * 1,000,000 routes, docs/performance.md). From the default allocator, a
 * block over 2 MiB is mapped from a 2 MiB boundary and advised
 * MADV_HUGEPAGE (transparent huge pages where the system's mode is
 * madvise or always), zero already; a failed advice leaves it in small
 * pages. Any other block as sy__malloc would give it. Freed by sy__free;
 * a huge block is never kept for reuse (alloc_map.c). */
void *sy__alloc_huge(const sy__alloc *a, size_t n, bool zero);
/* A bulk of temporaries (on) or not (off), for the calling thread until
 * it says otherwise; returns the state before, to be set back. In a bulk,
 * a block of 2 MiB or more that the default allocator maps afresh, or
 * moves to grow to 2 MiB or more, is placed and advised as sy__alloc_huge's
 * (2 MiB pages: one fault where 512 were, docs/performance.md "Round 11
 * (session 43)"). For the large arrays of a document's apply, most freed
 * before it returns: a block that outlives it keeps its huge pages, which
 * hold at most one partly used 2 MiB page more than small ones. */
bool sy__alloc_bulk(bool on);
/* True when p is a block of sy__alloc_huge that was advised. */
bool sy__alloc_huge_advised(const void *p);
/* Tests: the advice fails from now on (fail) or not, as on a kernel
 * without transparent huge pages. */
void sy__alloc_huge_test_fail(bool fail);

#endif
