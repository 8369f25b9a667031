/* buckets list|get|create|update|delete|credentials|test: the user's own
 * object storage (s3, gcs, r2), registered to be mounted into agents
 * (mounts.c). A bucket's secret never comes from the command line, where other
 * local users can read it in /proc: it is typed without echo or piped on
 * stdin; a gcs key file is read from a path. Nothing of it is printed. */
#include "cli/cli.h"
#include "core/util.h"

#include <errno.h>
#include <string.h>

static const struct ah_cli_col list_cols[] = {
	{"slug", "slug", AH_COL_TEXT},
	{"name", "name", AH_COL_TEXT},
	{"provider", "provider", AH_COL_TEXT},
	{"bucket", "bucket_name", AH_COL_TEXT},
	{"region", "region", AH_COL_TEXT},
	{"credentials", "has_credentials", AH_COL_BOOL},
	{"endpoint", "endpoint_url", AH_COL_TEXT},
	{0},
};

static const struct ah_cli_col bucket_cols[] = {
	{"slug", "slug", AH_COL_TEXT},
	{"id", "id", AH_COL_TEXT},
	{"name", "name", AH_COL_TEXT},
	{"provider", "provider", AH_COL_TEXT},
	{"bucket", "bucket_name", AH_COL_TEXT},
	{"region", "region", AH_COL_TEXT},
	{"endpoint", "endpoint_url", AH_COL_TEXT},
	{"credentials", "has_credentials", AH_COL_BOOL},
	{"created", "created_at", AH_COL_TIME},
	{"updated", "updated_at", AH_COL_TIME},
	{0},
};

static const char *bucket_path(struct ah_cli *c, const char *slug)
{
	return ah_sprintf(c->a, "/buckets/%s", ah_cli_seg(c, slug));
}

/* The options of the commands below, one struct for all (a member without a
 * row in a command's table stays unset). */
struct bucket_opts {
	struct ah_cli_paging page;
	const char *name, *slug, *provider, *bucket, *region, *endpoint_url;
	const char *access_key_id, *service_account_file;
	bool force;
};

static int run_list(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const struct bucket_opts *o = a->opts;
	return ah_cli_list(c, ah_sprintf(c->a, "/buckets?%s", ah_cli_paging(c, &o->page)), list_cols, err);
}

static int run_get(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	int rc = ah_cli_get(c, bucket_path(c, a->pos[0]), &r, err);
	if (!rc)
		ah_cli_show(c, r.body, bucket_cols);
	return rc;
}

/* The record's fields from the options create and update share. An empty
 * --region or --endpoint-url is null: the provider's default, no endpoint. */
static void bucket_fields(const struct bucket_opts *o, json_object *body)
{
	const struct { const char *v, *field; bool nullable; } map[] = {
		{o->name, "name", false}, {o->slug, "slug", false}, {o->provider, "provider", false},
		{o->bucket, "bucket_name", false}, {o->region, "region", true},
		{o->endpoint_url, "endpoint_url", true},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].v)
			json_object_object_add(body, map[i].field,
			                       map[i].nullable && !*map[i].v ? NULL : json_object_new_string(map[i].v));
}

static int run_create(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const struct bucket_opts *o = a->opts;
	struct ah_cli_resp r;
	json_object *body = ah_cli_obj(c);
	/* What the API requires is asked for here, in the CLI's own words. */
	const struct { const char *v, *opt; } required[] = {
		{o->name, "name"}, {o->provider, "provider"}, {o->bucket, "bucket"},
	};
	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
		if (!required[i].v)
			return ah_cli_usage(err, "buckets create: --%s is required (see agenthost buckets create --help)",
			                    required[i].opt);
	bucket_fields(o, body);
	int rc = ah_cli_send(c, "POST", "/buckets", body, &r, err);
	if (rc)
		return rc;
	ah_cli_show(c, r.body, bucket_cols);
	if (!c->json)
		ah_cli_note(c, "Next: agenthost buckets credentials %s, then agenthost buckets test %s",
		            ah_cli_text(c, r.body, "slug", AH_COL_TEXT), ah_cli_text(c, r.body, "slug", AH_COL_TEXT));
	return 0;
}

static int run_update(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	json_object *body = ah_cli_obj(c);
	bucket_fields(a->opts, body);
	if (!json_object_object_length(body))
		return ah_cli_usage(err, "buckets update: nothing to change (see agenthost buckets update --help)");
	int rc = ah_cli_send(c, "PATCH", bucket_path(c, a->pos[0]), body, &r, err);
	if (!rc)
		ah_cli_show(c, r.body, bucket_cols);
	return rc;
}

static int run_delete(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	bool force = ((const struct bucket_opts *)a->opts)->force;
	const char *path = ah_sprintf(c->a, "%s%s", bucket_path(c, a->pos[0]), force ? "?force=true" : "");
	int rc = ah_cli_send(c, "DELETE", path, NULL, &r, err);
	/* The API's 409 names the agents and its query parameter; say the option. */
	if (rc && r.status == 409) {
		const char *detail = ah_strdup(c->a, err->msg);
		return ah_err_set(err, rc, "%s: agenthost buckets delete %s --force", detail, a->pos[0]);
	}
	if (!rc)
		ah_cli_note(c, "Deleted bucket %s%s (its contents are untouched)", a->pos[0],
		            force ? " and its mounts" : "");
	return rc;
}

/* ok: the message on stdout, exit 0; not ok: the message as the error, exit 1. */
static int run_test(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	const char *path = ah_sprintf(c->a, "%s/test", bucket_path(c, a->pos[0]));
	struct ah_cli_req rq = {.method = "POST", .path = path, .timeout = 60,
	                        .waiting = ah_sprintf(c->a, "testing %s", a->pos[0])};
	int rc = ah_cli_call(c, &rq, &r, err);
	if (rc)
		return rc;
	json_object *ok = NULL;
	bool good = json_object_object_get_ex(r.body, "ok", &ok) && json_object_get_boolean(ok);
	const char *msg = ah_cli_text(c, r.body, "message", AH_COL_TEXT);
	if (c->json)
		ah_cli_print_json(c, r.body);
	else if (good)
		printf("%s: %s\n", ah_cli_paint(c, stdout, "32", "ok"), msg);
	return good ? 0 : ah_err_set(err, AH_EFAIL, "%s: %s", a->pos[0], msg);
}

/* ---- credentials ---- */

#define KEY_CAP 256                 /* the API's bound on access_key_id and secret_access_key */
#define ACCOUNT_CAP (64 * 1024)     /* and on service_account_json */

/* The service account's JSON key file (- for stdin), checked to be JSON here
 * so that a wrong path is told apart from a wrong key. */
static int account_body(struct ah_cli *c, const char *file, json_object *body, ah_err *err)
{
	char *text;
	int rc;
	FILE *f = strcmp(file, "-") ? fopen(file, "rb") : stdin;
	if (!f)
		return ah_cli_usage(err, "buckets credentials: cannot open %s: %s", file, strerror(errno));
	rc = ah_cli_read_all(c, f, ACCOUNT_CAP, &text, NULL, err);
	if (f != stdin)
		fclose(f);
	if (rc)
		return rc;
	json_object *parsed = ah_cli_own(c, json_tokener_parse(text));
	if (!json_object_is_type(parsed, json_type_object))
		return ah_cli_usage(err, "buckets credentials: %s is not a JSON key file", file);
	json_object_object_add(body, "service_account_json", json_object_new_string(text));
	return 0;
}

/* Without --access-key-id: asked at a terminal (an id is not secret, so it is
 * echoed), or the first line of stdin with the secret on the next. */
static int key_pair(struct ah_cli *c, const struct bucket_opts *o, char **id, char **secret, ah_err *err)
{
	*id = (char *)o->access_key_id;
	if (*id || c->tty_in) {
		int rc = *id ? 0 : ah_cli_ask(c, "Access key id", NULL, id, err);
		return rc ? rc : ah_cli_read_secret(c, "Secret access key", KEY_CAP, secret, err);
	}
	char *all;
	int rc = ah_cli_read_all(c, stdin, 2 * KEY_CAP + 4, &all, NULL, err);
	if (rc)
		return rc;
	char *nl = strchr(all, '\n');
	if (!nl)
		return ah_cli_usage(err, "buckets credentials: stdin holds the access key id and the secret "
		                    "on two lines (or give --access-key-id and the secret alone)");
	*nl = 0;
	ah_chomp(all);
	ah_chomp(nl + 1);
	if (strchr(nl + 1, '\n'))
		return ah_cli_usage(err, "buckets credentials: stdin holds more than two lines");
	*id = all;
	*secret = nl + 1;
	return 0;
}

/* The body for the bucket's provider: a key file only for gcs. */
static int creds_body(struct ah_cli *c, const struct ah_cli_args *a, json_object *body, ah_err *err)
{
	const struct bucket_opts *o = a->opts;
	const char *file = o->service_account_file;
	struct ah_cli_resp r;
	/* The bucket first: an unknown one fails before anything is asked. */
	int rc = ah_cli_get(c, bucket_path(c, a->pos[0]), &r, err);
	if (rc)
		return rc;
	bool gcs = !strcmp(ah_cli_text(c, r.body, "provider", AH_COL_TEXT), "gcs");
	if (gcs != (file != NULL))
		return ah_cli_usage(err, gcs ? "buckets credentials: %s is a gcs bucket: give --service-account-file PATH"
		                             : "buckets credentials: %s takes an access key pair, not a service account file",
		                    a->pos[0]);
	if (gcs)
		return account_body(c, file, body, err);
	if (o->access_key_id && !*o->access_key_id)
		return ah_cli_usage(err, "buckets credentials: --access-key-id is empty");
	char *id, *secret;
	rc = key_pair(c, o, &id, &secret, err);
	if (rc)
		return rc;
	json_object_object_add(body, "access_key_id", json_object_new_string(id));
	json_object_object_add(body, "secret_access_key", json_object_new_string(secret));
	return 0;
}

static int run_credentials(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	struct ah_cli_resp r;
	json_object *body = ah_cli_obj(c);
	int rc = creds_body(c, a, body, err);
	if (!rc)
		rc = ah_cli_send(c, "POST", ah_sprintf(c->a, "%s/credentials", bucket_path(c, a->pos[0])),
		                 body, &r, err);
	if (rc)
		return rc;
	if (c->json)
		ah_cli_print_json(c, r.body);
	else
		ah_cli_note(c, "Stored the credentials of %s (agenthost buckets test %s tries them)", a->pos[0],
		            a->pos[0]);
	return 0;
}

#define O struct bucket_opts
#define FIELD_OPTS \
	AH_OPT_STRING("slug", 0, "SLUG", O, slug, "the URL name (default: derived from the name)"), \
	AH_OPT_STRING("provider", 'p', "s3|gcs|r2", O, provider, "where the bucket is"), \
	AH_OPT_STRING("bucket", 'b', "BUCKET", O, bucket, "the bucket's name at the provider"), \
	AH_OPT_STRING("endpoint-url", 'e', "URL", O, endpoint_url, \
	              "http(s)://host[:port]: required for r2, any S3-compatible store"), \
	AH_OPT_STRING("region", 'r', "REGION", O, region, "default us-east-1 for s3, auto for r2 (\"\": the default)")

const struct ah_cli_cmd ah_cli_buckets_cmds[] = {
	{"buckets list", NULL, "list your buckets", 0, 0, false, run_list, {AH_CLI_PAGING_OPTS(O, page)}, sizeof(O)},
	{"buckets get", "SLUG", "show one bucket", 1, 1, false, run_get, {{0}}},
	{"buckets create", NULL, "register a bucket (then: buckets credentials, buckets test)", 0, 0, false,
	 run_create, {AH_OPT_STRING("name", 'n', "NAME", O, name, "what you call it (required)"), FIELD_OPTS}, sizeof(O)},
	{"buckets update", "SLUG", "change a bucket (its mounts apply it at the agents' next deploy)", 1, 1, false,
	 run_update, {AH_OPT_STRING("name", 'n', "NAME", O, name, "a new name"), FIELD_OPTS}, sizeof(O)},
	{"buckets delete", "SLUG", "forget a bucket (its contents are untouched)", 1, 1, false, run_delete,
	 {AH_OPT_BOOL("force", 'f', O, force, "also remove the agents' mounts of it")}, sizeof(O)},
	{"buckets credentials", "SLUG",
	 "set a bucket's credentials (the secret from stdin or typed without echo)", 1, 1, false,
	 run_credentials,
	 {AH_OPT_STRING("access-key-id", 'k', "ID", O, access_key_id,
	                "s3/r2: the access key id (else asked, or stdin's first line)"),
	  AH_OPT_STRING("service-account-file", 0, "PATH", O, service_account_file,
	                "gcs: the service account's JSON key file (- for stdin)")},
	 sizeof(O)},
	{"buckets test", "SLUG", "try the stored credentials with a real request; exit 1 when they fail", 1, 1,
	 false, run_test, {{0}}},
	{0},
};
