/* See run_req.h. */
#include "runner/run_req.h"
#include "core/json.h"
#include "deploy/deploy.h"

#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_TIMEOUT_MS 120000
#define LIMIT_TIMEOUT_MS 600000
#define DEFAULT_MAX_OUTPUT (10 << 20)
#define LIMIT_MAX_OUTPUT (16 << 20)
#define LIMIT_WARM 256      /* warm_max's bound (core/config_keys.h) */
#define ENV_EXTRA 6        /* 3 defaults + 2 of the model gateway + NULL */

bool ah_run_token_ok(const char *s, size_t max, const char *extra)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      strchr(extra, c)))
			return false;
	}
	return true;
}

static long long get_int(json_object *req, const char *key, long long def, long long min,
                         long long max)
{
	json_object *v;
	if (!json_object_object_get_ex(req, key, &v) || !json_object_is_type(v, json_type_int))
		return def;
	long long n = json_object_get_int64(v);
	return n < min ? min : n > max ? max : n;
}

void ah_run_req_free(struct ah_run_req *q)
{
	for (size_t i = 0; i < q->nenv; i++) {
		sodium_memzero(q->envp[i], strlen(q->envp[i]));
		free(q->envp[i]);
	}
	free(q->envp);
	free(q->secrets);
	free(q->egress);
	if (q->in) {
		sodium_memzero(q->in, q->in_len);
		free(q->in);
	}
	*q = (struct ah_run_req){ 0 };
}

int ah_run_req_setenv(struct ah_run_req *q, const char *name, const char *val, ah_err *err)
{
	size_t n = strlen(name) + strlen(val) + 2;
	char *s = q->nenv + 1 < q->env_cap ? malloc(n) : NULL;
	if (!s)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	snprintf(s, n, "%s=%s", name, val);
	q->envp[q->nenv++] = s;
	q->envp[q->nenv] = NULL;
	return 0;
}

void ah_run_req_unsetenv(struct ah_run_req *q, const char *name)
{
	size_t n = strlen(name), w = 0;
	for (size_t i = 0; i < q->nenv; i++) {
		if (strncmp(q->envp[i], name, n) == 0 && q->envp[i][n] == '=') {
			sodium_memzero(q->envp[i], strlen(q->envp[i]));
			free(q->envp[i]);
		} else {
			q->envp[w++] = q->envp[i];
		}
	}
	q->nenv = w;
	q->envp[w] = NULL;
}

/* One variable of the request's "env". */
static int take_var(struct ah_run_req *q, const char *k, json_object *v, ah_err *err)
{
	if (!ah_run_token_ok(k, 128, "_") || (k[0] >= '0' && k[0] <= '9'))
		return ah_err_set(err, AH_EINVALID, "invalid environment variable name");
	if (!json_object_is_type(v, json_type_string) ||
	    strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v))
		return ah_err_set(err, AH_EINVALID, "environment values must be strings without NUL");
	return ah_run_req_setenv(q, k, json_object_get_string(v), err);
}

/* The request's variables, then the defaults the request did not set. */
static int parse_env(struct ah_run_req *q, json_object *req, ah_err *err)
{
	static const char *const defaults[][2] = {
		{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", "/tmp"}, {"LANG", "C.UTF-8"},
	};
	json_object *env = NULL;
	if (json_object_object_get_ex(req, "env", &env) && !json_object_is_type(env, json_type_object)
	    && !json_object_is_type(env, json_type_null))
		return ah_err_set(err, AH_EINVALID, "\"env\" must be an object");
	size_t n = env && json_object_is_type(env, json_type_object) ? json_object_object_length(env) : 0;
	q->env_cap = n + ENV_EXTRA;
	if (!(q->envp = calloc(q->env_cap, sizeof(char *))) ||
	    !(q->secrets = calloc(n + 1, sizeof(char *))))
		return ah_err_set(err, AH_EFAIL, "out of memory");
	if (n > 0) {
		json_object_object_foreach(env, k, v) {
			int rc = take_var(q, k, v, err);
			if (rc != 0)
				return rc;
			q->secrets[q->nsecrets++] = json_object_get_string(v);
		}
	}
	for (size_t d = 0; d < 3; d++) {
		if (env && json_object_object_get_ex(env, defaults[d][0], NULL))
			continue;
		int rc = ah_run_req_setenv(q, defaults[d][0], defaults[d][1], err);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int parse_stdin(struct ah_run_req *q, json_object *req, ah_err *err)
{
	const char *b64 = ah_json_get_str(req, "stdin_b64");
	size_t len = b64 ? strlen(b64) : 0;
	if (!(q->in = malloc(len / 4 * 3 + 4)))
		return ah_err_set(err, AH_EFAIL, "out of memory");
	if (len && sodium_base642bin(q->in, len / 4 * 3 + 4, b64, len, NULL, &q->in_len, NULL,
	                             sodium_base64_VARIANT_ORIGINAL) != 0)
		return ah_err_set(err, AH_EINVALID, "stdin_b64 is not valid base64");
	return 0;
}

/* "network": {"mode": "allow", "allow": [entries]} (the API's canonical
 * form, handlers/agent_network.c); absent, null or mode "open": none. */
static int parse_network(struct ah_run_req *q, json_object *req, ah_err *err)
{
	json_object *net = NULL, *allow = NULL;
	if (!json_object_object_get_ex(req, "network", &net) || !net)
		return 0;
	const char *mode = ah_json_get_str(net, "mode");
	if (mode && strcmp(mode, "open") == 0)
		return 0;
	if (!mode || strcmp(mode, "allow") != 0 || !json_object_object_get_ex(net, "allow", &allow) ||
	    !json_object_is_type(allow, json_type_array) ||
	    json_object_array_length(allow) > AH_EGRESS_MAX_ENTRIES)
		return ah_err_set(err, AH_EINVALID, "invalid network");
	if (!(q->egress = calloc(1, sizeof *q->egress)))
		return ah_err_set(err, AH_EFAIL, "out of memory");
	for (size_t i = 0; i < json_object_array_length(allow); i++) {
		json_object *v = json_object_array_get_idx(allow, i);
		const char *why;
		if (!json_object_is_type(v, json_type_string) ||
		    ah_egress_entry_parse(&q->egress->entries[q->egress->n++], json_object_get_string(v),
		                          &why) != 0)
			return ah_err_set(err, AH_EINVALID, "invalid network entry");
	}
	return 0;
}

/* The image must be an existing directory under <data_dir>/images/. */
static bool image_ok(const struct ah_runner *r, const char *image)
{
	char real[PATH_MAX];
	size_t dl = strlen(r->data_dir);
	if (!image || !realpath(image, real))
		return false;
	return strncmp(real, r->data_dir, dl) == 0 && strncmp(real + dl, "/images/", 8) == 0 &&
	       strcmp(real, image) == 0;
}

/* The reason a request's ids or paths are refused, or NULL. */
static const char *bad_fields(const struct ah_run_req *q, const struct ah_runner *r)
{
	if (!ah_run_token_ok(q->invocation_id, 64, "_-"))
		return "invalid invocation_id";
	if (!ah_run_token_ok(q->agent_id, 32, "_"))
		return "invalid agent_id";
	if (q->session && !ah_run_token_ok(q->session, 128, "._:-"))
		return "invalid session";
	if (!q->entrypoint || ah_deploy_path_check(q->entrypoint) != 0)
		return "invalid entrypoint";
	if (!image_ok(r, q->image))
		return "image is not an image directory of this runner";
	return NULL;
}

int ah_run_req_parse(struct ah_run_req *q, const struct ah_runner *r, json_object *req,
                     ah_err *err)
{
	json_object *s = NULL;
	q->invocation_id = ah_json_get_str(req, "invocation_id");
	q->agent_id = ah_json_get_str(req, "agent_id");
	q->image = ah_json_get_str(req, "image");
	q->entrypoint = ah_json_get_str(req, "entrypoint");
	q->session = ah_json_get_str(req, "session");
	if (json_object_object_get_ex(req, "files", &q->files) &&
	    !json_object_is_type(q->files, json_type_object))
		q->files = NULL;
	if (json_object_object_get_ex(req, "budget", &q->budget) &&
	    !json_object_is_type(q->budget, json_type_array))
		q->budget = NULL;
	if (json_object_object_get_ex(req, "session", &s) && s && !q->session)
		return ah_err_set(err, AH_EINVALID, "\"session\" must be a string or null");
	const char *bad = bad_fields(q, r);
	if (bad)
		return ah_err_set(err, AH_EINVALID, "%s", bad);
	q->timeout_ms = (int)get_int(req, "timeout_ms", DEFAULT_TIMEOUT_MS, 1, LIMIT_TIMEOUT_MS);
	q->max_output = (size_t)get_int(req, "max_output_bytes", DEFAULT_MAX_OUTPUT, 1, LIMIT_MAX_OUTPUT);
	q->min_warm = (int)get_int(req, "min_warm", 0, 0, LIMIT_WARM);
	q->stream = json_object_get_boolean(json_object_object_get_ex(req, "stream", &s) ? s : NULL);
	int rc = parse_env(q, req, err);
	if (rc == 0)
		rc = parse_network(q, req, err);
	return rc ? rc : parse_stdin(q, req, err);
}
