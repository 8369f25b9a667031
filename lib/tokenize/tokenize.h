/* Token counting with OpenAI's cl100k_base byte-pair encoding, the way tiktoken's
 * encode_ordinary() counts: used to report the input and output token counts of
 * agent invocations without calling out to Node or Python.
 *
 * Special tokens such as "<|endoftext|>" are counted as ordinary text, since a
 * prompt that merely contains that string never means the control token. */
#ifndef AH_TOKENIZE_TOKENIZE_H
#define AH_TOKENIZE_TOKENIZE_H

#include <stddef.h>

/* Environment variable that names the vocabulary file when init gets NULL. */
#define AH_TOKENIZE_ENV "AGENTHOST_TOKENIZER_VOCAB"

/* Loads the vocabulary (a .tiktoken file: "base64token rank" per line). Call once
 * at start-up; not thread-safe. vocab_path NULL means $AGENTHOST_TOKENIZER_VOCAB if
 * set and non-empty, else the path compiled in by meson. Calling it again replaces
 * the loaded vocabulary only if the new one loads. Returns 0, or -1 with a message
 * in errbuf (errbuf may be NULL). */
int ah_tokenize_init(const char *vocab_path, char *errbuf, size_t errlen);

/* Stores in *out the number of tokens in len bytes of text. The text may hold NUL
 * bytes and invalid UTF-8: each run of invalid bytes is split out as a piece of its
 * own and encoded as raw bytes, as byte-level BPE does. Exact for every piece
 * (a regex match, e.g. a word) up to 1 MiB; a longer one, such as a megabyte of
 * spaces, is merged in 1 MiB chunks and may count a few tokens more. Safe to call
 * from several threads at once after init. Returns 0, or -1 if not initialised,
 * on a NULL argument or on out-of-memory. */
int ah_tokenize_count(size_t *out, const char *text, size_t len);

/* Releases the vocabulary; count fails until the next init. */
void ah_tokenize_free(void);

#endif
