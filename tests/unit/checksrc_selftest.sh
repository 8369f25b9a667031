#!/bin/sh
# checksrc.py must catch what it claims to: a tree with one break of each rule
# fails every rule, and naming each break on its own line (TAP).
set -u
here=$(dirname "$0")
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/lib/a" "$tree/lib/b" "$tree/handlers"
cat > "$tree/handlers/h.h" <<'C'
int h(void);
C
cat > "$tree/lib/a/a.c" <<'C'
#include "b/b.h"
#include "handlers/h.h"
void f(const char *s, char *d)
{
	strcpy(d, s);
	long v = strtol(s, NULL, 10);
	chmod(s, 0600);
	fcntl(3, F_SETFD, FD_CLOEXEC);
	write(1, s, 1);
}
C
printf '#include "a/a.h"\n' > "$tree/lib/b/b.c"
printf 'int a;\n' > "$tree/lib/a/a.h"
printf 'int b;\n' > "$tree/lib/b/b.h"
# a function of 90 lines and a file of over 500
{ printf 'void g(void)\n{\n'; i=0; while [ $i -lt 90 ]; do printf '\tx();\n'; i=$((i+1)); done
  printf '}\n'; i=0; while [ $i -lt 420 ]; do printf '/* filler */\n'; i=$((i+1)); done; } > "$tree/lib/b/long.c"
out=$("$here/checksrc.py" "$tree"); rc=$?
echo "1..3"
[ $rc -ne 0 ] && echo "ok 1 - a tree with faults fails" || echo "not ok 1 - a tree with faults fails"
n=$(printf '%s\n' "$out" | grep -c '^not ok')
[ "$n" -eq 7 ] && echo "ok 2 - every one of the seven rules caught its fault" ||
    { echo "not ok 2 - every one of the seven rules caught its fault ($n did)"; printf '%s\n' "$out" | sed 's/^/# /'; }
for want in strcpy strtol chmod fcntl write long.c 'g' handlers; do
    printf '%s\n' "$out" | grep '^#' | grep -q "$want" || { echo "not ok 3 - $want named"; exit 0; }
done
echo "ok 3 - each fault named"
