/* See ratelimit.h. One round trip per request: the upsert leaves the new count in
 * LAST_INSERT_ID, which the client reads back as the statement's insert id
 * (0 when the row was freshly inserted, i.e. the first hit). */
#include "ratelimit/ratelimit.h"

#include <time.h>

static const char SQL_HIT[] =
	"INSERT INTO rate_limits (subject, class, window_start, hits) VALUES (?, ?, ?, 1)"
	" ON DUPLICATE KEY UPDATE hits = LAST_INSERT_ID(hits + 1)";

static const char SQL_PRUNE[] =
	"DELETE FROM rate_limits WHERE window_start < ?";

int ah_ratelimit_hit(ah_req *r, const char *subject, char cls, long long limit, bool *over)
{
	char c[2] = {cls, '\0'};
	long long now = (long long)time(NULL);
	long long window = now - now % 60;
	*over = false;
	if (ah_db_exec(r->db, NULL, SQL_HIT, "ssi", subject, c, window) != 0)
		return AH_EFAIL;
	long long hits = (long long)ah_db_insert_id(r->db);
	if (hits == 0)
		hits = 1;
	r->rate.counted = true;
	r->rate.limit = limit;
	r->rate.remaining = hits >= limit ? 0 : limit - hits;
	r->rate.reset = window + 60;
	*over = hits > limit;
	return 0;
}

void ah_ratelimit_prune(ah_db *db)
{
	long long now = (long long)time(NULL);
	ah_db_exec(db, NULL, SQL_PRUNE, "i", now - now % 60 - 60);
}
