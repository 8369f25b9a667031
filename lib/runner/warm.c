/* See warm.h. The recipes are a short list under one mutex; the thread copies
 * what it needs out of it before it starts anything, so calls never wait for
 * a start. Environments are wiped when freed: they hold the agent's secrets. */
#include "runner/warm.h"
#include "runner/gateway.h"
#include "runner/run_files.h"
#include "core/log.h"
#include "core/util.h"
#include "core/settings.h"

#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEATHS 3       /* in a row, then no restart until the recipe changes */
#define TICK_MS 1000       /* dead and idle processes are noticed this often */
#define READY_POLL_MS 5    /* while a warm process starts: has it reached its read? */
#define RETRY_MS 10000     /* after a failed start (the host's budget, most likely) */
#define ENV_EXTRA 3        /* the gateway's two variables and NULL */

struct recipe {
	char agent_id[33];
	char fp[AH_SBX_FP_LEN + 1];
	char image[PATH_MAX];
	char entry[1100];          /* /app/<entrypoint> */
	char **envp;               /* NAME=value, NULL-terminated, owned */
	size_t nenv;
	json_object *files;        /* {"attach": [...]} of the call, or NULL */
	int want, deaths;
	int64_t idle_ms, last_call_ms;
	int64_t retry_ms;          /* no start before this (a start failed) */
	struct recipe *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct recipe *recipes;
static bool kicked, stopping;

/* ---- fingerprint ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static json_object *attach_of(json_object *files)
{
	json_object *att = NULL;
	if (!files || !json_object_object_get_ex(files, "attach", &att) ||
	    json_object_array_length(att) == 0)
		return NULL;
	return att;
}

void ah_warm_fingerprint(char out[AH_SBX_FP_LEN + 1], const struct ah_run_req *q)
{
	unsigned char h[AH_SBX_FP_LEN / 2];
	crypto_generichash_state st;
	crypto_generichash_init(&st, NULL, 0, sizeof h);
	crypto_generichash_update(&st, (const unsigned char *)q->image, strlen(q->image) + 1);
	crypto_generichash_update(&st, (const unsigned char *)q->entrypoint, strlen(q->entrypoint) + 1);
	/* The API's order of the variables may vary; their set may not. */
	char **sorted = malloc((q->nenv + 1) * sizeof *sorted);
	if (sorted) {
		memcpy(sorted, q->envp, q->nenv * sizeof *sorted);
		qsort(sorted, q->nenv, sizeof *sorted, cmp_str);
		for (size_t i = 0; i < q->nenv; i++)
			crypto_generichash_update(&st, (const unsigned char *)sorted[i], strlen(sorted[i]) + 1);
		free(sorted);
	} else {
		crypto_generichash_update(&st, (const unsigned char *)"\1oom", 4); /* matches nothing */
		crypto_generichash_update(&st, (const unsigned char *)&q, sizeof q);
	}
	json_object *att = attach_of(q->files);
	const char *a = att ? json_object_to_json_string_ext(att, JSON_C_TO_STRING_PLAIN) : "";
	crypto_generichash_update(&st, (const unsigned char *)a, strlen(a));
	crypto_generichash_final(&st, h, sizeof h);
	sodium_bin2hex(out, AH_SBX_FP_LEN + 1, h, sizeof h);
}

/* ---- recipes ---- */

static void free_env(char **envp, size_t n)
{
	for (size_t i = 0; envp && i < n; i++) {
		sodium_memzero(envp[i], strlen(envp[i]));
		free(envp[i]);
	}
	free(envp);
}

static void recipe_free(struct recipe *c)
{
	if (!c)
		return;
	free_env(c->envp, c->nenv);
	json_object_put(c->files);
	sodium_memzero(c, sizeof *c);
	free(c);
}

/* Lock held. */
static struct recipe **find(const char *agent_id)
{
	struct recipe **p = &recipes;
	while (*p && strcmp((*p)->agent_id, agent_id) != 0)
		p = &(*p)->next;
	return p;
}

static char **copy_env(char *const *envp, size_t n, size_t extra)
{
	char **e = calloc(n + extra, sizeof *e);
	for (size_t i = 0; e && i < n; i++)
		if (!(e[i] = strdup(envp[i]))) {
			free_env(e, i);
			return NULL;
		}
	return e;
}

/* The recipe of q (its strings copied), or NULL when out of memory. */
static struct recipe *recipe_of(const struct ah_run_req *q, const char *fp)
{
	struct recipe *c = calloc(1, sizeof *c);
	if (!c || !(c->envp = copy_env(q->envp, q->nenv, 1))) {
		free(c);
		return NULL;
	}
	c->nenv = q->nenv;
	snprintf(c->agent_id, sizeof c->agent_id, "%s", q->agent_id);
	snprintf(c->fp, sizeof c->fp, "%s", fp);
	snprintf(c->image, sizeof c->image, "%s", q->image);
	snprintf(c->entry, sizeof c->entry, "/app/%s", q->entrypoint);
	json_object *att = attach_of(q->files);
	if (att) {
		c->files = json_object_new_object();
		json_object *mine = NULL; /* deep: the request's objects are its thread's */
		if (json_object_deep_copy(att, &mine, NULL) == 0)
			json_object_object_add(c->files, "attach", mine);
		json_object_object_add(c->files, "session", json_object_new_array());
	}
	return c;
}

/* Lock held: whether the agent has a recipe, and if it is fp's, the call
 * noted on it (*had: its count before). */
static bool note_on_same(const struct ah_run_req *q, const char *fp, int64_t idle_ms, bool *exists,
                         int *had)
{
	struct recipe *c = *find(q->agent_id);
	*exists = c != NULL;
	if (!c || q->min_warm <= 0 || strcmp(c->fp, fp) != 0)
		return false;
	*had = c->want;
	c->want = q->min_warm; /* the same recipe: only its call time and count */
	c->idle_ms = idle_ms;
	c->last_call_ms = ah_now_ms();
	return true;
}

void ah_warm_note(const struct ah_run_req *q, const char *fp, int64_t idle_ms)
{
	struct recipe *fresh = NULL, *old = NULL;
	bool exists;
	int had = 0;
	pthread_mutex_lock(&mu);
	bool same = note_on_same(q, fp, idle_ms, &exists, &had);
	pthread_mutex_unlock(&mu);
	if (!same && (exists || q->min_warm > 0)) {
		/* A new recipe (or none): its copies of the secrets and attachments
		 * are made only now, outside the lock, not on every call. */
		if (q->min_warm > 0 && !(fresh = recipe_of(q, fp)))
			ah_log_warn("agent=%s: no memory for its warm recipe", q->agent_id);
		pthread_mutex_lock(&mu);
		struct recipe **p = find(q->agent_id);
		had = *p ? (*p)->want : 0;
		if ((old = *p))
			*p = old->next;
		if (fresh) {
			fresh->want = q->min_warm;
			fresh->idle_ms = idle_ms;
			fresh->last_call_ms = ah_now_ms();
			fresh->next = recipes;
			recipes = fresh;
		}
		pthread_mutex_unlock(&mu);
		recipe_free(old);
	}
	/* Fewer wanted: the extra ones go now (another fingerprint's go as the
	 * thread or a call meets them). */
	if (had > q->min_warm)
		ah_sandboxes_retire_warm(q->agent_id, q->min_warm);
	if (fresh)
		ah_warm_kick();
}

void ah_warm_deaths(const char *agent_id, const char *fp, int n)
{
	pthread_mutex_lock(&mu);
	struct recipe *c = *find(agent_id);
	if (c && strcmp(c->fp, fp) == 0)
		c->deaths += n;
	pthread_mutex_unlock(&mu);
}

void ah_warm_forget(const char *agent_id)
{
	pthread_mutex_lock(&mu);
	struct recipe **p = find(agent_id), *c = *p;
	if (c)
		*p = c->next;
	pthread_mutex_unlock(&mu);
	recipe_free(c);
	int n = ah_sandboxes_retire_warm(agent_id, 0);
	if (n > 0)
		ah_log_info("agent=%s: %d warm process(es) retired", agent_id, n);
}

int ah_warm_destroy_agent(const char *agent_id)
{
	ah_warm_forget(agent_id); /* first: no warm start between the two */
	return ah_sandboxes_destroy_agent(agent_id);
}

void ah_warm_kick(void)
{
	pthread_mutex_lock(&mu);
	kicked = true;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
}

void ah_warm_stop(void)
{
	pthread_mutex_lock(&mu);
	stopping = true;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
}

/* ---- the thread ---- */

struct start_ctx {
	const ah_config *cfg;
	struct recipe *c;          /* a private copy */
	bool session;              /* a session's next process, not a spare's */
};

/* With the gateway on the program gets a token of its own (the call that
 * takes it serves the gateway with that token: ops.c), never the key. */
_Static_assert(AH_GATEWAY_TOKEN_LEN <= AH_SBX_KEY_LEN, "a token fits the key");

/* The values of env that are the agent's secrets, the model key or the
 * gateway's token: all but the runner's defaults and the gateway's address.
 * What a warm process writes to stderr before its call is logged with these
 * redacted if it is retired or dies waiting (its call redacts its own). */
static size_t secret_values(const char **out, const struct ah_run_req *env)
{
	static const char *const plain[] = {"PATH=", "HOME=", "LANG=", "ANTHROPIC_BASE_URL="};
	size_t n = 0;
	for (size_t i = 0; i < env->nenv; i++) {
		bool skip = false;
		for (size_t k = 0; k < sizeof plain / sizeof plain[0]; k++)
			skip |= strncmp(env->envp[i], plain[k], strlen(plain[k])) == 0;
		const char *eq = strchr(env->envp[i], '=');
		if (!skip && eq)
			out[n++] = eq + 1;
	}
	return n;
}

static int start_warm(ah_sandbox *sb, void *arg, char key[AH_SBX_KEY_LEN + 1], ah_err *err)
{
	struct start_ctx *x = arg;
	struct recipe *c = x->c;
	struct ah_run_req env = {.env_cap = c->nenv + ENV_EXTRA};
	int rc = c->files ? ah_run_files_in(x->cfg, sb, c->files, false, 0, err) : 0;
	if (rc == 0 && !(env.envp = copy_env(c->envp, c->nenv, ENV_EXTRA)))
		rc = ah_err_set(err, AH_EFAIL, "out of memory");
	env.nenv = env.envp ? c->nenv : 0;
	if (rc == 0 && ah_settings_of(x->cfg)->model.gateway)
		rc = ah_gateway_env(&env, x->cfg, key, err);
	char tag[64];
	snprintf(tag, sizeof tag, "warm agent=%s", c->agent_id);
	const char *argv[] = {"/usr/bin/node", c->entry, NULL};
	/* A spare ends with its call unless the call's files are collected
	 * after it: then its spawner need not make a process for a next. */
	ah_sandbox_exec_spec spec = {.argv = argv, .envp = (const char *const *)env.envp,
	                             .log_tag = tag, .cwd = "/app",
	                             .last = !x->session && !c->files};
	const char *vals[env.nenv + 1];
	spec.redact = vals;
	spec.nredact = env.envp ? secret_values(vals, &env) : 0;
	if (rc == 0)
		rc = ah_sandbox_exec_start(sb, &spec, err);
	ah_run_req_free(&env);
	return rc;
}

/* A copy of the agent's recipe if it wants another warm process (have: how
 * many it has), else NULL. */
static struct recipe *wanting(const char *agent_id, int have)
{
	struct recipe *copy = NULL;
	pthread_mutex_lock(&mu);
	struct recipe *c = *find(agent_id);
	if (c && !stopping && have < c->want && c->deaths < MAX_DEATHS && ah_now_ms() >= c->retry_ms &&
	    (copy = malloc(sizeof *copy))) {
		*copy = *c;
		copy->next = NULL;
		copy->files = NULL;
		if (c->files)
			json_object_deep_copy(c->files, &copy->files, NULL);
		if (!(copy->envp = copy_env(c->envp, c->nenv, 1))) {
			json_object_put(copy->files);
			free(copy);
			copy = NULL;
		}
	}
	pthread_mutex_unlock(&mu);
	return copy;
}

static void put_off(const char *agent_id, const char *fp)
{
	pthread_mutex_lock(&mu);
	struct recipe *c = *find(agent_id);
	if (c && strcmp(c->fp, fp) == 0)
		c->retry_ms = ah_now_ms() + RETRY_MS;
	pthread_mutex_unlock(&mu);
}

/* Brings one agent to its count: reaps the dead, starts what is missing. */
static void top_up(const struct ah_runner *r, const char *agent_id, const char *fp)
{
	for (;;) {
		int dead = 0, have = ah_sandboxes_warm_count(agent_id, fp, &dead);
		if (dead > 0)
			ah_warm_deaths(agent_id, fp, dead);
		struct recipe *c = wanting(agent_id, have);
		if (!c)
			return;
		if (strcmp(c->fp, fp) != 0) { /* changed meanwhile: its own turn comes */
			recipe_free(c);
			return;
		}
		ah_sandbox_wait_quiet();
		ah_err err = {0};
		struct start_ctx x = {r->cfg, c};
		int rc = ah_sandboxes_add_warm(agent_id, c->image, fp, start_warm, &x, &err);
		recipe_free(c);
		if (rc != 0) {
			ah_log_warn("agent=%s: no warm process: %s; again in %d s", agent_id, err.msg,
			            RETRY_MS / 1000);
			put_off(agent_id, fp);
			return;
		}
	}
}

/* Recipes idle past their time go (with their processes); the others'
 * (agent, fingerprint) into todo. */
static size_t survey(char (*todo)[2][AH_SBX_FP_LEN + 1], size_t max)
{
	struct recipe *idle = NULL;
	size_t n = 0;
	int64_t now = ah_now_ms();
	pthread_mutex_lock(&mu);
	for (struct recipe **p = &recipes; *p;) {
		struct recipe *c = *p;
		if (now - c->last_call_ms > c->idle_ms) {
			*p = c->next;
			c->next = idle;
			idle = c;
			continue;
		}
		if (n < max) {
			snprintf(todo[n][0], sizeof todo[n][0], "%s", c->agent_id);
			snprintf(todo[n][1], sizeof todo[n][1], "%s", c->fp);
			n++;
		}
		p = &c->next;
	}
	pthread_mutex_unlock(&mu);
	while (idle) {
		struct recipe *next = idle->next;
		int k = ah_sandboxes_retire_warm(idle->agent_id, 0);
		ah_log_info("agent=%s: no call for %lld s: its %d warm process(es) dropped", idle->agent_id,
		            (long long)(idle->idle_ms / 1000), k);
		recipe_free(idle);
		idle = next;
	}
	return n;
}

void *ah_warm_thread(void *arg)
{
	const struct ah_runner *r = arg;
	enum { MAX_AGENTS = 256 };
	static char todo[MAX_AGENTS][2][AH_SBX_FP_LEN + 1];
	ah_sandbox_background(true); /* starts are work nobody waits for */
	int starting = 0;
	int64_t next_survey = 0;
	for (;;) {
		pthread_mutex_lock(&mu);
		if (!kicked && !stopping) {
			struct timespec ts = ah_deadline_in_ms(starting ? READY_POLL_MS : TICK_MS);
			pthread_cond_timedwait(&cv, &mu, &ts);
		}
		bool survey_now = kicked || ah_now_ms() >= next_survey;
		kicked = false;
		bool stop = stopping || r->stopping;
		pthread_mutex_unlock(&mu);
		if (stop)
			break;
		if (survey_now) {
			size_t n = survey(todo, MAX_AGENTS);
			for (size_t i = 0; i < n; i++)
				top_up(r, todo[i][0], todo[i][1]);
			ah_sandboxes_drop_idle_held();
			next_survey = ah_now_ms() + TICK_MS;
		}
		starting = ah_sandboxes_warm_poll();
	}
	pthread_mutex_lock(&mu); /* shutdown: the recipes' secrets go now */
	struct recipe *all = recipes;
	recipes = NULL;
	pthread_mutex_unlock(&mu);
	while (all) {
		struct recipe *next = all->next;
		recipe_free(all);
		all = next;
	}
	return NULL;
}

/* ---- sessions: the next process of a session, started after its call ---- */

struct ah_warm_next {
	struct recipe c;
	const ah_config *cfg;
};

struct ah_warm_next *ah_warm_next_of(const ah_config *cfg, const struct ah_run_req *q,
                                     const char *fp)
{
	struct recipe *c = recipe_of(q, fp);
	struct ah_warm_next *n = c ? malloc(sizeof *n) : NULL;
	if (n) {
		n->c = *c;
		n->c.idle_ms = ah_settings_of(cfg)->runner.warm_idle_seconds * 1000;
		n->cfg = cfg;
		json_object_put(n->c.files); /* the session's sandbox has its files already */
		n->c.files = NULL;
	} else if (c) {
		recipe_free(c);
		return NULL;
	}
	free(c); /* its strings now belong to n */
	return n;
}

void ah_warm_next_start(struct ah_warm_next *n, struct ah_sbx_lease *lease)
{
	char key[AH_SBX_KEY_LEN + 1] = "";
	ah_err err = {0};
	struct start_ctx x = {n->cfg, &n->c, true};
	if (start_warm(lease->sb, &x, key, &err) == 0)
		ah_sandboxes_lease_set_held(lease, n->c.fp, key, n->c.idle_ms);
	else
		ah_log_warn("agent=%s: the session's next process did not start: %s", n->c.agent_id,
		            err.msg);
	sodium_memzero(key, sizeof key);
}

void ah_warm_next_free(struct ah_warm_next *n)
{
	if (!n)
		return;
	free_env(n->c.envp, n->c.nenv);
	sodium_memzero(n, sizeof *n);
	free(n);
}
