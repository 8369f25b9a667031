# Sourced by tests/install/run on the installed current version: the
# document's "Reloading and restarting" section, under load and with calls
# running. Uses inside, as_you, call, doc, journal, say and fail of run.

# wrk against the API through nginx while the document's reload runs, and a
# second reload: each request answered, none an error. 429s (the flood guard:
# every request comes from 127.0.0.1 here) are answers, counted apart.
inside apt-get -qq -y install wrk >/dev/null || fail "apt-get install wrk"
inside sh -c 'cat >/root/count.lua' <<'LUA'
local threads = {}
function setup(t) table.insert(threads, t) end
function init() failed = 0; throttled = 0 end
function response(status)
  if status == 429 then throttled = throttled + 1
  elseif status < 200 or status > 299 then failed = failed + 1 end
end
function done(s)
  local f, t = 0, 0
  for _, th in ipairs(threads) do f = f + th:get("failed"); t = t + th:get("throttled") end
  local e = s.errors
  io.write(string.format("requests %d failed %d throttled %d socket-errors %d\n",
    s.requests, f, t, e.connect + e.read + e.write + e.timeout))
end
LUA
master=$(inside systemctl show -p MainPID --value agenthost-api)
first=$(inside pgrep -P "$master" | sort | tr '\n' ' ')
inside sh -c 'wrk -t2 -c8 -d10s --timeout 30s -s /root/count.lua https://agents.example.com/api/v1/health >/root/wrk.out 2>&1' &
wrkpid=$!
sleep 2
say "docs/install.md, Reloading and restarting (reload) under wrk"
doc --section "## Reloading and restarting:1"
sleep 2
inside systemctl reload agenthost-api || fail "the second reload failed"
wait "$wrkpid" || fail "wrk: $(inside cat /root/wrk.out)"
result=$(inside tail -n 1 /root/wrk.out)
say "wrk across two reloads: $result"
read -r _ total _ failed _ _ _ errors <<<"$result"
[ "$total" -gt 50 ] && [ "$failed" = 0 ] && [ "$errors" = 0 ] || fail "requests failed across the reload: $result"
[ "$(inside systemctl show -p MainPID --value agenthost-api)" = "$master" ] || fail "the reload restarted the API"
# New workers: none of those before the reloads is left.
workers=$(inside pgrep -P "$master" | sort | tr '\n' ' ')
for w in $first; do
    case " $workers " in *" $w "*) fail "worker $w outlived two reloads" ;; esac
done

# A file the check refuses: the reload fails naming the key and its line,
# nothing is signalled, and the API serves on as it was. What the master did
# is in its log (one line per reload it took); its children are no measure:
# the second reload's new workers may still be starting.
reloads() { inside journalctl -u agenthost-api "_PID=$master" --no-pager -o cat | grep -c "$1" || true; }
for _ in $(seq 60); do [ "$(reloads 'reload: configuration .* read')" -ge 2 ] && break; sleep 0.5; done
taken=$(reloads 'reload: configuration .* read')
[ "$taken" -ge 2 ] || fail "the API's master logged $taken of the two reloads"
inside sh -c 'echo "crud_workerz = 2" >>/etc/agenthost/agenthost.conf'
line=$(inside sh -c 'wc -l </etc/agenthost/agenthost.conf')
! inside systemctl reload agenthost-api 2>/dev/null || fail "a reload with an unknown key succeeded"
inside journalctl -u agenthost-api --no-pager -o cat |
    grep -F "agenthost.conf:$line: unknown configuration key crud_workerz (did you mean crud_workers?)" ||
    fail "the refused reload's log does not name the key and its line"
sleep 1
[ "$(reloads 'reload: configuration .* read')" = "$taken" ] && [ "$(reloads 'reload refused')" = 0 ] ||
    fail "a refused reload reached the API's master"
inside curl -fsS -o /dev/null https://agents.example.com/api/v1/health || fail "the API stopped serving"
inside sed -i '/^crud_workerz/d' /etc/agenthost/agenthost.conf
say "reload: no request failed; a refused file named its key and line, the API served on"

# The runner restarted during two calls: the short one finishes within the
# grace (5 s here), the long one fails saying why, neither hangs; then the
# runner serves again.
call short 1500 &
shortpid=$!
call long 60000 &
longpid=$!
# Both in their sandboxes (node runs) before the restart.
for _ in $(seq 120); do [ "$(inside pgrep -c -x node || true)" -ge 2 ] && break; sleep 0.5; done
sleep 0.5
say "docs/install.md, Reloading and restarting (runner restart) during two calls"
doc --section "## Reloading and restarting:2"
wait "$shortpid" "$longpid" || true
for c in short long; do
    say "$c call: exit $(inside cat /home/you/$c.rc 2>/dev/null): $(inside cat /home/you/$c.out /home/you/$c.err 2>/dev/null)"
done
[ "$(inside cat /home/you/short.rc)" = 0 ] && inside grep -qx 'slept 1500' /home/you/short.out ||
    fail "the call within the runner's grace did not finish"
rc=$(inside cat /home/you/long.rc)
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "the call past the runner's grace: exit $rc"
inside grep -q 'runner was stopped or restarted' /home/you/long.err ||
    fail "the call past the runner's grace does not say the runner stopped"
[ "$(inside systemctl is-active agenthost-runner)" = active ] || fail "the runner is not back"
for _ in $(seq 30); do as_you 'agenthost invoke slow 10' 2>/dev/null | grep -qx 'slept 10' && break; sleep 1; done
as_you 'agenthost invoke slow 10' | grep -qx 'slept 10' || { journal; fail "no call succeeds after the runner's restart"; }
say "runner restart: the call within the grace finished, the one past it failed saying why"
