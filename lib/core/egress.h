/* An agent's egress allow-list (issue 32): the entries of
 * `network.allow`, as the API checks them and the runner turns them into a
 * sandbox's firewall. One parser for both ends, so that what the API accepts
 * is exactly what the runner enforces.
 *
 * An entry is "host[:port]" or "a.b.c.d[/bits][:port]": a DNS name (the
 * runner resolves it when it makes the sandbox and pins the answer), or an
 * IPv4 address or network. Without a port every port is allowed. IPv6 is
 * off in sandboxes, so an IPv6 entry is refused. */
#ifndef AH_CORE_EGRESS_H
#define AH_CORE_EGRESS_H

#include <stdbool.h>
#include <stdint.h>

#define AH_EGRESS_MAX_ENTRIES 64
#define AH_EGRESS_MAX_ENTRY 260   /* a 253-character name and ":65535" */
#define AH_EGRESS_MAX_NAME 253

typedef struct ah_egress_entry {
	bool is_name;
	char name[AH_EGRESS_MAX_NAME + 1]; /* lowercase; is_name */
	uint32_t addr;                     /* host order, the network's first address */
	int bits;                          /* 0..32 */
	int port;                          /* 0: any */
} ah_egress_entry;

/* Parses one entry; on failure returns -1 and *why says what is wrong (a
 * static string for a 422's msg). */
int ah_egress_entry_parse(ah_egress_entry *out, const char *text, const char **why);

/* The entry's canonical text ("10.1.0.0/16:443", "example.com"): what the
 * API stores and shows. buf holds AH_EGRESS_MAX_ENTRY + 1. */
void ah_egress_entry_format(const ah_egress_entry *e, char *buf, unsigned long cap);

/* Loopback, private, CGNAT, reserved, multicast: refused unless the
 * operator allows private egress (egress_allow_private). */
bool ah_egress_net_private(uint32_t addr, int bits);
/* Link-local (cloud metadata): refused whatever the settings say. */
bool ah_egress_net_forbidden(uint32_t addr, int bits);

#endif
