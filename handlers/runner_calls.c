/* See runner_calls.h. */
#include "runner_calls.h"

static ah_rc rc_of(const ah_req *r)
{
	return (ah_rc){.arena = r->arena, .cfg = r->cfg, .db = r->db, .request_id = r->request_id};
}

int ah_runner_call(ah_req *r, json_object *req, json_object **resp, int timeout_ms)
{
	ah_rc c = rc_of(r);
	return ah_rc_call(&c, req, resp, timeout_ms);
}

int ah_runner_call_stream(ah_req *r, json_object *req, json_object **resp, int timeout_ms,
                          ah_runner_chunk_fn fn, void *ctx)
{
	ah_rc c = rc_of(r);
	return ah_rc_call_stream(&c, req, resp, timeout_ms, fn, ctx);
}

int ah_runner_destroy_agent(ah_req *r, const char *agent_id)
{
	ah_rc c = rc_of(r);
	return ah_rc_destroy_agent(&c, agent_id);
}

int ah_runner_forget_agent(ah_req *r, const char *agent_id, const char *runner_id, bool purge)
{
	ah_rc c = rc_of(r);
	return ah_rc_forget_agent(&c, agent_id, runner_id, purge);
}

int ah_runner_left_image(ah_req *r, const char *agent_id, const char *runner_id, bool purge,
                         const char *left_image)
{
	ah_rc c = rc_of(r);
	return ah_rc_left_image(&c, agent_id, runner_id, purge, left_image);
}

int ah_runner_retire_warm(ah_req *r, const char *agent_id, const char *runner_id)
{
	ah_rc c = rc_of(r);
	return ah_rc_retire_warm(&c, agent_id, runner_id);
}
