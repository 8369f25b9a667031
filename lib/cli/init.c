/* init [DIR]: a runnable agent project to start from: agent.json, index.js
 * (reads the prompt on stdin, answers on stdout) and .gitignore; with
 * --template claude-agent-sdk, a Claude Agent SDK agent (package.json,
 * index.mjs) whose Claude Code is running before its prompt arrives. Existing
 * files are left alone unless --force. */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/project.h"

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

/* The SDK's pre-warm API: startup() starts Claude Code and waits for its
 * initialize handshake; only then is stdin read, so an agent with min_warm
 * counts as ready (blocked reading its prompt) once Claude Code is up, and a
 * warm call only sends the prompt. Keep it in step with README "Warm agents". */
static const char sdk_index_mjs[] =
	"// A Claude Agent SDK agent on agenthost: the prompt arrives on stdin, the\n"
	"// answer goes to stdout. Claude Code starts before the prompt is read, so with\n"
	"// min_warm (agenthost agents update SLUG --min-warm 1) a call finds it running.\n"
	"import { startup } from '@anthropic-ai/claude-agent-sdk';\n"
	"\n"
	"const options = {\n"
	"  allowedTools: ['Bash', 'Read', 'Write', 'Edit', 'Glob', 'Grep'],\n"
	"  maxTurns: 8,\n"
	"  // process.env holds the model gateway's address and token; no telemetry.\n"
	"  env: { ...process.env, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' },\n"
	"};\n"
	"const warm = await startup({ options });\n"
	"\n"
	"const chunks = [];\n"
	"for await (const c of process.stdin) chunks.push(c);\n"
	"const prompt = Buffer.concat(chunks).toString('utf8');\n"
	"\n"
	"try {\n"
	"  let result;\n"
	"  for await (const m of warm.query(prompt)) if (m.type === 'result') result = m;\n"
	"  if (!result || result.is_error) throw new Error(result ? String(result.result ?? result.subtype) : 'no result');\n"
	"  process.stdout.write(result.result);\n"
	"} catch (e) {\n"
	"  process.stderr.write(`agent failed: ${e.message}\\n`); // the runner's log, under the call's id\n"
	"  process.exit(3);\n"
	"}\n";

/* Pinned: a version this service is tested with (tests/integration/sdk_agent). */
static const char sdk_package_json[] =
	"{\n"
	"  \"name\": \"%s\",\n"
	"  \"version\": \"1.0.0\",\n"
	"  \"private\": true,\n"
	"  \"type\": \"module\",\n"
	"  \"dependencies\": {\n"
	"    \"@anthropic-ai/claude-agent-sdk\": \"0.3.332\"\n"
	"  }\n"
	"}\n";

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

/* The slug the API would derive from name. */
static const char *slug_of(struct ah_cli *c, const char *name)
{
	return ah_slug_from_name(c->a, name, AH_SLUG_MAX);
}

static const char *manifest_text(struct ah_cli *c, const char *name, const char *entry)
{
	json_object *m = ah_cli_obj(c);
	json_object_object_add(m, "name", json_object_new_string(name));
	json_object_object_add(m, "slug", json_object_new_string(slug_of(c, name)));
	json_object_object_add(m, "version", json_object_new_string("1.0.0"));
	json_object_object_add(m, "entrypoint", json_object_new_string(entry));
	json_object_object_add(m, "runtime", json_object_new_string("node"));
	return ah_sprintf(c->a, "%s\n", json_object_to_json_string_ext(m, JSON_C_TO_STRING_PRETTY |
	                                                                JSON_C_TO_STRING_SPACED));
}

struct init_opts {
	const char *name, *template;
	bool force;
};

static int run_init(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err)
{
	const struct init_opts *o = a->opts;
	const char *dir = a->npos ? a->pos[0] : ".";
	bool force = o->force;
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return ah_err_set(err, AH_EFAIL, "cannot create %s: %s", dir, strerror(errno));
	const char *name = project_name(c, dir, o->name);
	if (!*slug_of(c, name))
		return ah_cli_usage(err, "init: \"%s\" has no letters or digits for a slug; use --name", name);
	const char *tpl = o->template;
	bool sdk = tpl && strcmp(tpl, "claude-agent-sdk") == 0;
	if (tpl && !sdk && strcmp(tpl, "echo") != 0)
		return ah_cli_usage(err, "init: unknown template \"%s\" (echo, claude-agent-sdk)", tpl);
	int rc = write_new(c, dir, "agent.json", manifest_text(c, name, sdk ? "index.mjs" : "index.js"),
	                   force, err);
	if (!rc && sdk)
		rc = write_new(c, dir, "package.json",
		               ah_sprintf(c->a, sdk_package_json, slug_of(c, name)), force, err);
	if (!rc)
		rc = write_new(c, dir, sdk ? "index.mjs" : "index.js", sdk ? sdk_index_mjs : index_js,
		               force, err);
	if (!rc)
		rc = write_new(c, dir, ".gitignore", gitignore, force, err);
	if (!rc)
		ah_cli_note(c, "Next: agenthost deploy %s --create, then agenthost invoke %s \"hello\"", dir,
		            slug_of(c, name));
	return rc;
}

const struct ah_cli_cmd ah_cli_init_cmds[] = {
	{"init", "[DIR]", "start an agent project in DIR (default: here)", 0, 1, true, run_init,
	 {AH_OPT_STRING("name", 'n', "NAME", struct init_opts, name, "the agent's name (default: the directory's name)"),
	  AH_OPT_BOOL("force", 'f', struct init_opts, force, "overwrite existing files"),
	  AH_OPT_STRING("template", 't', "NAME", struct init_opts, template,
	                "echo (default) or claude-agent-sdk (Claude Code warm before the prompt)")},
	 sizeof(struct init_opts)},
	{0},
};
