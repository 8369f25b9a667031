/* Fuzz target: a code upload (gzip'd tar) or a build's output (plain tar)
 * extracted as the deploy does. Input: one flag byte (bit 0: plain tar), then
 * the archive. Properties: nothing appears beside the destination; what an
 * accepted archive left has no setuid/setgid bit, no device, fifo or socket,
 * and no symlink leading out of the tree. */
#include "deploy/deploy.h"

#include <dirent.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[64], tarball[128], dest[128];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(base, sizeof base, "/tmp/ah-fuzz-tar-XXXXXX");
	if (!mkdtemp(base))
		exit(1);
	snprintf(tarball, sizeof tarball, "%s/in.tar", base);
	snprintf(dest, sizeof dest, "%s/dest", base);
	return 0;
}

static int check_entry(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)f;
	if (type == FTW_F && (st->st_mode & (S_ISUID | S_ISGID)))
		__builtin_trap();
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode) || S_ISFIFO(st->st_mode) ||
	    S_ISSOCK(st->st_mode))
		__builtin_trap();
	(void)path;
	return 0;
}

/* Only in.tar and dest/ may be in base. */
static void nothing_beside(void)
{
	DIR *d = opendir(base);
	if (!d)
		__builtin_trap();
	for (struct dirent *e; (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "in.tar") &&
		    strcmp(e->d_name, "dest"))
			__builtin_trap();
	closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	FILE *f = fopen(tarball, "wb");
	if (!f || fwrite(data + 1, 1, size - 1, f) != size - 1) {
		if (f)
			fclose(f);
		return 0;
	}
	fclose(f);
	ah_deploy_rmtree(dest);
	if (mkdir(dest, 0700) != 0)
		return 0;
	struct ah_tar_limits lim = AH_TAR_LIMITS_DEFAULT;
	lim.max_extracted = 8 << 20;
	lim.max_entries = 2000;
	lim.uncompressed = data[0] & 1;
	ah_err err = {0};
	if (ah_tarball_extract(tarball, dest, &lim, &err) == 0) {
		char link[4096];
		nftw(dest, check_entry, 16, FTW_PHYS);
		if (ah_deploy_find_escaping_link(link, sizeof link, dest) != 0)
			__builtin_trap();
	}
	nothing_beside();
	ah_deploy_rmtree(dest);
	return 0;
}
