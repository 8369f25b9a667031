/* Replays a fuzz target's corpus without libFuzzer: every file under the
 * directories (or the files) given runs through LLVMFuzzerTestOneInput once.
 * This is how .ci/run checks that no input that once crashed (or was found
 * interesting) by scripts/fuzz crashes now: built with the ordinary compiler,
 * and under ASan+UBSan in scripts/test's sanitizer pass. TAP. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	struct stat st;
	if (fstat(fileno(f), &st) != 0 || st.st_size < 0) {
		fclose(f);
		return -1;
	}
	size_t n = (size_t)st.st_size;
	uint8_t *buf = malloc(n ? n : 1); /* a copy of exactly n bytes: ASan sees overreads */
	size_t got = buf ? fread(buf, 1, n, f) : 0;
	fclose(f);
	if (!buf || got != n) {
		free(buf);
		return -1;
	}
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

static int replay_dir(const char *dir, int *count)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, alphasort);
	if (n < 0)
		return -1;
	int rc = 0;
	for (int i = 0; i < n; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
		struct stat st;
		if (names[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (replay_file(path) != 0) {
				fprintf(stderr, "# cannot read %s\n", path);
				rc = -1;
			}
			(*count)++;
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	int count = 0, rc = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0)
			rc = -1;
		else if (S_ISDIR(st.st_mode))
			rc |= replay_dir(argv[i], &count);
		else
			rc |= replay_file(argv[i]), count++;
	}
	printf("1..1\n%s 1 - %d inputs replayed without a crash\n", rc == 0 && count > 0 ? "ok" : "not ok",
	       count);
	return rc == 0 && count > 0 ? 0 : 1;
}
