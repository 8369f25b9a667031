/* Settings: every configuration key's value in a field of its module's struct,
 * filled once at load from the key table (config_keys.h, whose rows name the
 * struct and the field: config.c takes offsetof of it, as nginx's
 * ngx_command_t and redis's standardConfig do). A module takes the struct it
 * needs, not the whole configuration, and reads fields: no key id, no name
 * built at run time, no value parsed twice, no default spelled again.
 * Adding a setting: one row in config_keys.h and one field here.
 *
 * Types: STR and PATH are const char * (never NULL: "" when unset; the strings
 * live as long as the configuration), INT, MODE and PRICE (micro-dollars) are
 * long long, BOOL is bool. tests/unit/test_config.c checks each row's field
 * has its key's type. */
#ifndef AH_CORE_SETTINGS_H
#define AH_CORE_SETTINGS_H

#include "core/plans.h"

#include <stdbool.h>
#include <stddef.h>

/* MariaDB connection (lib/db) */
typedef struct {
	const char *socket;
	const char *host;
	long long port;
	const char *hosts;
	const char *user;
	const char *password;
	const char *name;
} ah_db_settings;

/* the API's FastCGI pools (lib/api) */
typedef struct {
	const char *fcgi_socket;
	const char *fcgi_invoke_socket;
	const char *fcgi_metrics_socket;
	const char *socket_group;
	long long socket_mode; /* octal mode */
	long long crud_workers;
	long long invoke_workers;
	long long rate_limit_crud;
	long long rate_limit_invoke;
	long long rate_limit_slots;
	const char *public_url;
	const char *openapi_file;
} ah_api_settings;

/* shared by the API, the runner and the admin tool */
typedef struct {
	const char *log_format;
	long long history_retention_days;
	const char *master_key_file;
	const char *data_dir;
	const char *schema_dir;
} ah_host_settings;

/* managed files' store (lib/files) */
typedef struct {
	const char *dir;
	const char *backend;
	const char *s3_endpoint;
	const char *s3_bucket;
	const char *s3_region;
	const char *s3_access_key_id;
	const char *s3_secret_access_key;
	long long upload_expiry_seconds;
} ah_files_settings;

/* the runner daemon (lib/runner) */
typedef struct {
	const char *socket;
	const char *socket_group;
	const char *pid_file;
	const char *id;
	const char *listen;
	const char *advertise;
	const char *secret;
	const char *secret_file;
	const char *metrics_listen;
	long long capacity;
	long long heartbeat_seconds;
	long long stale_seconds;
	long long shutdown_grace_seconds;
	long long warm_max;
	long long warm_idle_seconds;
	long long blob_cache_mb;
	long long blob_cache_idle_seconds;
	long long session_idle_seconds;
	long long session_give_way_seconds;
} ah_runner_settings;

/* deploys: builds, images, code and git (lib/runner deploy_*) */
typedef struct {
	long long max_attempts;
	long long timeout_seconds;
	long long lease_seconds;
	long long poll_ms;
	long long images_kept;
	long long image_max_mb;
	long long build_disk_mb;
	long long code_max_bytes;
	long long code_max_extracted_bytes;
	const char *git_allow_hosts;
	bool git_allow_private;
	const char *git_ssh_key;
	long long git_max_bytes;
	long long git_timeout_seconds;
} ah_deploy_settings;

/* bucket connections and mounts (lib/buckets, lib/runner fuse) */
typedef struct {
	const char *allow_hosts;
	bool allow_private;
	const char *rclone;
	long long mount_idle_seconds;
	long long mount_low_level_retries;
} ah_buckets_settings;

/* webhook deliveries (lib/webhooks) */
typedef struct {
	const char *allow_hosts;
	bool allow_http;
	long long retry_base_ms;
	long long retry_max_ms;
	long long give_up_seconds;
	long long timeout_seconds;
	long long concurrency;
} ah_webhook_settings;

/* the model key and the gateway (lib/runner gateway) */
typedef struct {
	const char *key_name;
	const char *key_value;
	const char *key_file;
	bool gateway;
	const char *upstream;
	long long max_body_bytes;
	const char *endpoints;
	const char *response_headers;
} ah_model_settings;

/* model prices, USD micro-dollars per million tokens: what a call costs (handlers/invoke_record)
 * and what the gateway charges against budgets (lib/runner gateway_budget) */
typedef struct {
	long long input;
	long long output;
	long long cache_write;
	long long cache_write_1h;
	long long cache_read;
} ah_price_settings;

/* calls: caps (handlers/invoke*) */
typedef struct {
	long long max_prompt_bytes;
	long long max_output_bytes;
	long long stream_keepalive_seconds;
	long long output_max_files;
	long long output_max_bytes;
	long long max_sessions[AH_PLAN_COUNT]; /* max_sessions_<plan>, by ah_plan_id */
	const char *tokenizer_vocab;
} ah_invoke_settings;

/* the scheduler (handlers/schedule_run) */
typedef struct {
	bool enabled;
	long long poll_ms;
	long long max_running;
	long long sweep_ms; /* the sweep of calls whose owner is gone (invocation_sweep.c) */
} ah_schedule_settings;

/* JWT logins (lib/auth) */
typedef struct {
	const char *hs256_secret;
	const char *hs256_secret_file;
	const char *jwks_url;
	bool jwks_allow_local;
	long long jwks_cache_seconds;
	long long jwks_refetch_seconds;
	const char *issuer;
	const char *audience;
	const char *email_claim;
	const char *default_plan;
	long long leeway_seconds;
	bool link_by_email;
} ah_jwt_settings;

/* sandboxes (lib/sandbox) */
typedef struct {
	const char *root;
	long long memory_mb;
	long long cpus;
	long long pids;
	long long nofile;
	long long disk_mb;
	long long pool_size;
	long long pool_max;
	long long uid_base;
	long long max;
	const char *net;
	const char *dns;
	bool allow_loopback_egress;
	const char *keeper;
	long long memory_budget_mb;
	long long disk_reserve_mb;
	const char *cgroup;
	bool egress_allow_private;
} ah_sandbox_settings;

/* Every module's settings, filled once at load (config.c). */
typedef struct {
	ah_db_settings db;
	ah_api_settings api;
	ah_host_settings host;
	ah_files_settings files;
	ah_runner_settings runner;
	ah_deploy_settings deploy;
	ah_buckets_settings buckets;
	ah_webhook_settings webhook;
	ah_model_settings model;
	ah_price_settings price;
	ah_invoke_settings invoke;
	ah_schedule_settings schedule;
	ah_jwt_settings jwt;
	ah_sandbox_settings sandbox;
} ah_settings;

/* The structs of ah_settings, for the rows of config_keys.h to name. */
typedef enum {
	AH_SET_db,
	AH_SET_api,
	AH_SET_host,
	AH_SET_files,
	AH_SET_runner,
	AH_SET_deploy,
	AH_SET_buckets,
	AH_SET_webhook,
	AH_SET_model,
	AH_SET_price,
	AH_SET_invoke,
	AH_SET_schedule,
	AH_SET_jwt,
	AH_SET_sandbox,
	AH_SET_COUNT
} ah_settings_set;

typedef struct {
	const char *name; /* "invoke": ah_settings.invoke */
	size_t offset, size;
} ah_settings_set_info;

extern const ah_settings_set_info ah_settings_sets[AH_SET_COUNT];

struct ah_config;
/* The settings of a configuration; NULL: the defaults (computed ones at their
 * key's lower bound, as ah_cfg_int(NULL, ...) gives). Never NULL. */
const ah_settings *ah_settings_of(const struct ah_config *c);

/* A string setting, NULL when unset (""): for the optional ones. */
static inline const char *ah_set_opt(const char *s)
{
	return s && *s ? s : NULL;
}

#endif
