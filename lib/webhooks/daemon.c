/* The delivery loop: claim due rows, send them all at once, write each
 * outcome back.
 *
 * Claiming is one conditional UPDATE (due, pending, not claimed or its claim
 * expired) that stamps the rows with a token of this claim: InnoDB's row
 * locks make a second daemon's UPDATE skip what the first took, so two
 * daemons on a cluster never send the same attempt. A claim lasts the
 * request's time limit plus CLAIM_SLACK_S; a daemon that dies holding one
 * leaves it to expire, and the row is sent again (at least once). Outcomes
 * are written only by the claim's holder (WHERE claim_token). */
#include "webhooks/daemon.h"
#include "core/log.h"
#include "core/util.h"
#include "db/enums.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define CLAIM_BATCH 200
#define CLAIM_SLACK_S 60
#define POLL_MS 200
/* Payloads held in memory at once: a record can be 10 MB and more (the
 * output cap, escaped), so a thousand in flight must not all be big. */
#define BYTES_IN_FLIGHT_MAX (256LL << 20)
#define SHUTDOWN_GRACE_MS 5000
#define PURGE_EVERY_MS (3600 * 1000)
#define PURGE_BATCH 10000

static const char SQL_CLAIM[] =
	"UPDATE webhook_deliveries SET claim_token = ?, claimed_until = NOW(3) + INTERVAL ? SECOND"
	" WHERE state = " AH_SQ(AH_DELIVERY_S_PENDING) " AND next_attempt_at <= NOW(3)"
	" AND (claimed_until IS NULL OR claimed_until < NOW(3)) ORDER BY next_attempt_at LIMIT ?";
static const char SQL_CLAIMED[] =
	"SELECT id, user_id, url, invocation_id, LENGTH(payload), attempts,"
	" TIMESTAMPDIFF(MICROSECOND, created_at, NOW(3)) DIV 1000"
	" FROM webhook_deliveries WHERE claim_token = ?";
static const char SQL_PAYLOAD[] =
	"SELECT payload FROM webhook_deliveries WHERE id = ? AND claim_token = ?";
static const char SQL_FINISH[] =
	"UPDATE webhook_deliveries SET state = ?, attempts = attempts + 1,"
	" last_status_code = CAST(? AS SIGNED), last_error = LEFT(?, 512),"
	" attempt_log = JSON_ARRAY_APPEND(attempt_log, '$', JSON_OBJECT('at', ?,"
	" 'status_code', CAST(? AS SIGNED), 'error', LEFT(?, 512), 'duration_ms', ?)),"
	" next_attempt_at = NOW(3) + INTERVAL ? MICROSECOND,"
	" delivered_at = IF(? = " AH_SQ(AH_DELIVERY_S_DELIVERED) ", NOW(3), NULL), updated_at = NOW(3),"
	" claim_token = NULL, claimed_until = NULL WHERE id = ? AND claim_token = ?";
/* Finished deliveries go with the history they belong to: the same
 * retention (history_retention_days), in batches that hold no lock long. */
static const char SQL_PURGE[] =
	"DELETE FROM webhook_deliveries WHERE state <> " AH_SQ(AH_DELIVERY_S_PENDING) 
	" AND created_at < NOW(3) - INTERVAL ? DAY LIMIT ?";
static const char SQL_RELEASE[] =
	"UPDATE webhook_deliveries SET claim_token = NULL, claimed_until = NULL"
	" WHERE id = ? AND claim_token = ?";

/* The wait before the next attempt after `attempts` failed ones: the base
 * doubled each time up to the maximum, half of it fixed and half random
 * (jitter spreads the retries of many deliveries that failed together). */
static long long backoff_ms(const ah_webhook_settings *set, long long attempts)
{
	long long base = set->retry_base_ms, max = set->retry_max_ms, d = base;
	for (long long i = 1; i < attempts && d < max; i++)
		d *= 2;
	if (d > max)
		d = max;
	return d / 2 + (long long)randombytes_uniform((uint32_t)(d / 2 + 1));
}

static void job_link(ah_whd *d, ah_whd_job *j)
{
	j->next = d->jobs;
	if (d->jobs)
		d->jobs->prev = j;
	d->jobs = j;
	d->inflight++;
	d->bytes += (long long)j->len;
}

static void job_unlink(ah_whd *d, ah_whd_job *j)
{
	if (j->prev)
		j->prev->next = j->next;
	else
		d->jobs = j->next;
	if (j->next)
		j->next->prev = j->prev;
	d->inflight--;
	d->bytes -= (long long)j->len;
}

static void job_free(ah_whd_job *j)
{
	curl_slist_free_all(j->headers);
	if (j->h)
		curl_easy_cleanup(j->h);
	ah_arena_destroy(j->a);
}

/* The attempt's outcome: delivered, pending again after the backoff, or
 * failed once the give-up window has passed. */
static void decide(ah_whd *d, ah_whd_job *j, long status, const char *error)
{
	long long elapsed = (ah_mono_us() - j->start_us) / 1000, age = j->age_ms + elapsed;
	long long window = d->set->give_up_seconds * 1000LL, wait = 0;
	const char *state = AH_DELIVERY_S_DELIVERED;
	if (error) {
		wait = backoff_ms(d->set, j->attempts + 1);
		if (age + wait > window) /* the last attempt at the deadline itself */
			wait = window - age;
		state = wait <= 0 ? AH_DELIVERY_S_FAILED : AH_DELIVERY_S_PENDING;
		ah_log_info("delivery %s (invocation %s): attempt %lld failed: %s; %s", j->id,
		            j->invocation_id, j->attempts + 1, error,
		            strcmp(state, AH_DELIVERY_S_FAILED) == 0 ? "given up" : "will retry");
	}
	j->out.state = state;
	j->out.code = status ? ah_sprintf(j->a, "%ld", status) : NULL;
	j->out.error = error;
	j->out.at = ah_now_rfc3339(j->a);
	j->out.elapsed_ms = elapsed;
	j->out.wait_us = (wait > 0 ? wait : 0) * 1000;
}

static int record(ah_whd *d, const ah_whd_job *j)
{
	return ah_db_exec(d->db, NULL, SQL_FINISH, "ssssssiisss", j->out.state, j->out.code,
	                  j->out.error, j->out.at, j->out.code, j->out.error, j->out.elapsed_ms,
	                  j->out.wait_us, j->out.state, j->id, j->token);
}

/* Writes the outcomes of a list of jobs (linked by next), then frees them:
 * one transaction, one log flush, for all that finished together (a
 * thousand answers in the same second are a thousand commits otherwise);
 * each on its own if that fails. */
static void record_all(ah_whd *d, ah_whd_job *done)
{
	int rc = done && done->next ? ah_db_begin(d->db) : AH_EFAIL;
	for (ah_whd_job *j = done; rc == 0 && j; j = j->next)
		rc = record(d, j);
	if (rc == 0 && done && done->next && (rc = ah_db_commit(d->db)) == 0)
		done = NULL; /* all written: only to free */
	else if (done && done->next)
		ah_db_rollback(d->db);
	for (ah_whd_job *j = done; j; j = j->next)
		if (record(d, j) != 0)
			ah_log_error("delivery %s: cannot record its attempt: %s", j->id, ah_db_error(d->db));
}

static void free_all(ah_whd_job *done)
{
	while (done) {
		ah_whd_job *next = done->next;
		job_free(done);
		free(done);
		done = next;
	}
}

/* The user's secret, looked up once per claim. */
typedef struct secret_cache {
	const char *user[CLAIM_BATCH], *secret[CLAIM_BATCH];
	size_t n;
} secret_cache;

static const char *secret_of(ah_whd *d, ah_arena *a, secret_cache *c, const char *user)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->user[i], user) == 0)
			return c->secret[i];
	const char *s = NULL;
	ah_err err = {0};
	if (ah_webhook_secret_get(d->db, a, user, &s, &err) != 0)
		ah_log_error("user %s: no webhook secret to sign with: %s", user, err.msg);
	c->user[c->n] = user;
	c->secret[c->n++] = s;
	return s;
}

static ah_whd_job *job_from_row(ah_whd *d, char *const *row, const char *token)
{
	ah_whd_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->a = ah_arena_new();
	j->id = ah_strdup(j->a, row[0]);
	j->user_id = ah_strdup(j->a, row[1]);
	j->url = ah_strdup(j->a, row[2]);
	j->invocation_id = ah_strdup(j->a, row[3]);
	j->len = (size_t)ah_cell_ll(row[4]);
	j->attempts = ah_cell_ll(row[5]);
	j->age_ms = ah_cell_ll(row[6]);
	j->token = ah_strdup(j->a, token);
	j->policy = &d->policy;
	return j;
}

/* The row's payload into the job's arena (only now: see BYTES_IN_FLIGHT_MAX). */
static int load_payload(ah_whd *d, ah_whd_job *j)
{
	ah_rows rows;
	if (ah_db_query(d->db, j->a, &rows, SQL_PAYLOAD, "ss", j->id, j->token) != 0 || rows.n != 1)
		return AH_EFAIL;
	j->payload = rows.v[0][0];
	j->len = rows.len[0][0];
	return 0;
}

static void release(ah_whd *d, const ah_whd_job *j)
{
	if (ah_db_exec(d->db, NULL, SQL_RELEASE, "ss", j->id, j->token) != 0)
		ah_log_error("delivery %s: cannot release its claim", j->id);
}

/* Claims up to n due rows and starts their requests; how many it started
 * (fewer than n: nothing more is due, or the memory budget is spent). */
static size_t claim(ah_whd *d, size_t n)
{
	char token[23];
	ah_rows rows;
	secret_cache cache = {0};
	long long lease = d->set->timeout_seconds + CLAIM_SLACK_S;
	ah_base62_random(token, 22);
	ah_arena *a = ah_arena_new();
	size_t started = 0;
	if (ah_db_exec(d->db, NULL, SQL_CLAIM, "sii", token, lease, (long long)n) != 0 ||
	    ah_db_query(d->db, a, &rows, SQL_CLAIMED, "s", token) != 0) {
		/* Two daemons' claims (or a claim and an outcome) may meet as a
		 * deadlock: the server rolled this one back, the next poll claims. */
		if (!ah_db_deadlocked(d->db))
			ah_log_error("cannot claim deliveries: %s", ah_db_error(d->db));
		ah_arena_destroy(a);
		return 0;
	}
	for (size_t i = 0; i < rows.n; i++) {
		ah_whd_job *j = job_from_row(d, rows.v[i], token);
		if (!j)
			continue; /* its claim expires: sent later */
		if (d->inflight > 0 && d->bytes + (long long)j->len > BYTES_IN_FLIGHT_MAX) {
			release(d, j); /* over the memory budget: another round takes it */
			free_all(j);
			continue;
		}
		const char *secret = secret_of(d, a, &cache, j->user_id);
		if (secret && load_payload(d, j) == 0 && ah_whd_send(d, j, secret) == 0) {
			job_link(d, j);
			started++;
			continue;
		}
		j->start_us = ah_mono_us();
		decide(d, j, 0, secret ? "cannot start the request" : "no webhook signing secret");
		j->next = NULL;
		record_all(d, j);
		free_all(j);
	}
	ah_arena_destroy(a);
	return started;
}

static void reap(ah_whd *d)
{
	CURLMsg *m;
	int left;
	ah_whd_job *done = NULL;
	while ((m = curl_multi_info_read(d->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		ah_whd_job *j = NULL;
		long status;
		const char *error;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&j);
		CURLcode rc = m->data.result;
		curl_multi_remove_handle(d->multi, j->h);
		ah_whd_outcome(j, rc, &status, &error);
		decide(d, j, status, error);
		job_unlink(d, j);
		j->next = done;
		done = j;
	}
	record_all(d, done);
	free_all(done);
}

/* Attempts still in flight at shutdown go back to the queue at once (the
 * receiver may have had them: at least once). */
static void release_all(ah_whd *d)
{
	while (d->jobs) {
		ah_whd_job *j = d->jobs;
		job_unlink(d, j);
		curl_multi_remove_handle(d->multi, j->h);
		release(d, j);
		job_free(j);
		free(j);
	}
}

static void purge(ah_whd *d)
{
	long long days = ah_settings_of(d->cfg)->host.history_retention_days;
	unsigned long long n = PURGE_BATCH;
	while (days > 0 && n == PURGE_BATCH && !*d->stop) {
		if (ah_db_exec(d->db, &n, SQL_PURGE, "ii", days, (long long)PURGE_BATCH) != 0) {
			ah_log_error("cannot purge old deliveries: %s", ah_db_error(d->db));
			return;
		}
	}
}

int ah_whd_run(ah_whd *d)
{
	int64_t next_claim = 0, stop_at = 0, next_purge = 0;
	int running;
	for (;;) {
		int64_t now = ah_now_ms();
		if (*d->stop && !stop_at)
			stop_at = now + SHUTDOWN_GRACE_MS;
		if (stop_at && (d->inflight == 0 || now >= stop_at))
			break;
		if (!stop_at && now >= next_purge) {
			purge(d);
			next_purge = now + PURGE_EVERY_MS;
		}
		if (!stop_at && d->inflight < d->capacity && now >= next_claim) {
			size_t want = (size_t)(d->capacity - d->inflight);
			want = want > CLAIM_BATCH ? CLAIM_BATCH : want;
			/* A full batch: more may be due; claim again at once. */
			next_claim = claim(d, want) == want ? now : now + POLL_MS;
		}
		curl_multi_perform(d->multi, &running);
		reap(d);
		int wait = next_claim > ah_now_ms() ? (int)(next_claim - ah_now_ms()) : 0;
		if (d->inflight >= d->capacity || stop_at)
			wait = POLL_MS;
		curl_multi_poll(d->multi, NULL, 0, wait, NULL);
	}
	release_all(d);
	return 0;
}
