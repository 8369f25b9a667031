/* See egress.h. */
#include "core/egress.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint32_t net; int bits; } v4net;

/* The ranges the sandbox's host firewall drops (lib/sandbox/net.c). */
static const v4net PRIVATE[] = {
	{0x00000000, 8}, {0x0A000000, 8}, {0x64400000, 10}, {0x7F000000, 8},
	{0xAC100000, 12}, {0xC0000000, 24}, {0xC0A80000, 16}, {0xC6120000, 15},
	{0xE0000000, 3},
};
static const v4net FORBIDDEN[] = { {0xA9FE0000, 16} };

static uint32_t mask_of(int bits)
{
	return bits == 0 ? 0 : 0xFFFFFFFFu << (32 - bits);
}

/* Two networks overlap when the wider one contains the other's start. */
static bool overlaps(uint32_t a, int abits, uint32_t b, int bbits)
{
	int bits = abits < bbits ? abits : bbits;
	return (a & mask_of(bits)) == (b & mask_of(bits));
}

static bool any_overlap(const v4net *list, size_t n, uint32_t addr, int bits)
{
	for (size_t i = 0; i < n; i++)
		if (overlaps(addr, bits, list[i].net, list[i].bits))
			return true;
	return false;
}

bool ah_egress_net_private(uint32_t addr, int bits)
{
	return any_overlap(PRIVATE, sizeof PRIVATE / sizeof PRIVATE[0], addr, bits);
}

bool ah_egress_net_forbidden(uint32_t addr, int bits)
{
	return any_overlap(FORBIDDEN, sizeof FORBIDDEN / sizeof FORBIDDEN[0], addr, bits);
}

/* 1..max decimal digits without a sign or leading zero; -1 if not. */
static long small_number(const char *s, size_t n, long max)
{
	if (n == 0 || n > 5 || (n > 1 && s[0] == '0'))
		return -1;
	long v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v <= max ? v : -1;
}

static bool name_ok(const char *s, size_t n)
{
	size_t label = 0;
	if (n == 0 || n > AH_EGRESS_MAX_NAME)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '.') {
			if (label == 0 || s[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if (!(alnum || (c == '-' && label > 0)) || ++label > 63)
			return false;
	}
	return label > 0 && s[n - 1] != '-';
}

/* The last label is all digits: the text means an address, and must be one. */
static bool looks_numeric(const char *s, size_t n)
{
	size_t i = n;
	while (i > 0 && s[i - 1] != '.')
		i--;
	if (i == n)
		return false;
	for (size_t j = i; j < n; j++)
		if (s[j] < '0' || s[j] > '9')
			return false;
	return true;
}

static int parse_cidr(ah_egress_entry *out, const char *s, size_t n, const char **why)
{
	char buf[32];
	const char *slash = memchr(s, '/', n);
	size_t alen = slash ? (size_t)(slash - s) : n;
	*why = "Input should be a valid IPv4 address or CIDR";
	if (alen >= sizeof buf)
		return -1;
	memcpy(buf, s, alen);
	buf[alen] = '\0';
	struct in_addr a;
	if (inet_pton(AF_INET, buf, &a) != 1)
		return -1;
	long bits = slash ? small_number(slash + 1, n - alen - 1, 32) : 32;
	if (bits < 0)
		return -1;
	out->addr = ntohl(a.s_addr);
	out->bits = (int)bits;
	if (out->addr & ~mask_of(out->bits)) {
		*why = "CIDR has host bits set";
		return -1;
	}
	return 0;
}

int ah_egress_entry_parse(ah_egress_entry *out, const char *text, const char **why)
{
	memset(out, 0, sizeof *out);
	size_t n = strlen(text);
	*why = "Entry is too long";
	if (n == 0 || n > AH_EGRESS_MAX_ENTRY) {
		*why = n ? *why : "Entry is empty";
		return -1;
	}
	const char *colon = strchr(text, ':');
	if (strchr(text, '[') || (colon && strchr(colon + 1, ':'))) {
		*why = "IPv6 is not supported (sandboxes have no IPv6)";
		return -1;
	}
	size_t hlen = colon ? (size_t)(colon - text) : n;
	if (colon) {
		long port = small_number(colon + 1, n - hlen - 1, 65535);
		if (port <= 0) {
			*why = "Port should be 1-65535";
			return -1;
		}
		out->port = (int)port;
	}
	if (memchr(text, '/', hlen) || looks_numeric(text, hlen))
		return parse_cidr(out, text, hlen, why);
	if (!name_ok(text, hlen)) {
		*why = "Input should be a host name or an IPv4 address or CIDR";
		return -1;
	}
	out->is_name = true;
	for (size_t i = 0; i < hlen; i++)
		out->name[i] = (char)(text[i] >= 'A' && text[i] <= 'Z' ? text[i] + 32 : text[i]);
	out->name[hlen] = '\0';
	return 0;
}

void ah_egress_entry_format(const ah_egress_entry *e, char *buf, unsigned long cap)
{
	char host[AH_EGRESS_MAX_NAME + 4];
	if (e->is_name) {
		snprintf(host, sizeof host, "%s", e->name);
	} else {
		struct in_addr a = { htonl(e->addr) };
		char s[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &a, s, sizeof s);
		if (e->bits == 32)
			snprintf(host, sizeof host, "%s", s);
		else
			snprintf(host, sizeof host, "%s/%d", s, e->bits);
	}
	if (e->port)
		snprintf(buf, cap, "%s:%d", host, e->port);
	else
		snprintf(buf, cap, "%s", host);
}
