/* The runner's Prometheus exposition (docs/metrics.md) on a listener of its
 * own (runner_metrics_listen, off unless set): plain HTTP, GET /metrics, one
 * connection at a time on one thread. It says nothing secret (counts and the
 * runner's id) but takes no credentials either: keep it on loopback or a
 * private address that only Prometheus reaches.
 *
 * What it reports is read without the database: the registry's sandboxes
 * (counted under its lock at scrape time), the heartbeat's counts, and the
 * deploy queue as the heartbeat thread last read it (each beat), so a scrape
 * never waits on MariaDB and never holds a connection of its own. */
#include "runner/runner.h"
#include "runner/sandboxes.h"
#include "core/io.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/util.h"
#include "db/enums.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int mx_fd = -1;

/* Written by the heartbeat thread, read by a scrape: relaxed atomics. */
static struct {
	uint64_t beats, beat_failures;
	int64_t last_beat_ms;
	int64_t queued, running, oldest_queued_ms;
	int queue_known;
	int64_t hooks_pending, hooks_late_ms; /* webhook_deliveries; -1: not read */
} st = {.hooks_pending = -1};

void ah_metrics_beat(bool ok)
{
	if (!ok) {
		__atomic_fetch_add(&st.beat_failures, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_fetch_add(&st.beats, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&st.last_beat_ms, ah_now_ms(), __ATOMIC_RELAXED);
}

/* The deploy queue, cluster-wide (every runner reports the same table):
 * one range read of the deploy_jobs_claim index. */
void ah_metrics_read_queue(ah_db *db)
{
	ah_arena *a = ah_arena_new();
	ah_rows rows;
	int64_t queued = 0, running = 0, oldest = 0;
	if (ah_db_query(db, a, &rows, "SELECT state, COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, "
	                "MIN(created_at), NOW(3)) DIV 1000, 0) FROM deploy_jobs "
	                "WHERE state IN (" AH_SQ(AH_JOB_S_QUEUED) ", " AH_SQ(AH_JOB_S_RUNNING) ") GROUP BY state", "") == 0) {
		for (size_t i = 0; i < rows.n; i++) {
			char **c = rows.v[i];
			if (!c[0] || !c[1] || !c[2])
				continue;
			if (strcmp(c[0], AH_JOB_S_QUEUED) == 0) {
				queued = atoll(c[1]);
				oldest = atoll(c[2]);
			} else {
				running = atoll(c[1]);
			}
		}
		__atomic_store_n(&st.queued, queued, __ATOMIC_RELAXED);
		__atomic_store_n(&st.running, running, __ATOMIC_RELAXED);
		__atomic_store_n(&st.oldest_queued_ms, oldest, __ATOMIC_RELAXED);
		__atomic_store_n(&st.queue_known, 1, __ATOMIC_RELAXED);
	}
	/* The webhook backlog (issue 28), read here since agenthost-webhooks
	 * serves no HTTP: pending deliveries, and how late the most overdue one
	 * is (a range read of webhook_deliveries_due). */
	if (ah_db_query(db, a, &rows, "SELECT COUNT(*), COALESCE(GREATEST(0, TIMESTAMPDIFF(MICROSECOND,"
	                " MIN(next_attempt_at), NOW(3)) DIV 1000), 0) FROM webhook_deliveries"
	                " WHERE state = " AH_SQ(AH_DELIVERY_S_PENDING), "") == 0 && rows.n == 1) {
		__atomic_store_n(&st.hooks_pending, ah_cell_ll(rows.v[0][0]), __ATOMIC_RELAXED);
		__atomic_store_n(&st.hooks_late_ms, ah_cell_ll(rows.v[0][1]), __ATOMIC_RELAXED);
	}
	ah_arena_destroy(a);
}

int ah_metrics_listen(struct ah_runner *r, ah_err *err)
{
	const char *spec = ah_settings_of(r->cfg)->runner.metrics_listen;
	char host[256], port[16];
	if (!*spec)
		return 0;
	if (ah_hostport_split(spec, host, sizeof host, port, sizeof port) != 0)
		return ah_err_set(err, AH_EINVALID, "runner_metrics_listen: not host:port: %s", spec);
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	int g = getaddrinfo(host, port, &hints, &res), one = 1;
	if (g != 0)
		return ah_err_set(err, AH_EINVALID, "runner_metrics_listen %s: %s", spec, gai_strerror(g));
	for (struct addrinfo *ai = res; ai && mx_fd < 0; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
		    bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 16) == 0)
			mx_fd = fd;
		else if (fd >= 0)
			close(fd);
	}
	freeaddrinfo(res);
	/* A port taken (another runner's on this host) costs the metrics, not the runner. */
	if (mx_fd < 0)
		ah_log_error("runner_metrics_listen %s: cannot listen: %s; no metrics", spec,
		             strerror(errno));
	else
		ah_log_info("metrics on http://%s/metrics", spec);
	return 0;
}

static void gauge(FILE *f, const char *name, const char *help, const char *labels, double v)
{
	ah_mx_family(f, name, "gauge", help);
	fprintf(f, "%s%s %.17g\n", name, labels, v);
}

static void write_sandboxes(FILE *f, const struct ah_runner *r)
{
	struct ah_sbx_census c;
	ah_sandboxes_census(&c);
	long long max = ah_settings_of(r->cfg)->sandbox.max;
	long long used = (long long)(c.busy + c.warm + c.idle);
	ah_mx_family(f, "agenthost_runner_sandboxes", "gauge",
	             "Sandboxes of this runner by state: busy (running a call), warm (a program waiting "
	             "for a call), idle (a session's between calls, a spare), free (room left under sandbox_max).");
	fprintf(f, "agenthost_runner_sandboxes{state=\"busy\"} %zu\n", c.busy);
	fprintf(f, "agenthost_runner_sandboxes{state=\"warm\"} %zu\n", c.warm);
	fprintf(f, "agenthost_runner_sandboxes{state=\"idle\"} %zu\n", c.idle);
	fprintf(f, "agenthost_runner_sandboxes{state=\"free\"} %lld\n", max > used ? max - used : 0);
	gauge(f, "agenthost_runner_capacity", "Concurrent runs this runner takes (runner_capacity).",
	      "", (double)r->capacity);
}

static void write_beats_and_queue(FILE *f, const struct ah_runner *r)
{
	char labels[128];
	snprintf(labels, sizeof labels, "{runner_id=\"%s\"}", r->id);
	gauge(f, "agenthost_runner_info", "This runner's id (the runners table's), always 1.", labels, 1);
	ah_mx_family(f, "agenthost_runner_heartbeats_total", "counter",
	             "Heartbeats this runner recorded in the runners table.");
	fprintf(f, "agenthost_runner_heartbeats_total %llu\n",
	        (unsigned long long)__atomic_load_n(&st.beats, __ATOMIC_RELAXED));
	ah_mx_family(f, "agenthost_runner_heartbeat_failures_total", "counter",
	             "Heartbeats that could not be recorded (database away).");
	fprintf(f, "agenthost_runner_heartbeat_failures_total %llu\n",
	        (unsigned long long)__atomic_load_n(&st.beat_failures, __ATOMIC_RELAXED));
	int64_t last = __atomic_load_n(&st.last_beat_ms, __ATOMIC_RELAXED);
	gauge(f, "agenthost_runner_last_heartbeat_timestamp_seconds",
	      "Unix time of the last heartbeat recorded (0: none yet).", "", (double)last / 1000.0);
	if (!__atomic_load_n(&st.queue_known, __ATOMIC_RELAXED))
		return; /* not read yet: no numbers rather than false zeros */
	ah_mx_family(f, "agenthost_deploy_queue_jobs", "gauge",
	             "Deploy jobs in the queue (cluster-wide), by state, as of the last heartbeat.");
	fprintf(f, "agenthost_deploy_queue_jobs{state=\"queued\"} %lld\n",
	        (long long)__atomic_load_n(&st.queued, __ATOMIC_RELAXED));
	fprintf(f, "agenthost_deploy_queue_jobs{state=\"running\"} %lld\n",
	        (long long)__atomic_load_n(&st.running, __ATOMIC_RELAXED));
	gauge(f, "agenthost_deploy_queue_oldest_age_seconds",
	      "Age of the oldest queued deploy job (0: none queued), as of the last heartbeat.", "",
	      (double)__atomic_load_n(&st.oldest_queued_ms, __ATOMIC_RELAXED) / 1000.0);
	int64_t hooks = __atomic_load_n(&st.hooks_pending, __ATOMIC_RELAXED);
	if (hooks < 0)
		return;
	gauge(f, "agenthost_webhook_backlog_deliveries",
	      "Webhook deliveries pending (cluster-wide), as of the last heartbeat.", "", (double)hooks);
	gauge(f, "agenthost_webhook_backlog_late_seconds",
	      "How long the most overdue pending webhook delivery has been due (0: none).", "",
	      (double)__atomic_load_n(&st.hooks_late_ms, __ATOMIC_RELAXED) / 1000.0);
}

/* The request's head, until its blank line, within 4 KiB and 2 s in all: the
 * listener serves one connection at a time, so a client that trickles bytes
 * must not hold it for longer. */
static bool read_head(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	int64_t deadline = ah_now_ms() + 2000;
	while (n + 1 < cap) {
		int64_t left = deadline - ah_now_ms();
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
			return false;
		ssize_t k = recv(fd, buf + n, cap - 1 - n, 0);
		if (k <= 0)
			return false;
		n += (size_t)k;
		buf[n] = '\0';
		if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
			return true;
	}
	return false;
}

static void answer(int fd, const struct ah_runner *r)
{
	char head[4096];
	if (!read_head(fd, head, sizeof head))
		return;
	bool scrape = strncmp(head, "GET /metrics ", 13) == 0 || strncmp(head, "GET /metrics?", 13) == 0;
	char *body = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);
	if (!f)
		return;
	if (scrape) {
		write_sandboxes(f, r);
		write_beats_and_queue(f, r);
		ah_mx_write_db(f, ah_mx_total());
	} else {
		fputs("Not Found: GET /metrics\n", f);
	}
	fclose(f);
	char hdr[256];
	int h = snprintf(hdr, sizeof hdr, "HTTP/1.0 %s\r\nContent-Type: text/plain; version=0.0.4; "
	                 "charset=utf-8\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
	                 scrape ? "200 OK" : "404 Not Found", len);
	if (ah_send_all(fd, hdr, (size_t)h) == 0)
		ah_send_all(fd, body, len);
	free(body);
}

void *ah_metrics_thread(void *arg)
{
	struct ah_runner *r = arg;
	while (mx_fd >= 0 && !r->stopping) {
		struct pollfd pf = {.fd = mx_fd, .events = POLLIN};
		if (poll(&pf, 1, 200) <= 0)
			continue;
		int fd = accept4(mx_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		answer(fd, r);
		close(fd);
	}
	if (mx_fd >= 0)
		close(mx_fd);
	mx_fd = -1;
	return NULL;
}
