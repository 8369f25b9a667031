/* The runner's TCP handshakes in flight, counted per peer (handshakes.c). */
#ifndef AH_RUNNER_HANDSHAKES_H
#define AH_RUNNER_HANDSHAKES_H

#include <stdbool.h>

struct sockaddr;

/* Handshakes in flight at once: each holds a connection thread for up to
 * AH_RAUTH_TIMEOUT_MS. */
#define AH_HS_MAX 32
/* ...and from one peer: an IPv4 address, an IPv6 /64, or this host itself
 * (any local user can connect from any of 127/8 and from each of its
 * addresses, so they are all one peer). */
#define AH_HS_MAX_PER_PEER 8

/* The peer of a connection, as handshakes are counted. */
typedef struct {
	unsigned char b[9]; /* family tag, then 4 or 8 address bytes, zero-padded */
} ah_hs_peer;

void ah_hs_peer_of(ah_hs_peer *out, const struct sockaddr *sa);
/* A handshake slot for peer; false when all are taken or the peer holds its
 * share. Each true is given back with ah_hs_give. */
bool ah_hs_take(const ah_hs_peer *peer);
void ah_hs_give(const ah_hs_peer *peer);

#endif
