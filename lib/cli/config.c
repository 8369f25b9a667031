/* Where the API's URL and key come from: the file `login` writes
 * ($XDG_CONFIG_HOME/agenthost/config, else ~/.config/agenthost/config; mode
 * 0600, "key = value" lines), overridden by AGENTHOST_URL and AGENTHOST_API_KEY,
 * and the URL by --url. */
#include "cli/cli.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_URL "http://127.0.0.1:8080/api/v1"

static const char *config_dir(struct ah_cli *c)
{
	const char *x = getenv("XDG_CONFIG_HOME");
	if (x && x[0] == '/')
		return ah_sprintf(c->a, "%s/agenthost", x);
	const char *home = getenv("HOME");
	return ah_sprintf(c->a, "%s/.config/agenthost", home && *home ? home : ".");
}

/* "url = …" and "api_key = …" lines of an open config file. */
static void read_lines(struct ah_cli *c, FILE *f, const char **url, const char **key)
{
	char line[4096];
	while (fgets(line, sizeof(line), f)) {
		char *eq = strchr(line, '=');
		if (line[0] == '#' || !eq)
			continue;
		*eq = 0;
		const char *k = ah_trim(line), *v = ah_trim(eq + 1);
		if (!strcmp(k, "url"))
			*url = ah_strdup(c->a, v);
		else if (!strcmp(k, "api_key"))
			*key = ah_strdup(c->a, v);
	}
}

static int read_file(struct ah_cli *c, const char **url, const char **key, ah_err *err)
{
	FILE *f = fopen(c->config_path, "r");
	struct stat st;
	if (!f)
		return errno == ENOENT ? 0 : ah_err_set(err, AH_EFAIL, "%s: %s", c->config_path, strerror(errno));
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077))
		ah_cli_note(c, "agenthost: warning: %s is readable by others (chmod 600 it); it holds your API key",
		            c->config_path);
	read_lines(c, f, url, key);
	fclose(f);
	return 0;
}

/* URL without trailing slashes. */
static const char *norm_url(struct ah_cli *c, const char *u)
{
	char *s = ah_strdup(c->a, u);
	size_t n = strlen(s);
	while (n && s[n - 1] == '/')
		s[--n] = 0;
	return s;
}

int ah_cli_config_load(struct ah_cli *c, ah_err *err)
{
	const char *url = NULL, *key = NULL, *e;
	c->config_path = ah_sprintf(c->a, "%s/config", config_dir(c));
	int rc = read_file(c, &url, &key, err);
	if (rc)
		return rc;
	if ((e = getenv("AGENTHOST_URL")) && *e)
		url = e;
	if ((e = getenv("AGENTHOST_API_KEY")) && *e)
		key = e;
	if (c->url_flag)
		url = c->url_flag;
	c->url = norm_url(c, url ? url : DEFAULT_URL);
	c->key = key;
	return 0;
}

static int mkdir_private(const char *path, ah_err *err)
{
	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		return ah_err_set(err, AH_EFAIL, "cannot create %s: %s", path, strerror(errno));
	return 0;
}

/* The config directory, its parent (~/.config) included. */
static int make_dirs(struct ah_cli *c, ah_err *err)
{
	char *dir = ah_strdup(c->a, config_dir(c));
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		int rc = mkdir_private(dir, err);
		*slash = '/';
		if (rc)
			return rc;
	}
	return mkdir_private(dir, err);
}

/* Written to a new 0600 file that replaces the old one, so that the key is
 * never in a file with looser permissions, not even for a moment. */
int ah_cli_config_save(struct ah_cli *c, const char *url, const char *key, ah_err *err)
{
	int rc = make_dirs(c, err);
	if (rc)
		return rc;
	const char *tmp = ah_sprintf(c->a, "%s.%ld.tmp", c->config_path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return ah_err_set(err, AH_EFAIL, "cannot write %s: %s", tmp, strerror(errno));
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(tmp);
		return ah_err_set(err, AH_EFAIL, "cannot write %s: %s", tmp, strerror(errno));
	}
	fprintf(f, "# agenthost client configuration (written by agenthost login)\nurl = %s\napi_key = %s\n",
	        url, key);
	bool bad = fflush(f) != 0 || fsync(fd) != 0;
	bad |= fclose(f) != 0;
	if (bad || rename(tmp, c->config_path) != 0) {
		unlink(tmp);
		return ah_err_set(err, AH_EFAIL, "cannot write %s: %s", c->config_path, strerror(errno));
	}
	return 0;
}

int ah_cli_config_remove(struct ah_cli *c, bool *removed, ah_err *err)
{
	*removed = unlink(c->config_path) == 0;
	if (!*removed && errno != ENOENT)
		return ah_err_set(err, AH_EFAIL, "cannot remove %s: %s", c->config_path, strerror(errno));
	return 0;
}
