/* agenthost-webhooks' delivery loop (daemon.c) and one delivery's request
 * (send.c): rows claimed from webhook_deliveries, sent concurrently through
 * one libcurl multi handle, their outcome written back. */
#ifndef AH_WEBHOOKS_DAEMON_H
#define AH_WEBHOOKS_DAEMON_H

#include <curl/curl.h>
#include <signal.h>

#include "webhooks/webhooks.h"

typedef struct ah_whd_job ah_whd_job;

typedef struct ah_whd {
	const ah_config *cfg;
	const ah_webhook_settings *set; /* ah_settings_of(cfg)->webhook */
	ah_db *db;
	CURLM *multi;
	ah_addr_policy policy;
	int inflight, capacity;
	long long bytes; /* payload bytes in flight */
	ah_whd_job *jobs; /* in flight, for the release at shutdown */
	volatile sig_atomic_t *stop;
} ah_whd;

/* One attempt in flight: what its request needs and its outcome needs. */
struct ah_whd_job {
	ah_whd_job *next, *prev;
	ah_arena *a;
	CURL *h;
	struct curl_slist *headers;
	const char *id, *token, *url, *user_id, *invocation_id, *payload;
	size_t len;
	long long attempts, age_ms; /* before this attempt; the row's age at the claim */
	int64_t start_us;
	const ah_addr_policy *policy;
	int refused; /* the address the connection reached: 1 private, 2 forbidden */
	char errbuf[CURL_ERROR_SIZE];
	/* The attempt's outcome as it is written back (daemon.c's decide). */
	struct {
		const char *state, *code, *error, *at;
		long long elapsed_ms, wait_us;
	} out;
};

/* Runs until *stop, then lets attempts in flight finish for a few seconds
 * and hands the rest back to the queue. */
int ah_whd_run(ah_whd *d);

/* The easy handle of job j, signed with secret, added to the multi handle. */
int ah_whd_send(ah_whd *d, ah_whd_job *j, const char *secret);

/* A finished request's outcome: status code (0: none) and the error text. */
void ah_whd_outcome(const ah_whd_job *j, CURLcode rc, long *status, const char **error);

#endif
