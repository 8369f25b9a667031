/* The deploy queue, shared by any number of runners on any number of database
 * nodes. A claim is one conditional UPDATE whose affected rows decide: it sets
 * the job running (with a lease the heartbeat renews) only if it is still
 * claimable, so of two runners that saw the same job one gets the row and the
 * other gets 0 rows, and tries the next candidate. Row locks (SELECT ... FOR
 * UPDATE SKIP LOCKED) would not do: on a Galera cluster they lock one node
 * only, and two nodes' claims would both succeed; their UPDATEs instead meet
 * in certification, where the second is rolled back (1213) and, run again by
 * db.c, finds the job taken. A running job whose lease has passed belongs to a
 * dead runner and is claimed again. Outcomes:
 *   success                  done (the agent was switched in deploy_job.c)
 *   the machine's fault      queued again after a back-off, until
 *                            deploy_max_attempts, then as below
 *   the project's fault      failed, agent `error` with the message
 *   superseded               failed quietly: only an agent's newest job matters
 * A queued job's lease_until doubles as "not before" for the back-off. */
#include "runner/runner.h"
#include "core/arena.h"
#include "core/log.h"
#include "core/util.h"
#include "db/enums.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { CLAIMED = 0, NOTHING = 1, AGAIN = 2 };

/* A deploy that failed: an agent that had an image stays active on it (the
 * runner switches an agent only to a finished image), its status_message
 * saying so (the CLI and dashboard show it; the deploy's record has the
 * error); an agent that never had one is in error (API.md: invoke answers 409). */
static const char SQL_AGENT_FAILED[] =
	"UPDATE agents SET status = IF(image_path IS NULL, " AH_SQ(AH_AGENT_S_ERROR) ", " AH_SQ(AH_AGENT_S_ACTIVE) "),"
	" status_message = IF(image_path IS NULL, ?, CONCAT(?, '; the previous deploy keeps serving')),"
	" updated_at = NOW(3) WHERE id = ?";

static bool has_newer_job(ah_db *db, ah_arena *a, const char *agent_id, long long id)
{
	ah_rows rows;
	if (ah_db_query(db, a, &rows, "SELECT id FROM deploy_jobs WHERE agent_id = ? AND id > ? "
	                "LIMIT 1", "si", agent_id, id) != 0)
		return false;
	return rows.n > 0;
}

#define SQL_CLAIMABLE \
	"((state = " AH_SQ(AH_JOB_S_QUEUED) " AND (lease_until IS NULL OR lease_until <= NOW(3))) " \
	"OR (state = " AH_SQ(AH_JOB_S_RUNNING) " AND lease_until < NOW(3)))"

/* A dead runner's job that used up its attempts: failed, if it still is
 * what the candidate's row said (another runner may be ahead of us). */
static int give_up(ah_db *db, const struct ah_job *j, const char *last_error, long long attempts)
{
	char msg[700];
	unsigned long long n = 0;
	snprintf(msg, sizeof(msg), "Deploy failed after %lld attempts: %s", attempts,
	         last_error ? last_error : "the runner stopped during the deploy");
	if (ah_db_exec(db, &n, "UPDATE deploy_jobs SET state = " AH_SQ(AH_JOB_S_FAILED) ", lease_until = NULL, "
	               "error = ?, updated_at = NOW(3) WHERE id = ? AND attempts = ? AND state = " AH_SQ(AH_JOB_S_RUNNING) " "
	               "AND lease_until < NOW(3)", "sii", msg, j->id, attempts) != 0)
		return AH_EFAIL;
	if (n == 0)
		return 0;
	ah_log_warn("job=%lld agent=%s: giving up: %s", j->id, j->agent_id, msg);
	return ah_db_exec(db, NULL, SQL_AGENT_FAILED, "sss", msg, msg, j->agent_id);
}

/* One candidate row: CLAIMED, AGAIN (it was settled otherwise: superseded,
 * given up) or NOTHING (another runner took it first). */
static int try_candidate(ah_db *db, ah_arena *a, struct ah_runner *r, ah_rows *rows, size_t i,
                         struct ah_job *j)
{
	long long attempts = 0;
	unsigned long long n = 0;
	memset(j, 0, sizeof(*j));
	if (ah_parse_ll(&j->id, ah_cell(rows, i, 0)) != 0 ||
	    ah_parse_ll(&attempts, ah_cell(rows, i, 3)) != 0)
		return AH_EFAIL;
	snprintf(j->agent_id, sizeof(j->agent_id), "%s", ah_cell(rows, i, 1));
	bool expired = strcmp(ah_cell(rows, i, 2), "running") == 0;
	if (has_newer_job(db, a, j->agent_id, j->id)) {
		if (ah_db_exec(db, &n, "UPDATE deploy_jobs SET state = " AH_SQ(AH_JOB_S_FAILED) ", lease_until = NULL, "
		               "error = 'Superseded by a newer deploy', updated_at = NOW(3) "
		               "WHERE id = ? AND " SQL_CLAIMABLE, "i", j->id) != 0)
			return AH_EFAIL;
		if (n == 1)
			ah_log_info("job=%lld agent=%s: superseded by a newer deploy", j->id, j->agent_id);
		return AGAIN;
	}
	if (expired && attempts >= r->max_attempts)
		return give_up(db, j, ah_cell(rows, i, 4), attempts) == 0 ? AGAIN : AH_EFAIL;
	/* attempts = ?: the row is still the one we looked at. */
	if (ah_db_exec(db, &n, "UPDATE deploy_jobs SET state = " AH_SQ(AH_JOB_S_RUNNING) ", attempts = attempts + 1, "
	               "runner_id = ?, lease_until = NOW(3) + INTERVAL ? SECOND, updated_at = NOW(3) "
	               "WHERE id = ? AND attempts = ? AND " SQL_CLAIMABLE, "siii", r->id,
	               (long long)r->lease_seconds, j->id, attempts) != 0)
		return AH_EFAIL;
	if (n == 0)
		return NOTHING;
	if (expired)
		ah_log_warn("job=%lld agent=%s: lease expired (runner died?); taking it over", j->id,
		            j->agent_id);
	j->attempts = (int)attempts + 1;
	return CLAIMED;
}

/* The oldest claimable jobs (a few: the others' claims may take the first),
 * tried in order until one is ours. */
static int claim(ah_db *db, struct ah_runner *r, struct ah_job *j)
{
	ah_arena *a = ah_arena_new();
	ah_rows rows;
	int rc = NOTHING;
	if (ah_db_query(db, a, &rows, "SELECT id, agent_id, state, attempts, error FROM deploy_jobs "
	                "WHERE " SQL_CLAIMABLE " ORDER BY id LIMIT 8", "") != 0)
		rc = AH_EFAIL;
	for (size_t i = 0; rc == NOTHING && i < rows.n; i++)
		rc = try_candidate(db, a, r, &rows, i, j);
	ah_arena_destroy(a);
	return rc;
}

/* The project's fault, or the machine's after the last attempt. */
static int fail_job(ah_db *db, const struct ah_runner *r, const struct ah_job *j, const char *msg)
{
	ah_arena *a = ah_arena_new();
	unsigned long long n = 0;
	int rc = ah_db_begin(db);
	if (rc == 0)
		rc = ah_db_exec(db, &n, "UPDATE deploy_jobs SET state = " AH_SQ(AH_JOB_S_FAILED) ", lease_until = NULL, "
		                "error = ?, updated_at = NOW(3) WHERE id = ? AND runner_id = ? "
		                "AND state = " AH_SQ(AH_JOB_S_RUNNING), "sis", msg, j->id, r->id);
	/* A newer deploy of the agent decides its status; a lost lease decides nothing. */
	if (rc == 0 && n == 1 && !has_newer_job(db, a, j->agent_id, j->id))
		rc = ah_db_exec(db, NULL, SQL_AGENT_FAILED, "sss", msg, msg, j->agent_id);
	if (rc == 0)
		rc = ah_db_commit(db);
	else
		ah_db_rollback(db);
	ah_arena_destroy(a);
	return rc;
}

static int requeue(ah_db *db, const struct ah_runner *r, const struct ah_job *j, const char *msg,
                   bool quiet)
{
	long long delay = 2LL << (j->attempts > 6 ? 6 : j->attempts - 1);
	if (!quiet) /* said once, not again for each try to reach the database */
		ah_log_warn("%s: attempt %d failed, retrying in %lld s: %s", j->tag, j->attempts, delay,
		            msg);
	return ah_db_exec(db, NULL, "UPDATE deploy_jobs SET state = " AH_SQ(AH_JOB_S_QUEUED) ", runner_id = NULL, "
	                  "lease_until = NOW(3) + INTERVAL ? SECOND, error = ?, updated_at = NOW(3) "
	                  "WHERE id = ? AND runner_id = ?", "isis", delay, msg, j->id, r->id);
}

/* The host's sandbox budget refused the build: not the job's fault, so the
 * attempt does not count; tried again in a while, on whichever runner. */
static int wait_for_room(ah_db *db, const struct ah_runner *r, const struct ah_job *j,
                         const char *msg, bool quiet)
{
	if (!quiet)
		ah_log_warn("%s: %s; trying again in 10 s", j->tag, msg);
	return ah_db_exec(db, NULL, "UPDATE deploy_jobs SET state = " AH_SQ(AH_JOB_S_QUEUED) ", runner_id = NULL, "
	                  "lease_until = NOW(3) + INTERVAL 10 SECOND, error = ?, "
	                  "attempts = GREATEST(attempts - 1, 0), updated_at = NOW(3) "
	                  "WHERE id = ? AND runner_id = ?", "sis", msg, j->id, r->id);
}

int ah_jobs_release(ah_db *db, const struct ah_runner *r, long long job_id)
{
	/* Not the job's fault: the attempt does not count. */
	return ah_db_exec(db, NULL, "UPDATE deploy_jobs SET state = " AH_SQ(AH_JOB_S_QUEUED) ", runner_id = NULL, "
	                  "lease_until = NULL, attempts = GREATEST(attempts - 1, 0), updated_at = NOW(3) "
	                  "WHERE id = ? AND runner_id = ? AND state = " AH_SQ(AH_JOB_S_RUNNING), "is", job_id, r->id);
}

int ah_jobs_expire_own(ah_db *db, const struct ah_runner *r)
{
	unsigned long long n = 0;
	int rc = ah_db_exec(db, &n, "UPDATE deploy_jobs SET lease_until = NOW(3) - INTERVAL 1 SECOND "
	                    "WHERE state = " AH_SQ(AH_JOB_S_RUNNING) " AND runner_id = ?", "s", r->id);
	if (rc == 0 && n > 0)
		ah_log_warn("%llu job(s) held by an earlier run of this runner will be taken again", n);
	return rc;
}

/* Messages quote strangers' bytes (file names, npm output cut at a byte
 * count): the utf8mb4 column refuses invalid UTF-8, so each bad byte becomes
 * '?' before it goes near the database. */
static void utf8_clean(char *out, size_t n, const char *in)
{
	size_t o = 0;
	for (size_t i = 0; in[i] && o + 5 < n;) {
		unsigned char c = (unsigned char)in[i];
		size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
		if (len > 0 && strnlen(in + i, len) == len && ah_utf8_valid(in + i, len)) {
			memcpy(out + o, in + i, len);
			o += len;
			i += len;
		} else {
			out[o++] = '?';
			i++;
		}
	}
	out[o] = '\0';
}

/* Records the outcome; a database that is away gets a few tries (the job's
 * lease covers the gap, and if it runs out another attempt redoes the job). */
static void record(ah_db *db, struct ah_runner *r, const struct ah_job *j, int rc, const ah_err *in)
{
	ah_err clean = {.code = in->code}, *err = &clean;
	utf8_clean(clean.msg, sizeof(clean.msg), in->msg);
	for (int tries = 0; tries < 15; tries++) {
		int db_rc;
		if (rc == 0 || rc == AH_ECONFLICT)
			return;
		if (r->stopping && (rc == AH_EFAIL || rc == AH_EBUSY))
			db_rc = ah_jobs_release(db, r, j->id);
		else if (rc == AH_EBUSY)
			db_rc = wait_for_room(db, r, j, err->msg, tries > 0);
		else if (rc == AH_EFAIL && j->attempts < r->max_attempts)
			db_rc = requeue(db, r, j, err->msg, tries > 0);
		else {
			char msg[sizeof(err->msg) + 40];
			if (rc == AH_EFAIL)
				snprintf(msg, sizeof(msg), "%s (after %d attempts)", err->msg, j->attempts);
			else
				snprintf(msg, sizeof(msg), "%s", err->msg);
			if (tries == 0)
				ah_log_warn("%s: deploy failed: %s", j->tag, msg);
			db_rc = fail_job(db, r, j, msg);
		}
		if (db_rc == 0)
			return;
		sleep(2);
	}
	ah_log_error("%s: could not record the outcome; the lease will expire", j->tag);
}

static void set_current(struct ah_runner *r, long long id)
{
	pthread_mutex_lock(&r->job_mu);
	r->current_job = id;
	r->job_lost = 0;
	pthread_mutex_unlock(&r->job_mu);
}

void *ah_jobs_thread(void *arg)
{
	struct ah_runner *r = arg;
	ah_db *db = NULL;
	ah_err err = {0};
	int poll_ms = (int)ah_settings_of(r->cfg)->deploy.poll_ms;
	while (!r->stopping && !db && ah_db_open(&db, r->cfg, &err) != 0) {
		ah_log_error("job loop: %s; retrying", err.msg);
		sleep(2);
	}
	while (!r->stopping) {
		struct ah_job j;
		int rc = claim(db, r, &j);
		if (rc == AGAIN)
			continue;
		if (rc != CLAIMED) {
			usleep((useconds_t)poll_ms * 1000);
			continue;
		}
		snprintf(j.tag, sizeof(j.tag), "agent=%s job=%lld", j.agent_id, j.id);
		set_current(r, j.id);
		memset(&err, 0, sizeof(err));
		rc = ah_deploy_job_run(db, r, &j, &err);
		record(db, r, &j, rc, &err);
		set_current(r, 0);
	}
	ah_db_close(db);
	return NULL;
}
