/* The runner's TCP handshakes in flight per peer (lib/runner/handshakes.c):
 * one peer holding its share leaves the rest to the others, every address of
 * this host is one peer (a local user picks any of 127/8), an IPv6 /64 is one
 * peer, and slots come back when handshakes end. TAP. */
#include "runner/handshakes.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

static ah_hs_peer peer(const char *text)
{
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	ah_hs_peer p;
	if (inet_pton(AF_INET, text, &a4->sin_addr) == 1)
		a4->sin_family = AF_INET;
	else if (inet_pton(AF_INET6, text, &a6->sin6_addr) == 1)
		a6->sin6_family = AF_INET6;
	ah_hs_peer_of(&p, (struct sockaddr *)&ss);
	return p;
}

/* How many slots peer text gets when it asks for n more. */
static int take(const char *text, int n)
{
	ah_hs_peer p = peer(text);
	int got = 0;
	for (int i = 0; i < n; i++)
		got += ah_hs_take(&p);
	return got;
}

static void give(const char *text, int n)
{
	ah_hs_peer p = peer(text);
	for (int i = 0; i < n; i++)
		ah_hs_give(&p);
}

int main(void)
{
	ok(take("127.0.0.1", 40) == AH_HS_MAX_PER_PEER, "one address gets its share, not all %d",
	   AH_HS_MAX);
	ok(take("127.0.0.2", 1) == 0 && take("::1", 1) == 0 && take("0.0.0.0", 1) == 0,
	   "other loopback addresses are the same peer: this host");
	ok(take("203.0.113.7", 1) == 1, "another peer still gets a slot");
	ok(take("2001:db8:1:2::1", AH_HS_MAX_PER_PEER) == AH_HS_MAX_PER_PEER &&
	   take("2001:db8:1:2:ffff::9", 1) == 0, "an IPv6 /64 is one peer");
	ok(take("2001:db8:1:3::1", 1) == 1, "the next /64 is another");
	ok(take("::ffff:203.0.113.7", AH_HS_MAX_PER_PEER) == AH_HS_MAX_PER_PEER - 1,
	   "a v4-mapped address is its IPv4 address");
	/* In flight now: 8 + 1 + 8 + 1 + 7 = 25 of 32. */
	ok(take("198.51.100.1", 8) == 7, "and all peers together get at most %d", AH_HS_MAX);
	ok(take("198.51.100.2", 1) == 0, "a new peer waits when all are taken");
	give("127.0.0.1", AH_HS_MAX_PER_PEER);
	ok(take("198.51.100.2", 1) == 1, "slots come back when handshakes end");
	ok(take("127.0.0.9", AH_HS_MAX_PER_PEER) == AH_HS_MAX_PER_PEER - 1,
	   "and this host gets its share again, within the total");
	return tap_done();
}
