/* Host-local rate-limit leases. The database row of a (subject, class, minute)
 * stays the one global count that bounds every API host, but a host reserves
 * tokens from it in chunks and hands them out from a small hash table in shared
 * memory that all workers of the host see. The chunk shrinks with the budget
 * nobody has reserved yet, down to one token, so small limits (100/min) stay
 * exact and a host never holds much of a budget that another host could use.
 *
 * This file knows nothing about the database: ah_rl_take says whether a token
 * was handed out or how many to reserve, and ah_rl_settle books what the
 * database granted. */
#ifndef AH_RATELIMIT_LEASE_H
#define AH_RATELIMIT_LEASE_H

#include <stdbool.h>
#include <stddef.h>

#define AH_RL_KEY_MAX 96      /* class letter + subject + NUL */
#define AH_RL_WINDOW 60       /* seconds per counting window */
#define AH_RL_SHARE 64        /* a chunk is at most 1/64 of the unreserved budget */
#define AH_RL_CHUNK_MAX 4096

typedef struct ah_rl_table ah_rl_table;

enum ah_rl_verdict {
	AH_RL_TAKEN,    /* a token was handed out */
	AH_RL_OVER,     /* the window's budget is spent: answer 429 */
	AH_RL_RESERVE,  /* reserve ticket.chunk tokens, then ah_rl_settle(consume) */
	AH_RL_NOSLOT,   /* no table or no free slot: count in the database directly */
};

typedef struct ah_rl_ticket {
	long long window;     /* start of the counting window (Unix seconds) */
	long long remaining;  /* TAKEN/OVER: X-RateLimit-Remaining as this host sees it */
	long long chunk;      /* RESERVE, or TAKEN with prefetch: tokens to reserve */
	bool prefetch;        /* TAKEN: the pool runs low; reserve chunk more once idle */
} ah_rl_ticket;

/* Start of the window holding Unix time now. */
long long ah_rl_window(long long now);

/* Tokens to reserve at once when `reserved` of `limit` are reserved globally. */
long long ah_rl_chunk(long long limit, long long reserved);

/* Tokens a reservation of `asked` gets when the row already counts `old`:
 * what the database statement computes, here so that both sides agree. */
long long ah_rl_granted(long long limit, long long old, long long asked);

/* A table of nslots shared with every process forked after this call.
 * NULL when the mapping fails (callers then count in the database directly). */
ah_rl_table *ah_rl_table_new(unsigned nslots);
void ah_rl_table_free(ah_rl_table *t);

/* Takes one token for key (class letter + subject) at Unix time now. */
enum ah_rl_verdict ah_rl_take(ah_rl_table *t, const char *key, long long now, long long limit,
                              ah_rl_ticket *out);

/* What is left of key's window at now as this host last saw it, without
 * taking a token or asking the database: limit when the host has no slot. */
long long ah_rl_peek(ah_rl_table *t, const char *key, long long now, long long limit);

/* Books a reservation for tk->window that asked for `asked` tokens and got
 * `granted`, leaving the global count at `total`. With consume (the RESERVE
 * path) the caller keeps one token and the verdict is TAKEN or OVER; without it
 * (a prefetch) everything goes to the pool and the verdict is TAKEN. */
enum ah_rl_verdict ah_rl_settle(ah_rl_table *t, const char *key, long long limit,
                                long long granted, long long total, bool consume,
                                ah_rl_ticket *tk);

#endif
