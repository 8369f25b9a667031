/* Fuzz target: an egress allow-list entry (lib/core/egress.c), as the API
 * reads it from a request and the runner from a run request. Input: the
 * entry's text. Properties: an accepted entry's canonical text parses again
 * to the same entry (what the API stores is what the runner enforces); a
 * name is lowercase letters, digits, '-' and '.', at most 253 characters;
 * a network has no host bits and 0-32 bits; a port is 0 or 1-65535; a
 * refused entry always says why. */
#include "core/egress.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(const ah_egress_entry *e)
{
	if (e->port < 0 || e->port > 65535 || e->bits < 0 || e->bits > 32)
		__builtin_trap();
	if (!e->is_name) {
		if (e->bits < 32 && (e->addr & (0xFFFFFFFFu >> e->bits)))
			__builtin_trap();
		return;
	}
	size_t n = strlen(e->name);
	if (n == 0 || n > AH_EGRESS_MAX_NAME)
		__builtin_trap();
	for (size_t i = 0; i < n; i++) {
		char c = e->name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
			__builtin_trap();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	ah_egress_entry e, again;
	const char *why = NULL;
	if (ah_egress_entry_parse(&e, s, &why) != 0) {
		if (!why || !*why)
			__builtin_trap();
		free(s);
		return 0;
	}
	check(&e);
	char canon[AH_EGRESS_MAX_ENTRY + 1];
	ah_egress_entry_format(&e, canon, sizeof canon);
	if (ah_egress_entry_parse(&again, canon, &why) != 0 || memcmp(&e, &again, sizeof e) != 0)
		__builtin_trap();
	(void)ah_egress_net_private(e.addr, e.bits);
	(void)ah_egress_net_forbidden(e.addr, e.bits);
	free(s);
	return 0;
}
