#!/bin/sh
# An option row that names a member of another type, or a member that does not
# exist, must not build (cli.h's AH_OPT_* check it): the compiler refuses both,
# and accepts the right row (TAP). Arguments: the C compiler, the source root.
set -u
cc=$1 src=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
flags="-std=c11 -fsyntax-only -I$src/lib $(pkg-config --cflags json-c)"
row() {
	printf '#include "cli/cli.h"\nstruct x { const char *name; bool force; struct ah_cli_int n; };\n' > "$dir/t.c"
	printf 'const struct ah_cli_opt o[] = {%s};\n' "$1" >> "$dir/t.c"
	$cc $flags "$dir/t.c" > "$dir/out" 2>&1
}
n=0 fail=0
check() {  # what, expected status (0 builds, 1 refused), row
	n=$((n + 1))
	row "$3"; got=$?
	[ "$got" -ne 0 ] && got=1
	if [ "$got" -eq "$2" ]; then echo "ok $n - $1"; else echo "not ok $n - $1"; sed 's/^/# /' "$dir/out"; fail=1; fi
}
check "rows of the right types build" 0 \
	'AH_OPT_STRING("name", 0, "N", struct x, name, "h"), AH_OPT_BOOL("force", 0, struct x, force, "h"), AH_OPT_INT("n", 0, "N", 0, 9, struct x, n, "h")'
check "a flag into a string member is refused" 1 'AH_OPT_BOOL("name", 0, struct x, name, "h")'
check "a string into a bool member is refused" 1 'AH_OPT_STRING("force", 0, "V", struct x, force, "h")'
check "a number into a string member is refused" 1 'AH_OPT_INT("name", 0, "N", 0, 9, struct x, name, "h")'
check "a misspelt member is refused" 1 'AH_OPT_BOOL("force", 0, struct x, forse, "h")'
echo "1..$n"
exit $fail
