/* invoke SLUG [PROMPT] [-i FILE|-] [-s SESSION] [--timeout N]: the agent's
 * response on stdout, exactly as it wrote it, and what the call cost on
 * stderr, so that `agenthost invoke a "…" > out.txt` keeps only the answer.
 * On a terminal the response streams as the agent writes it (issue 28;
 * --no-stream waits for the whole answer); --async starts the call and prints
 * its id (invocations get / cancel, invocations.c). */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PROMPT_CAP (16u << 20)   /* the API's own cap is lower (max_prompt_bytes) and says so */

struct invoke_opts {
	const char *input, *session, *webhook;
	struct ah_cli_int timeout;
	bool stream, no_stream, async;
};

/* The prompt: the argument, -i FILE, -i - or piped stdin. */
static int read_prompt(struct ah_cli *c, const struct ah_cli_args *a, char **out, size_t *len, ah_err *err)
{
	const char *in = ((const struct invoke_opts *)a->opts)->input;
	if (a->npos > 1 && in)
		return ah_cli_usage(err, "invoke: give the prompt as an argument or with -i, not both");
	if (a->npos > 1) {
		*out = a->pos[1];
		*len = strlen(*out);
		return 0;
	}
	if (!in && c->tty_in)
		return ah_cli_usage(err, "invoke: no prompt (give it as an argument, with -i FILE, or on stdin)");
	if (!in || !strcmp(in, "-"))
		return ah_cli_read_all(c, stdin, PROMPT_CAP, out, len, err);
	FILE *f = fopen(in, "rb");
	if (!f)
		return ah_cli_usage(err, "invoke: cannot open %s: %s", in, strerror(errno));
	int rc = ah_cli_read_all(c, f, PROMPT_CAP, out, len, err);
	fclose(f);
	return rc;
}

static int invoke_body(struct ah_cli *c, const struct ah_cli_args *a, json_object **out, long long *timeout,
                       ah_err *err)
{
	const struct invoke_opts *o = a->opts;
	char *prompt;
	size_t len;
	if (o->timeout.set)
		*timeout = o->timeout.n;
	int rc = read_prompt(c, a, &prompt, &len, err);
	if (rc)
		return rc;
	json_object *body = ah_cli_obj(c);
	json_object_object_add(body, "prompt", json_object_new_string_len(prompt, (int)len));
	const char *session = o->session;
	if (session)
		json_object_object_add(body, "session_id", json_object_new_string(session));
	if (*timeout)
		json_object_object_add(body, "timeout_seconds", json_object_new_int64(*timeout));
	if (o->async && o->stream)
		return ah_cli_usage(err, "invoke: --async and --stream do not go together");
	if (o->async)
		json_object_object_add(body, "async", json_object_new_boolean(1));
	const char *hook = o->webhook;
	if (hook)
		json_object_object_add(body, "webhook_url", json_object_new_string(hook));
	*out = body;
	return 0;
}

/* Where the call's time went (issue 31): the result's timing, one dim line. */
static void print_timing(struct ah_cli *c, json_object *res)
{
	static const char *const phases[] = {"queue", "take", "start", "run", "collect", "record"};
	json_object *t, *v;
	char line[256];
	size_t n = 0;
	if (!json_object_object_get_ex(res, "timing", &t) || !json_object_is_type(t, json_type_object))
		return;
	for (size_t i = 0; i < sizeof phases / sizeof phases[0] && n < sizeof line; i++)
		if (json_object_object_get_ex(t, ah_sprintf(c->a, "%s_ms", phases[i]), &v))
			n += (size_t)snprintf(line + n, sizeof line - n, "%s%s %.2f", n ? " · " : "", phases[i],
			                      json_object_get_double(v));
	if (n && n < sizeof line)
		fprintf(stderr, "%s\n", ah_cli_paint(c, stderr, "2", ah_sprintf(c->a, "time (ms): %s", line)));
}

/* printed: the response went out already (streamed). */
static void print_result(struct ah_cli *c, json_object *res, bool printed)
{
	json_object *v;
	if (printed) {
		if (c->tty_out)
			putchar('\n');
		fflush(stdout);
	} else if (json_object_object_get_ex(res, "response_content", &v) && v) {
		size_t n = (size_t)json_object_get_string_len(v);
		const char *s = json_object_get_string(v);
		fwrite(s, 1, n, stdout);
		if (c->tty_out && n && s[n - 1] != '\n')
			putchar('\n');
		fflush(stdout);
	}
	/* With the model gateway the cost is priced from the provider's tokens:
	 * show them beside the prompt's, or the line would not add up. */
	const char *model = json_object_object_get_ex(res, "model_input_tokens", NULL) ?
		ah_sprintf(c->a, " · model %s in, %s out",
		           ah_cli_text(c, res, "model_input_tokens", AH_COL_NUM),
		           ah_cli_text(c, res, "model_output_tokens", AH_COL_NUM)) : "";
	fprintf(stderr, "%s\n", ah_cli_paint(c, stderr, "2",
	        ah_sprintf(c->a, "tokens %s in, %s out%s · $%s · %s ms · session %s",
	                   ah_cli_text(c, res, "input_tokens", AH_COL_NUM),
	                   ah_cli_text(c, res, "output_tokens", AH_COL_NUM), model,
	                   ah_cli_text(c, res, "total_cost_usd", AH_COL_NUM),
	                   ah_cli_text(c, res, "duration_ms", AH_COL_NUM),
	                   ah_cli_text(c, res, "session_id", AH_COL_TEXT))));
	print_timing(c, res);
	/* Some of the files the agent wrote were not kept (caps, quota, time). */
	if (json_object_object_get_ex(res, "files_error", &v) && v)
		ah_cli_note(c, "files: %s", json_object_get_string(v));
}

/* ---- streaming ---- */

struct sse_in {
	struct ah_cli *c;
	char *buf;
	size_t len, cap;
	const char *end;        /* "done" or "error" once the last event came */
	json_object *last;      /* its data */
};

static void sse_event(struct sse_in *s, char *ev)
{
	const char *name = "", *data = NULL;
	char *save = NULL;
	for (char *line = strtok_r(ev, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "event: ", 7))
			name = line + 7;
		else if (!strncmp(line, "data: ", 6))
			data = line + 6;
	}
	json_object *o = data ? ah_cli_own(s->c, json_tokener_parse(data)) : NULL, *t;
	if (!strcmp(name, "output") && o && json_object_object_get_ex(o, "text", &t)) {
		fwrite(json_object_get_string(t), 1, (size_t)json_object_get_string_len(t), stdout);
		fflush(stdout);
	} else if (!strcmp(name, "done") || !strcmp(name, "error")) {
		s->end = !strcmp(name, "done") ? "done" : "error";
		s->last = o;
	}
}

/* Events end at a blank line; comments (keep-alive) are skipped. */
static size_t on_events(void *ctx, const char *data, size_t len)
{
	struct sse_in *s = ctx;
	if (s->len + len + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 65536;
		while (cap < s->len + len + 1)
			cap *= 2;
		char *p = realloc(s->buf, cap);
		if (!p)
			return 0;
		s->buf = p;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, data, len);
	s->len += len;
	s->buf[s->len] = '\0';
	char *sep;
	while ((sep = strstr(s->buf, "\n\n"))) {
		*sep = '\0';
		if (s->buf[0] != ':')
			sse_event(s, s->buf);
		size_t used = (size_t)(sep + 2 - s->buf);
		memmove(s->buf, sep + 2, s->len - used + 1);
		s->len -= used;
	}
	return len;
}

/* The streamed call's end: its result line, or its error as the command's. */
static int stream_end(struct ah_cli *c, const struct ah_cli_args *a, struct sse_in *s, ah_err *err)
{
	json_object *d, *inv = NULL;
	if (!s->end)
		return ah_err_set(err, AH_EFAIL, "the stream ended before the call's result came");
	if (!strcmp(s->end, "done")) {
		print_result(c, s->last, true);
		return 0;
	}
	if (c->tty_out)
		putchar('\n');
	if (s->last && json_object_object_get_ex(s->last, "invocation", &inv))
		ah_cli_note(c, "invocation %s (agenthost logs %s --invocation %s shows its stderr)",
		            ah_cli_text(c, inv, "invocation_id", AH_COL_TEXT), a->pos[0],
		            ah_cli_text(c, inv, "invocation_id", AH_COL_TEXT));
	return ah_err_set(err, AH_EFAIL, "%s", s->last && json_object_object_get_ex(s->last, "detail", &d)
	                  ? json_object_get_string(d) : "the call failed");
}

static bool wants_stream(struct ah_cli *c, const struct ah_cli_args *a)
{
	const struct invoke_opts *o = a->opts;
	if (o->no_stream || o->async || c->json)
		return false;
	return o->stream || c->tty_out;
}

static int run_invoke(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	long long timeout = 0;
	json_object *body = NULL;
	struct ah_cli_resp r;
	int rc = invoke_body(c, a, &body, &timeout, err);
	if (rc)
		return rc;
	struct ah_cli_req rq = {
		.method = "POST",
		.path = ah_sprintf(c->a, "/agents/%s/invoke", ah_cli_seg(c, a->pos[0])),
		.json = body,
		.timeout = (long)(timeout ? timeout : 600) + 60,  /* the API's own timeout answers first */
		.waiting = ah_sprintf(c->a, "running %s", a->pos[0]),
	};
	struct sse_in sse = {.c = c};
	if (wants_stream(c, a)) {
		json_object_object_add(body, "stream", json_object_new_boolean(1));
		rq.events = on_events;
		rq.events_ctx = &sse;
		rq.waiting = NULL; /* the response itself shows the call runs */
	}
	rc = ah_cli_call(c, &rq, &r, err);
	free(sse.buf);
	if (!rc && rq.events && r.status == 200)
		return stream_end(c, a, &sse, err);
	if (!rc && r.status == 202) {
		if (c->json)
			ah_cli_print_json(c, r.body);
		else
			printf("%s\n", ah_cli_text(c, r.body, "invocation_id", AH_COL_TEXT));
		ah_cli_note(c, "running; agenthost invocations get %s %s shows it, agenthost invocations"
		            " cancel %s %s stops it", a->pos[0], ah_cli_text(c, r.body, "invocation_id", AH_COL_TEXT),
		            a->pos[0], ah_cli_text(c, r.body, "invocation_id", AH_COL_TEXT));
		return 0;
	}
	json_object *inv = NULL;
	if (rc && r.body)
		json_object_object_get_ex(r.body, "invocation", &inv);
	if (c->json && r.body && (!rc || inv))
		ah_cli_print_json(c, r.body);
	else if (!rc)
		print_result(c, r.body, false);
	else if (inv)
		ah_cli_note(c, "invocation %s (agenthost invocations %s lists it; agenthost logs %s"
		            " --invocation %s shows its stderr)",
		            ah_cli_text(c, inv, "invocation_id", AH_COL_TEXT), a->pos[0], a->pos[0],
		            ah_cli_text(c, inv, "invocation_id", AH_COL_TEXT));
	return rc;
}

#define O struct invoke_opts
const struct ah_cli_cmd ah_cli_invoke_cmds[] = {
	{"invoke", "SLUG [PROMPT]", "run an agent: its response on stdout, tokens, cost and time on stderr",
	 1, 2, false, run_invoke,
	 {AH_OPT_STRING("input", 'i', "FILE", O, input, "read the prompt from FILE (- for stdin)"),
	  AH_OPT_STRING("session", 's', "SESSION", O, session,
	                "run in this session (created on first use, its sandbox kept)"),
	  AH_OPT_INT("timeout", 't', "SECONDS", 1, 600, O, timeout,
	             "give up after this long, 1-600 (default: the agent's)"),
	  AH_OPT_BOOL("stream", 0, O, stream, "print the response as the agent writes it (the default on a terminal)"),
	  AH_OPT_BOOL("no-stream", 0, O, no_stream, "wait for the whole response"),
	  AH_OPT_BOOL("async", 0, O, async, "start the call and print its id (see invocations get, cancel)"),

	  AH_OPT_STRING("webhook", 0, "URL", O, webhook,
	                "POST the finished record there too, signed (default: the agent's)")},
	 sizeof(O)},
	{0},
};
