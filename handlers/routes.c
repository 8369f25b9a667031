/* Every resource's route table, merged by the router. One line per file. */
#include "routes.h"

const ah_route *const ah_route_tables[] = {
	ah_agents_routes,
	ah_code_routes,
	ah_secrets_routes,
	ah_api_keys_routes,
	ah_users_routes,
	ah_health_routes,
	ah_openapi_routes,
	ah_invoke_routes,
	ah_sessions_routes,
	ah_usage_routes,
	ah_files_routes,
	ah_file_upload_routes,
	ah_file_presign_routes,
	ah_agent_files_routes,
	ah_buckets_routes,
	ah_bucket_access_routes,
	ah_mounts_routes,
	ah_deploys_routes,
	ah_invocation_logs_routes,
	ah_invocation_routes,
	ah_schedules_routes,
	ah_webhooks_routes,
	NULL,
};
