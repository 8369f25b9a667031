/* The byte-pair merge of one pre-tokenized piece, counting the tokens it yields.
 * The rule is tiktoken's: repeatedly merge the adjacent pair whose concatenation
 * has the lowest rank (the leftmost on a tie) until no pair is a token.
 *
 * Very short pieces use tiktoken's own quadratic scan. Longer ones (a run of
 * spaces, a CJK sentence, a blob of punctuation) would make that scan quadratic
 * in the prompt size, so they use a linked list plus a min-heap keyed by
 * (rank, position), which picks the same pair at every step in O(n log n).
 *
 * Pieces over MAX_PIECE bytes (a megabyte of letters or spaces with no break)
 * are merged in MAX_PIECE chunks to bound memory (36 bytes per byte of piece);
 * only there can the count differ from tiktoken, by at most a few tokens per
 * chunk boundary. */
#include "tok_internal.h"

#include <stdlib.h>

/* Largest piece handled by the quadratic scan; above it the heap is faster. */
#define SMALL_PIECE 16
/* Largest piece whose heap merge runs in stack buffers (9 KiB) without malloc. */
#define STACK_PIECE 256
/* Largest piece merged as a whole; see the top of the file. */
#define MAX_PIECE (1u << 20)

/* Rank of the bytes from part i to the end of part i+1 in the scan's arrays. */
static uint32_t scan_pair_rank(const struct tok_vocab *v, const unsigned char *p,
                               const uint32_t *start, size_t i, size_t nent)
{
    if (i + 2 >= nent)
        return TOK_NO_RANK;
    return tok_rank(v, p + start[i], start[i + 2] - start[i]);
}

/* Index of the lowest rank among the first m entries (first one on a tie). */
static size_t scan_min(const uint32_t *rank, size_t m)
{
    size_t best = 0;
    for (size_t i = 1; i < m; i++)
        if (rank[i] < rank[best])
            best = i;
    return best;
}

/* tiktoken's merge: start[] holds part boundaries plus the end, rank[i] the rank
 * of merging part i with part i+1. */
static size_t bpe_small(const struct tok_vocab *v, const unsigned char *p, size_t n)
{
    uint32_t start[SMALL_PIECE + 1], rank[SMALL_PIECE + 1];
    size_t nent = n + 1;
    for (size_t i = 0; i <= n; i++)
        start[i] = (uint32_t)i;
    for (size_t i = 0; i < nent; i++)
        rank[i] = scan_pair_rank(v, p, start, i, nent);
    for (;;) {
        size_t i = scan_min(rank, nent - 1);
        if (rank[i] == TOK_NO_RANK)
            break;
        /* Drop boundary i+1: part i now spans what parts i and i+1 did. */
        memmove(&start[i + 1], &start[i + 2], (nent - i - 2) * sizeof *start);
        memmove(&rank[i + 1], &rank[i + 2], (nent - i - 2) * sizeof *rank);
        nent--;
        rank[i] = scan_pair_rank(v, p, start, i, nent);
        if (i > 0)
            rank[i - 1] = scan_pair_rank(v, p, start, i - 1, nent);
    }
    return nent - 1;
}

/* State of the heap merge. Parts are named by their first byte's offset. */
struct merge {
    const struct tok_vocab *v;
    const unsigned char *p;
    uint32_t n;
    uint32_t *next;  /* offset of the following part; n after the last */
    uint32_t *prev;  /* offset of the preceding part; UINT32_MAX for the first */
    uint32_t *rank;  /* rank of merging the part with its successor, TOK_NO_RANK
                      * if none or if the part was merged away */
    uint64_t *heap;  /* rank << 32 | offset; stale entries are skipped on pop */
    size_t heap_len;
};

static void heap_push(struct merge *m, uint64_t key)
{
    size_t i = m->heap_len++;
    while (i > 0 && m->heap[(i - 1) / 2] > key) {
        m->heap[i] = m->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    m->heap[i] = key;
}

/* Moves key down from slot i to its place among the first len entries. */
static void heap_sift_down(uint64_t *heap, size_t len, size_t i, uint64_t key)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= len)
            break;
        if (c + 1 < len && heap[c + 1] < heap[c])
            c++;
        if (key <= heap[c])
            break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = key;
}

static uint64_t heap_pop(struct merge *m)
{
    uint64_t top = m->heap[0];
    if (--m->heap_len > 0)
        heap_sift_down(m->heap, m->heap_len, 0, m->heap[m->heap_len]);
    return top;
}

/* Recomputes the pair rank of part i and queues it if it is a token. */
static void requeue(struct merge *m, uint32_t i)
{
    uint32_t j = m->next[i];
    uint32_t end = j < m->n ? m->next[j] : m->n;
    m->rank[i] = j < m->n ? tok_rank(m->v, m->p + i, end - i) : TOK_NO_RANK;
    if (m->rank[i] != TOK_NO_RANK)
        heap_push(m, (uint64_t)m->rank[i] << 32 | i);
}

/* Merges part i with its successor; returns 1 if the heap entry was current. */
static int merge_at(struct merge *m, uint64_t key)
{
    uint32_t i = (uint32_t)key, r = (uint32_t)(key >> 32);
    /* A merged-away part has TOK_NO_RANK and a grown pair has a new, different
     * rank (ranks are unique per byte string), so a mismatch means stale. */
    if (m->rank[i] != r)
        return 0;
    uint32_t j = m->next[i];
    m->next[i] = m->next[j];
    if (m->next[i] < m->n)
        m->prev[m->next[i]] = i;
    m->rank[j] = TOK_NO_RANK;
    requeue(m, i);
    if (m->prev[i] != UINT32_MAX)
        requeue(m, m->prev[i]);
    return 1;
}

/* Ranks every adjacent byte pair and heapifies them in O(n), cheaper than n pushes. */
static void init_pairs(struct merge *m)
{
    for (uint32_t i = 0; i < m->n; i++) {
        m->next[i] = i + 1;
        m->prev[i] = i == 0 ? UINT32_MAX : i - 1;
        m->rank[i] = i + 1 < m->n ? tok_rank(m->v, m->p + i, 2) : TOK_NO_RANK;
        if (m->rank[i] != TOK_NO_RANK)
            m->heap[m->heap_len++] = (uint64_t)m->rank[i] << 32 | i;
    }
    for (size_t i = m->heap_len / 2; i-- > 0;)
        heap_sift_down(m->heap, m->heap_len, i, m->heap[i]);
}

static size_t heap_merge(struct merge *m)
{
    init_pairs(m);
    size_t parts = m->n;
    while (m->heap_len > 0)
        parts -= (size_t)merge_at(m, heap_pop(m));
    return parts;
}

/* Each merge queues at most two pairs, so 3n bounds the heap. */
static int bpe_large(const struct tok_vocab *v, const unsigned char *p, size_t n, size_t *out)
{
    struct merge m = { .v = v, .p = p, .n = (uint32_t)n };
    if (n <= STACK_PIECE) {
        uint32_t next[STACK_PIECE], prev[STACK_PIECE], rank[STACK_PIECE];
        uint64_t heap[3 * STACK_PIECE];
        m.next = next;
        m.prev = prev;
        m.rank = rank;
        m.heap = heap;
        *out = heap_merge(&m);
        return 0;
    }
    m.next = malloc(n * sizeof *m.next);
    m.prev = malloc(n * sizeof *m.prev);
    m.rank = malloc(n * sizeof *m.rank);
    m.heap = malloc(3 * n * sizeof *m.heap);
    int rc = -1;
    if (m.next && m.prev && m.rank && m.heap) {
        *out = heap_merge(&m);
        rc = 0;
    }
    free(m.next);
    free(m.prev);
    free(m.rank);
    free(m.heap);
    return rc;
}

/* Counts one piece of at most MAX_PIECE bytes. */
static int bpe_piece(const struct tok_vocab *v, const unsigned char *p, size_t n, size_t *out)
{
    /* Most pieces are whole tokens: one lookup, no merge. */
    if (tok_rank(v, p, n) != TOK_NO_RANK) {
        *out = 1;
        return 0;
    }
    if (n <= SMALL_PIECE) {
        *out = bpe_small(v, p, n);
        return 0;
    }
    return bpe_large(v, p, n, out);
}

/* Where to cut a chunk off an oversized piece: not inside a UTF-8 character,
 * which would cost a token or two more than cutting before it. */
static size_t chunk_cut(const unsigned char *p)
{
    size_t k = MAX_PIECE;
    while (k > MAX_PIECE - 3 && (p[k] & 0xC0) == 0x80)
        k--;
    return k;
}

int tok_bpe_count(const struct tok_vocab *v, const unsigned char *p, size_t n, size_t *out)
{
    size_t total = 0, part;
    while (n > MAX_PIECE) {
        size_t k = chunk_cut(p);
        if (bpe_piece(v, p, k, &part) < 0)
            return -1;
        total += part;
        p += k;
        n -= k;
    }
    if (n > 0) {
        if (bpe_piece(v, p, n, &part) < 0)
            return -1;
        total += part;
    }
    *out = total;
    return 0;
}
