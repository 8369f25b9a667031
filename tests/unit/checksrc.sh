#!/bin/sh
# Source check (as curl's checksrc): fails if a banned C function is called in
# lib/ or handlers/. Word-boundary match, so snprintf, vsnprintf, ah_sprintf,
# fgets or strtoll never trip it. TAP output, one test per banned name.
# Usage: checksrc.sh [SOURCE_ROOT]   (default: the repository this script is in)
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
banned="sprintf strcpy strcat strtok atoi gets"
set -- $banned
echo "1..$#"
n=0 failed=0
for fn in $banned; do
    n=$((n + 1))
    # Comments are not exempt on purpose: a banned name in a comment is rare and
    # cheap to reword, and exempting comments would need a C lexer.
    hits=$(grep -rnE "(^|[^A-Za-z0-9_])$fn[[:space:]]*\(" "$root/lib" "$root/handlers" \
           --include='*.c' --include='*.h' 2>/dev/null)
    if [ -n "$hits" ]; then
        echo "not ok $n - no $fn( in lib/ or handlers/"
        printf '%s\n' "$hits" | sed "s|^$root/|# |"
        failed=1
    else
        echo "ok $n - no $fn( in lib/ or handlers/"
    fi
done
[ -d "$root/lib" ] && [ -d "$root/handlers" ] || { echo "# $root has no lib/ and handlers/"; exit 1; }
exit $failed
