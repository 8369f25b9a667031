/* Fuzz target: what reaches the runner's TCP port (or the API from it)
 * before and after the handshake: the challenge and answer lines, then
 * sealed frames read from a socket. The fuzzer holds no key, so nothing may
 * open: every frame must be refused, never crash, never read past the input.
 * Input: LINE "\n" FRAMES. */
#include "rpc/rpc.h"
#include "split.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

static ah_rauth_key key;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	ah_err err = {0};
	if (sodium_init() < 0 || ah_rauth_key_derive(&key, "fuzz secret", 11, &err) != 0)
		return 1;
	return 0;
}

static void frames(const char *in, size_t len, bool runner_side)
{
	int sv[2];
	if (len > 65536 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return;
	ssize_t w = write(sv[1], in, len);
	close(sv[1]);
	ah_rauth_nonces n = {0};
	ah_rwire wire;
	ah_rwire_start(&wire, sv[0], &key, &n, runner_side);
	unsigned char *msg = NULL;
	size_t mlen = 0;
	ah_err err = {0};
	if (w == (ssize_t)len &&
	    ah_rwire_recv(&wire, 1 << 20, ah_now_ms() + 1000, &msg, &mlen, &err) == 0)
		__builtin_trap(); /* opened without the key */
	free(msg);
	ah_rwire_wipe(&wire);
	close(sv[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *line, *rest;
	size_t rlen;
	if (fuzz_split(data, size, &line, &rest, &rlen) != 0)
		return 0;
	unsigned char sn[AH_RAUTH_NONCE_BYTES] = {0};
	ah_rauth_parse_challenge(line, strlen(line), sn);
	unsigned char cn[AH_RAUTH_NONCE_BYTES] = {0};
	if (ah_rauth_check_answer(&key, sn, line, strlen(line), cn) == 0)
		__builtin_trap(); /* answered without the key */
	if (ah_rauth_check_proof(&key, sn, cn, line, strlen(line)) == 0)
		__builtin_trap();
	frames(rest, rlen, size % 2);
	free(line);
	free(rest);
	return 0;
}
