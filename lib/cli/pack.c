/* Packing a project for `deploy`: the directory as a gzip tarball (libarchive)
 * in an unlinked temporary file, without node_modules and .git (the build
 * installs dependencies itself) and without what .gitignore or .agenthostignore
 * in the project's root names. Those files take gitignore's common forms:
 * "name", "*.log", "dir/", "/only-at-root", "a/b/c", "**" and "!not-this";
 * last match wins, and a directory left out takes everything under it along.
 * Only regular files, directories and symlinks go in, owned by root, so the
 * tarball says nothing about local users. */
#include "cli/cli.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_RULES 512
#define MAX_DEPTH 64

struct rule {
	const char *pat;
	bool negate, dir_only, anchored;
};

struct packer {
	struct ah_cli *c;
	const char *root;
	struct archive *ar;
	struct rule rules[MAX_RULES];
	int nrules;
	int nfiles;
};

static void add_rule(struct packer *p, char *line)
{
	struct rule r = {0};
	size_t n = strlen(line);
	while (n && strchr(" \t\r\n", line[n - 1]))
		line[--n] = 0;
	if (!n || line[0] == '#' || p->nrules >= MAX_RULES)
		return;
	if ((r.negate = line[0] == '!'))
		line++, n--;
	if (n && line[n - 1] == '/')
		r.dir_only = true, line[--n] = 0;
	if ((r.anchored = line[0] == '/'))
		line++;
	r.anchored |= strchr(line, '/') != NULL;
	if (!*line)
		return;
	r.pat = ah_strdup(p->c->a, line);
	p->rules[p->nrules++] = r;
}

static void load_rules(struct packer *p, const char *name)
{
	char line[4096];
	FILE *f = fopen(ah_sprintf(p->c->a, "%s/%s", p->root, name), "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		add_rule(p, line);
	fclose(f);
}

static bool ignored(const struct packer *p, const char *rel, const char *base, bool is_dir)
{
	bool out = false;
	if (is_dir && (!strcmp(base, "node_modules") || !strcmp(base, ".git")))
		return true;
	for (int i = 0; i < p->nrules; i++) {
		const struct rule *r = &p->rules[i];
		if (r->dir_only && !is_dir)
			continue;
		/* "**" spans directories: fnmatch without FNM_PATHNAME lets '*' do that;
		 * a leading "**" + "/" also matches at the top. */
		int flags = strstr(r->pat, "**") ? 0 : FNM_PATHNAME;
		bool hit = fnmatch(r->pat, r->anchored ? rel : base, r->anchored ? flags : 0) == 0 ||
		           (!strncmp(r->pat, "**/", 3) && fnmatch(r->pat + 3, rel, 0) == 0);
		if (hit)
			out = !r->negate;
	}
	return out;
}

static int copy_data(struct packer *p, const char *path, ah_err *err)
{
	char buf[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return ah_err_set(err, AH_EFAIL, "cannot read %s: %s", path, strerror(errno));
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (archive_write_data(p->ar, buf, (size_t)n) != n)
			break;
	close(fd);
	if (n != 0)
		return ah_err_set(err, AH_EFAIL, "cannot pack %s: %s", path,
		                  n < 0 ? strerror(errno) : archive_error_string(p->ar));
	return 0;
}

static int add_entry(struct packer *p, const char *path, const char *rel, const struct stat *st, ah_err *err)
{
	char target[4096];
	struct archive_entry *e = archive_entry_new();
	archive_entry_copy_stat(e, st);
	archive_entry_set_pathname(e, rel);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	if (S_ISLNK(st->st_mode)) {
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = 0;
		archive_entry_set_symlink(e, target);
	}
	int rc = archive_write_header(p->ar, e) == ARCHIVE_OK ? 0
	       : ah_err_set(err, AH_EFAIL, "cannot pack %s: %s", rel, archive_error_string(p->ar));
	archive_entry_free(e);
	if (!rc && S_ISREG(st->st_mode)) {
		rc = copy_data(p, path, err);
		p->nfiles++;
	}
	return rc;
}

static int walk(struct packer *p, const char *rel, int depth, ah_err *err);

static int visit(struct packer *p, const char *rel, const char *name, int depth, ah_err *err)
{
	struct stat st;
	const char *r = *rel ? ah_sprintf(p->c->a, "%s/%s", rel, name) : name;
	const char *path = ah_sprintf(p->c->a, "%s/%s", p->root, r);
	if (lstat(path, &st) != 0)
		return ah_err_set(err, AH_EFAIL, "cannot read %s: %s", path, strerror(errno));
	if (!(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode)))
		return 0;
	if (ignored(p, r, name, S_ISDIR(st.st_mode)))
		return 0;
	int rc = add_entry(p, path, r, &st, err);
	if (!rc && S_ISDIR(st.st_mode))
		rc = walk(p, r, depth + 1, err);
	return rc;
}

static int walk(struct packer *p, const char *rel, int depth, ah_err *err)
{
	struct dirent **names;
	const char *dir = *rel ? ah_sprintf(p->c->a, "%s/%s", p->root, rel) : p->root;
	if (depth > MAX_DEPTH)
		return ah_cli_usage(err, "%s: directories nested deeper than %d", dir, MAX_DEPTH);
	int n = scandir(dir, &names, NULL, alphasort), rc = 0;
	if (n < 0)
		return ah_err_set(err, AH_EFAIL, "cannot read %s: %s", dir, strerror(errno));
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		if (!rc && strcmp(name, ".") && strcmp(name, ".."))
			rc = visit(p, rel, name, depth, err);
		free(names[i]);
	}
	free(names);
	return rc;
}

int ah_cli_pack(struct ah_cli *c, const char *dir, FILE **out, long long *size, int *nfiles, ah_err *err)
{
	struct packer p = {.c = c, .root = dir};
	FILE *f = tmpfile();
	if (!f)
		return ah_err_set(err, AH_EFAIL, "cannot make a temporary file: %s", strerror(errno));
	load_rules(&p, ".gitignore");
	load_rules(&p, ".agenthostignore");
	p.ar = archive_write_new();
	/* No padding of the last block: the upload is the compressed bytes only. */
	int rc = archive_write_set_bytes_in_last_block(p.ar, 1) == ARCHIVE_OK &&
	         archive_write_add_filter_gzip(p.ar) == ARCHIVE_OK &&
	         archive_write_set_format_pax_restricted(p.ar) == ARCHIVE_OK &&
	         archive_write_open_FILE(p.ar, f) == ARCHIVE_OK
	         ? walk(&p, "", 0, err)
	         : ah_err_set(err, AH_EFAIL, "cannot start the tarball: %s", archive_error_string(p.ar));
	if (archive_write_close(p.ar) != ARCHIVE_OK && !rc)
		rc = ah_err_set(err, AH_EFAIL, "cannot finish the tarball: %s", archive_error_string(p.ar));
	archive_write_free(p.ar);
	if (!rc && (fflush(f) != 0 || (*size = ftell(f)) < 0))
		rc = ah_err_set(err, AH_EFAIL, "cannot write the tarball: %s", strerror(errno));
	if (rc) {
		fclose(f);
		return rc;
	}
	*out = f;
	*nfiles = p.nfiles;
	return 0;
}
