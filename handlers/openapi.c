/* /openapi.json: the OpenAPI document (docs/openapi.yaml converted to JSON at
 * build time), read once per worker. */
#include "routes.h"
#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>

static char *doc;
static size_t doc_len;

static int load(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return AH_EFAIL;
	char *buf = NULL;
	size_t cap = 0, len = 0, n;
	do {
		if (len + 65536 > cap) {
			char *nb = realloc(buf, cap = len + 65536 * 2);
			if (!nb) {
				free(buf);
				fclose(f);
				return AH_EFAIL;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	doc = buf;
	doc_len = len;
	return 0;
}

static int openapi(ah_req *r)
{
	if (!doc && load(ah_settings_of(r->cfg)->api.openapi_file) != 0) {
		ah_log_error("cannot read the OpenAPI document");
		return AH_EFAIL;
	}
	return ah_reply_raw(r, 200, "application/json", doc, doc_len);
}

const ah_route ah_openapi_routes[] = {
	{"GET", "/openapi.json", openapi, AH_R_PUBLIC, 0},
	{NULL, NULL, NULL, 0, 0},
};
