/* The route table of every resource; handlers/routes.c lists them for the router. */
#ifndef AH_HANDLERS_ROUTES_H
#define AH_HANDLERS_ROUTES_H

#include "http/router.h"

extern const ah_route ah_agents_routes[];
extern const ah_route ah_code_routes[];
extern const ah_route ah_secrets_routes[];
extern const ah_route ah_api_keys_routes[];
extern const ah_route ah_users_routes[];
extern const ah_route ah_health_routes[];
extern const ah_route ah_openapi_routes[];
extern const ah_route ah_invoke_routes[];
extern const ah_route ah_sessions_routes[];
extern const ah_route ah_usage_routes[];
extern const ah_route ah_files_routes[];
extern const ah_route ah_file_upload_routes[];
extern const ah_route ah_file_presign_routes[];
extern const ah_route ah_agent_files_routes[];
extern const ah_route ah_buckets_routes[];
extern const ah_route ah_bucket_access_routes[];
extern const ah_route ah_mounts_routes[];
extern const ah_route ah_deploys_routes[];
extern const ah_route ah_invocation_logs_routes[];
extern const ah_route ah_invocation_routes[];
extern const ah_route ah_schedules_routes[];
extern const ah_route ah_webhooks_routes[];

/* Seconds since any runner's last heartbeat (-1: none ever); health.c. */
int ah_runner_heartbeat_age(ah_req *r, long long *out);

/* All of the above, NULL-terminated: what agenthost-api serves (main.c). */
extern const ah_route *const ah_route_tables[];

#endif
