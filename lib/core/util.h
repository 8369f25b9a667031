/* Small helpers: checked number parsing, ids, time formatting, base62. */
#ifndef AH_CORE_UTIL_H
#define AH_CORE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/arena.h"

/* Whole-string decimal parse; 0 or AH_EINVALID. */
int ah_parse_ll(long long *out, const char *s);

/* n random base62 characters into out (n+1 bytes). Uses libsodium's CSPRNG. */
void ah_base62_random(char *out, size_t n);
/* "<prefix>_" + 22 random base62 characters, from the arena. */
char *ah_id_new(ah_arena *a, const char *prefix);

/* Current UTC time as RFC 3339 with milliseconds, e.g. 2026-11-21T23:59:59.123Z. */
char *ah_now_rfc3339(ah_arena *a);
/* MariaDB DATETIME(3) text "YYYY-MM-DD HH:MM:SS[.fff]" → RFC 3339 with ms, or NULL. */
char *ah_db_time_to_rfc3339(ah_arena *a, const char *dbtime);
/* The same text (UTC, as the API's connections read it) as ms since the
 * epoch into *ms; AH_EINVALID for anything else. */
int ah_db_time_ms(const char *dbtime, int64_t *ms);
int64_t ah_now_ms(void);
/* Microseconds on the monotonic clock: for durations, never dates. */
int64_t ah_mono_us(void);
/* The CLOCK_REALTIME instant ms from now: a deadline for pthread_cond_timedwait
 * (whose default clock that is) and pthread_timedjoin_np. */
struct timespec ah_deadline_in_ms(int64_t ms);

/* True if s[0..len) is valid UTF-8 (no overlongs, no surrogates). */
bool ah_utf8_valid(const char *s, size_t len);

/* Length of the well-formed sequence at s[0..n) (n >= 1), or 0 with *bad set to
 * the length of its maximal invalid subpart (Unicode 3.9). */
size_t ah_utf8_seq(const unsigned char *s, size_t n, size_t *bad);

/* len bytes as valid UTF-8: each maximal invalid subsequence becomes U+FFFD, as
 * browsers decode. Returns s itself when it is valid already. */
const char *ah_utf8_repair(ah_arena *a, const char *s, size_t len, size_t *outlen);

/* s with its leading and trailing white space (isspace) cut off, in place:
 * a "key = value" line's parts. */
char *ah_trim(char *s);
/* Cuts one line ending ("\n", "\r\n" or "\r") off the end of s, in place: a
 * line read with fgets or getline. */
void ah_chomp(char *s);

/* Sleeps base_us plus a uniform random part below jitter_us (jitter_us > 0):
 * processes retrying the same conflict fall out of step. */
void ah_sleep_jittered(unsigned base_us, unsigned jitter_us);

#endif
