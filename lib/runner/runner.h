/* agenthost-runner: the one privileged process. It claims deploy jobs from the
 * deploy_jobs table (jobs.c, deploy_job.c), keeps itself registered and its
 * leases alive (heartbeat.c), and serves the API workers on a unix socket
 * (server.c, and optionally over TCP with a shared secret: tcp.c) with
 * sandboxes it keeps in a registry (sandboxes.c).
 *
 * Threads: main (signals, start-up, shutdown), the job loop, the heartbeat, the
 * socket acceptor, and one short-lived thread per socket connection. Each thread
 * that talks to MariaDB opens its own connection: a connection is not
 * thread-safe. Connection threads never touch the database. */
#ifndef AH_RUNNER_RUNNER_H
#define AH_RUNNER_RUNNER_H

#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "core/err.h"
#include "db/db.h"

struct ah_runner {
	const ah_config *cfg;
	char id[65];
	char socket_path[PATH_MAX];   /* absolute */
	char address[256];            /* registered in runners.address: socket_path, or
	                                 host:port when TCP is on (tcp.c) */
	char data_dir[PATH_MAX];      /* absolute: image paths go into the database */
	char pid_file[PATH_MAX];
	int capacity;                 /* concurrent runs */
	int lease_seconds;
	int max_attempts;
	volatile int stopping;        /* SIGTERM seen: claim nothing more */

	/* The job being worked on, for the heartbeat's lease renewal. */
	pthread_mutex_t job_mu;
	long long current_job;
	volatile int job_lost;        /* the lease could not be renewed: someone else has it */
};

/* A claimed deploy job. */
struct ah_job {
	long long id;
	char agent_id[33];
	int attempts;                 /* including this one */
	char tag[160];                /* "agent=<slug> (<id>) job=<id>" for log lines */
	char image_sha[65];           /* the built image in the file store; "" if not kept */
	char old_image_sha[65];       /* the one it replaced, read by the switch; "" if none */
	char commit[41];              /* the git commit built; "" for uploaded code */
};

/* deploy_job.c: one attempt of a claimed job, up to and including the switch
 * of the agent to its new image. 0; AH_ECONFLICT when the job was superseded or
 * its lease lost (nothing to record); else a deploy.h code with err set. */
int ah_deploy_job_run(ah_db *db, struct ah_runner *r, struct ah_job *job, ah_err *err);

/* deploy_record.c: the job's row in deploys. The build's output for the user
 * goes through a buffer to the row (ah_deploy_log_write is an
 * ah_deploy_output_fn); flush before the job's outcome is recorded. */
struct ah_deploy_log {
	ah_db *db;
	long long job_id;
	long long flushed_ms;
	size_t len;
	char buf[16384];
};
void ah_deploy_log_open(struct ah_deploy_log *l, ah_db *db, long long job_id, int attempt);
void ah_deploy_log_write(void *ctx, const char *text, size_t len);
void ah_deploy_log_flush(struct ah_deploy_log *l);
void ah_deploy_record_commit(ah_db *db, const struct ah_job *j);
int ah_deploy_record_active(ah_db *db, const struct ah_job *j, const char *image_dir,
                            const char *entrypoint, const char *commit);
void ah_deploy_images_prune(ah_db *db, const struct ah_runner *r, const struct ah_job *j);

/* jobs.c: the claim loop; arg is the struct ah_runner. Opens its own db. */
void *ah_jobs_thread(void *arg);
/* Gives a job this runner holds back to the queue (shutdown). */
int ah_jobs_release(ah_db *db, const struct ah_runner *r, long long job_id);
/* Start-up: jobs this runner id held when it died are expired at once. */
int ah_jobs_expire_own(ah_db *db, const struct ah_runner *r);

/* heartbeat.c */
int ah_heartbeat_register(ah_db *db, const struct ah_runner *r, ah_err *err);
void *ah_heartbeat_thread(void *arg);

/* server.c */
int ah_server_listen(struct ah_runner *r, ah_err *err);
void *ah_server_thread(void *arg);
/* Stops accepting and waits (up to grace_ms) for connections in flight. */
void ah_server_stop(int grace_ms);

/* tcp.c: the optional TCP listener (runner_listen). Sets r->address; the
 * listener is off (ah_tcp_fd() < 0) unless runner_listen is set, and refused
 * without a runner secret. */
int ah_tcp_listen(struct ah_runner *r, ah_err *err);
int ah_tcp_fd(void);
void ah_tcp_close(void);
/* Runs the handshake on an accepted TCP connection; true when the peer proved
 * the secret and *w is ready to carry the sealed request and answer
 * (rpc/rpc.h, frames; the caller wipes it). Else the peer has been told
 * so, and the caller closes. */
struct ah_rwire;
bool ah_tcp_admit(int fd, struct ah_rwire *w);
/* The sealed request of an admitted connection (malloc'ed, NUL-terminated),
 * or NULL, logged with the peer's address, when none came intact. */
char *ah_tcp_read_request(struct ah_rwire *w, size_t cap, int timeout_ms, size_t *len);

/* metrics.c: the Prometheus listener (runner_metrics_listen; off when empty).
 * ah_metrics_listen binds it at start (a malformed address: AH_EINVALID; a
 * port taken: logged, no metrics); the thread serves it until stopping. The
 * heartbeat thread reports each beat and reads the deploy queue for it. */
int ah_metrics_listen(struct ah_runner *r, ah_err *err);
void *ah_metrics_thread(void *arg);
void ah_metrics_beat(bool ok);
void ah_metrics_read_queue(ah_db *db);

/* ---- images.c: images in the file store, for a takeover ---- */
/* Packs image_dir into the file store; its SHA-256 (hex) into sha. */
int ah_image_publish(const struct ah_runner *r, ah_db *db, const char *image_dir, char sha[65],
                     ah_err *err);
/* The local path (into out) of another runner's image path
 * .../images/<agent>/<job>: <data_dir>/images/<agent>/<job>, fetched from the
 * file store by its SHA-256 and extracted, with its mount plan, if not there
 * yet. */
int ah_image_adopt(const struct ah_runner *r, const char *image, const char *sha, char *out,
                   size_t n, ah_err *err);
/* A deleted agent's images and the uploaded code this runner holds go. */
void ah_image_purge_agent(const struct ah_runner *r, const char *agent_id);
/* The uploaded code at path (<data_dir>/code/<agent>.tar.gz) made the one
 * whose SHA-256 is sha, from the file store if it is missing or another. */
int ah_code_fetch(const struct ah_runner *r, const char *sha, const char *path, ah_err *err);
/* A run request's "image" made this runner's (ah_image_adopt with its
 * "image_sha256"), when it names another runner's. */
int ah_image_adopt_req(const struct ah_runner *r, json_object *req, ah_err *err);

#endif
