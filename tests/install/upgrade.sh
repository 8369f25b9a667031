# Sourced by tests/install/run once the previous version ($OLD's .debs) is
# installed by docs/install.md: data made with it, then the upgrade the
# document's "Upgrades" section gives, first with the database's disk full
# (it stops at the migration; the old version serves on), then completed by
# the section's `dpkg --configure -a` with a call running. Uses inside,
# as_you, doc, say and fail of run.

# The database's disk, small: MariaDB's datadir moved onto a tmpfs of what it
# holds and 64 MB, which the upgrade below finds full. The old version's
# services start again on it before they get their data.
say "MariaDB's datadir on a small filesystem of its own"
inside sh -ec '
systemctl stop agenthost-api agenthost-runner
systemctl stop mariadb.socket mariadb.service     # no socket activation half way
mv /var/lib/mysql /var/lib/mysql.disk
mkdir -m 755 /var/lib/mysql
mount -t tmpfs -o size=$(($(du -sm /var/lib/mysql.disk | cut -f1) + 64))m,mode=755 tmpfs /var/lib/mysql
cp -a /var/lib/mysql.disk/. /var/lib/mysql/
chown mysql:mysql /var/lib/mysql
systemctl start mariadb.socket mariadb.service
systemctl start agenthost-runner agenthost-api' || { journal; fail "moving MariaDB's datadir"; }
# The previous version's units are Type=simple: started is not yet listening.
inside sh -c 'for i in $(seq 60); do curl -fsS -o /dev/null https://agents.example.com/api/v1/health && exit 0; sleep 0.5; done; exit 1' ||
    { journal; fail "the previous version's API did not answer after its restart"; }

# The previous version's data: history, a session, a file (and the two
# agents run made).
say "data on version ${FROM:0:12}: history, a session, a file"
as_you '
agenthost invoke my-agent "before the upgrade" >/dev/null
agenthost invoke my-agent "in a session" --session kept >/dev/null
agenthost invoke slow 10 --session kept >/dev/null
head -c 300000 /dev/urandom >blob.bin
agenthost files upload blob.bin >/dev/null' || { journal; fail "making data on the previous version"; }

# Rows of every table (but the migration lock and the rate-limit windows,
# which come and go) and the bytes of the managed files and uploaded code.
snapshot() {
    inside sh -c '
mariadb -N agenthost -e "SELECT table_name FROM information_schema.tables
    WHERE table_schema = \"agenthost\" AND table_name NOT IN (\"schema_lock\", \"rate_limits\")
    ORDER BY 1" | while read -r t; do echo "$t $(mariadb -N agenthost -e "SELECT COUNT(*) FROM \`$t\`")"; done
cd /var/lib/agenthost && echo "bytes $(find files data/code -type f -print0 | sort -z |
    xargs -0 -r cat | sha256sum | cut -c1-16) $(find files data/code -type f | wc -l) files"'
}
# A file older than a key: invoke_workers gone from it, as if it came later.
inside sed -i '/invoke_workers/d' /etc/agenthost/agenthost.conf
before=$(snapshot)
echo "$before" | tr '\n' ' '; echo

# The upgrade with the database's disk full (a file filling the tmpfs): it
# stops at a migration, saying which and that the disk is full, restarts
# nothing, and the old version goes on serving.
units() { inside systemctl show -p MainPID --value agenthost-api agenthost-runner | tr '\n' ' '; }
running=$(units)
inside sh -c 'dd if=/dev/zero of=/var/lib/mysql/filler bs=1M >/dev/null 2>&1; sync' || true
say "docs/install.md, Upgrades: to $(basename "$DEBS"/agenthost_*.deb), with the database's disk full"
rc=0
out=$(inside sh -c 'mkdir -p /root/install && cd /root/install &&
    exec python3 /root/docs/install-run --section "## Upgrades:1" /root/docs/install.md /root/debs' 2>&1) || rc=$?
echo "$out" | grep -E '^(agenthost|E: |dpkg: )' || true
[ "$rc" != 0 ] || fail "the upgrade went through with the database's disk full"
echo "$out" | grep -Eq 'agenthost-admin: migration [0-9]+[a-z]*_[a-z_]+\.sql (failed|ran but)' ||
    fail "the failed upgrade does not name the migration"
echo "$out" | grep -q "agenthost-admin: the database's disk is full" || fail "the failed upgrade does not say the disk is full"
echo "$out" | grep -q 'dpkg --configure -a' || fail "the failed upgrade does not say how to complete it"
[ "$(units)" = "$running" ] || fail "the failed upgrade restarted the services ($running -> $(units))"
inside dpkg-query -W -f='${Status}\n' agenthost | grep -q half-configured ||
    fail "agenthost is not half-configured after the failed upgrade: $(inside dpkg-query -W -f='${Status}' agenthost)"
code=$(inside curl -s -o /dev/null -w '%{http_code}' https://agents.example.com/api/v1/health)
[ "$code" = 200 ] || fail "the old version's /health answers $code with the disk full"
# Space again: the old version, on what the migrations applied, answers a
# call (history written) before the upgrade is completed.
inside rm -f /var/lib/mysql/filler
as_you 'agenthost invoke my-agent "disk freed, not yet upgraded" >/dev/null' ||
    { journal; fail "the old version does not answer on the half-migrated schema"; }
say "disk full: the upgrade stopped at its migration, the old version served on"

# The upgrade completed as the document says, with a call running (4 s; the
# runner's grace at its stop is 5 s).
inside rm -f /home/you/call.rc
call call 4000 &
callpid=$!
sleep 1
say "docs/install.md, Upgrades: dpkg --configure -a"
doc --section "## Upgrades:2"
inside agenthost-admin config check >/dev/null || fail "config check after the upgrade"
wait "$callpid" || true
rc=$(inside cat /home/you/call.rc 2>/dev/null || echo none)
out=$(inside cat /home/you/call.out /home/you/call.err 2>/dev/null || true)
say "the call running during the upgrade: exit $rc: $out"
case "$rc" in
0) echo "$out" | grep -q 'slept 4000' || fail "the call during the upgrade answered something else: $out" ;;
none|124) fail "the call running during the upgrade hung" ;;
*) [ -n "$(inside cat /home/you/call.err)" ] || fail "the call during the upgrade failed without a word" ;;
esac

# The key the file lacks takes its default, and the start says so.
inside journalctl -u agenthost-api -u agenthost-runner --no-pager -o cat |
    grep -F 'invoke_workers is not in this file (new since it was written?): it takes its default' ||
    fail "the start after the upgrade does not say that invoke_workers takes its default"

# Migrations: each applied once, all of the new version's.
inside dpkg-query -W -f='${Version}\n' agenthost | grep -qx "$(sed -n '1s/^agenthost (\([^)]*\)).*/\1/p' "$ROOT/debian/changelog")" ||
    fail "the upgrade did not install the current version"
[ "$(inside systemctl show -p Result --value agenthost-migrate)" = success ] || { journal; fail "agenthost-migrate failed"; }
twice=$(inside journalctl -u agenthost-migrate --no-pager -o cat | grep -o 'applied [^ ]*' | sort | uniq -d)
[ -z "$twice" ] || fail "migrations applied twice: $twice"
files=$(inside sh -c 'ls /usr/share/agenthost/schema/*.sql | wc -l')
rows=$(inside mariadb -N agenthost -e 'SELECT COUNT(*) FROM schema_migrations')
[ "$files" = "$rows" ] || fail "$rows migrations recorded, $files in the package"

# Nothing lost: every table has at least its rows (history gained the call),
# the bytes are the same.
after=$(snapshot)
echo "$after" | tr '\n' ' '; echo
while read -r t n; do
    [ "$t" = bytes ] && continue
    m=$(echo "$after" | awk -v t="$t" '$1 == t {print $2}')
    [ -n "$m" ] && [ "$m" -ge "$n" ] || fail "table $t: $n rows before the upgrade, ${m:-none} after"
done <<<"$before"
[ "$(echo "$before" | grep '^bytes')" = "$(echo "$after" | grep '^bytes')" ] ||
    fail "managed files or uploaded code changed across the upgrade"

# The agents answer without a redeploy; the session and the file are there.
as_you 'agenthost invoke my-agent "after the upgrade" >/dev/null && agenthost invoke slow 10 | grep -qx "slept 10"
agenthost sessions list my-agent | grep -q kept
agenthost files list | grep -q blob.bin' || { journal; fail "after the upgrade: agents, sessions or files"; }
say "upgraded from ${FROM:0:12}: migrations once, nothing lost, agents answer without a redeploy"
