/* The agent project manifest: agent.json (castari.json when agent.json is
 * absent). Every problem gets its own message because it becomes the agent's
 * status_message, the only thing the user sees of a failed deploy. The project
 * tree is a stranger's, so files are opened without following symlinks: a
 * manifest linked to a host file must not be read, let alone quoted. */
#include "deploy/deploy.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* One dot-separated identifier list (prerelease or build). Numeric identifiers of
 * a prerelease may not have leading zeros. Returns the end or NULL. */
static const char *semver_idents(const char *p, bool prerelease)
{
	for (;;) {
		const char *start = p;
		bool numeric = true;
		while (isalnum((unsigned char)*p) || *p == '-') {
			if (!isdigit((unsigned char)*p))
				numeric = false;
			p++;
		}
		if (p == start)
			return NULL;
		if (prerelease && numeric && *start == '0' && p - start > 1)
			return NULL;
		if (*p != '.')
			return p;
		p++;
	}
}

static const char *semver_number(const char *p)
{
	if (!isdigit((unsigned char)*p))
		return NULL;
	if (*p == '0')
		return isdigit((unsigned char)p[1]) ? NULL : p + 1;
	while (isdigit((unsigned char)*p))
		p++;
	return p;
}

bool ah_semver_valid(const char *s)
{
	const char *p = s;
	for (int i = 0; i < 3; i++) {
		if (!p || !(p = semver_number(p)))
			return false;
		if (i < 2 && *p++ != '.')
			return false;
	}
	if (*p == '-' && !(p = semver_idents(p + 1, true)))
		return false;
	if (*p == '+' && !(p = semver_idents(p + 1, false)))
		return false;
	return *p == '\0';
}

/* Fetches a string member; missing and wrong-typed are told apart. */
static int get_string(const char **out, json_object *obj, const char *key, bool required,
                      const char *file, ah_err *err)
{
	json_object *v = NULL;
	*out = NULL;
	if (!json_object_object_get_ex(obj, key, &v) || json_object_is_type(v, json_type_null)) {
		if (!required)
			return 0;
		return ah_err_set(err, AH_EINVALID, "Invalid manifest %s: \"%s\" is required", file, key);
	}
	if (!json_object_is_type(v, json_type_string))
		return ah_err_set(err, AH_EINVALID, "Invalid manifest %s: \"%s\" must be a string",
		                  file, key);
	*out = json_object_get_string(v);
	if ((size_t)json_object_get_string_len(v) != strlen(*out))
		return ah_err_set(err, AH_EINVALID, "Invalid manifest %s: \"%s\" contains a NUL byte",
		                  file, key);
	return 0;
}

/* Copies a value that passed its checks; over-long values are an error too. */
static int keep(char *dst, size_t n, const char *v, const char *key, const char *file, ah_err *err)
{
	size_t len = strlen(v);
	if (len >= n)
		return ah_err_set(err, AH_EINVALID, "Invalid manifest %s: \"%s\" is longer than %zu characters",
		                  file, key, n - 1);
	memcpy(dst, v, len + 1);
	return 0;
}

static int check_fields(struct ah_manifest *out, json_object *root, const char *file, ah_err *err)
{
	const char *name, *slug, *version, *entry, *runtime;
	int rc;
	if ((rc = get_string(&name, root, "name", true, file, err)) != 0 ||
	    (rc = get_string(&slug, root, "slug", false, file, err)) != 0 ||
	    (rc = get_string(&version, root, "version", true, file, err)) != 0 ||
	    (rc = get_string(&entry, root, "entrypoint", true, file, err)) != 0 ||
	    (rc = get_string(&runtime, root, "runtime", true, file, err)) != 0)
		return rc;
	if (!*name)
		return ah_err_set(err, AH_EINVALID, "Invalid manifest %s: \"name\" must not be empty", file);
	if (slug && !ah_slug_valid(slug))
		return ah_err_set(err, AH_EINVALID, "Invalid manifest %s: \"slug\" must match "
		                  "^[a-z0-9]+(-[a-z0-9]+)*$ (got \"%.64s\")", file, slug);
	if (!ah_semver_valid(version))
		return ah_err_set(err, AH_EINVALID, "Invalid manifest %s: \"version\" must be semver "
		                  "(got \"%.64s\")", file, version);
	if (ah_deploy_path_check(entry) != 0)
		return ah_err_set(err, AH_EINVALID, "Invalid manifest %s: \"entrypoint\" must be a "
		                  "relative path inside the project (got \"%.200s\")", file, entry);
	if (strcmp(runtime, "node") != 0)
		return ah_err_set(err, AH_EINVALID, "Invalid manifest %s: \"runtime\" must be \"node\" "
		                  "(got \"%.64s\")", file, runtime);
	if ((rc = keep(out->name, sizeof(out->name), name, "name", file, err)) != 0 ||
	    (rc = keep(out->slug, sizeof(out->slug), slug ? slug : "", "slug", file, err)) != 0 ||
	    (rc = keep(out->version, sizeof(out->version), version, "version", file, err)) != 0)
		return rc;
	return keep(out->entrypoint, sizeof(out->entrypoint), entry, "entrypoint", file, err);
}

int ah_manifest_parse(struct ah_manifest *out, const char *file, const char *json,
                      size_t len, ah_err *err)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->file, sizeof(out->file), "%s", file);
	if (len > AH_MANIFEST_MAX_BYTES)
		return ah_err_set(err, AH_EINVALID, "Invalid manifest %s: larger than %d KiB", file,
		                  AH_MANIFEST_MAX_BYTES / 1024);
	json_tokener *tok = json_tokener_new();
	if (!tok)
		return ah_err_set(err, AH_EFAIL, "out of memory");
	json_object *root = json_tokener_parse_ex(tok, json, (int)len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	/* Trailing garbage after a complete value is still not a JSON document. */
	size_t used = json_tokener_get_parse_end(tok);
	while (root && used < len && isspace((unsigned char)json[used]))
		used++;
	json_tokener_free(tok);
	int rc;
	const char *why = root ? "trailing characters after the value" :
	                  jerr == json_tokener_continue ? "unexpected end of input" :
	                  json_tokener_error_desc(jerr);
	if (!root || jerr != json_tokener_success || used != len)
		rc = ah_err_set(err, AH_EINVALID, "Invalid manifest %s: not valid JSON (%s)", file, why);
	else if (!json_object_is_type(root, json_type_object))
		rc = ah_err_set(err, AH_EINVALID, "Invalid manifest %s: must be a JSON object", file);
	else
		rc = check_fields(out, root, file, err);
	json_object_put(root);
	return rc;
}

/* Opens name under dirfd, refusing any symlink on the way and any escape. */
static int open_beneath(int dirfd, const char *name, int flags)
{
	struct open_how how = {
		.flags = (unsigned long long)(flags | O_CLOEXEC),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	return (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
}

/* Reads the manifest file; ENOENT leaves *found false. */
static int read_manifest(char *buf, size_t cap, size_t *len, bool *found, int dirfd,
                         const char *file, ah_err *err)
{
	*found = false;
	int fd = open_beneath(dirfd, file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		*found = true;
		return ah_err_set(err, AH_EINVALID, "Invalid manifest %s: cannot be read (%s)", file,
		                  errno == ELOOP ? "it is a symbolic link" : strerror(errno));
	}
	*found = true;
	struct stat st;
	int rc = 0;
	ssize_t n = 0;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		rc = ah_err_set(err, AH_EINVALID, "Invalid manifest %s: not a regular file", file);
	else if (st.st_size > (off_t)cap - 1)
		rc = ah_err_set(err, AH_EINVALID, "Invalid manifest %s: larger than %d KiB", file,
		                AH_MANIFEST_MAX_BYTES / 1024);
	else if ((n = read(fd, buf, cap - 1)) < 0)
		rc = ah_err_set(err, AH_EFAIL, "cannot read %s: %s", file, strerror(errno));
	*len = n > 0 ? (size_t)n : 0;
	close(fd);
	return rc;
}

static int check_entrypoint(int dirfd, const struct ah_manifest *m, ah_err *err)
{
	int fd = open_beneath(dirfd, m->entrypoint, O_PATH | O_NOFOLLOW);
	if (fd < 0) {
		if (errno == ELOOP || errno == EXDEV)
			return ah_err_set(err, AH_EINVALID, "Entrypoint \"%s\" must not be reached through "
			                  "a symbolic link", m->entrypoint);
		return ah_err_set(err, AH_EINVALID, "Entrypoint \"%s\" does not exist in the project",
		                  m->entrypoint);
	}
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		rc = ah_err_set(err, AH_EINVALID, "Entrypoint \"%s\" is not a regular file",
		                m->entrypoint);
	close(fd);
	return rc;
}

int ah_manifest_load(struct ah_manifest *out, const char *project_dir, ah_err *err)
{
	char buf[AH_MANIFEST_MAX_BYTES + 2];
	int dirfd = open(project_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return ah_err_set(err, AH_EFAIL, "cannot open the project directory: %s", strerror(errno));
	int rc = 0;
	bool found = false;
	for (size_t i = 0; ah_manifest_names[i] && !found && rc == 0; i++) {
		size_t len = 0;
		rc = read_manifest(buf, sizeof(buf), &len, &found, dirfd, ah_manifest_names[i], err);
		if (rc == 0 && found)
			rc = ah_manifest_parse(out, ah_manifest_names[i], buf, len, err);
	}
	if (rc == 0 && !found)
		rc = ah_err_set(err, AH_EINVALID, "No agent.json or castari.json in the project root");
	if (rc == 0)
		rc = check_entrypoint(dirfd, out, err);
	close(dirfd);
	return rc;
}
