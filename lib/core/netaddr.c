/* See netaddr.h. The ranges are those of RFC 6890's special-purpose
 * registries, with link-local and the clouds' metadata addresses apart: those
 * no configuration opens. */
#include "core/netaddr.h"
#include "core/err.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

static bool v4_in(uint32_t a, uint32_t net, int bits)
{
	return (a >> (32 - bits)) == (net >> (32 - bits));
}

/* Link-local (169.254/16: AWS, GCP, Azure metadata at 169.254.169.254) and
 * Alibaba's metadata address. */
static bool v4_forbidden(uint32_t a)
{
	return v4_in(a, 0xA9FE0000, 16) || a == 0x646464C8;
}

static bool v4_private(uint32_t a)
{
	static const struct { uint32_t net; int bits; } nets[] = {
		{0x00000000, 8}, {0x0A000000, 8}, {0x64400000, 10}, {0x7F000000, 8},
		{0xAC100000, 12}, {0xC0000000, 24}, {0xC0000200, 24},
		{0xC0A80000, 16}, {0xC6120000, 15}, {0xC6336400, 24}, {0xCB007100, 24},
		{0xE0000000, 4}, {0xF0000000, 4},
	};
	for (size_t i = 0; i < sizeof(nets) / sizeof(nets[0]); i++)
		if (v4_in(a, nets[i].net, nets[i].bits))
			return true;
	return false;
}

static enum ah_addr_kind v4_kind(uint32_t a)
{
	if (v4_forbidden(a))
		return AH_ADDR_FORBIDDEN;
	return v4_private(a) ? AH_ADDR_PRIVATE : AH_ADDR_PUBLIC;
}

static enum ah_addr_kind v6_kind(const unsigned char *b)
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const unsigned char zero[12] = {0};
	static const unsigned char nat64[12] = {0, 0x64, 0xff, 0x9b};
	static const unsigned char aws[16] = {0xfd, 0, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54};
	uint32_t v4 = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
	/* v4-mapped and v4-compatible (and ::, ::1 among them): the v4 address is
	 * what is reached. */
	if (memcmp(b, mapped, 12) == 0 || memcmp(b, zero, 12) == 0)
		return v4 <= 1 ? AH_ADDR_PRIVATE : v4_kind(v4);
	if (memcmp(b, nat64, 12) == 0) /* a translator's, towards v4 */
		return v4_forbidden(v4) ? AH_ADDR_FORBIDDEN : AH_ADDR_PRIVATE;
	if ((b[0] == 0xfe && (b[1] & 0xc0) == 0x80) || memcmp(b, aws, 16) == 0)
		return AH_ADDR_FORBIDDEN;             /* fe80::/10, AWS fd00:ec2::254 */
	if ((b[0] & 0xfe) == 0xfc ||                  /* fc00::/7 unique local */
	    (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) ||  /* fec0::/10 site-local */
	    b[0] == 0xff ||                           /* multicast */
	    (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8))
		return AH_ADDR_PRIVATE;
	return AH_ADDR_PUBLIC;
}

enum ah_addr_kind ah_addr_kind(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return v4_kind(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	if (sa->sa_family == AF_INET6)
		return v6_kind(((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr);
	return AH_ADDR_FORBIDDEN;
}

/* ---- spellings ---------------------------------------------------------- */

/* One part of a legacy IPv4 address: 0x hex, 0 octal, else decimal. */
static bool v4_part(const char *p, size_t n, uint64_t *out)
{
	int base = 10;
	if (n >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
		n -= 2;
	} else if (n >= 2 && p[0] == '0') {
		base = 8;
		p++;
		n--;
	}
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		int d = isdigit((unsigned char)p[i]) ? p[i] - '0'
		        : isxdigit((unsigned char)p[i]) ? tolower((unsigned char)p[i]) - 'a' + 10 : 99;
		if (d >= base || v > 0xffffffffULL)
			return false;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	if (n == 0 && base != 16) /* "0x" alone is 0, an empty part is nothing */
		return false;
	*out = v;
	return true;
}

/* The WHATWG URL standard's IPv4 parser (what curl and glibc's inet_aton
 * accept too): up to 4 parts, the last filling the bytes left. */
static bool v4_parse(const char *s, size_t len, uint32_t *out)
{
	uint64_t parts[4];
	size_t np = 0;
	for (const char *p = s, *end = s + len; p <= end; np++) {
		const char *dot = memchr(p, '.', (size_t)(end - p));
		size_t n = (size_t)((dot ? dot : end) - p);
		if (np == 4 || !v4_part(p, n, &parts[np]))
			return false;
		p += n + 1;
	}
	uint64_t v = 0;
	for (size_t i = 0; i + 1 < np; i++) {
		if (parts[i] > 255)
			return false;
		v |= parts[i] << (8 * (3 - i));
	}
	if (parts[np - 1] >= (1ULL << (8 * (5 - np))))
		return false;
	*out = (uint32_t)(v | parts[np - 1]);
	return true;
}

/* The last label is a number (digits, or 0x and hex digits). */
static bool ends_in_number(const char *s, size_t len)
{
	const char *dot = NULL;
	for (size_t i = len; i > 0 && !dot; i--)
		if (s[i - 1] == '.')
			dot = s + i - 1;
	const char *l = dot ? dot + 1 : s;
	size_t n = (size_t)(s + len - l);
	if (n >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X')) {
		for (size_t i = 2; i < n; i++)
			if (!isxdigit((unsigned char)l[i]))
				return false;
		return true;
	}
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)l[i]))
			return false;
	return n > 0;
}

enum ah_addr_text ah_addr_parse(struct sockaddr_storage *out, const char *text)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	size_t len = strlen(text);
	if (strchr(text, ':')) {
		a6->sin6_family = AF_INET6;
		if (inet_pton(AF_INET6, text, &a6->sin6_addr) != 1)
			return strpbrk(text, "%") || strspn(text, "0123456789abcdefABCDEF:.") == len
			       ? AH_ADDR_TEXT_MALFORMED : AH_ADDR_TEXT_NAME;
	} else {
		if (len > 1 && text[len - 1] == '.')
			len--; /* "169.254.169.254." is that address to every resolver */
		if (!ends_in_number(text, len))
			return AH_ADDR_TEXT_NAME;
		uint32_t v;
		if (!v4_parse(text, len, &v))
			return AH_ADDR_TEXT_MALFORMED;
		a4->sin_family = AF_INET;
		a4->sin_addr.s_addr = htonl(v);
	}
	if (out)
		*out = ss;
	return AH_ADDR_TEXT_ADDRESS;
}

int ah_addr_kind_text(const char *text)
{
	struct sockaddr_storage ss;
	switch (ah_addr_parse(&ss, text)) {
	case AH_ADDR_TEXT_ADDRESS:
		return (int)ah_addr_kind((struct sockaddr *)&ss);
	case AH_ADDR_TEXT_MALFORMED:
		return -2;
	default:
		return -1;
	}
}

/* ---- the policy ---------------------------------------------------------- */

/* A v4-mapped IPv6 address as its IPv4 one; the port kept. */
static void unmap(struct sockaddr_storage *ss)
{
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	static const unsigned char mapped[12] = {[10] = 0xff, [11] = 0xff};
	if (ss->ss_family != AF_INET6 || memcmp(a6->sin6_addr.s6_addr, mapped, 12) != 0)
		return;
	struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = a6->sin6_port};
	memcpy(&a4.sin_addr, a6->sin6_addr.s6_addr + 12, 4);
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, &a4, sizeof(a4));
}

bool ah_addr_same(const struct sockaddr_storage *x, const struct sockaddr_storage *y)
{
	struct sockaddr_storage a = *x, b = *y;
	unmap(&a);
	unmap(&b);
	if (a.ss_family != b.ss_family)
		return false;
	if (a.ss_family == AF_INET)
		return ((struct sockaddr_in *)&a)->sin_addr.s_addr ==
		       ((struct sockaddr_in *)&b)->sin_addr.s_addr;
	return a.ss_family == AF_INET6 &&
	       memcmp(&((struct sockaddr_in6 *)&a)->sin6_addr, &((struct sockaddr_in6 *)&b)->sin6_addr,
	              16) == 0;
}

struct entry {
	struct sockaddr_storage net;
	int bits;
	long lo, hi;
};

static bool number(const char *s, size_t n, long max, long *out)
{
	char buf[8], *e;
	if (n == 0 || n >= sizeof(buf) || !isdigit((unsigned char)s[0]))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	long v = strtol(buf, &e, 10);
	*out = v;
	return *e == '\0' && v <= max;
}

/* "address[/bits][:port[-port]]", "[v6][/bits][:port[-port]]". */
static bool entry_parse(struct entry *out, const char *e, size_t len)
{
	char addr[64];
	const char *a = e, *a_end, *p;
	if (*e == '[') {
		a = e + 1;
		a_end = memchr(a, ']', len - 1);
		p = a_end ? a_end + 1 : NULL;
	} else {
		a_end = e + strcspn(e, "/:");
		if (a_end > e + len)
			a_end = e + len;
		p = a_end;
	}
	if (!a_end || a_end == a || (size_t)(a_end - a) >= sizeof(addr))
		return false;
	memcpy(addr, a, (size_t)(a_end - a));
	addr[a_end - a] = '\0';
	if (ah_addr_parse(&out->net, addr) != AH_ADDR_TEXT_ADDRESS)
		return false;
	unmap(&out->net);
	long max_bits = out->net.ss_family == AF_INET ? 32 : 128, bits = max_bits;
	const char *end = e + len;
	if (p < end && *p == '/') {
		size_t n = strcspn(p + 1, ":");
		if (p + 1 + n > end)
			n = (size_t)(end - p - 1);
		if (!number(p + 1, n, max_bits, &bits))
			return false;
		p += 1 + n;
	}
	out->bits = (int)bits;
	out->lo = 1;
	out->hi = 65535;
	if (p < end) {
		const char *dash = memchr(p, '-', (size_t)(end - p));
		if (*p != ':' || !number(p + 1, (size_t)((dash ? dash : end) - p - 1), 65535, &out->lo))
			return false;
		out->hi = out->lo;
		if (dash && !number(dash + 1, (size_t)(end - dash - 1), 65535, &out->hi))
			return false;
	}
	return out->lo >= 1 && out->lo <= out->hi;
}

static bool prefix_eq(const unsigned char *x, const unsigned char *y, int bits)
{
	int whole = bits / 8, rest = bits % 8;
	if (memcmp(x, y, (size_t)whole) != 0)
		return false;
	unsigned char mask = (unsigned char)(0xff << (8 - rest));
	return rest == 0 || ((x[whole] ^ y[whole]) & mask) == 0;
}

static bool entry_matches(const struct entry *en, const struct sockaddr_storage *ss)
{
	if (en->net.ss_family != ss->ss_family)
		return false;
	const unsigned char *x, *y;
	long port;
	if (ss->ss_family == AF_INET) {
		x = (const unsigned char *)&((const struct sockaddr_in *)&en->net)->sin_addr;
		y = (const unsigned char *)&((const struct sockaddr_in *)ss)->sin_addr;
		port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
	} else {
		x = ((const struct sockaddr_in6 *)&en->net)->sin6_addr.s6_addr;
		y = ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
		port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	}
	return prefix_eq(x, y, en->bits) && en->lo <= port && port <= en->hi;
}

/* Calls fn on each entry of list; stops at the first it returns true for. */
static bool each_entry(const char *list, bool (*fn)(const char *e, size_t n, void *ud), void *ud)
{
	const char *p = list ? list : "";
	while (*p) {
		p += strspn(p, ", \t");
		size_t n = strcspn(p, ", \t");
		if (n > 0 && fn(p, n, ud))
			return true;
		p += n;
	}
	return false;
}

static bool listed_one(const char *e, size_t n, void *ud)
{
	struct entry en;
	return entry_parse(&en, e, n) && entry_matches(&en, ud);
}

enum ah_addr_kind ah_addr_policy_check(const ah_addr_policy *p, const struct sockaddr *sa)
{
	enum ah_addr_kind k = ah_addr_kind(sa);
	if (k != AH_ADDR_PRIVATE)
		return k;
	if (p->allow_private)
		return AH_ADDR_PUBLIC;
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, sa, sa->sa_family == AF_INET ? sizeof(struct sockaddr_in)
	                                         : sizeof(struct sockaddr_in6));
	unmap(&ss);
	return each_entry(p->allow_hosts, listed_one, &ss) ? AH_ADDR_PUBLIC : AH_ADDR_PRIVATE;
}

struct bad_entry {
	char *out;
	size_t n;
};

static bool bad_one(const char *e, size_t n, void *ud)
{
	struct entry en;
	struct bad_entry *b = ud;
	if (entry_parse(&en, e, n))
		return false;
	snprintf(b->out, b->n, "%.*s", (int)n, e);
	return true;
}

int ah_addr_list_check(const char *allow_hosts, char *bad, size_t n)
{
	struct bad_entry b = {bad, n};
	return each_entry(allow_hosts, bad_one, &b) ? AH_EINVALID : 0;
}

/* 127/8 and 0/8 (0.0.0.0 reaches this host too), ::1 and ::, and their
 * v4-mapped forms. */
bool ah_addr_is_loopback(const struct sockaddr *sa)
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const unsigned char zero[15] = {0};
	uint32_t a;
	if (sa->sa_family == AF_INET) {
		a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
	} else if (sa->sa_family == AF_INET6) {
		const unsigned char *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		if (memcmp(b, zero, 15) == 0 && b[15] <= 1)
			return true;
		if (memcmp(b, mapped, 12) != 0)
			return false;
		a = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
	} else {
		return false;
	}
	return v4_in(a, 0x7F000000, 8) || v4_in(a, 0x00000000, 8);
}

/* IPv4 (a v4-mapped IPv6 address as its IPv4 one) or IPv6 bytes of sa; 0
 * for another family. */
static size_t addr_bytes(const struct sockaddr *sa, unsigned char out[16])
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (sa->sa_family == AF_INET) {
		memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return 4;
	}
	if (sa->sa_family != AF_INET6)
		return 0;
	const unsigned char *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
	if (memcmp(b, mapped, 12) == 0) {
		memcpy(out, b + 12, 4);
		return 4;
	}
	memcpy(out, b, 16);
	return 16;
}

bool ah_addr_is_own(const struct sockaddr *sa)
{
	unsigned char want[16], have[16];
	size_t n = addr_bytes(sa, want);
	struct ifaddrs *ifs = NULL;
	bool found = false;
	if (ah_addr_is_loopback(sa))
		return true;
	/* Unknown: counted as this host's, the cautious answer for both callers. */
	if (n == 0 || getifaddrs(&ifs) != 0)
		return true;
	for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next)
		if (i->ifa_addr && addr_bytes(i->ifa_addr, have) == n && memcmp(want, have, n) == 0)
			found = true;
	freeifaddrs(ifs);
	return found;
}

/* netaddr.h */
int ah_addr_host_kind(const char *host, bool bracketed, long port, const ah_addr_policy *pol)
{
	size_t n = strlen(host);
	if (strcasecmp(host, "localhost") == 0 || strcasecmp(host, "localhost.") == 0 ||
	    (n > 10 && strcasecmp(host + n - 10, ".localhost") == 0) ||
	    (n > 11 && strcasecmp(host + n - 11, ".localhost.") == 0))
		host = "127.0.0.1";
	struct sockaddr_storage ss;
	enum ah_addr_text t = ah_addr_parse(&ss, host);
	if (t == AH_ADDR_TEXT_MALFORMED || (bracketed && (t != AH_ADDR_TEXT_ADDRESS ||
	                                                  ss.ss_family != AF_INET6)))
		return -2;
	if (t == AH_ADDR_TEXT_NAME)
		return -1;
	if (ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
	return (int)ah_addr_policy_check(pol, (struct sockaddr *)&ss);
}
