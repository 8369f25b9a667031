/* Unit test of lib/tokenize, printed as TAP. The counts in the table were pinned
 * from the reference implementation, js-tiktoken 1.0.21 with cl100k_base, as
 * encode(text, [], []).length (special tokens counted as text); the invalid
 * UTF-8 rows have no reference (tiktoken takes only valid text) and pin this
 * implementation's rule: each run of invalid bytes is a piece of raw bytes. */
#include "tokenize/tokenize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct count_case {
    const char *desc;
    const char *text;
    size_t len;    /* bytes of text, which may hold NUL bytes */
    size_t repeat; /* text is repeated this many times */
    size_t expect;
};

static const struct count_case cases[] = {
    {"empty string",
      "",
      0, 1, 0},
    {"hello world",
      "hello world",
      11, 1, 2},
    {"sentence with punctuation",
      "Hello, world! How are you today? Fine; thanks -- for asking...",
      62, 1, 16},
    {"seven digits",
      "1234567",
      7, 1, 3},
    {"long number and decimals",
      "Pi is 3.14159265358979, e is 2.71828 and 1,000,000 > 999999.",
      60, 1, 30},
    {"single space",
      " ",
      1, 1, 1},
    {"whitespace runs and newlines",
      "  leading and trailing  \n"
      "\n"
      "\n"
      "middle   \t\tend\r\n"
      "\r\n"
      "  \n",
      48, 1, 10},
    {"indented lines",
      "if (x) {\n"
      "    y();\n"
      "\n"
      "        z();\n"
      "}\n",
      34, 1, 12},
    {"German umlauts",
      "Grüße aus München: schöne Straße, Äpfel und Öl.",
      54, 1, 17},
    {"Chinese",
      "你好，世界！今天天气很好，我们去公园散步吧。",
      66, 1, 27},
    {"Japanese and Korean",
      "こんにちは世界。한국어 텍스트입니다.",
      53, 1, 14},
    {"Cyrillic and Arabic",
      "Привет, мир! مرحبا بالعالم",
      47, 1, 17},
    {"emoji",
      "Great job 👍🏽🎉 😀 family 👨\342\200\215👩\342\200\215👧 flag 🇩🇪!",
      68, 1, 32},
    {"C code",
      "static int parse_rank(const unsigned char *s, size_t n, uint32_t *rank)\n"
      "{\n"
      "    if (n == 0 || n > 10)\n"
      "        return -1;\n"
      "    uint64_t r = 0;\n"
      "    for (size_t i = 0; i < n; i++) {\n"
      "        if (s[i] < '0' || s[i] > '9')\n"
      "            return -1;\n"
      "        r = r * 10 + (uint64_t)(s[i] - '0');\n"
      "    }\n"
      "    *rank = (uint32_t)r; // done\n"
      "    return 0;\n"
      "}\n",
      337, 1, 129},
    {"Python code",
      "def fib(n):\n"
      "    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
      "    a, b = 0, 1\n"
      "    for _ in range(n):\n"
      "        a, b = b, a + b\n"
      "    return a\n"
      "\n"
      "print([fib(i) for i in range(10)])  # [0, 1, 1, 2, ...]\n",
      189, 1, 74},
    {"contractions",
      "I'm sure they'll say we've done what's right, but it's not; you'd know. DON'T! I'LL WE'VE",
      89, 1, 31},
    {"curly apostrophe",
      "it’s they’re",
      16, 1, 4},
    {"special token text is ordinary",
      "<|endoftext|> and <|fim_prefix|>",
      32, 1, 14},
    {"URL and JSON",
      "{\"url\": \"https://example.com/a/b?c=1&d=two\", \"ok\": true, \"n\": [1, 2, 3]}",
      72, 1, 36},
    {"300 spaces (heap merge)",
      " ",
      1, 300, 3},
    {"1000 letters a (heap merge)",
      "a",
      1, 1000, 125},
    {"long word (heap merge)",
      "supercalifragilisticexpialidocious",
      34, 20, 258},
    {"long CJK run (heap merge)",
      "的一是不了人我在有他这为之大来以个中上们",
      60, 30, 600},
    {"punctuation run (heap merge)",
      "=-+*",
      4, 100, 300},
    {"NUL bytes",
      "a\000b\000\000c \000",
      8, 1, 8},
    {"control characters",
      "\001\002\033[31mred\033[0m\177",
      15, 1, 10},
    /* Invalid UTF-8: pinned from this implementation, see the top of the file. */
    {"invalid bytes inside a word", "abc\377\376def", 8, 1, 4},
    {"truncated CJK character", "\344\270", 2, 1, 1},
    {"text ending mid-character", "caf\303", 4, 1, 2},
    {"lone continuation byte", "\200", 1, 1, 1},
    {"overlong NUL", "\300\200 overlong", 11, 1, 4},
    {"encoded surrogate", "\355\240\200 surrogate", 13, 1, 3},
    {"invalid run between spaces", "ok \377\377\377\377 end", 11, 1, 7},
    {"300 invalid bytes (heap merge)", "\377", 1, 300, 300},
    {"truncated character between valid ones", "中\344\270x", 6, 1, 3},
    {"truncated emoji", "hello \360\237\230 world", 15, 1, 4},
    /* Longer than the 1 MiB that is merged whole: counted in 1 MiB chunks, and
     * exact here since 128-space tokens tile each chunk. */
    {"2 MiB of spaces (chunked merge)", " ", 1, 2u << 20, 16384},
};

#define NCASES (sizeof cases / sizeof cases[0])

static int check(int ok, size_t *n, const char *desc)
{
    printf("%s %zu - %s\n", ok ? "ok" : "not ok", ++*n, desc);
    return ok ? 0 : 1;
}

/* The case text repeated c->repeat times; +1 so malloc never sees 0. */
static char *expand(const struct count_case *c, size_t *len)
{
    *len = c->len * c->repeat;
    char *buf = malloc(*len + 1);
    if (buf == NULL)
        return NULL;
    for (size_t i = 0; i < c->repeat; i++)
        memcpy(buf + i * c->len, c->text, c->len);
    return buf;
}

static int run_case(const struct count_case *c, size_t *n)
{
    size_t len, got = (size_t)-1;
    char *buf = expand(c, &len);
    int rc = buf != NULL ? ah_tokenize_count(&got, buf, len) : -1;
    free(buf);
    if (rc != 0 || got != c->expect)
        printf("# %s: rc %d, got %zu tokens, want %zu\n", c->desc, rc, got, c->expect);
    return check(rc == 0 && got == c->expect, n, c->desc);
}

/* The API's edges: bad arguments, a missing file, the env override, reloading. */
static int run_api_checks(size_t *n)
{
    char err[256] = "";
    size_t got = 99;
    int fails = 0, rc;
    fails += check(ah_tokenize_count(NULL, "x", 1) == -1, n, "NULL out is refused");
    fails += check(ah_tokenize_count(&got, NULL, 1) == -1, n, "NULL text with length is refused");
    fails += check(ah_tokenize_count(&got, NULL, 0) == 0 && got == 0, n, "NULL empty text is 0");
    fails += check(ah_tokenize_init("/nonexistent/vocab", err, sizeof err) == -1 &&
                       strstr(err, "/nonexistent/vocab") != NULL,
                   n, "missing file fails with its name in the message");
    fails += check(ah_tokenize_count(&got, "hi", 2) == 0 && got == 1, n,
                   "failed init keeps the vocabulary");
    setenv(AH_TOKENIZE_ENV, "/nonexistent/env-vocab", 1);
    rc = ah_tokenize_init(NULL, err, sizeof err);
    fails += check(rc == -1 && strstr(err, "env-vocab") != NULL, n,
                   AH_TOKENIZE_ENV " overrides the default path");
    setenv(AH_TOKENIZE_ENV, TEST_VOCAB, 1);
    fails += check(ah_tokenize_init(NULL, err, sizeof err) == 0, n, "reloading by the environment works");
    ah_tokenize_free();
    fails += check(ah_tokenize_count(&got, "hi", 2) == -1, n, "count after free fails");
    ah_tokenize_free();
    fails += check(1, n, "free twice is harmless");
    return fails;
}

/* Writes content to a fresh temporary file and tries to load it as vocabulary;
 * returns init's result with its message in err. */
static int init_from(const char *content, char *err, size_t errlen)
{
    char path[] = "/tmp/test_tokenize_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -2;
    size_t len = strlen(content);
    int rc = write(fd, content, len) == (ssize_t)len ? ah_tokenize_init(path, err, errlen) : -2;
    close(fd);
    unlink(path);
    return rc;
}

/* Vocabulary files the loader must refuse rather than count wrongly with. */
static int run_bad_vocab_checks(size_t *n)
{
    char err[256] = "";
    int fails = 0, rc;
    rc = init_from("IQ== 0\nIg== x\n", err, sizeof err);
    fails += check(rc == -1 && strstr(err, ":2:") != NULL, n, "malformed line is refused by number");
    rc = init_from("IQ== 0\nIQ== 1\n", err, sizeof err);
    fails += check(rc == -1 && strstr(err, ":2:") != NULL, n, "duplicate token is refused");
    rc = init_from("IQ== 0\nIg== 1\n", err, sizeof err);
    fails += check(rc == -1 && strstr(err, "256 single bytes") != NULL, n,
                   "vocabulary without every single byte is refused");
    return fails;
}

/* Checks made outside the table: main's two, the API's and the bad files'. */
#define NOTHER (2 + 9 + 3)

int main(void)
{
    char err[256] = "";
    size_t n = 0;
    int fails = 0;
    printf("1..%zu\n", NCASES + NOTHER);
    size_t got;
    fails += check(ah_tokenize_count(&got, "x", 1) == -1, &n, "count before init fails");
    /* The checkout's copy: the built-in default is where meson installs it. */
    setenv(AH_TOKENIZE_ENV, TEST_VOCAB, 1);
    int rc = ah_tokenize_init(NULL, err, sizeof err);
    if (rc != 0)
        printf("# init: %s\n", err);
    fails += check(rc == 0, &n, "init loads the vocabulary the environment names");
    if (rc != 0) {
        printf("Bail out! no vocabulary\n");
        return 1;
    }
    for (size_t i = 0; i < NCASES; i++)
        fails += run_case(&cases[i], &n);
    fails += run_bad_vocab_checks(&n);
    fails += run_api_checks(&n);
    ah_tokenize_free();
    return fails == 0 ? 0 : 1;
}
