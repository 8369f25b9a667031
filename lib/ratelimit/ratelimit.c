/* See ratelimit.h. A reservation is one upsert that adds at most `asked` tokens
 * without passing the limit; it leaves the row's previous count in
 * LAST_INSERT_ID, which the client reads back as the statement's insert id (0
 * when the row was freshly inserted), so the grant is known without a read. */
#include "ratelimit/ratelimit.h"
#include "ratelimit/lease.h"
#include "core/util.h"

#include <string.h>
#include <time.h>

static const char SQL_RESERVE[] =
	"INSERT INTO rate_limits (subject, class, window_start, hits) VALUES (?, ?, ?, LEAST(?, ?))"
	" ON DUPLICATE KEY UPDATE hits = LAST_INSERT_ID(hits) + LEAST(?, GREATEST(? - hits, 0))";

static const char SQL_PRUNE[] =
	"DELETE FROM rate_limits WHERE window_start < ?";

static ah_rl_table *table;

/* A refill this worker promised to do once its response is out. */
static struct {
	bool due;
	char key[AH_RL_KEY_MAX];
	long long limit;
	ah_rl_ticket tk;
} pending;

int ah_ratelimit_init(unsigned nslots)
{
	table = ah_rl_table_new(nslots);
	return table ? 0 : AH_EFAIL;
}

/* Reserves up to `asked` tokens of key's window; key is class letter + subject. */
static int reserve(ah_db *db, const char *key, long long window, long long limit,
                   long long asked, long long *granted, long long *total)
{
	char cls[2] = {key[0], '\0'};
	if (ah_db_exec(db, NULL, SQL_RESERVE, "ssiiiii", key + 1, cls, window, asked, limit,
	               asked, limit) != 0)
		return AH_EFAIL;
	long long old = (long long)ah_db_insert_id(db);
	*granted = ah_rl_granted(limit, old, asked);
	*total = old + *granted;
	return 0;
}

/* Takes a token, going to the database when the host's pool is empty. */
static int take(ah_db *db, const char *key, long long limit, ah_rl_ticket *tk,
                enum ah_rl_verdict *v)
{
	*v = ah_rl_take(table, key, (long long)time(NULL), limit, tk);
	if (*v != AH_RL_RESERVE && *v != AH_RL_NOSLOT)
		return 0;
	ah_rl_table *t = *v == AH_RL_RESERVE ? table : NULL;
	long long granted, total;
	if (reserve(db, key, tk->window, limit, tk->chunk, &granted, &total) != 0) {
		ah_rl_settle(t, key, limit, 0, 0, false, tk); /* releases the refill claim */
		return AH_EFAIL;
	}
	*v = ah_rl_settle(t, key, limit, granted, total, true, tk);
	return 0;
}

int ah_ratelimit_hit(ah_req *r, const char *subject, char cls, long long limit, bool *over)
{
	const char *key = ah_sprintf(r->arena, "%c%s", cls, subject);
	ah_rl_ticket tk;
	enum ah_rl_verdict v;
	*over = false;
	if (take(r->db, key, limit, &tk, &v) != 0)
		return AH_EFAIL;
	if (tk.prefetch && strlen(key) < sizeof(pending.key)) {
		memcpy(pending.key, key, strlen(key) + 1);
		pending.limit = limit;
		pending.tk = tk;
		pending.due = true;
	}
	r->rate.counted = true;
	r->rate.limit = limit;
	r->rate.remaining = tk.remaining;
	r->rate.reset = tk.window + AH_RL_WINDOW;
	*over = v == AH_RL_OVER;
	return 0;
}

void ah_ratelimit_peek(ah_req *r, const char *subject, char cls, long long limit)
{
	long long now = (long long)time(NULL);
	r->rate.counted = true;
	r->rate.limit = limit;
	r->rate.remaining = ah_rl_peek(table, ah_sprintf(r->arena, "%c%s", cls, subject), now, limit);
	r->rate.reset = ah_rl_window(now) + AH_RL_WINDOW;
}

void ah_ratelimit_idle(ah_db *db)
{
	if (!pending.due)
		return;
	pending.due = false;
	long long granted = 0, total = 0;
	if (reserve(db, pending.key, pending.tk.window, pending.limit, pending.tk.chunk, &granted,
	            &total) != 0)
		granted = total = 0;
	ah_rl_settle(table, pending.key, pending.limit, granted, total, false, &pending.tk);
}

void ah_ratelimit_prune(ah_db *db)
{
	long long now = (long long)time(NULL);
	ah_db_exec(db, NULL, SQL_PRUNE, "i", ah_rl_window(now) - AH_RL_WINDOW);
}
