/* Unit test of the bucket and mount input rules (lib/buckets, handlers/
 * validate.c) and core/netaddr's ranges, one table row per input and what the
 * API must decide about it. Printed as TAP. */
#include "buckets/buckets.h"
#include "core/netaddr.h"
#include "validate.h"

#include <stdbool.h>
#include <string.h>

#include "tap.h"

static const struct {
	const char *url;
	bool private_ok, path_ok, want;
	const char *allow_hosts;
} endpoints[] = {
	{"https://s3.eu-west-1.amazonaws.com", false, false, true},
	{"https://acct.r2.cloudflarestorage.com/", false, false, true},
	{"http://minio.example.com:9000", false, false, true},
	{"https://s3.example.com/bucket", false, false, false},   /* a path */
	{"https://oauth2.googleapis.com/token", false, true, true}, /* token_uri: path allowed */
	{"https://key:secret@s3.example.com", false, false, false},
	{"https://key@s3.example.com", false, false, false},
	{"file:///etc/passwd", true, true, false},
	{"gopher://s3.example.com:70/", true, true, false},
	{"ftp://s3.example.com", true, true, false},
	{"s3.example.com", true, true, false},
	{"https://", true, true, false},
	{"https://s3.example.com:0", true, true, false},
	{"https://s3.example.com:65536", true, true, false},
	{"https://s3.example.com?x=1", true, true, false},
	{"https://s3.example.com#f", true, true, false},
	{"https://s3 .example.com", true, true, false},
	{"http://127.0.0.1:9000", false, false, false},            /* loopback */
	{"http://127.0.0.1:9000", true, false, true},              /* ... allowed */
	{"http://localhost:9000", false, false, false},
	{"http://10.1.2.3", false, false, false},
	{"http://100.64.0.1", false, false, false},                /* CGNAT */
	{"http://192.168.1.1", true, false, true},
	{"http://169.254.169.254", true, false, false},            /* metadata: never */
	{"http://[fe80::1]:9000", true, false, false},
	{"http://[::1]:9000", false, false, false},
	{"http://[::ffff:169.254.169.254]", true, false, false},
	{"http://100.100.100.200", true, false, false},            /* Alibaba metadata */
	{"https://8.8.8.8", false, false, true},
	/* Other spellings of the metadata address are that address. */
	{"http://0251.0376.0251.0376/", true, false, false},      /* octal */
	{"http://2852039166/", true, false, false},               /* decimal */
	{"http://0xa9fea9fe/", true, false, false},               /* hex */
	{"http://0xA9.0xFE.0xA9.0xFE/", true, false, false},
	{"http://169.254.43518/", true, false, false},            /* a.b.c16 */
	{"http://169.16689662/", true, false, false},             /* a.b24 */
	{"http://169.254.169.254./", true, false, false},         /* a trailing dot */
	{"http://[::ffff:a9fe:a9fe]/", true, false, false},       /* v4-mapped, hex */
	{"http://[::ffff:169.254.169.254]:80/", true, false, false},
	{"http://[64:ff9b::a9fe:a9fe]/", true, false, false},     /* NAT64 */
	{"http://[fe80::1%25eth0]:9000", true, false, false},     /* a zone id */
	{"http://[s3.example.com]/", true, false, false},         /* brackets, no v6 */
	{"http://2130706433:9000", false, false, false},          /* 127.0.0.1 */
	{"http://017700000001:9000", false, false, false},
	{"http://0x7f.1:9000", false, false, false},
	{"http://localhost.:9000", false, false, false},
	{"http://s3.localhost:9000", false, false, false},
	{"http://1.2.3.256/", true, false, false},                /* a malformed number */
	{"http://1.2.3.4.5/", true, false, false},
	{"http://08/", true, false, false},
	{"http://s3.example.123/", true, false, false},           /* ends in a number */
	{"http://8.8.8.8./", false, false, true},
	{"http://134744072/", false, false, true},                /* 8.8.8.8 */
	{"http://s3.0x.example.com/", false, false, true},        /* a name */
	/* storage_allow_hosts: the address and port, in any spelling. */
	{"http://127.0.0.1:9000", false, false, true, "127.0.0.1:9000"},
	{"http://127.0.0.1:9001", false, false, false, "127.0.0.1:9000"},
	{"http://127.0.0.1", false, false, false, "127.0.0.1:9000"},  /* port 80 */
	{"http://2130706433:9000", false, false, true, "127.0.0.1:9000-9009"},
	{"http://[::ffff:127.0.0.1]:9005", false, false, true, "0x7f000001:9000-9009"},
	{"http://127.0.0.2:9000", false, false, false, "127.0.0.1:9000"},
	{"http://10.1.2.3:443", false, false, true, "10.0.0.0/8"},
	{"http://10.1.2.3:443", false, false, false, "10.0.0.0/16:443"},
	{"http://[fd00::5]:443", false, false, true, "x, [fd00::]/8:443"},
	{"http://169.254.169.254", false, false, false, "169.254.0.0/16"}, /* never */
	{"http://localhost:9000", false, false, true, "127.0.0.1:9000"},
};

static const struct { const char *in; bool want; } names[] = {
	{"my-data", true}, {"a.b.c", true}, {"gcs_bucket_1", true}, {"abc", true},
	{"ab", false}, {"My-Data", false}, {"-data", false}, {"data-", false}, {"a..b", false},
	{"has space", false}, {"a/b", false},
};

static const struct { const char *in; bool want; } mount_paths[] = {
	{"/data", true}, {"/mnt/data", true}, {"/workspace/a-b_c.d", true}, {"/application", true},
	{"/filesystem", true}, {"/data/proc", true},
	{"data", false}, {"/", false}, {"//data", false}, {"/data/", false}, {"/data//x", false},
	{"/data/../etc", false}, {"/data/./x", false}, {"/..", false}, {"/.", false},
	{"/proc", false}, {"/proc/1", false}, {"/sys", false}, {"/dev/shm", false}, {"/app", false},
	{"/app/x", false}, {"/files", false}, {"/files/agent", false}, {"/usr/local", false},
	{"/etc", false}, {"/tmp", false}, {"/tmp/x", true}, {"/lib64", false}, {"/.sbx", false},
	{"/da\nta", false}, {"/a,b", false}, {"/a:b", false}, {"/a\\b", false},
};

static const struct { const char *in; bool want; } prefixes[] = {
	{"", true}, {"team/a", true}, {"team/a/", true}, {"a.b", true},
	{"/abs", false}, {"a/../b", false}, {"..", false}, {"a//b", false}, {"./a", false},
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void sa_cases(void)
{
	static const char ok_key[] =
		"{\"type\":\"service_account\",\"client_email\":\"a@p.iam.gserviceaccount.com\","
		"\"private_key\":\"-----BEGIN PRIVATE KEY-----\\nx\\n-----END PRIVATE KEY-----\\n\","
		"\"token_uri\":\"https://oauth2.googleapis.com/token\"}";
	static const struct { const char *json; bool want; const char *what; } cases[] = {
		{ok_key, true, "a service account key"},
		{"not json", false, "not JSON"},
		{"[1]", false, "an array"},
		{"{\"client_email\":\"a@b\",\"private_key\":\"-----BEGIN x\"}", false, "no token_uri"},
		{"{\"client_email\":\"a@b\",\"token_uri\":\"https://t.example/t\"}", false, "no private_key"},
		{"{\"private_key\":\"-----BEGIN x\",\"token_uri\":\"https://t.example/t\"}", false, "no client_email"},
		{"{\"type\":\"authorized_user\",\"client_email\":\"a@b\",\"private_key\":\"-----BEGIN x\","
		 "\"token_uri\":\"https://t.example/t\"}", false, "another type of key"},
		{"{\"client_email\":\"a@b\",\"private_key\":\"-----BEGIN x\",\"token_uri\":\"file:///x\"}",
		 false, "a file:// token_uri"},
		{"{\"client_email\":\"a@b\",\"private_key\":\"-----BEGIN x\","
		 "\"token_uri\":\"http://169.254.169.254/t\"}", false, "a metadata token_uri"},
		{"{\"client_email\":\"a@b\",\"private_key\":\"-----BEGIN x\","
		 "\"token_uri\":\"http://0251.0376.0251.0376/t\"}", false, "an octal metadata token_uri"},
	};
	ah_arena *a = ah_arena_new();
	for (size_t i = 0; i < N(cases); i++) {
		ah_bucket_creds c = {0};
		ah_err err = {0};
		static const ah_addr_policy none = {0};
		int rc = ah_bucket_sa_parse(a, &c, cases[i].json, &none, &err);
		ok((rc == 0) == cases[i].want && (rc != 0 || (c.client_email && c.private_key && c.token_uri)),
		   "service_account_json: %s (%s)", cases[i].what, rc ? err.msg : "accepted");
	}
	ah_bucket_creds in = {.access_key_id = "AK", .secret_access_key = "S\"K"}, out;
	ah_err err;
	ok(ah_bucket_creds_decode(a, &out, AH_PROVIDER_S3, ah_bucket_creds_encode(a, &in), &err) == 0 &&
	   strcmp(out.secret_access_key, "S\"K") == 0, "s3 credentials survive sealing's encoding");
	ok(ah_bucket_creds_decode(a, &out, AH_PROVIDER_GCS, ah_bucket_creds_encode(a, &in), &err) ==
	   AH_ENOTFOUND, "s3 credentials are none for gcs");
	ah_arena_destroy(a);
}

int main(void)
{
	for (size_t i = 0; i < N(endpoints); i++) {
		ah_err err = {0};
		ah_addr_policy pol = {endpoints[i].private_ok, endpoints[i].allow_hosts};
		int rc = ah_bucket_endpoint_check(endpoints[i].url, &pol, endpoints[i].path_ok, &err);
		ok((rc == 0) == endpoints[i].want, "endpoint %s%s%s: %s", endpoints[i].url,
		   endpoints[i].private_ok ? " (private allowed)" : "",
		   endpoints[i].allow_hosts ? " (allow_hosts)" : "", rc ? err.msg : "accepted");
	}
	for (size_t i = 0; i < N(names); i++)
		ok(ah_bucket_name_valid(names[i].in) == names[i].want, "bucket name '%s'", names[i].in);
	for (size_t i = 0; i < N(mount_paths); i++)
		ok((ah_bucket_mount_path_problem(mount_paths[i].in) == NULL) == mount_paths[i].want,
		   "mount path '%s'", mount_paths[i].in);
	for (size_t i = 0; i < N(prefixes); i++)
		ok((ah_source_prefix_problem(prefixes[i].in) == NULL) == prefixes[i].want,
		   "source prefix '%s'", prefixes[i].in);
	ok(ah_addr_kind_text("100.64.0.1") == AH_ADDR_PRIVATE, "CGNAT is private");
	ok(ah_addr_kind_text("169.254.1.1") == AH_ADDR_FORBIDDEN, "link-local is forbidden");
	ok(ah_addr_kind_text("1.1.1.1") == AH_ADDR_PUBLIC, "an outside address is public");
	ok(ah_addr_kind_text("s3.example.com") == -1, "a name is no address");
	ok(ah_addr_kind_text("2852039166") == AH_ADDR_FORBIDDEN, "decimal metadata is forbidden");
	ok(ah_addr_kind_text("0251.0376.0251.0376") == AH_ADDR_FORBIDDEN, "octal metadata is forbidden");
	ok(ah_addr_kind_text("0xa9fea9fe") == AH_ADDR_FORBIDDEN, "hex metadata is forbidden");
	ok(ah_addr_kind_text("::ffff:169.254.169.254") == AH_ADDR_FORBIDDEN, "v4-mapped metadata");
	ok(ah_addr_kind_text("0x7f.0.0.1") == AH_ADDR_PRIVATE, "hex loopback is private");
	ok(ah_addr_kind_text("1.2.3.256") == -2, "a malformed number is neither");
	ok(ah_addr_kind_text("4294967296") == -2 && ah_addr_kind_text("99999999999999999999999") == -2 &&
	   ah_addr_kind_text("0x1ffffffff") == -2 && ah_addr_kind_text("1.0x1000000") == -2 &&
	   ah_addr_kind_text("09.1.1.1") == -2 && ah_addr_kind_text("1..1") == -2,
	   "numbers past an IPv4 address, or not numbers in their base, are malformed");
	ok(ah_addr_kind_text("4294967295") == AH_ADDR_PRIVATE && ah_addr_kind_text("0x") == AH_ADDR_PRIVATE &&
	   ah_addr_kind_text("1.") == AH_ADDR_PRIVATE && ah_addr_kind_text("8.0x80808") == AH_ADDR_PUBLIC,
	   "edge spellings are addresses");
	ok(ah_addr_kind_text(".") == -1 && ah_addr_kind_text("a.b1") == -1 && ah_addr_kind_text("0x.g") == -1,
	   "names that end in letters are names");
	char bad[64] = "";
	ok(ah_addr_list_check("127.0.0.1:9000-9009, [::1]:80 10.0.0.0/8", bad, sizeof(bad)) == 0,
	   "storage_allow_hosts entries");
	ok(ah_addr_list_check("127.0.0.1:9000, s3.local:9000", bad, sizeof(bad)) == AH_EINVALID &&
	   strcmp(bad, "s3.local:9000") == 0, "a name is no storage_allow_hosts entry (%s)", bad);
	ok(ah_addr_list_check("127.0.0.1:0", bad, sizeof(bad)) == AH_EINVALID, "port 0");
	ok(ah_addr_list_check("10.0.0.0/33", bad, sizeof(bad)) == AH_EINVALID, "/33");
	sa_cases();
	return tap_done();
}
