/* Public entry points of the tokenizer: loading the cl100k_base vocabulary and
 * counting tokens. Counting splits the text with cl100k's pre-tokenizer regex
 * (PCRE2, JIT-compiled) and runs the byte-pair merge on each piece. */
#define PCRE2_CODE_UNIT_WIDTH 8

#include "tokenize.h"
#include "tok_internal.h"

#include <pcre2.h>
#include <stdlib.h>

#ifndef AH_TOKENIZE_VOCAB
#define AH_TOKENIZE_VOCAB "lib/tokenize/data/cl100k_base.tiktoken"
#endif

/* Unicode White_Space, spelt out: PCRE2's \s also matches U+180E, which stopped
 * being a space in Unicode 6.3 and is not one for tiktoken's Rust regex. */
#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}" \
           "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

/* cl100k_base's pat_str from tiktoken, with \s and \S replaced by the class above. */
static const char split_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
    "|\\p{N}{1,3}"
    "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*"
    "|[" WS "]*[\\r\\n]+"
    "|[" WS "]+(?![^" WS "])"
    "|[" WS "]+";

static struct {
    struct tok_vocab *vocab;
    pcre2_code *re;
    pcre2_match_context *mctx;
} g;

/* Compiled for valid UTF-8 only: count_pieces() hands the regex valid stretches
 * of text and deals with invalid bytes itself. PCRE2_MATCH_INVALID_UTF would do
 * that too, but without JIT it rescans the rest of the subject on every match,
 * which makes a megabyte take tens of seconds. */
static pcre2_code *compile_split(char *err, size_t errlen)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)split_pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &code, &off, NULL);
    if (re == NULL) {
        PCRE2_UCHAR msg[120];
        pcre2_get_error_message(code, msg, sizeof msg);
        tok_errf(err, errlen, "tokenizer regex at %zu: %s", (size_t)off, (char *)msg);
        return NULL;
    }
    /* Without JIT (some platforms) the interpreter gives the same matches, slower. */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    return re;
}

static const char *default_path(void)
{
    const char *env = getenv(AH_TOKENIZE_ENV);
    return (env != NULL && env[0] != '\0') ? env : AH_TOKENIZE_VOCAB;
}

/* PCRE2's default match limit (10 million backtracks) stops "\s*[\r\n]+" on a
 * whitespace run of ~10 MB. Every branch backtracks at most over the run it
 * started on, so the work stays linear and the limits can safely go. */
static pcre2_match_context *unlimited_context(char *err, size_t errlen)
{
    pcre2_match_context *mctx = pcre2_match_context_create(NULL);
    if (mctx == NULL) {
        tok_errf(err, errlen, "tokenizer: out of memory");
        return NULL;
    }
    pcre2_set_match_limit(mctx, UINT32_MAX);
    pcre2_set_depth_limit(mctx, UINT32_MAX);
    pcre2_set_heap_limit(mctx, UINT32_MAX);
    return mctx;
}

int ah_tokenize_init(const char *vocab_path, char *errbuf, size_t errlen)
{
    const char *path = vocab_path != NULL ? vocab_path : default_path();
    struct tok_vocab *v;
    if (tok_vocab_load(&v, path, errbuf, errlen) < 0)
        return -1;
    pcre2_code *re = compile_split(errbuf, errlen);
    pcre2_match_context *mctx = re != NULL ? unlimited_context(errbuf, errlen) : NULL;
    if (mctx == NULL) {
        pcre2_code_free(re);
        tok_vocab_free(v);
        return -1;
    }
    ah_tokenize_free();
    g.vocab = v;
    g.re = re;
    g.mctx = mctx;
    return 0;
}

void ah_tokenize_free(void)
{
    tok_vocab_free(g.vocab);
    pcre2_code_free(g.re);
    pcre2_match_context_free(g.mctx);
    g.vocab = NULL;
    g.re = NULL;
    g.mctx = NULL;
}

/* Adds the tokens of text[from, to) to *total. */
static int add_piece(size_t *total, const unsigned char *text, size_t from, size_t to)
{
    size_t n;
    if (tok_bpe_count(g.vocab, text + from, to - from, &n) < 0)
        return -1;
    *total += n;
    return 0;
}

/* Length of the valid UTF-8 character at p (as RFC 3629 and PCRE2 define it:
 * no overlong forms, no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_char_len(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4;
    else
        return 0;
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

/* Bytes of valid UTF-8 at the start of p. */
static size_t valid_prefix(const unsigned char *p, size_t n)
{
    size_t i = 0, k;
    while (i < n && (k = utf8_char_len(p + i, n - i)) > 0)
        i += k;
    return i;
}

/* Bytes at the start of p that begin no valid character. */
static size_t invalid_prefix(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n && utf8_char_len(p + i, n - i) == 0)
        i++;
    return i;
}

/* Counts the pieces of valid UTF-8 text. Every character is matched by some
 * branch and none matches empty, so matches tile the text. */
static int count_valid(pcre2_match_data *md, const unsigned char *text, size_t len,
                       size_t *total)
{
    size_t pos = 0;
    while (pos < len) {
        int rc = pcre2_match(g.re, text, len, pos, PCRE2_NO_UTF_CHECK, md, g.mctx);
        if (rc < 0)
            return -1;
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t e = ov[1];
        /* Defensive: should a match ever not start here or be empty, take one
         * character as a piece so that the loop always moves on. */
        if (ov[0] != pos || e <= pos)
            e = pos + utf8_char_len(text + pos, len - pos);
        if (add_piece(total, text, pos, e) < 0)
            return -1;
        pos = e;
    }
    return 0;
}

/* Splits the text into valid UTF-8 stretches, which the regex splits further,
 * and runs of invalid bytes, each of which is one piece of raw bytes (the way
 * tiktoken's byte-level BPE treats bytes; never replaced by U+FFFD). An invalid
 * byte thus ends a regex match just as the end of the text would. */
static int count_pieces(pcre2_match_data *md, const unsigned char *text, size_t len,
                        size_t *total)
{
    size_t pos = 0;
    while (pos < len) {
        size_t ok = valid_prefix(text + pos, len - pos);
        if (ok > 0 && count_valid(md, text + pos, ok, total) < 0)
            return -1;
        pos += ok;
        size_t bad = invalid_prefix(text + pos, len - pos);
        if (bad > 0 && add_piece(total, text, pos, pos + bad) < 0)
            return -1;
        pos += bad;
    }
    return 0;
}

int ah_tokenize_count(size_t *out, const char *text, size_t len)
{
    if (out == NULL || (text == NULL && len > 0) || g.vocab == NULL)
        return -1;
    size_t total = 0;
    if (len > 0) {
        /* Per call rather than shared, so that counting is thread-safe. */
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(g.re, NULL);
        if (md == NULL)
            return -1;
        int rc = count_pieces(md, (const unsigned char *)text, len, &total);
        pcre2_match_data_free(md);
        if (rc < 0)
            return -1;
    }
    *out = total;
    return 0;
}
