/* Splits a fuzz input in two at its first newline: many boundaries take two
 * strings (a query and a body, a key set and a token). Both parts are
 * NUL-terminated copies the caller frees (the second may contain NULs; its
 * length is given). */
#ifndef AH_FUZZ_SPLIT_H
#define AH_FUZZ_SPLIT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int fuzz_split(const uint8_t *data, size_t size, char **a, char **b, size_t *blen)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t alen = nl ? (size_t)(nl - data) : size;
	*blen = nl ? size - alen - 1 : 0;
	*a = malloc(alen + 1);
	*b = malloc(*blen + 1);
	if (!*a || !*b) {
		free(*a);
		free(*b);
		return -1;
	}
	memcpy(*a, data, alen);
	(*a)[alen] = '\0';
	if (*blen)
		memcpy(*b, nl + 1, *blen);
	(*b)[*blen] = '\0';
	/* a query or header never holds a NUL: cut there, as the worker's C strings do */
	(*a)[strlen(*a)] = '\0';
	return 0;
}

#endif
