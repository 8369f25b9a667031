/* Every configuration key, once: its id, name, type, default, bounds and doc
 * line (like redis's static_configs[]). ah_config_load validates each against
 * this list at start-up, and the accessors of config.h take the ids, so a read
 * cannot name a key missing here nor carry a default of its own.
 * README.md's configuration table and lib/sandbox/sandbox.h's key list are
 * checked against it (tests/unit/test_config.c).
 *
 * X(ID, name, type, default, min, max, set, field, doc): name is ID in lower
 * case; the value lands in ah_settings.set.field (core/settings.h), filled once
 * at load. A NULL default is computed at load (config.c computed_default); ""
 * is unset.
 * Types: STR (text), PATH (file or directory), INT (in [min, max]), BOOL
 * (true/false, 1/0, yes/no, on/off), MODE (octal, at most 0777), PRICE (USD,
 * up to 6 decimals). Paths default to the installed layout (core/paths.h);
 * scripts/run writes the checkout's. */
#ifndef AH_CORE_CONFIG_KEYS_H
#define AH_CORE_CONFIG_KEYS_H

#include "core/paths.h"

#include <stddef.h>

#define AH_UID_BASE_MAX ((1LL << 32) - 1 - 16384LL * 65536)

/* clang-format off */
#define AH_CONFIG_KEYS(X) \
	X(DB_SOCKET, "db_socket", PATH, "", 0, 0, db, socket, "MariaDB unix socket; empty: TCP to db_host") \
	X(DB_HOST, "db_host", STR, NULL, 0, 0, db, host, "MariaDB host (localhost with db_socket, else 127.0.0.1)") \
	X(DB_PORT, "db_port", INT, "3306", 1, 65535, db, port, "MariaDB TCP port") \
	X(DB_HOSTS, "db_hosts", STR, "", 0, 0, db, hosts, "host:port,... of a cluster's nodes, tried in order (overrides db_socket/db_host/db_port)") \
	X(DB_USER, "db_user", STR, "agenthost", 0, 0, db, user, "MariaDB user") \
	X(DB_PASSWORD, "db_password", STR, "", 0, 0, db, password, "MariaDB password") \
	X(DB_NAME, "db_name", STR, "agenthost", 0, 0, db, name, "MariaDB database") \
	X(FCGI_SOCKET, "fcgi_socket", PATH, AH_PATH_RUN "/api.sock", 0, 0, api, fcgi_socket, "FastCGI socket of the CRUD pool") \
	X(FCGI_INVOKE_SOCKET, "fcgi_invoke_socket", PATH, AH_PATH_RUN "/api-invoke.sock", 0, 0, api, fcgi_invoke_socket, "FastCGI socket of the invoke pool") \
	X(FCGI_METRICS_SOCKET, "fcgi_metrics_socket", STR, "", 0, 0, api, fcgi_metrics_socket, "FastCGI socket of the metrics worker; empty: fcgi_socket's name with -metrics before .sock") \
	X(SOCKET_GROUP, "socket_group", STR, "www-data", 0, 0, api, socket_group, "group of the FastCGI sockets") \
	X(SOCKET_MODE, "socket_mode", MODE, "0660", 0, 0777, api, socket_mode, "mode of the FastCGI sockets") \
	X(CRUD_WORKERS, "crud_workers", INT, NULL, 1, 256, api, crud_workers, "CRUD worker processes (3 per CPU, at least 4)") \
	X(INVOKE_WORKERS, "invoke_workers", INT, "16", 1, 256, api, invoke_workers, "invoke worker processes: concurrent invocations") \
	X(LOG_FORMAT, "log_format", STR, "text", 0, 0, host, log_format, "text or json: the API's and the runner's log lines as text, or one JSON object a line") \
	X(HISTORY_RETENTION_DAYS, "history_retention_days", INT, "90", 0, 36500, host, history_retention_days, "days of invocation history kept (0: forever); the runner purges older rows") \
	X(RATE_LIMIT_CRUD, "rate_limit_crud", INT, "100", 1, 1000000000, api, rate_limit_crud, "CRUD requests per minute per user") \
	X(RATE_LIMIT_INVOKE, "rate_limit_invoke", INT, "10", 1, 1000000000, api, rate_limit_invoke, "invocations per minute per user") \
	X(RATE_LIMIT_SLOTS, "rate_limit_slots", INT, "4096", 64, 1 << 20, api, rate_limit_slots, "slots of the shared rate-limit table") \
	X(MASTER_KEY_FILE, "master_key_file", PATH, AH_PATH_STATE "/master.key", 0, 0, host, master_key_file, "32-byte key for secrets and API-key hashes") \
	X(DATA_DIR, "data_dir", PATH, AH_PATH_STATE "/data", 0, 0, host, data_dir, "uploaded code, images, builds") \
	X(FILES_DIR, "files_dir", PATH, NULL, 0, 0, files, dir, "managed files' blobs and uploads (files beside data_dir)") \
	X(STORAGE_BACKEND, "storage_backend", STR, "local", 0, 0, files, backend, "where managed files' bytes live: local (files_dir) or s3") \
	X(S3_ENDPOINT, "s3_endpoint", STR, "", 0, 0, files, s3_endpoint, "S3 endpoint URL, e.g. https://s3.eu-west-1.amazonaws.com") \
	X(S3_BUCKET, "s3_bucket", STR, "", 0, 0, files, s3_bucket, "S3 bucket of managed files") \
	X(S3_REGION, "s3_region", STR, "us-east-1", 0, 0, files, s3_region, "S3 region (SigV4 scope)") \
	X(S3_ACCESS_KEY_ID, "s3_access_key_id", STR, "", 0, 0, files, s3_access_key_id, "S3 access key id") \
	X(S3_SECRET_ACCESS_KEY, "s3_secret_access_key", STR, "", 0, 0, files, s3_secret_access_key, "S3 secret access key") \
	X(FILES_UPLOAD_EXPIRY_SECONDS, "files_upload_expiry_seconds", INT, "3600", 1, 604800, files, upload_expiry_seconds, "presigned upload URLs expire") \
	X(PUBLIC_URL, "public_url", STR, "", 0, 0, api, public_url, "base URL clients reach; empty: the request's scheme and Host") \
	X(SCHEMA_DIR, "schema_dir", PATH, AH_PATH_DATA "/schema", 0, 0, host, schema_dir, "SQL migrations agenthost-admin migrate applies") \
	X(OPENAPI_FILE, "openapi_file", PATH, AH_PATH_DATA "/openapi.json", 0, 0, api, openapi_file, "the OpenAPI document GET /openapi.json serves") \
	X(TOKENIZER_VOCAB, "tokenizer_vocab", PATH, "", 0, 0, invoke, tokenizer_vocab, "BPE vocabulary; empty: the built-in cl100k_base") \
	X(RUNNER_SOCKET, "runner_socket", PATH, AH_PATH_RUNNER_RUN "/runner.sock", 0, 0, runner, socket, "where the runner listens") \
	X(RUNNER_SOCKET_GROUP, "runner_socket_group", STR, "", 0, 0, runner, socket_group, "group of the runner socket; empty: unchanged") \
	X(RUNNER_PID_FILE, "runner_pid_file", PATH, "", 0, 0, runner, pid_file, "runner pid file; empty: runner.pid by its socket") \
	X(RUNNER_ID, "runner_id", STR, "", 0, 0, runner, id, "runner id; empty: host name and socket hash") \
	X(RUNNER_LISTEN, "runner_listen", STR, "", 0, 0, runner, listen, "TCP host:port the runner also listens on") \
	X(RUNNER_ADVERTISE, "runner_advertise", STR, "", 0, 0, runner, advertise, "address the runner registers") \
	X(RUNNER_SECRET, "runner_secret", STR, "", 0, 0, runner, secret, "shared secret for runner TCP") \
	X(RUNNER_SECRET_FILE, "runner_secret_file", PATH, "", 0, 0, runner, secret_file, "file holding runner_secret") \
	X(RUNNER_METRICS_LISTEN, "runner_metrics_listen", STR, "", 0, 0, runner, metrics_listen, "host:port of the runner's Prometheus /metrics (plain HTTP, no auth: keep it on loopback); empty: off") \
	X(RUNNER_CAPACITY, "runner_capacity", INT, "16", 1, 1024, runner, capacity, "concurrent runs a runner takes") \
	X(RUNNER_HEARTBEAT_SECONDS, "runner_heartbeat_seconds", INT, "5", 1, 300, runner, heartbeat_seconds, "runner heartbeat period") \
	X(RUNNER_STALE_SECONDS, "runner_stale_seconds", INT, "30", 1, 86400, runner, stale_seconds, "a runner silent this long is down (health)") \
	X(RUNNER_SHUTDOWN_GRACE_SECONDS, "runner_shutdown_grace_seconds", INT, "20", 0, 3600, runner, shutdown_grace_seconds, "runs may finish this long at stop") \
	X(BLOB_CACHE_MB, "blob_cache_mb", INT, "1024", 0, 1 << 20, runner, blob_cache_mb, "MiB of copies of S3 blobs (attachments, session outputs) the runner keeps under data_dir/blob-cache, least recently used going first; 0: none, every call fetches its blobs from the bucket") \
	X(BLOB_CACHE_IDLE_SECONDS, "blob_cache_idle_seconds", INT, "600", 10, 86400 * 30, runner, blob_cache_idle_seconds, "a copy of an S3 blob unused this long is removed, so a deleted file leaves the runner's disk within it") \
	X(WARM_MAX, "warm_max", INT, "10", 0, 256, runner, warm_max, "warm processes one agent may ask for (min_warm), whatever its plan") \
	X(WARM_IDLE_SECONDS, "warm_idle_seconds", INT, "600", 10, 86400 * 30, runner, warm_idle_seconds, "an agent's warm processes are dropped after this long without calls") \
	X(SESSION_IDLE_SECONDS, "session_idle_seconds", INT, "3600", 1, 86400 * 30, runner, session_idle_seconds, "idle session sandboxes are reclaimed") \
	X(SESSION_GIVE_WAY_SECONDS, "session_give_way_seconds", INT, "60", 1, 86400, runner, session_give_way_seconds, "at the host's sandbox budget, a session sandbox idle this long gives its room to a new call") \
	X(DEPLOY_MAX_ATTEMPTS, "deploy_max_attempts", INT, "3", 1, 100, deploy, max_attempts, "deploy retries") \
	X(DEPLOY_TIMEOUT_SECONDS, "deploy_timeout_seconds", INT, "600", 10, 7200, deploy, timeout_seconds, "deploy time cap") \
	X(DEPLOY_LEASE_SECONDS, "deploy_lease_seconds", INT, "30", 3, 3600, deploy, lease_seconds, "deploy job lease") \
	X(DEPLOY_POLL_MS, "deploy_poll_ms", INT, "1000", 50, 60000, deploy, poll_ms, "deploy queue poll period") \
	X(DEPLOY_IMAGES_KEPT, "deploy_images_kept", INT, "5", 1, 100, deploy, images_kept, "an agent's last deploy images kept for rollback") \
	X(IMAGE_MAX_MB, "image_max_mb", INT, "1024", 1, 1 << 20, deploy, image_max_mb, "an agent's built image at most") \
	X(BUILD_DISK_MB, "build_disk_mb", INT, "3072", 64, 1 << 20, deploy, build_disk_mb, "the build sandbox's disk") \
	X(CODE_MAX_BYTES, "code_max_bytes", INT, "52428800", 1024, 1LL << 34, deploy, code_max_bytes, "uploaded tarball, compressed") \
	X(CODE_MAX_EXTRACTED_BYTES, "code_max_extracted_bytes", INT, "524288000", 1024, 1LL << 40, deploy, code_max_extracted_bytes, "uploaded tarball, extracted") \
	X(GIT_ALLOW_HOSTS, "git_allow_hosts", STR, "", 0, 0, deploy, git_allow_hosts, "private hosts that may be cloned") \
	X(GIT_ALLOW_PRIVATE, "git_allow_private", BOOL, "false", 0, 0, deploy, git_allow_private, "development only: any private host may be cloned") \
	X(GIT_SSH_KEY, "git_ssh_key", PATH, "", 0, 0, deploy, git_ssh_key, "SSH key for git clones") \
	X(GIT_MAX_BYTES, "git_max_bytes", INT, "209715200", 1 << 20, 1LL << 40, deploy, git_max_bytes, "clone size cap") \
	X(GIT_TIMEOUT_SECONDS, "git_timeout_seconds", INT, "120", 1, 3600, deploy, git_timeout_seconds, "clone time cap") \
	X(STORAGE_ALLOW_HOSTS, "storage_allow_hosts", STR, "", 0, 0, buckets, allow_hosts, "private addresses (and ports) bucket connections may reach") \
	X(STORAGE_ALLOW_PRIVATE, "storage_allow_private", BOOL, "false", 0, 0, buckets, allow_private, "development only: bucket endpoints may be private addresses") \
	X(WEBHOOK_ALLOW_HOSTS, "webhook_allow_hosts", STR, "", 0, 0, webhook, allow_hosts, "private addresses (and ports) webhook deliveries may reach") \
	X(WEBHOOK_ALLOW_HTTP, "webhook_allow_http", BOOL, "false", 0, 0, webhook, allow_http, "webhook URLs may be http:// (development; production: https only)") \
	X(WEBHOOK_RETRY_BASE_MS, "webhook_retry_base_ms", INT, "10000", 1, 3600000, webhook, retry_base_ms, "first retry of a failed webhook delivery after about this long, doubling each time") \
	X(WEBHOOK_RETRY_MAX_MS, "webhook_retry_max_ms", INT, "3600000", 1, 86400000, webhook, retry_max_ms, "longest wait between two attempts of a webhook delivery") \
	X(WEBHOOK_GIVE_UP_SECONDS, "webhook_give_up_seconds", INT, "86400", 1, 604800, webhook, give_up_seconds, "a webhook delivery not accepted this long after its call is given up (failed)") \
	X(WEBHOOK_TIMEOUT_SECONDS, "webhook_timeout_seconds", INT, "10", 1, 120, webhook, timeout_seconds, "one webhook attempt's time limit, connection included") \
	X(WEBHOOK_CONCURRENCY, "webhook_concurrency", INT, "1000", 1, 10000, webhook, concurrency, "webhook deliveries agenthost-webhooks has in flight at once") \
	X(MOUNT_RCLONE, "mount_rclone", PATH, "/usr/bin/rclone", 0, 0, buckets, rclone, "the rclone binary bucket mounts run") \
	X(MOUNT_IDLE_SECONDS, "mount_idle_seconds", INT, "600", 10, 86400, buckets, mount_idle_seconds, "an agent's bucket mounts unused this long are stopped") \
	X(MOUNT_LOW_LEVEL_RETRIES, "mount_low_level_retries", INT, "10", 1, 100, buckets, mount_low_level_retries, "how many times a bucket mount's rclone tries a failed request to the bucket (its --low-level-retries)") \
	X(MODEL_KEY_NAME, "model_key_name", STR, "ANTHROPIC_API_KEY", 0, 0, model, key_name, "variable carrying the model key") \
	X(MODEL_KEY_VALUE, "model_key_value", STR, "", 0, 0, model, key_value, "the model-provider key") \
	X(MODEL_KEY_FILE, "model_key_file", PATH, "", 0, 0, model, key_file, "file holding model_key_value") \
	X(MODEL_GATEWAY, "model_gateway", BOOL, "off", 0, 0, model, gateway, "agents get a token instead of the key") \
	X(MODEL_GATEWAY_UPSTREAM, "model_gateway_upstream", STR, "https://api.anthropic.com", 0, 0, model, upstream, "the gateway's provider") \
	X(MODEL_GATEWAY_MAX_BODY_BYTES, "model_gateway_max_body_bytes", INT, "33554432", 1024, 256LL << 20, model, max_body_bytes, "gateway body cap") \
	X(MODEL_GATEWAY_ENDPOINTS, "model_gateway_endpoints", STR, "POST /v1/messages usage, POST /v1/messages/count_tokens free", 0, 0, model, endpoints, "what the gateway forwards: METHOD /path usage|free, comma-separated; nothing else") \
	X(MODEL_GATEWAY_RESPONSE_HEADERS, "model_gateway_response_headers", STR, "content-type, request-id, retry-after, retry-after-ms, x-should-retry", 0, 0, model, response_headers, "provider answer headers passed back to agents (name, or prefix*)") \
	X(PRICE_INPUT_PER_MTOK, "price_input_per_mtok", PRICE, "3.00", 0, 0, price, input, "USD per million input tokens") \
	X(PRICE_OUTPUT_PER_MTOK, "price_output_per_mtok", PRICE, "15.00", 0, 0, price, output, "USD per million output tokens") \
	X(PRICE_CACHE_WRITE_PER_MTOK, "price_cache_write_per_mtok", PRICE, NULL, 0, 0, price, cache_write, "USD per million cache-write input tokens (1.25 x price_input_per_mtok)") \
	X(PRICE_CACHE_WRITE_1H_PER_MTOK, "price_cache_write_1h_per_mtok", PRICE, NULL, 0, 0, price, cache_write_1h, "USD per million 1-hour cache-write input tokens (2 x price_input_per_mtok)") \
	X(PRICE_CACHE_READ_PER_MTOK, "price_cache_read_per_mtok", PRICE, NULL, 0, 0, price, cache_read, "USD per million cache-read input tokens (0.1 x price_input_per_mtok)") \
	X(MAX_PROMPT_BYTES, "max_prompt_bytes", INT, "2097152", 0, 16 * 1024 * 1024, invoke, max_prompt_bytes, "prompt cap") \
	X(MAX_OUTPUT_BYTES, "max_output_bytes", INT, "10485760", 1, 16 * 1024 * 1024, invoke, max_output_bytes, "stdout cap") \
	X(STREAM_KEEPALIVE_SECONDS, "stream_keepalive_seconds", INT, "15", 1, 3600, invoke, stream_keepalive_seconds, "a streamed call sends a keep-alive comment after this long without an event") \
	X(SCHEDULER, "scheduler", BOOL, "true", 0, 0, schedule, enabled, "this API host runs due schedules (any number of hosts may: each tick runs once)") \
	X(SCHEDULE_POLL_MS, "schedule_poll_ms", INT, "1000", 50, 60000, schedule, poll_ms, "how often the scheduler looks for due schedules") \
	X(SCHEDULE_MAX_RUNNING, "schedule_max_running", INT, "8", 1, 256, schedule, max_running, "scheduled runs one API host runs at once") \
	X(RUNNING_SWEEP_MS, "running_sweep_ms", INT, "10000", 100, 3600000, schedule, sweep_ms, "how often an API host records the calls in progress whose owner process is gone as failed") \
	X(SESSION_OUTPUT_MAX_FILES, "session_output_max_files", INT, "100", 0, 100000, invoke, output_max_files, "session files one invocation keeps at most (the rest: files_error)") \
	X(SESSION_OUTPUT_MAX_BYTES, "session_output_max_bytes", INT, "1073741824", 0, 1LL << 40, invoke, output_max_bytes, "bytes of outputs one invocation keeps at most, counted by disk blocks; also capped by sandbox_disk_mb and the quota left") \
	X(MAX_SESSIONS_FREE, "max_sessions_free", INT, NULL, 0, 1000000, invoke, max_sessions[AH_PLAN_FREE], "live sessions per free user") \
	X(MAX_SESSIONS_PRO, "max_sessions_pro", INT, NULL, 0, 1000000, invoke, max_sessions[AH_PLAN_PRO], "live sessions per pro user") \
	X(MAX_SESSIONS_ENTERPRISE, "max_sessions_enterprise", INT, NULL, 0, 1000000, invoke, max_sessions[AH_PLAN_ENTERPRISE], "live sessions per enterprise user") \
	X(JWT_HS256_SECRET, "jwt_hs256_secret", STR, "", 0, 0, jwt, hs256_secret, "HS256 secret for JWT logins") \
	X(JWT_HS256_SECRET_FILE, "jwt_hs256_secret_file", PATH, "", 0, 0, jwt, hs256_secret_file, "file holding jwt_hs256_secret") \
	X(JWT_JWKS_URL, "jwt_jwks_url", STR, "", 0, 0, jwt, jwks_url, "identity provider's JWKS URL") \
	X(JWT_JWKS_ALLOW_LOCAL, "jwt_jwks_allow_local", BOOL, "false", 0, 0, jwt, jwks_allow_local, "jwt_jwks_url may be on loopback, link-local or this host above port 1023") \
	X(JWT_JWKS_CACHE_SECONDS, "jwt_jwks_cache_seconds", INT, "300", 0, 7 * 86400, jwt, jwks_cache_seconds, "JWKS kept this long") \
	X(JWT_JWKS_REFETCH_SECONDS, "jwt_jwks_refetch_seconds", INT, "60", 1, 86400, jwt, jwks_refetch_seconds, "a token whose kid no key has makes the JWKS be fetched again at most this often") \
	X(JWT_ISSUER, "jwt_issuer", STR, "", 0, 0, jwt, issuer, "required iss claim") \
	X(JWT_AUDIENCE, "jwt_audience", STR, "", 0, 0, jwt, audience, "required aud claim") \
	X(JWT_EMAIL_CLAIM, "jwt_email_claim", STR, "email", 0, 0, jwt, email_claim, "claim holding the email") \
	X(JWT_DEFAULT_PLAN, "jwt_default_plan", STR, "free", 0, 0, jwt, default_plan, "plan of users a JWT login creates") \
	X(JWT_LEEWAY_SECONDS, "jwt_leeway_seconds", INT, "30", 0, 3600, jwt, leeway_seconds, "clock skew allowed on exp/nbf") \
	X(JWT_LINK_BY_EMAIL, "jwt_link_by_email", BOOL, "false", 0, 0, jwt, link_by_email, "a new identity may take the user with its email") \
	X(SANDBOX_ROOT, "sandbox_root", PATH, AH_PATH_STATE "/data/sandboxes", 0, 0, sandbox, root, "sandbox state") \
	X(SANDBOX_MEMORY_MB, "sandbox_memory_mb", INT, "2048", 16, 1 << 20, sandbox, memory_mb, "memory cap per sandbox") \
	X(SANDBOX_CPUS, "sandbox_cpus", INT, "2", 1, 1024, sandbox, cpus, "cpu quota per sandbox") \
	X(SANDBOX_PIDS, "sandbox_pids", INT, "256", 8, 1 << 20, sandbox, pids, "pids cap per sandbox") \
	X(SANDBOX_NOFILE, "sandbox_nofile", INT, "1024", 16, 1 << 20, sandbox, nofile, "RLIMIT_NOFILE in sandboxes") \
	X(SANDBOX_DISK_MB, "sandbox_disk_mb", INT, "10240", 0, 1 << 24, sandbox, disk_mb, "writable layer per sandbox") \
	X(SANDBOX_POOL_SIZE, "sandbox_pool_size", INT, "2", 0, 64, sandbox, pool_size, "pre-made sandboxes kept ready") \
	X(SANDBOX_POOL_MAX, "sandbox_pool_max", INT, "16", 0, 256, sandbox, pool_max, "the pool grows to this") \
	X(SANDBOX_UID_BASE, "sandbox_uid_base", INT, "1000000", 65536, AH_UID_BASE_MAX, sandbox, uid_base, "host uid of slot 0's root") \
	X(SANDBOX_MAX, "sandbox_max", INT, "256", 1, 16384, sandbox, max, "sandboxes alive at once") \
	X(SANDBOX_NET, "sandbox_net", STR, "10.254", 0, 0, sandbox, net, "first two octets of the sandbox /16") \
	X(SANDBOX_DNS, "sandbox_dns", STR, "", 0, 0, sandbox, dns, "resolvers sandboxes may reach") \
	X(SANDBOX_ALLOW_LOOPBACK_EGRESS, "sandbox_allow_loopback_egress", BOOL, "0", 0, 0, sandbox, allow_loopback_egress, "tests only: sandboxes reach the host") \
	X(SANDBOX_KEEPER, "sandbox_keeper", PATH, "", 0, 0, sandbox, keeper, "path of agenthost-keeper") \
	X(SANDBOX_MEMORY_BUDGET_MB, "sandbox_memory_budget_mb", INT, "0", 0, 1LL << 30, sandbox, memory_budget_mb, "memory all sandboxes together; 0: host RAM - max(2 GiB, 25 %)") \
	X(DISK_RESERVE_MB, "disk_reserve_mb", INT, "-1", -1, 1LL << 40, sandbox, disk_reserve_mb, "free space kept on sandbox_root's filesystem; -1: max(1 GiB, 5 %)") \
	X(SANDBOX_CGROUP, "sandbox_cgroup", STR, "agenthost", 0, 0, sandbox, cgroup, "the sandboxes' cgroup parent") \
	X(EGRESS_ALLOW_PRIVATE, "egress_allow_private", BOOL, "0", 0, 0, sandbox, egress_allow_private, "agents' allow-lists may name private ranges")
/* clang-format on */

typedef enum {
#define AH_CFG_ENUM(id, name, type, def, min, max, set, field, doc) AH_CFG_##id,
	AH_CONFIG_KEYS(AH_CFG_ENUM)
#undef AH_CFG_ENUM
	AH_CFG_COUNT
} ah_cfg_key;

typedef enum { AH_CFGT_STR, AH_CFGT_PATH, AH_CFGT_INT, AH_CFGT_BOOL, AH_CFGT_MODE, AH_CFGT_PRICE } ah_cfg_type;

/* The C type of a key's settings field: const char *, long long or bool. */
typedef enum { AH_CFGF_OTHER, AH_CFGF_STR, AH_CFGF_LL, AH_CFGF_BOOL } ah_cfg_field;

typedef struct {
	const char *name; /* "rate_limit_crud" */
	ah_cfg_type type;
	const char *def;  /* NULL: computed at load */
	long long min, max;
	const char *doc;
	int set;            /* ah_settings_set: the struct the value lands in */
	size_t offset;      /* of the field in ah_settings */
	ah_cfg_field field; /* the field's C type */
} ah_cfg_info;

/* The table, indexed by ah_cfg_key. */
extern const ah_cfg_info ah_cfg_table[AH_CFG_COUNT];

#endif
