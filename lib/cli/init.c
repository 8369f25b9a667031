/* init [DIR]: a runnable agent project to start from: agent.json, index.js
 * (reads the prompt on stdin, answers on stdout) and .gitignore. Existing files
 * are left alone unless --force. */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char index_js[] =
	"// An agenthost agent: the prompt arrives on stdin, the answer goes to stdout.\n"
	"// Secrets (agenthost secrets set SLUG KEY) are environment variables here;\n"
	"// the model key is in ANTHROPIC_API_KEY when the operator configured one.\n"
	"const chunks = [];\n"
	"process.stdin.on('data', (c) => chunks.push(c));\n"
	"process.stdin.on('end', () => {\n"
	"  const prompt = Buffer.concat(chunks).toString('utf8');\n"
	"  process.stdout.write(`You said: ${prompt}\\n`);\n"
	"});\n";

static const char gitignore[] = "node_modules/\n.env\n";

static int write_new(struct ah_cli *c, const char *dir, const char *name, const char *text, bool force,
                     ah_err *err)
{
	const char *path = ah_sprintf(c->a, "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL), 0644);
	if (fd < 0 && errno == EEXIST)
		return ah_cli_usage(err, "%s exists (--force overwrites it)", path);
	if (fd < 0)
		return ah_err_set(err, AH_EFAIL, "cannot create %s: %s", path, strerror(errno));
	size_t n = strlen(text);
	ssize_t w = write(fd, text, n);
	bool bad = w != (ssize_t)n;
	bad |= close(fd) != 0;
	if (bad)
		return ah_err_set(err, AH_EFAIL, "cannot write %s", path);
	ah_cli_note(c, "  created %s", path);
	return 0;
}

/* The project's name: --name, else the directory's own name. */
static const char *project_name(struct ah_cli *c, const char *dir, const char *flag)
{
	char real[PATH_MAX];
	if (flag)
		return flag;
	if (!realpath(dir, real))
		return "my-agent";
	return ah_strdup(c->a, basename(real));
}

static const char *manifest_text(struct ah_cli *c, const char *name)
{
	json_object *m = ah_cli_obj(c);
	json_object_object_add(m, "name", json_object_new_string(name));
	json_object_object_add(m, "slug", json_object_new_string(ah_cli_slugify(c, name)));
	json_object_object_add(m, "version", json_object_new_string("1.0.0"));
	json_object_object_add(m, "entrypoint", json_object_new_string("index.js"));
	json_object_object_add(m, "runtime", json_object_new_string("node"));
	return ah_sprintf(c->a, "%s\n", json_object_to_json_string_ext(m, JSON_C_TO_STRING_PRETTY |
	                                                                JSON_C_TO_STRING_SPACED));
}

static int run_init(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const char *dir = a->npos ? a->pos[0] : ".";
	bool force = ah_cli_opt(a, "force") != NULL;
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return ah_err_set(err, AH_EFAIL, "cannot create %s: %s", dir, strerror(errno));
	const char *name = project_name(c, dir, ah_cli_opt(a, "name"));
	if (!*ah_cli_slugify(c, name))
		return ah_cli_usage(err, "init: \"%s\" has no letters or digits for a slug; use --name", name);
	int rc = write_new(c, dir, "agent.json", manifest_text(c, name), force, err);
	if (!rc)
		rc = write_new(c, dir, "index.js", index_js, force, err);
	if (!rc)
		rc = write_new(c, dir, ".gitignore", gitignore, force, err);
	if (!rc)
		ah_cli_note(c, "Next: agenthost deploy %s --create, then agenthost invoke %s \"hello\"", dir,
		            ah_cli_slugify(c, name));
	return rc;
}

const struct ah_cli_cmd ah_cli_init_cmds[] = {
	{"init", "[DIR]", "start an agent project in DIR (default: here)", 0, 1, true, run_init,
	 {{"name", 'n', "NAME", "the agent's name (default: the directory's name)"},
	  {"force", 'f', NULL, "overwrite existing files"}}},
	{0},
};
