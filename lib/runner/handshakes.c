/* See handshakes.h. Without a share per peer, one host (or one local user)
 * opening AH_HS_MAX connections and answering none would keep every API host
 * out for as long as it kept doing so. An API host's handshake takes one
 * round trip, so it rarely has more than a couple in flight. */
#include "runner/handshakes.h"
#include "core/netaddr.h"

#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>

enum { TAG_UNKNOWN, TAG_HOST, TAG_V4, TAG_V6 };

/* Rows with n > 0 are the peers with handshakes in flight (at most AH_HS_MAX). */
static struct {
	ah_hs_peer peer;
	int n;
} rows[AH_HS_MAX];
static int total;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

void ah_hs_peer_of(ah_hs_peer *out, const struct sockaddr *sa)
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	memset(out, 0, sizeof *out);
	if (!sa || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
		return; /* every peer of unknown address is one */
	if (ah_addr_is_own(sa)) {
		out->b[0] = TAG_HOST;
		return;
	}
	if (sa->sa_family == AF_INET) {
		out->b[0] = TAG_V4;
		memcpy(out->b + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return;
	}
	const unsigned char *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
	bool v4 = memcmp(a, mapped, 12) == 0;
	out->b[0] = v4 ? TAG_V4 : TAG_V6;
	memcpy(out->b + 1, v4 ? a + 12 : a, v4 ? 4 : 8);
}

bool ah_hs_take(const ah_hs_peer *peer)
{
	int row = -1, free_row = -1;
	bool ok = false;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < AH_HS_MAX && row < 0; i++) {
		if (rows[i].n > 0 && memcmp(&rows[i].peer, peer, sizeof *peer) == 0)
			row = i;
		else if (rows[i].n == 0 && free_row < 0)
			free_row = i;
	}
	if (row < 0 && free_row >= 0) {
		row = free_row;
		rows[row].peer = *peer;
	}
	/* A free row exists whenever total < AH_HS_MAX: each busy row holds one. */
	if (row >= 0 && total < AH_HS_MAX && rows[row].n < AH_HS_MAX_PER_PEER) {
		rows[row].n++;
		total++;
		ok = true;
	}
	pthread_mutex_unlock(&mu);
	return ok;
}

void ah_hs_give(const ah_hs_peer *peer)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < AH_HS_MAX; i++)
		if (rows[i].n > 0 && memcmp(&rows[i].peer, peer, sizeof *peer) == 0) {
			rows[i].n--;
			total--;
			break;
		}
	pthread_mutex_unlock(&mu);
}
