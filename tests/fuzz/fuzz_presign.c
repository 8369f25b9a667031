/* Fuzz target: the presigned upload URL's token (handlers/file_presign.c), as
 * the PUT to upload_url brings it: the query string through lib/http, then
 * expires and signature against the URL MAC of the file's id and size.
 * Input: the query string. Property: a URL is accepted only when its
 * signature is the MAC of exactly (id, the expiry it states, size); the URL
 * the service itself makes is accepted (checked once at start-up). The
 * master key is a fixed test key in a temporary file. */
#include "fake_req.h"
#include "files_api.h"
#include "core/config.h"
#include "crypto/crypto.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define ID "fil_fuzz0000000000000000"
#define SIZE 1234LL

static void setup(void)
{
	char key[] = "/tmp/ah-fuzz-key-XXXXXX", conf[] = "/tmp/ah-fuzz-conf-XXXXXX";
	int kfd = mkstemp(key), cfd = mkstemp(conf);
	unsigned char k[32];
	memset(k, 0x42, sizeof k);
	if (kfd < 0 || cfd < 0 || write(kfd, k, sizeof k) != (ssize_t)sizeof k ||
	    dprintf(cfd, "master_key_file = %s\n", key) < 0)
		abort();
	close(kfd);
	close(cfd);
	static ah_config *cfg; /* for the whole run */
	ah_err err = { 0 };
	if (ah_config_load(&cfg, conf, &err) != 0 || ah_crypto_init(cfg, 0, &err) != 0)
		abort();
	unlink(key);
	unlink(conf);
}

static bool accepted(const char *query, long long *e)
{
	static struct fake_req f;
	fake_req_init(&f, query, "", 0);
	bool ok = ah_upload_url_signed(&f.r, ID, SIZE, e);
	fake_req_done(&f);
	return ok;
}

/* The service's own URL for this file must pass. */
static void positive_control(void)
{
	char mac[AH_URL_MAC_HEX], q[200];
	long long e = 0;
	ah_crypto_url_mac(mac, "PUT\n" ID "\n4102444800\n1234");
	snprintf(q, sizeof q, "expires=4102444800&signature=%s", mac);
	if (!accepted(q, &e) || e != 4102444800LL)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	if (!ready) {
		setup();
		positive_control();
		ready = true;
	}
	char *query = malloc(size + 1);
	if (!query)
		return 0;
	memcpy(query, data, size);
	query[size] = '\0';
	long long e = 0;
	if (accepted(query, &e)) {
		/* Only the MAC of what the URL states: recompute it independently. */
		char claim[128], mac[AH_URL_MAC_HEX];
		snprintf(claim, sizeof claim, "PUT\n%s\n%lld\n%lld", ID, e, SIZE);
		ah_crypto_url_mac(mac, claim);
		if (!strstr(query, mac))
			__builtin_trap();
	}
	free(query);
	return 0;
}
