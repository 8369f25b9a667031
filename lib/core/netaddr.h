/* What kind of address a connection would reach: the one policy shared by
 * every connection the service makes on a user's behalf (git clones in
 * lib/deploy, customer bucket endpoints in lib/buckets), so that a range
 * refused for one is refused for all. */
#ifndef AH_CORE_NETADDR_H
#define AH_CORE_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>


struct sockaddr;

enum ah_addr_kind { AH_ADDR_PUBLIC, AH_ADDR_PRIVATE, AH_ADDR_FORBIDDEN };

/* FORBIDDEN: link-local and cloud metadata (169.254/16, 100.100.100.200,
 * fe80::/10, fd00:ec2::254, and their v4-mapped forms), and any family but
 * IPv4/IPv6. PRIVATE: loopback, private, CGNAT, reserved, multicast. */
enum ah_addr_kind ah_addr_kind(const struct sockaddr *sa);

/* A host as every resolver reads it. ADDRESS: an IPv6 literal (no brackets)
 * or an IPv4 one in any spelling getaddrinfo, curl and browsers take (the
 * WHATWG URL standard's IPv4 parser): dotted quad, fewer parts
 * (169.254.43518), each part decimal, octal with a leading 0 or hex with 0x
 * (0251.0376.0251.0376, 0xa9fea9fe, 2852039166), one trailing dot. MALFORMED:
 * the last label is a number but the whole is no address ("1.2.3.256",
 * "08"): resolvers disagree on such a name, so it is refused rather than
 * guessed. NAME: anything else. out (may be NULL) gets the address, port 0. */
enum ah_addr_text { AH_ADDR_TEXT_NAME, AH_ADDR_TEXT_ADDRESS, AH_ADDR_TEXT_MALFORMED };
enum ah_addr_text ah_addr_parse(struct sockaddr_storage *out, const char *text);

/* x and y are one address, ports aside (a v4-mapped IPv6 address is its
 * IPv4 one). */
bool ah_addr_same(const struct sockaddr_storage *x, const struct sockaddr_storage *y);

/* The kind of a literal address (ah_addr_parse's ADDRESS); -1 when text is a
 * name, -2 when it is MALFORMED. */
int ah_addr_kind_text(const char *text);

/* Which private addresses an operator opened for one kind of connection:
 * all of them (development only), and a list of "address[/bits][:port[-port]]"
 * entries, comma or space separated, "[v6]" in brackets ("127.0.0.1:9000",
 * "10.0.0.0/8", "[fd00::5]:443"), compared with the address and port a
 * connection reaches (an address is one in any spelling ah_addr_parse
 * reads; a v4-mapped IPv6 address is its IPv4 one). */
typedef struct ah_addr_policy {
	bool allow_private;
	const char *allow_hosts;
} ah_addr_policy;

/* AH_ADDR_PUBLIC when a connection to sa (with its port) is allowed: a
 * public address, or a private one the policy opens; otherwise its kind.
 * Link-local and metadata addresses are never allowed. */
enum ah_addr_kind ah_addr_policy_check(const ah_addr_policy *p, const struct sockaddr *sa);

/* The kind of a URL's host under p: a literal address in any spelling, with
 * the URL's port, is checked against the policy; "localhost" and names under
 * it are loopback. -1: a name (to be checked on each connection's address);
 * -2: malformed (or a bracketed host that is not IPv6). Shared by the bucket
 * endpoints and the webhook URLs. */
int ah_addr_host_kind(const char *host, bool bracketed, long port, const ah_addr_policy *p);

/* allow_hosts' entries are all well formed; else AH_EINVALID naming the first
 * bad one (for a setting's check at start-up). */
int ah_addr_list_check(const char *allow_hosts, char *bad, size_t n);

/* Whether sa is this host's loopback (or the unspecified address, which
 * reaches it as well): where any local user may listen. */
bool ah_addr_is_loopback(const struct sockaddr *sa);

/* Whether sa is one of this host's own addresses (an interface's, loopback
 * included): a connection from there may come from any local user. True
 * when that cannot be told. */
bool ah_addr_is_own(const struct sockaddr *sa);

#endif
