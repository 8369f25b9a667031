/* agenthost-runner-ping: test-only (not installed). Sends one JSON request to
 * a runner over TCP exactly as an API worker does (handshake, then
 * sealed frames of rpc/rpc.h) and prints the answer line, so the integration
 * test can drive the real client through a relay that watches or tampers
 * with the bytes (tests/integration/test_runner_tcp.py).
 *
 *   agenthost-runner-ping HOST:PORT SECRET_FILE [REQUEST_JSON]
 *
 * REQUEST_JSON defaults to {"op":"ping"}. Exit status 0 with the answer on
 * stdout; 1 with the reason on stderr; 2 on bad usage. */
#include "rpc/rpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TIMEOUT_MS 120000

static int fail(const char *what, const ah_err *err)
{
	fprintf(stderr, "agenthost-runner-ping: %s: %s\n", what, err->msg);
	return 1;
}

int main(int argc, char **argv)
{
	ah_rauth_key key;
	ah_rwire w;
	ah_err err = {0};
	unsigned char *ans = NULL;
	size_t alen = 0;
	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: %s HOST:PORT SECRET_FILE [REQUEST_JSON]\n", argv[0]);
		return 2;
	}
	const char *req = argc == 4 ? argv[3] : "{\"op\":\"ping\"}";
	if (sodium_init() < 0 || ah_rauth_key_from_file(&key, argv[2], &err) != 0)
		return fail("secret", &err);
	int rc = ah_rwire_dial(&w, argv[1], &key, &err);
	sodium_memzero(&key, sizeof key);
	if (rc != 0)
		return fail("handshake", &err);
	rc = ah_rwire_exchange(&w, req, strlen(req), TIMEOUT_MS, &ans, &alen, &err);
	close(w.fd);
	ah_rwire_wipe(&w);
	if (rc != 0)
		return fail("exchange", &err);
	fwrite(ans, 1, alen, stdout);
	putchar('\n');
	free(ans);
	return 0;
}
