/* Fuzz target: a request's query string and JSON body through lib/http, as a
 * handler reads them (paging, filters, the body object with an allow list,
 * typed fields, the 422 answer). Input: QUERY "\n" BODY. Property: whatever
 * comes in, the answer written is a well-formed status line. */
#include "fake_req.h"
#include "split.h"

#include <stdio.h>

static const char *const allowed[] = {
	"name", "description", "slug", "git_repo_url", "git_branch", "timeout_seconds",
	"is_public", "tags", NULL,
};

static void read_fields(struct fake_req *f, json_object *o)
{
	const char *s;
	long long n;
	bool b, present;
	ah_field_str(&f->r, o, "name", AH_F_REQUIRED, 1, 100, &s, &present);
	ah_field_str(&f->r, o, "description", AH_F_NULLABLE, 0, 1000, &s, &present);
	ah_field_str(&f->r, o, "slug", 0, 1, 63, &s, &present);
	ah_field_int(&f->r, o, "timeout_seconds", 0, 1, 600, &n, &present);
	ah_field_bool(&f->r, o, "is_public", AH_F_NULLABLE, &b, &present);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *query, *body;
	size_t blen;
	if (fuzz_split(data, size, &query, &body, &blen) != 0)
		return 0;
	static struct fake_req f;
	fake_req_init(&f, query, body, blen);
	long long limit, offset;
	if (ah_page(&f.r, &limit, &offset) == 0) {
		ah_query_get(&f.r, "scope");
		ah_query_get(&f.r, "tags");
		ah_query_get(&f.r, "search");
		json_object *o = NULL;
		if (ah_body_object(&f.r, &o, allowed) == 0) {
			read_fields(&f, o);
			if (ah_verr_reply(&f.r) == 0)
				ah_reply_no_content(&f.r);
		}
	}
	int status = 0;
	if (sscanf((const char *)f.outbuf, "Status: %d", &status) != 1 || status < 200 || status > 599)
		__builtin_trap();
	fake_req_done(&f);
	free(query);
	free(body);
	return 0;
}
