/* Fuzz target: the token counter over whatever an agent answers. Property:
 * never more tokens than bytes (each token covers at least one byte). */
#include "tokenize/tokenize.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef AH_FUZZ_VOCAB
#error "AH_FUZZ_VOCAB: the vocabulary file"
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	char why[256];
	if (ah_tokenize_init(AH_FUZZ_VOCAB, why, sizeof why) != 0) {
		fprintf(stderr, "tokenizer: %s\n", why);
		exit(1);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t n = 0;
	if (ah_tokenize_count(&n, (const char *)data, size) == 0 && n > size)
		__builtin_trap();
	return 0;
}
