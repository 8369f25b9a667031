/* See netaddr.h. The ranges are those of RFC 6890's special-purpose
 * registries, with link-local and the clouds' metadata addresses apart: those
 * no configuration opens. */
#include "core/netaddr.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
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

int ah_addr_kind_text(const char *text)
{
	struct sockaddr_in a4 = {.sin_family = AF_INET};
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
	if (inet_pton(AF_INET, text, &a4.sin_addr) == 1)
		return (int)ah_addr_kind((struct sockaddr *)&a4);
	if (inet_pton(AF_INET6, text, &a6.sin6_addr) == 1)
		return (int)ah_addr_kind((struct sockaddr *)&a6);
	return -1;
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
