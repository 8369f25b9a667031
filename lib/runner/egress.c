/* See egress.h. A short list under one mutex: only agents with an
 * allow-list have a record, and it is read once per sandbox made. */
#include "runner/egress.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct rec {
	char agent_id[33];
	ah_sandbox_egress eg;
	struct rec *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct rec *recs;

static struct rec **find(const char *agent_id)
{
	struct rec **p = &recs;
	while (*p && strcmp((*p)->agent_id, agent_id) != 0)
		p = &(*p)->next;
	return p;
}

static bool same(const ah_sandbox_egress *a, const ah_sandbox_egress *b)
{
	if (!a || !b)
		return a == b;
	return a->n == b->n && memcmp(a->entries, b->entries, a->n * sizeof a->entries[0]) == 0;
}

int ah_egress_note(const char *agent_id, const ah_sandbox_egress *eg)
{
	pthread_mutex_lock(&mu);
	struct rec **p = find(agent_id);
	int changed = !same(*p ? &(*p)->eg : NULL, eg);
	if (changed && !eg) {
		struct rec *r = *p;
		*p = r->next;
		free(r);
	} else if (changed) {
		struct rec *r = *p ? *p : calloc(1, sizeof *r);
		if (r && !*p) {
			strncpy(r->agent_id, agent_id, sizeof r->agent_id - 1);
			r->next = recs;
			recs = r;
		}
		if (r)
			r->eg = *eg;
		else
			changed = -1;
	}
	pthread_mutex_unlock(&mu);
	return changed;
}

int ah_egress_of(const char *agent_id, ah_sandbox_egress **out)
{
	pthread_mutex_lock(&mu);
	struct rec *r = *find(agent_id);
	ah_sandbox_egress *copy = r ? malloc(sizeof *copy) : NULL;
	if (copy)
		*copy = r->eg;
	pthread_mutex_unlock(&mu);
	*out = copy;
	return r && !copy ? -1 : 0;
}

void ah_egress_forget(const char *agent_id)
{
	pthread_mutex_lock(&mu);
	struct rec **p = find(agent_id), *r = *p;
	if (r) {
		*p = r->next;
		free(r);
	}
	pthread_mutex_unlock(&mu);
}

int ah_egress_spec(const char *agent_id, ah_sandbox_spec *spec, ah_sandbox_egress **eg, ah_err *err)
{
	if (ah_egress_of(agent_id, eg) != 0)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	spec->egress = *eg;
	return 0;
}
