/* The project's manifest as the client needs it: agent.json (castari.json when
 * it is absent, as the service reads it), its name and slug, and the slug the
 * API derives from a name when none is given. */
#include "cli/cli.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"

const char *ah_cli_slugify(struct ah_cli *c, const char *name)
{
	char *s = ah_alloc(c->a, strlen(name) + 1);
	size_t n = 0;
	bool dash = false;
	for (const unsigned char *p = (const unsigned char *)name; *p && n < 63; p++) {
		if (isalnum(*p) && *p < 0x80) {
			if (dash && n)
				s[n++] = '-';
			dash = false;
			if (n < 63)
				s[n++] = (char)tolower(*p);
		} else {
			dash = true;
		}
	}
	while (n && s[n - 1] == '-')
		s[--n] = 0;
	s[n] = 0;
	return s;
}

int ah_cli_manifest_read(struct ah_cli *c, const char *dir, struct ah_cli_manifest *out, ah_err *err)
{
	static const char *const names[] = {"agent.json", "castari.json"};
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < 2 && !out->path; i++) {
		const char *p = ah_sprintf(c->a, "%s/%s", dir, names[i]);
		if (access(p, F_OK) == 0)
			out->path = p;
	}
	if (!out->path)
		return ah_cli_usage(err, "no agent.json in %s (agenthost init makes one)", dir);
	json_object *m = ah_cli_own(c, json_object_from_file(out->path));
	if (!m || !json_object_is_type(m, json_type_object))
		return ah_cli_usage(err, "%s is not a JSON object: %s", out->path, json_util_get_last_err());
	out->name = ah_json_get_str(m, "name");
	out->slug = ah_json_get_str(m, "slug");
	out->description = ah_json_get_str(m, "description");
	if (!out->name || !*out->name)
		return ah_cli_usage(err, "%s has no \"name\"", out->path);
	if (!out->slug || !*out->slug)
		out->slug = ah_cli_slugify(c, out->name);
	if (!*out->slug)
		return ah_cli_usage(err, "%s: cannot make a slug of the name; add \"slug\"", out->path);
	return 0;
}
