/* Drives lib/s3 from the command line for tests/integration/test_s3.py:
 *   s3_tool put KEY PATH [CONTENT_TYPE] | get KEY PATH | head KEY | delete KEY
 *         | list PREFIX MAX_KEYS | presign METHOD KEY EXPIRES
 *         | presign-get KEY EXPIRES CONTENT_TYPE DISPOSITION
 * The store comes from AH_S3_ENDPOINT, AH_S3_BUCKET, AH_S3_REGION, AH_S3_KEY,
 * AH_S3_SECRET. Prints results on stdout; exit 2 for a missing object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "s3/s3.h"

static int print_key(void *ud, const char *key, int64_t size)
{
	(void)ud;
	printf("%s %lld\n", key, (long long)size);
	return 0;
}

static int run(const ah_s3 *s, int argc, char **argv, ah_err *err)
{
	const char *cmd = argv[1];
	long long n = 0;
	if (strcmp(cmd, "put") == 0 && argc >= 4)
		return ah_s3_put_file(s, argv[2], argv[3], argc > 4 ? argv[4] : NULL, err);
	if (strcmp(cmd, "get") == 0 && argc == 4)
		return ah_s3_get_file(s, argv[2], argv[3], err);
	if (strcmp(cmd, "delete") == 0 && argc == 3)
		return ah_s3_delete(s, argv[2], err);
	if (strcmp(cmd, "head") == 0 && argc == 3) {
		int64_t size = 0;
		int rc = ah_s3_head(s, argv[2], &size, err);
		if (rc == 0)
			printf("%lld\n", (long long)size);
		return rc;
	}
	if (strcmp(cmd, "list") == 0 && argc == 4 && ah_parse_ll(&n, argv[3]) == 0)
		return ah_s3_list(s, argv[2], (int)n, print_key, NULL, err);
	if (strcmp(cmd, "presign") == 0 && argc == 5 && ah_parse_ll(&n, argv[4]) == 0) {
		char url[AH_S3_URL_MAX];
		int rc = ah_s3_presign(url, sizeof(url), s, argv[2], argv[3], (long)n, time(NULL), err);
		if (rc == 0)
			printf("%s\n", url);
		return rc;
	}
	if (strcmp(cmd, "presign-get") == 0 && argc == 6 && ah_parse_ll(&n, argv[3]) == 0) {
		char url[AH_S3_URL_MAX];
		const char *extra[] = {"response-content-disposition", argv[5], "response-content-type",
		                       argv[4], NULL};
		int rc = ah_s3_presign_q(url, sizeof(url), s, "GET", argv[2], (long)n, time(NULL), extra, err);
		if (rc == 0)
			printf("%s\n", url);
		return rc;
	}
	return ah_err_set(err, AH_EINVALID, "usage: s3_tool put|get|head|delete|list|presign …");
}

int main(int argc, char **argv)
{
	ah_s3 s;
	ah_err err = {0};
	if (argc < 2 || ah_s3_init(&s, getenv("AH_S3_ENDPOINT"), getenv("AH_S3_BUCKET"),
	                           getenv("AH_S3_REGION"), getenv("AH_S3_KEY"),
	                           getenv("AH_S3_SECRET"), &err)) {
		fprintf(stderr, "s3_tool: %s\n", argc < 2 ? "usage" : err.msg);
		return 1;
	}
	int rc = run(&s, argc, argv, &err);
	if (rc)
		fprintf(stderr, "s3_tool: %s\n", err.msg);
	return rc == 0 ? 0 : rc == AH_ENOTFOUND ? 2 : 1;
}
