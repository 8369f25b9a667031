/* /health: for load balancers, without authentication or rate limiting.
 * 200 while the database answers (status "degraded" when no runner has sent a
 * heartbeat lately, since CRUD still works then); 503 when it does not. */
#include "routes.h"
#include "core/util.h"

static const char SQL_RUNNER_AGE[] =
	"SELECT TIMESTAMPDIFF(SECOND, MAX(heartbeat_at), NOW(3)) FROM runners";

/* Seconds since the last heartbeat of any runner in *out, -1 when none has
 * ever registered; also how a deploying agent tells that nothing will take
 * its job (agent.c). */
int ah_runner_heartbeat_age(ah_req *r, long long *out)
{
	ah_rows rows;
	*out = -1;
	if (ah_db_query(r->db, r->arena, &rows, SQL_RUNNER_AGE, "") != 0)
		return AH_EFAIL;
	const char *age = ah_cell(&rows, 0, 0);
	if (age && ah_parse_ll(out, age) != 0)
		*out = -1;
	return 0;
}

static int health(ah_req *r)
{
	long long secs;
	if (ah_db_ping(r->db) != 0 || ah_runner_heartbeat_age(r, &secs) != 0) {
		json_object *o = json_object_new_object();
		ah_json_str(o, "detail", "Database unreachable");
		ah_json_str(o, "status", "unavailable");
		ah_json_str(o, "database", "unreachable");
		return ah_reply_json(r, 503, o);
	}
	long long stale = ah_settings_of(r->cfg)->runner.stale_seconds;
	json_object *o = json_object_new_object();
	ah_json_str(o, "status", (secs >= 0 && secs <= stale) ? "ok" : "degraded");
	ah_json_str(o, "database", "ok");
	if (secs >= 0)
		ah_json_int(o, "runner_heartbeat_age_seconds", secs);
	else
		ah_json_str(o, "runner_heartbeat_age_seconds", NULL);
	return ah_reply_json(r, 200, o);
}

const ah_route ah_health_routes[] = {
	{"GET", "/health", health, AH_R_PUBLIC | AH_R_NO_RATE, 0},
	{NULL, NULL, NULL, 0, 0},
};
