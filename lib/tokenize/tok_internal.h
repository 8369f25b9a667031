/* Internals shared by the tokenizer's files: the rank table (token bytes -> rank)
 * and the byte-pair merge that counts the tokens of one pre-tokenized piece.
 * The lookup is inline because the merge calls it for every candidate pair. */
#ifndef AH_TOKENIZE_TOK_INTERNAL_H
#define AH_TOKENIZE_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Rank of a byte string that is not a token; greater than every real rank so a
 * plain minimum search skips it. */
#define TOK_NO_RANK UINT32_MAX

/* One open-addressing slot; len 0 marks an empty slot (tokens are never empty). */
struct tok_slot {
    uint32_t off;  /* offset of the token's bytes in tok_vocab.bytes */
    uint32_t len;
    uint32_t rank;
};

struct tok_vocab {
    unsigned char *bytes;   /* every token's bytes, back to back */
    struct tok_slot *slots; /* power-of-two sized, at most half full */
    uint32_t mask;          /* slot count - 1 */
    uint32_t count;         /* tokens loaded */
    uint32_t max_len;       /* longest token: longer strings miss without hashing */
};

/* Hashes 8 bytes at a time: tokens average ~6 bytes, so this is one or two
 * multiplications per lookup instead of one per byte. */
static inline uint64_t tok_hash(const unsigned char *p, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    uint64_t w;
    while (n >= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 29);
}

/* Rank of the n bytes at p, or TOK_NO_RANK. */
static inline uint32_t tok_rank(const struct tok_vocab *v, const unsigned char *p, size_t n)
{
    if (n == 0 || n > v->max_len)
        return TOK_NO_RANK;
    for (uint64_t i = tok_hash(p, n);; i++) {
        const struct tok_slot *s = &v->slots[i & v->mask];
        if (s->len == 0)
            return TOK_NO_RANK;
        if (s->len == n && memcmp(v->bytes + s->off, p, n) == 0)
            return s->rank;
    }
}

/* Loads a .tiktoken file into a new table; -1 with a message in err on failure. */
int tok_vocab_load(struct tok_vocab **out, const char *path, char *err, size_t errlen);
void tok_vocab_free(struct tok_vocab *v);

/* Number of tokens the n bytes at p (one pre-tokenized piece) merge into.
 * Returns 0, or -1 on out-of-memory. */
int tok_bpe_count(const struct tok_vocab *v, const unsigned char *p, size_t n, size_t *out);

/* Writes an error message if the caller gave a buffer. */
void tok_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
