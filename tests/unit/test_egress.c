/* Unit test of the allow-list entry parser (lib/core/egress.c), printed as
 * TAP: one row per entry, with whether it parses, its canonical text, and
 * whether its range is private or forbidden (the API's 422s and the
 * runner's refusals both come from here). */
#include "core/egress.h"

#include <stdio.h>
#include <string.h>

#include "tap.h"

enum { OK, BAD };
enum { PUB, PRIV, FORB, NAME };

static const struct { const char *in; int parses; const char *canon; int kind; } rows[] = {
	{"example.com", OK, "example.com", NAME},
	{"Example.COM:443", OK, "example.com:443", NAME},
	{"a-b.c-d.e", OK, "a-b.c-d.e", NAME},
	{"localhost", OK, "localhost", NAME},
	{"203.0.113.7", OK, "203.0.113.7", PUB},
	{"203.0.113.0/24", OK, "203.0.113.0/24", PUB},
	{"203.0.113.0/24:8080", OK, "203.0.113.0/24:8080", PUB},
	{"0.0.0.0/0", OK, "0.0.0.0/0", FORB},          /* covers link-local: use mode open */
	{"128.0.0.0/2", OK, "128.0.0.0/2", FORB},
	{"192.0.2.0/24", OK, "192.0.2.0/24", PUB},
	{"8.0.0.0/7", OK, "8.0.0.0/7", PUB},
	{"8.0.0.0/4", BAD, NULL, 0},                    /* host bits set */
	{"10.1.2.3", OK, "10.1.2.3", PRIV},
	{"172.31.255.255", OK, "172.31.255.255", PRIV},
	{"172.32.0.1", OK, "172.32.0.1", PUB},
	{"127.0.0.1:80", OK, "127.0.0.1:80", PRIV},
	{"100.64.0.0/10", OK, "100.64.0.0/10", PRIV},
	{"224.0.0.1", OK, "224.0.0.1", PRIV},
	{"169.254.169.254", OK, "169.254.169.254", FORB},
	{"169.0.0.0/8", OK, "169.0.0.0/8", FORB},       /* contains link-local */
	{"203.0.113.1/24", BAD, NULL, 0},               /* host bits set */
	{"10.0.0.0/33", BAD, NULL, 0},
	{"10.0.0.0/", BAD, NULL, 0},
	{"10.0.0.0/08", BAD, NULL, 0},
	{"300.1.2.3", BAD, NULL, 0},
	{"1.2.3", BAD, NULL, 0},                        /* numeric last label, no address */
	{"0x7f.1", BAD, NULL, 0},
	{"010.1.1.1", BAD, NULL, 0},
	{"example.com:0", BAD, NULL, 0},
	{"example.com:65536", BAD, NULL, 0},
	{"example.com:", BAD, NULL, 0},
	{"example.com:+80", BAD, NULL, 0},
	{"example.com:080", BAD, NULL, 0},
	{"[2001:db8::1]:443", BAD, NULL, 0},
	{"2001:db8::1", BAD, NULL, 0},
	{"bad_name.com", BAD, NULL, 0},
	{"-a.com", BAD, NULL, 0},
	{"a-.com", BAD, NULL, 0},
	{"a..com", BAD, NULL, 0},
	{".com", BAD, NULL, 0},
	{"com.", BAD, NULL, 0},
	{"", BAD, NULL, 0},
	{"a b", BAD, NULL, 0},
	{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com", BAD, NULL, 0},
};

static int kind_of(const ah_egress_entry *e)
{
	if (e->is_name)
		return NAME;
	if (ah_egress_net_forbidden(e->addr, e->bits))
		return FORB;
	return ah_egress_net_private(e->addr, e->bits) ? PRIV : PUB;
}

int main(void)
{
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		ah_egress_entry e;
		const char *why = NULL;
		int rc = ah_egress_entry_parse(&e, rows[i].in, &why);
		if (rows[i].parses == BAD) {
			ok(rc != 0 && why && *why, "'%s' is refused (%s)", rows[i].in, why ? why : "-");
			continue;
		}
		char buf[AH_EGRESS_MAX_ENTRY + 1] = "";
		if (rc == 0)
			ah_egress_entry_format(&e, buf, sizeof buf);
		ok(rc == 0 && strcmp(buf, rows[i].canon) == 0 && kind_of(&e) == rows[i].kind,
		   "'%s' parses as '%s' (kind %d)", rows[i].in, buf, rc == 0 ? kind_of(&e) : -1);
	}
	/* The longest name there may be: 253 characters in labels of 63. */
	char name[300];
	memset(name, 'a', 253);
	name[63] = name[127] = name[191] = '.';
	name[253] = '\0';
	ah_egress_entry e;
	const char *why;
	ok(ah_egress_entry_parse(&e, name, &why) == 0, "a 253-character name parses");
	name[253] = 'a', name[254] = '\0';
	ok(ah_egress_entry_parse(&e, name, &why) != 0, "a 254-character name is refused");
	return tap_done();
}
