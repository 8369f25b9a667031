/* What kind of address a connection would reach: the one policy shared by
 * every connection the service makes on a user's behalf (git clones in
 * lib/deploy, customer bucket endpoints in lib/buckets), so that a range
 * refused for one is refused for all. */
#ifndef AH_CORE_NETADDR_H
#define AH_CORE_NETADDR_H

#include <stdbool.h>

struct sockaddr;

enum ah_addr_kind { AH_ADDR_PUBLIC, AH_ADDR_PRIVATE, AH_ADDR_FORBIDDEN };

/* FORBIDDEN: link-local and cloud metadata (169.254/16, 100.100.100.200,
 * fe80::/10, fd00:ec2::254, and their v4-mapped forms), and any family but
 * IPv4/IPv6. PRIVATE: loopback, private, CGNAT, reserved, multicast. */
enum ah_addr_kind ah_addr_kind(const struct sockaddr *sa);

/* The kind of a literal IPv4 or IPv6 address (no brackets); -1 when text is
 * not one. */
int ah_addr_kind_text(const char *text);

/* Whether sa is this host's loopback (or the unspecified address, which
 * reaches it as well): where any local user may listen. */
bool ah_addr_is_loopback(const struct sockaddr *sa);

/* Whether sa is one of this host's own addresses (an interface's, loopback
 * included): a connection from there may come from any local user. True
 * when that cannot be told. */
bool ah_addr_is_own(const struct sockaddr *sa);

#endif
