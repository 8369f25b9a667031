/* Reading a request: FastCGI params, query parameters, percent-decoding. */
#include "http/http.h"
#include "http/internal.h"

#include "core/util.h"

#include <fcgiapp.h>
#include <string.h>

const char *ah_param_env(ah_req *r, const char *name)
{
	return FCGX_GetParam(name, r->fcgi->envp);
}

static bool param_set(ah_req *r, const char *name)
{
	const char *v = ah_param_env(r, name);
	return v && strcmp(v, "1") == 0;
}

bool ah_auth_subrequest(ah_req *r)
{
	return param_set(r, "AGENTHOST_AUTH_REQUEST");
}

bool ah_auth_checked(ah_req *r)
{
	return param_set(r, "AGENTHOST_AUTH_CHECKED");
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

char *ah_url_decode(ah_arena *a, const char *s, size_t n, bool plus_is_space, size_t *outlen)
{
	char *out = ah_alloc(a, n + 1);
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n &&
		    hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			out[j++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else if (plus_is_space && s[i] == '+') {
			out[j++] = ' ';
		} else {
			out[j++] = s[i];
		}
	}
	out[j] = '\0';
	if (outlen)
		*outlen = j;
	return out;
}

const char *ah_query_get(ah_req *r, const char *name)
{
	size_t nl = strlen(name);
	const char *q = r->query;
	while (q && *q) {
		const char *amp = strchr(q, '&');
		size_t len = amp ? (size_t)(amp - q) : strlen(q);
		const char *eq = memchr(q, '=', len);
		size_t kl = eq ? (size_t)(eq - q) : len;
		size_t dkl;
		char *k = ah_url_decode(r->arena, q, kl, true, &dkl);
		if (dkl == nl && memcmp(k, name, nl) == 0) {
			size_t vl;
			char *v = eq ? ah_url_decode(r->arena, eq + 1, len - kl - 1, true, &vl)
			             : ah_strdup(r->arena, "");
			/* A NUL smuggled in as %00 would silently cut the value. */
			if (eq && strlen(v) != vl)
				return "\x01";
			return v;
		}
		q = amp ? amp + 1 : NULL;
	}
	return NULL;
}

int ah_page(ah_req *r, long long *limit, long long *offset)
{
	const char *l = ah_query_get(r, "limit"), *o = ah_query_get(r, "offset");
	*limit = 20;
	*offset = 0;
	if (l && (ah_parse_ll(limit, l) != 0 || *limit < 1 || *limit > 100))
		ah_verr(r, "query", "limit", "Input should be an integer between 1 and 100", "int_range");
	if (o && (ah_parse_ll(offset, o) != 0 || *offset < 0))
		ah_verr(r, "query", "offset", "Input should be an integer greater than or equal to 0", "int_range");
	return ah_verr_reply(r);
}
