/* deploy [DIR]: for a local agent, pack the project, upload it and start the
 * deploy; for a git agent, only start it. Then follow the agent until it is
 * active or in error, with a live status line on a terminal. --create makes
 * the agent from agent.json when it does not exist yet. */
#include "cli/cli.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/json.h"
#include "core/util.h"

#define CODE_CAP (50LL << 20)   /* the API's limit for PUT …/code */

struct deploy {
	struct ah_cli *c;
	const char *dir, *slug, *spath;   /* spath: "/agents/<escaped slug>" */
	struct ah_cli_manifest m;
	bool have_manifest;
	int64_t started;
	const char *said;                 /* the last waiting note printed */
};

/* The agent's record; *found false (and 0) when there is none. */
static int find_agent(struct deploy *d, json_object **rec, bool *found, ah_err *err)
{
	struct ah_cli_resp r;
	int rc = ah_cli_get(d->c, d->spath, &r, err);
	*found = rc == 0;
	*rec = r.body;
	return rc && r.status == 404 ? 0 : rc;
}

static int create_agent(struct deploy *d, json_object **rec, ah_err *err)
{
	struct ah_cli_resp r;
	json_object *body = ah_cli_obj(d->c);
	json_object_object_add(body, "name", json_object_new_string(d->m.name));
	json_object_object_add(body, "slug", json_object_new_string(d->slug));
	json_object_object_add(body, "source_type", json_object_new_string("local"));
	if (d->m.description)
		json_object_object_add(body, "description", json_object_new_string(d->m.description));
	int rc = ah_cli_send(d->c, "POST", "/agents", body, &r, err);
	if (!rc)
		ah_cli_note(d->c, "Created agent %s", d->slug);
	*rec = r.body;
	return rc;
}

static int upload(struct deploy *d, ah_err *err)
{
	FILE *tar;
	long long size;
	int nfiles;
	struct ah_cli_resp r;
	ah_cli_status_line(d->c, "packing %s", d->dir);
	int rc = ah_cli_pack(d->c, d->dir, &tar, &size, &nfiles, err);
	ah_cli_status_end(d->c);
	if (rc)
		return rc;
	if (size > CODE_CAP) {
		fclose(tar);
		return ah_cli_usage(err, "the packed project is %.1f MB; the API takes at most 50 MB "
		                    "(list large files in .agenthostignore)", size / 1e6);
	}
	struct ah_cli_req rq = {.method = "PUT", .path = ah_sprintf(d->c->a, "%s/code", d->spath), .upload = tar,
	                        .upload_size = size, .content_type = "application/gzip", .timeout = 600,
	                        .progress = true};
	rc = ah_cli_call(d->c, &rq, &r, err);
	fclose(tar);
	if (!rc)
		ah_cli_note(d->c, "Uploaded %d files (%.1f kB, sha256 %.12s…)", nfiles, size / 1e3,
		            ah_cli_text(d->c, r.body, "sha256", AH_COL_TEXT));
	return rc;
}

static double elapsed(const struct deploy *d)
{
	return (double)(ah_now_ms() - d->started) / 1000.0;
}

/* What a deploying agent's status_message says (the API's note that no
 * runner is alive to take the job), NULL when nothing. Printed once as a
 * line of its own when stderr is not a terminal, where no status line is
 * drawn: a script sees why the deploy waits. */
static const char *waiting_note(struct deploy *d, json_object *rec)
{
	const char *msg = ah_json_get_str(rec, "status_message");
	if (!msg)
		return NULL;
	const char *text = ah_cli_text(d->c, rec, "status_message", AH_COL_TEXT);
	if (!d->c->tty_err && (!d->said || strcmp(d->said, text) != 0))
		ah_cli_note(d->c, "%s: %s", d->slug, text);
	d->said = text;
	return text;
}

/* Polls the agent until it leaves `deploying`; the record in *rec. */
static int follow(struct deploy *d, long long wait_max, json_object **rec, ah_err *err)
{
	static const char spin[] = "|/-\\";
	for (unsigned i = 0;; i++) {
		struct ah_cli_resp r;
		/* Drawn before the first look too: a quick deploy still shows its phase. */
		ah_cli_status_line(d->c, "%c deploying %s  %5.1f s", spin[(i * 4) % 4], d->slug, elapsed(d));
		int rc = ah_cli_get(d->c, d->spath, &r, err);
		if (rc)
			return rc;
		const char *st = ah_json_get_str(r.body, "status");
		*rec = r.body;
		if (!st || strcmp(st, "deploying"))
			return 0;
		if (elapsed(d) > (double)wait_max)
			return ah_err_set(err, AH_ETIMEOUT, "%s is still deploying after %.0f s; "
			                  "agenthost agents get %s shows when it is done", d->slug, elapsed(d), d->slug);
		const char *why = waiting_note(d, r.body);
		for (int k = 0; k < 4; k++) {
			ah_cli_status_line(d->c, "%c deploying %s  %5.1f s  (%s)", spin[(i * 4 + k + 1) % 4], d->slug,
			                   elapsed(d), why ? why : "building the image: npm install, checks");
			usleep(250 * 1000);
		}
	}
}

static int finish(struct deploy *d, json_object *rec, ah_err *err)
{
	const char *st = ah_json_get_str(rec, "status");
	ah_cli_status_end(d->c);
	if (d->c->json)
		ah_cli_print_json(d->c, rec);
	/* Active with a message: the deploy failed and the previous one serves on. */
	const char *msg = ah_json_get_str(rec, "status_message");
	if (st && !strcmp(st, "active") && (!msg || !*msg)) {
		if (!d->c->json)
			printf("%s is %s (deployed in %.1f s)\n", d->slug, ah_cli_paint(d->c, stdout, "32", "active"),
			       elapsed(d));
		return 0;
	}
	return ah_err_set(err, AH_EFAIL, "deploy of %s failed (%s): %s", d->slug, st ? st : "?",
	                  ah_cli_text(d->c, rec, "status_message", AH_COL_TEXT));
}

struct deploy_opts {
	const char *agent;
	bool create, no_wait;
	struct ah_cli_int wait;
};

/* Which agent: --agent, else the manifest's slug (or its name's). */
static int target(struct deploy *d, const struct deploy_opts *o, ah_err *err)
{
	int rc = ah_cli_manifest_read(d->c, d->dir, &d->m, err);
	d->have_manifest = rc == 0;
	d->slug = o->agent;
	if (!d->slug && rc)
		return rc;
	if (!d->slug)
		d->slug = d->m.slug;
	d->spath = ah_sprintf(d->c->a, "/agents/%s", ah_cli_seg(d->c, d->slug));
	return 0;
}

static int prepare(struct deploy *d, const struct deploy_opts *o, ah_err *err)
{
	json_object *rec;
	bool found;
	int rc = find_agent(d, &rec, &found, err);
	if (rc)
		return rc;
	if (!found && !o->create)
		return ah_err_set(err, AH_ENOTFOUND, "there is no agent %s (--create makes it from %s)", d->slug,
		                  d->have_manifest ? d->m.path : "agent.json");
	if (!found && !d->have_manifest)
		return ah_cli_manifest_read(d->c, d->dir, &d->m, err);
	if (!found && (rc = create_agent(d, &rec, err)))
		return rc;
	const char *src = ah_json_get_str(rec, "source_type");
	if (src && !strcmp(src, "git"))
		return 0;   /* the runner clones it */
	if (!d->have_manifest)
		return ah_cli_manifest_read(d->c, d->dir, &d->m, err);
	return upload(d, err);
}

static int run_deploy(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const struct deploy_opts *o = a->opts;
	struct deploy d = {.c = c, .dir = a->npos ? a->pos[0] : ".", .started = ah_now_ms()};
	long long wait_max = o->wait.set ? o->wait.n : 1800;
	struct ah_cli_resp r;
	json_object *rec;
	int rc = target(&d, o, err);
	if (!rc)
		rc = prepare(&d, o, err);
	if (!rc)
		rc = ah_cli_send(c, "POST", ah_sprintf(c->a, "%s/deploy", d.spath), NULL, &r, err);
	if (rc)
		return rc;
	if (o->no_wait) {
		if (c->json)
			ah_cli_print_json(c, r.body);
		else
			printf("%s: deploy started (agenthost agents get %s shows its status)\n", d.slug, d.slug);
		return 0;
	}
	rc = follow(&d, wait_max, &rec, err);
	ah_cli_status_end(c);
	return rc ? rc : finish(&d, rec, err);
}

const struct ah_cli_cmd ah_cli_deploy_cmds[] = {
	{"deploy", "[DIR]", "upload the project in DIR (default: here) and deploy it; follows until active or error",
	 0, 1, false, run_deploy,
	 {AH_OPT_STRING("agent", 'a', "SLUG", struct deploy_opts, agent,
	                "the agent to deploy (default: agent.json's slug, or its name's)"),
	  AH_OPT_BOOL("create", 0, struct deploy_opts, create, "create the agent from agent.json when it does not exist"),
	  AH_OPT_BOOL("no-wait", 0, struct deploy_opts, no_wait, "return once the deploy has started"),
	  AH_OPT_INT("wait", 0, "SECONDS", 1, 86400, struct deploy_opts, wait,
	             "follow for at most this long (default 1800)")},
	 sizeof(struct deploy_opts)},
	{0},
};
