/* Loads a .tiktoken vocabulary ("base64token rank" per line, as OpenAI publishes
 * it) into an open-addressing hash table from token bytes to rank. Worker
 * processes load it once at start-up, so the parse is a single pass over the file
 * with no per-token allocation. */
#include "tok_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Ranks at or above this are refused so they can never collide with TOK_NO_RANK. */
#define RANK_LIMIT 0x7FFFFFFFu

/* Largest file accepted: offsets into the byte blob are 32-bit. */
#define FILE_LIMIT (1u << 30)

void tok_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Reads the whole file into a fresh buffer; the vocabulary is small (1.7 MB). */
static int read_file(const char *path, unsigned char **buf, size_t *len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tok_errf(err, errlen, "tokenizer vocabulary %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > FILE_LIMIT) {
        tok_errf(err, errlen, "tokenizer vocabulary %s: not a regular file of 1 byte to 1 GiB",
                 path);
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size, got = 0;
    unsigned char *b = malloc(size);
    while (b != NULL && got < size) {
        ssize_t r = read(fd, b + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            tok_errf(err, errlen, "tokenizer vocabulary %s: read failed", path);
            free(b);
            close(fd);
            return -1;
        }
        got += (size_t)r;
    }
    close(fd);
    if (b == NULL) {
        tok_errf(err, errlen, "tokenizer vocabulary: out of memory");
        return -1;
    }
    *buf = b;
    *len = size;
    return 0;
}

/* Value of a base64 digit, or -1. */
static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Decodes padded standard base64; returns the byte count or -1 if malformed. */
static long b64_decode(const unsigned char *s, size_t n, unsigned char *dst)
{
    if (n == 0 || n % 4 != 0)
        return -1;
    size_t pad = (s[n - 1] == '=') + (s[n - 2] == '=');
    long out = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t q = 0;
        for (size_t k = 0; k < 4; k++) {
            int d = (i + k >= n - pad) ? 0 : b64_value(s[i + k]);
            if (d < 0)
                return -1;
            q = q << 6 | (uint32_t)d;
        }
        dst[out++] = (unsigned char)(q >> 16);
        dst[out++] = (unsigned char)(q >> 8);
        dst[out++] = (unsigned char)q;
    }
    return out - (long)pad;
}

/* Parses a decimal rank below RANK_LIMIT; no sign, no spaces. */
static int parse_rank(const unsigned char *s, size_t n, uint32_t *rank)
{
    if (n == 0 || n > 10)
        return -1;
    uint64_t r = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        r = r * 10 + (uint64_t)(s[i] - '0');
    }
    if (r >= RANK_LIMIT)
        return -1;
    *rank = (uint32_t)r;
    return 0;
}

/* Inserts the token stored at bytes[off..off+len); -1 if it is already there. */
static int insert(struct tok_vocab *v, uint32_t off, uint32_t len, uint32_t rank)
{
    const unsigned char *p = v->bytes + off;
    for (uint64_t i = tok_hash(p, len);; i++) {
        struct tok_slot *s = &v->slots[i & v->mask];
        if (s->len == 0) {
            *s = (struct tok_slot){ .off = off, .len = len, .rank = rank };
            return 0;
        }
        if (s->len == len && memcmp(v->bytes + s->off, p, len) == 0)
            return -1;
    }
}

/* Parses one non-empty line into the table; *used is the blob's fill level. */
static int parse_line(struct tok_vocab *v, const unsigned char *s, size_t n, uint32_t *used)
{
    if (n > 0 && s[n - 1] == '\r')
        n--;
    const unsigned char *sp = memchr(s, ' ', n);
    if (sp == NULL)
        return -1;
    size_t tlen = (size_t)(sp - s);
    uint32_t rank;
    if (parse_rank(sp + 1, n - tlen - 1, &rank) < 0)
        return -1;
    long dlen = b64_decode(s, tlen, v->bytes + *used);
    if (dlen <= 0 || insert(v, *used, (uint32_t)dlen, rank) < 0)
        return -1;
    *used += (uint32_t)dlen;
    if ((uint32_t)dlen > v->max_len)
        v->max_len = (uint32_t)dlen;
    v->count++;
    return 0;
}

/* Sizes the table for the file's line count: at most half full keeps probes short. */
static int alloc_table(struct tok_vocab *v, const unsigned char *buf, size_t len)
{
    size_t lines = 1;
    for (const unsigned char *p = buf; (p = memchr(p, '\n', len - (size_t)(p - buf))) != NULL; p++)
        lines++;
    size_t slots = 1024;
    while (slots < 2 * lines)
        slots *= 2;
    v->slots = calloc(slots, sizeof *v->slots);
    /* Decoded base64 is shorter than its text, so the file size bounds the blob. */
    v->bytes = malloc(len);
    v->mask = (uint32_t)(slots - 1);
    return (v->slots == NULL || v->bytes == NULL) ? -1 : 0;
}

static int parse_all(struct tok_vocab *v, const unsigned char *buf, size_t len, char *err,
                     size_t errlen, const char *path)
{
    uint32_t used = 0;
    size_t lineno = 0;
    for (size_t pos = 0; pos < len;) {
        const unsigned char *nl = memchr(buf + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - buf) : len;
        lineno++;
        if (end > pos && parse_line(v, buf + pos, end - pos, &used) < 0) {
            tok_errf(err, errlen, "tokenizer vocabulary %s:%zu: malformed or duplicate token",
                     path, lineno);
            return -1;
        }
        pos = end + 1;
    }
    return 0;
}

/* Every single byte must be a token, or the merge could leave bytes with no
 * token and the count would be wrong. */
static int check_bytes(const struct tok_vocab *v)
{
    for (unsigned c = 0; c < 256; c++) {
        unsigned char b = (unsigned char)c;
        if (tok_rank(v, &b, 1) == TOK_NO_RANK)
            return -1;
    }
    return 0;
}

int tok_vocab_load(struct tok_vocab **out, const char *path, char *err, size_t errlen)
{
    unsigned char *buf;
    size_t len;
    if (read_file(path, &buf, &len, err, errlen) < 0)
        return -1;
    struct tok_vocab *v = calloc(1, sizeof *v);
    int rc = -1;
    if (v == NULL || alloc_table(v, buf, len) < 0) {
        tok_errf(err, errlen, "tokenizer vocabulary: out of memory");
    } else if (parse_all(v, buf, len, err, errlen, path) == 0) {
        rc = check_bytes(v);
        if (rc < 0)
            tok_errf(err, errlen, "tokenizer vocabulary %s: not all 256 single bytes are tokens",
                     path);
    }
    free(buf);
    if (rc < 0) {
        tok_vocab_free(v);
        return -1;
    }
    *out = v;
    return 0;
}

void tok_vocab_free(struct tok_vocab *v)
{
    if (v == NULL)
        return;
    free(v->bytes);
    free(v->slots);
    free(v);
}
