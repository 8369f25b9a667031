/* Unit test of lib/webhooks: the URL rules a webhook_url must pass (one row
 * per URL, under https-only and with http and an allow list), and the
 * signature against a vector computed with Python's hmac. Printed as TAP. */
#include "webhooks/webhooks.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

static ah_config *load(const char *text)
{
	char path[] = "/tmp/ah-test-webhooks-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
	ah_config *c = NULL;
	ah_err err = {0};
	if (ah_config_load(&c, path, &err) != 0)
		printf("# %s\n", err.msg);
	unlink(path);
	return c;
}

static const struct {
	const char *url;
	bool strict_ok, dev_ok; /* https only, no list; http allowed and 127.0.0.1:8000-8009 */
} urls[] = {
	{"https://hooks.example.com/agenthost", true, true},
	{"https://hooks.example.com:8443/a?token=x", true, true},
	{"https://hooks.example.com?x=1", true, true},
	{"http://hooks.example.com/agenthost", false, true},      /* http: only when allowed */
	{"ftp://hooks.example.com/", false, false},
	{"hooks.example.com/x", false, false},
	{"https://", false, false},
	{"https://user:pw@hooks.example.com/", false, false},     /* credentials */
	{"https://hooks.example.com/#frag", false, false},
	{"https://hooks.example.com:0/", false, false},
	{"https://hooks.example.com:65536/", false, false},
	{"https://hooks.example.com:80x/", false, false},
	{"https://hooks .example.com/", false, false},
	{"http://127.0.0.1:8000/h", false, true},                 /* listed */
	{"http://127.0.0.1:8010/h", false, false},                /* not the listed port */
	{"http://127.0.0.2:8000/h", false, false},                /* not the listed address */
	{"http://localhost:8000/h", false, true},                 /* localhost is 127.0.0.1 */
	{"https://localhost/h", false, false},
	{"https://a.localhost/h", false, false},
	{"https://10.0.0.1/", false, false},
	{"https://100.64.0.1/", false, false},                    /* CGNAT */
	{"https://[::1]/", false, false},
	{"https://[fd00::1]/", false, false},
	{"https://169.254.169.254/latest/meta-data", false, false},
	{"https://0xa9fea9fe/", false, false},                    /* the same, in hex */
	{"https://2130706433/", false, false},                    /* 127.0.0.1 as one number */
	{"https://1.2.3.256/", false, false},                     /* malformed */
	{"https://8.8.8.8/", true, true},
	{"https://[2606:4700::1111]:8443/", true, true},
	{"https://[2001:db8::1]/", false, false},                 /* documentation range */
};

static void test_urls(void)
{
	ah_config *strict = load("");
	ah_config *dev = load("webhook_allow_http = true\nwebhook_allow_hosts = 127.0.0.1:8000-8009\n");
	ah_err err;
	for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
		err = (ah_err){0};
		bool got = ah_webhook_url_check(urls[i].url, &ah_settings_of(strict)->webhook, &err) == 0;
		ok(got == urls[i].strict_ok, "https only: %s %s (%s)", urls[i].url,
		   urls[i].strict_ok ? "allowed" : "refused", err.msg);
		err = (ah_err){0};
		got = ah_webhook_url_check(urls[i].url, &ah_settings_of(dev)->webhook, &err) == 0;
		ok(got == urls[i].dev_ok, "http and a list: %s %s (%s)", urls[i].url,
		   urls[i].dev_ok ? "allowed" : "refused", err.msg);
	}
	char long_url[2100] = "https://example.com/";
	memset(long_url + 20, 'a', 2049 - 20);
	long_url[2049] = '\0';
	ok(ah_webhook_url_check(long_url, &ah_settings_of(strict)->webhook, &err) == AH_EINVALID && strstr(err.msg, "2048"),
	   "a URL over 2048 characters is refused (%s)", err.msg);
	ah_config_free(strict);
	ah_config_free(dev);
}

static void test_signature(void)
{
	char hex[AH_WEBHOOK_SIG_HEX];
	ah_webhook_sign(hex, "whsec_test", 1700000000, "{\"a\":1}", 7);
	ok(strcmp(hex, "38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789") == 0,
	   "HMAC-SHA256 of \"t.body\" under the whole secret, as Python's hmac computes it");
	ah_webhook_sign(hex, "whsec_test", 1700000001, "{\"a\":1}", 7);
	ok(strcmp(hex, "38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789") != 0,
	   "another timestamp signs differently");
}

int main(void)
{
	if (sodium_init() < 0)
		return 1;
	test_urls();
	test_signature();
	return tap_done();
}
