/* The project's manifest as the client needs it: agent.json (castari.json when
 * it is absent, as the service reads it: core/project.h has the names), its
 * name and its slug, the one the API derives from the name when none is given. */
#include "cli/cli.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"
#include "core/project.h"

int ah_cli_manifest_read(struct ah_cli *c, const char *dir, struct ah_cli_manifest *out, ah_err *err)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; ah_manifest_names[i] && !out->path; i++) {
		const char *p = ah_sprintf(c->a, "%s/%s", dir, ah_manifest_names[i]);
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
		out->slug = ah_slug_from_name(c->a, out->name, AH_SLUG_MAX);
	if (!*out->slug)
		return ah_cli_usage(err, "%s: cannot make a slug of the name; add \"slug\"", out->path);
	return 0;
}
