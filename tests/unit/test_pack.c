/* Unit test of lib/deploy/pack.c, printed as TAP: an image packed for the
 * file store (zstd since issue 27's redeploy figure) comes back whole
 * through the stored image's extraction, while an upload's extraction,
 * which takes gzip only, still refuses it. */
#include "deploy/deploy.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int put(const char *dir, const char *name, const char *data)
{
	char p[400];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	FILE *f = fopen(p, "we");
	if (!f)
		return -1;
	fputs(data, f);
	return fclose(f);
}

static bool same(const char *path, const char *data)
{
	char buf[256] = "";
	FILE *f = fopen(path, "re");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	if (f)
		fclose(f);
	return n == strlen(data) && memcmp(buf, data, n) == 0;
}

int main(void)
{
	char tmpl[] = "/tmp/ah-test-pack-XXXXXX", src[300], arc[300], back[300], up[300], p[400];
	const char *base = mkdtemp(tmpl);
	ah_err err = {0};
	if (!base)
		return 1;
	snprintf(src, sizeof src, "%s/src", base);
	snprintf(arc, sizeof arc, "%s/image.tar.zst", base);
	snprintf(back, sizeof back, "%s/back", base);
	snprintf(up, sizeof up, "%s/upload", base);
	mkdir(src, 0755);
	snprintf(p, sizeof p, "%s/lib", src);
	mkdir(p, 0755);
	put(src, "agent.json", "{}");
	put(src, "lib/a.js", "module.exports = 1;\n");
	snprintf(p, sizeof p, "%s/link.js", src);
	int rc = symlink("lib/a.js", p);
	printf("1..4\n");

	rc = rc == 0 ? ah_tarball_pack(src, arc, &err) : -1;
	unsigned char magic[4] = {0};
	int fd = open(arc, O_RDONLY | O_CLOEXEC);
	bool zstd = fd >= 0 && read(fd, magic, 4) == 4 && !memcmp(magic, "\x28\xb5\x2f\xfd", 4);
	if (fd >= 0)
		close(fd);
	printf("%s 1 - packed as zstd%s%s\n", rc == 0 && zstd ? "ok" : "not ok", rc ? ": " : "",
	       rc ? err.msg : "");

	struct ah_tar_limits lim = AH_TAR_LIMITS_DEFAULT;
	lim.zstd_too = true;
	mkdir(back, 0700);
	rc = ah_tarball_extract(arc, back, &lim, &err);
	char a[400], l[400], target[64] = "";
	snprintf(a, sizeof a, "%s/lib/a.js", back);
	snprintf(l, sizeof l, "%s/link.js", back);
	ssize_t tn = readlink(l, target, sizeof target - 1);
	bool whole = rc == 0 && same(a, "module.exports = 1;\n") && tn == 8 &&
	             !memcmp(target, "lib/a.js", 8);
	printf("%s 2 - the stored image's extraction gives the tree back%s%s\n",
	       whole ? "ok" : "not ok", rc ? ": " : "", rc ? err.msg : "");

	struct ah_tar_limits upload = AH_TAR_LIMITS_DEFAULT;
	mkdir(up, 0700);
	rc = ah_tarball_extract(arc, up, &upload, &err);
	bool refused = rc == AH_EINVALID &&
	               !strcmp(err.msg, "Invalid tarball: not a gzip-compressed tar archive");
	printf("%s 3 - an upload's extraction refuses it (%s)\n", refused ? "ok" : "not ok",
	       rc ? err.msg : "extracted");
	/* node_modules in a part of its own, kept and reused (a redeploy). */
	char part[300], arc2[300], back2[300], nm[400], got[400];
	snprintf(part, sizeof part, "%s/image.deps.tzst", base);
	snprintf(arc2, sizeof arc2, "%s/image2.tar.zst", base);
	snprintf(nm, sizeof nm, "%s/node_modules", src);
	mkdir(nm, 0755);
	put(nm, "dep.js", "exports.dep = true;\n");
	bool split = true;
	for (int round = 0; round < 2 && split; round++) {
		put(src, "index.js", round ? "second\n" : "first\n");
		snprintf(back2, sizeof back2, "%s/back2-%d", base, round);
		mkdir(back2, 0700);
		struct stat ps;
		rc = ah_image_pack(src, arc2, part, &err);
		split = rc == 0 && stat(part, &ps) == 0 &&
		        ah_tarball_extract(arc2, back2, &lim, &err) == 0;
		snprintf(got, sizeof got, "%s/index.js", back2);
		split = split && same(got, round ? "second\n" : "first\n");
		snprintf(got, sizeof got, "%s/node_modules/dep.js", back2);
		split = split && same(got, "exports.dep = true;\n");
		snprintf(got, sizeof got, "%s/lib/a.js", back2);
		split = split && same(got, "module.exports = 1;\n");
	}
	printf("%s 4 - node_modules packed apart and reused: the archive is the whole tree%s%s\n",
	       split ? "ok" : "not ok", split ? "" : ": ", split ? "" : err.msg);
	ah_deploy_rmtree(base);
	return zstd && whole && refused && split ? 0 : 1;
}
