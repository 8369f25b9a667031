/* See cancel.h. */
#include "runner/cancel.h"
#include "runner/ops.h"
#include "core/json.h"
#include "core/util.h"

#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EARLY_MAX 64            /* cancels for runs not started yet, kept */
#define EARLY_MS 60000          /* this long */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static ah_run_slot *slots;
static struct {
	char id[48];
	long long at;
} early[EARLY_MAX];

static bool take_early(const char *id)
{
	long long now = ah_now_ms();
	for (int i = 0; i < EARLY_MAX; i++)
		if (early[i].id[0] && now - early[i].at < EARLY_MS && strcmp(early[i].id, id) == 0) {
			early[i].id[0] = '\0';
			return true;
		}
	return false;
}

static void note_early(const char *id)
{
	int oldest = 0;
	for (int i = 1; i < EARLY_MAX; i++)
		if (early[i].at < early[oldest].at)
			oldest = i;
	snprintf(early[oldest].id, sizeof early[oldest].id, "%s", id);
	early[oldest].at = ah_now_ms();
}

void ah_run_slot_add(ah_run_slot *s, const char *id)
{
	snprintf(s->id, sizeof s->id, "%s", id ? id : "");
	pthread_mutex_lock(&mu);
	s->flag = take_early(s->id);
	s->next = slots;
	slots = s;
	pthread_mutex_unlock(&mu);
}

void ah_run_slot_remove(ah_run_slot *s)
{
	pthread_mutex_lock(&mu);
	for (ah_run_slot **p = &slots; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			break;
		}
	pthread_mutex_unlock(&mu);
}

json_object *ah_op_cancel(json_object *req)
{
	const char *id = ah_json_get_str(req, "invocation_id");
	if (!id || !*id || strlen(id) >= sizeof early[0].id)
		return ah_op_error(AH_RPC_INVALID, "invalid invocation_id");
	bool found = false;
	pthread_mutex_lock(&mu);
	for (ah_run_slot *s = slots; s; s = s->next)
		if (strcmp(s->id, id) == 0) {
			s->flag = 1;
			found = true;
		}
	if (!found)
		note_early(id);
	pthread_mutex_unlock(&mu);
	json_object *ans = json_object_new_object();
	json_object_object_add(ans, "ok", json_object_new_boolean(1));
	json_object_object_add(ans, "found", json_object_new_boolean(found));
	return ans;
}

/* ---- streamed runs ---- */

static __thread ah_chunk_writer sink_fn;
static __thread void *sink_conn;

void ah_run_chunk_sink(ah_chunk_writer fn, void *conn)
{
	sink_fn = fn;
	sink_conn = conn;
}

/* {"chunk_b64":"…"}: written by hand, as runner_client/stream.c reads it
 * (json-c would escape the base64's "/"). */
void ah_run_chunk(void *ctx, const char *data, size_t len)
{
	(void)ctx;
	if (!sink_fn || !len)
		return;
	static const char head[] = "{\"chunk_b64\":\"";
	size_t b64 = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
	char *msg = malloc(sizeof head + b64 + 2);
	if (!msg)
		return;
	memcpy(msg, head, sizeof head - 1);
	sodium_bin2base64(msg + sizeof head - 1, b64, (const unsigned char *)data, len,
	                  sodium_base64_VARIANT_ORIGINAL);
	size_t n = sizeof head - 1 + strlen(msg + sizeof head - 1);
	msg[n++] = '"';
	msg[n++] = '}';
	sink_fn(sink_conn, msg, n);
	free(msg);
}
