"""An invocation does only the work its agent needs (issue 31): what the
invoke worker asks MariaDB for one plain call of an agent without files,
mounts, session or budgets, read from the server's general log (the API
worker's own connection, found by the call's history INSERT). Each statement
is a round trip on every call's path; the lookup that authenticates the call
also reads what the call needs besides the agent (the budgets, the runner's
heartbeat, and for an ephemeral call of an agent without attachments its
secrets and the quota left), so two remain: that lookup, and the history
row with the budgets' charge (one CALL, one transaction: schema/035). A call
in a session, or of an agent with attachments, reads its environment
(secrets, session and files in one) as a third. Budget and takeover
behaviour itself is tested in test_invoke_budget.py, test_budgets.py and the
cluster kit."""
import hashlib
import json
import os
import secrets as pysecrets
import signal

import pytest

from agent_code import deployed_agent, needs_runner
from conftest import api_pids, db_query, wait_until

ECHO_JS = ("let b=''; process.stdin.on('data', d => b += d);"
           " process.stdin.on('end', () => process.stdout.write(b));\n")
# Not the call's own: the API-wide rate limiter's counting (every request's),
# the key's last_used_at (written once a minute), the history INSERT's
# triggers (run inside that statement: no round trip of their own).
NOT_THE_CALLS = ("rate_limits", "SET last_used_at", "NEW.")


def general_log(fn):
    """Runs fn with MariaDB's general log in its table; returns fn's result
    and the log's (thread_id, command_type, argument) rows."""
    db_query("SET GLOBAL log_output = 'TABLE'; TRUNCATE mysql.general_log;"
             " SET GLOBAL general_log = 1")
    try:
        out = fn()
    finally:
        db_query("SET GLOBAL general_log = 0")
    rows = db_query("SELECT thread_id, command_type, REPLACE(REPLACE(CONVERT(argument USING utf8mb4),"
                    " '\\n', ' '), '\\t', ' ') FROM mysql.general_log ORDER BY event_time")
    db_query("TRUNCATE mysql.general_log")
    return out, rows


def call_statements(client, slug, **body):
    """The statements the call's invoke worker ran for it, in order."""
    def call():
        r = client.post(f"/agents/{slug}/invoke", json={"prompt": "hi", **body}, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()["invocation_id"]
    inv_id, rows = general_log(call)
    # The only call while the log was on: its worker's connection wrote the row.
    mine = [t for t, kind, arg in rows if kind == "Execute" and ("INSERT INTO invocations" in arg
                                                                  or "CALL invocation_" in arg)]
    assert len(mine) == 1, [r for r in rows if "invocations" in r[2]]
    assert db_query(f"SELECT COUNT(*) FROM invocations WHERE id = '{inv_id}'") == [["1"]]
    return [arg for t, kind, arg in rows if t == mine[0] and kind in ("Execute", "Query")
            and not any(w in arg for w in NOT_THE_CALLS)]


def warm(client, slug, **body):
    for _ in range(2):  # the worker's statements prepared, the sandbox pool warm
        r = client.post(f"/agents/{slug}/invoke", json={"prompt": "x", **body}, timeout=120)
        assert r.status_code == 200, r.text


@needs_runner
def test_plain_call_runs_two_statements(client):
    a = deployed_agent(client, ECHO_JS)
    warm(client, a["slug"])
    stmts = call_statements(client, a["slug"])
    short = [s[:90] for s in stmts]
    assert len(stmts) == 2, short
    assert "FROM api_keys k" in stmts[0], short          # the lookup, with the environment
    assert "FROM secrets" in stmts[0], short
    # The history row and the spend (kept for budgets set later), together.
    assert "CALL invocation_finish" in stmts[1], short


@needs_runner
def test_a_call_in_a_session_reads_its_environment(client):
    """The session's state and files are the body's session_id's: the
    lookup, made before the body is read, cannot have them."""
    a = deployed_agent(client, ECHO_JS)
    warm(client, a["slug"], session_id="s1")
    stmts = call_statements(client, a["slug"], session_id="s1")
    short = [s[:90] for s in stmts]
    assert len(stmts) == 3, short
    assert "FROM sessions" in stmts[1] and "FROM secrets" in stmts[1], short


# Prints a sha256 of each S_ variable it was given.
SECRETS_JS = """
const crypto = require('crypto');
process.stdin.resume();
process.stdin.on('end', () => {
  const out = {};
  for (const [k, v] of Object.entries(process.env))
    if (k.startsWith('S_')) out[k] = crypto.createHash('sha256').update(v).digest('hex');
  process.stdout.write(JSON.stringify(out));
});
"""


def sha(v):
    return hashlib.sha256(v.encode()).hexdigest()


def env_seen(client, slug):
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "x"}, timeout=120)
    assert r.status_code == 200, r.text
    return json.loads(r.json()["response_content"])


@needs_runner
def test_an_ephemeral_call_has_its_secrets_as_they_are_now(client):
    """The secrets come with the lookup (and so from MariaDB's query cache
    while they stand): each change still applies to the next call."""
    a = deployed_agent(client, SECRETS_JS)
    sp = f"/agents/{a['slug']}/secrets"
    assert env_seen(client, a["slug"]) == {}
    one, two = pysecrets.token_hex(8), "two \"quoted\" ünïcode\n" + pysecrets.token_hex(8)
    assert client.post(sp, json={"key": "S_ONE", "value": one}).status_code == 201
    assert client.post(sp, json={"key": "S_TWO", "value": two}).status_code == 201
    assert env_seen(client, a["slug"]) == {"S_ONE": sha(one), "S_TWO": sha(two)}
    stmts = call_statements(client, a["slug"])
    assert len(stmts) == 2, [s[:90] for s in stmts]  # no statement of its own for them
    assert client.post(sp, json={"key": "S_ONE", "value": "changed"}).status_code == 201
    assert env_seen(client, a["slug"]) == {"S_ONE": sha("changed"), "S_TWO": sha(two)}
    assert client.delete(f"{sp}/S_TWO").status_code == 204
    assert env_seen(client, a["slug"]) == {"S_ONE": sha("changed")}


def new_workers(master):
    """SIGHUP to the API master: a new generation of workers, with new
    database connections (a session takes MariaDB's globals as they are)."""
    before = set(api_pids()[1])
    os.kill(master, signal.SIGHUP)
    assert wait_until(lambda: not before & set(api_pids()[1]), timeout=30), "the workers were not replaced"


@needs_runner
def test_secrets_past_what_the_lookup_carries_are_all_given(client):
    """The lookup carries the secrets as one aggregate, which MariaDB cuts at
    group_concat_max_len (1024 where an operator's server keeps MySQL's
    default): a cut list is read again with a statement of its own, and the
    agent gets every secret."""
    a = deployed_agent(client, SECRETS_JS)
    want = {}
    for i in range(4):
        v = pysecrets.token_hex(200)  # 400 bytes, 800 as hex: 4 make over 1024
        assert client.post(f"/agents/{a['slug']}/secrets",
                           json={"key": f"S_{i}", "value": v}).status_code == 201
        want[f"S_{i}"] = sha(v)
    assert env_seen(client, a["slug"]) == want
    (cap,), = db_query("SELECT @@GLOBAL.group_concat_max_len")
    master = api_pids()[0]
    db_query("SET GLOBAL group_concat_max_len = 1024")
    try:
        new_workers(master)
        assert env_seen(client, a["slug"]) == want
        stmts = call_statements(client, a["slug"])
        assert len(stmts) == 3 and "FROM secrets" in stmts[1], [s[:90] for s in stmts]
    finally:
        db_query(f"SET GLOBAL group_concat_max_len = {int(cap)}")
        new_workers(master)
    stmts = call_statements(client, a["slug"])
    assert len(stmts) == 2, [s[:90] for s in stmts]


STDERR_JS = ("let b=''; process.stdin.on('data', d => b += d);"
             " process.stdin.on('end', () => { process.stderr.write('note: ' + b + '\\n');"
             " process.stdout.write(b); });\n")


@needs_runner
def test_call_with_stderr_records_its_logs_in_the_same_round_trip(client):
    """Issue 29: keeping stderr costs no round trip: the history row and the
    logs row (and the budgets' charge) are one CALL (one transaction), not
    START TRANSACTION, two INSERTs and COMMIT."""
    a = deployed_agent(client, STDERR_JS)
    warm(client, a["slug"])
    stmts = call_statements(client, a["slug"])
    short = [s[:90] for s in stmts]
    assert len(stmts) == 2, short
    assert "CALL invocation_finish" in stmts[1], short
    inv = client.get(f"/agents/{a['slug']}/invocations").json()[0]
    logs = client.get(f"/agents/{a['slug']}/invocations/{inv['invocation_id']}/logs").json()
    assert logs["logs"] == "note: hi\n" and logs["truncated"] is False, logs


def qcache_hits():
    return int(db_query("SHOW GLOBAL STATUS LIKE 'Qcache_hits'")[0][1])


@needs_runner
def test_the_calls_lookup_is_answered_from_the_query_cache(client):
    """The lookup that authenticates a call reads the runner's heartbeat time,
    not its age (no NOW()): MariaDB's query cache then answers it until one
    of its rows changes. A heartbeat (every runner_heartbeat_seconds) is
    such a change, so of four calls in a row at most one misses."""
    (size,), = db_query("SELECT @@query_cache_type <> 'OFF' AND @@query_cache_size > 0")
    if size != "1":
        pytest.skip("this MariaDB has no query cache")
    a = deployed_agent(client, ECHO_JS)

    def call():
        r = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": "x"}, timeout=120)
        assert r.status_code == 200, r.text
    for _ in range(2):  # statements prepared, results cached
        call()
    before = qcache_hits()
    for _ in range(4):
        call()
    assert qcache_hits() - before >= 3


@needs_runner
def test_a_sessions_calls_read_their_environment_from_the_query_cache(client):
    """A session's call counts live outside its row (schema/033): a call in
    a session no longer changes the `sessions` table that the environment's
    statement reads, so the next call's is answered from the query cache as
    an ephemeral call's is (it was planned and run again on every session
    call: four calls in a row made at most four hits, all the lookup's). The
    counts are still kept, and a session that starts anew counts from 0."""
    (size,), = db_query("SELECT @@query_cache_type <> 'OFF' AND @@query_cache_size > 0")
    if size != "1":
        pytest.skip("this MariaDB has no query cache")
    a = deployed_agent(client, ECHO_JS)

    def call():
        r = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": "x", "session_id": "warm"},
                        timeout=120)
        assert r.status_code == 200, r.text
    for _ in range(2):  # the session made, statements prepared, results cached
        call()
    before = qcache_hits()
    for _ in range(4):
        call()
    assert qcache_hits() - before >= 6
    s = client.get(f"/agents/{a['slug']}/sessions").json()
    assert [(x["id"], x["invocation_count"]) for x in s] == [("warm", 6)], s
    # Ended and started again: a new session, counted from its first call.
    db_query(f"UPDATE sessions SET state = 'expired', sandbox_id = NULL WHERE agent_id = '{a['id']}'")
    call()
    s = client.get(f"/agents/{a['slug']}/sessions").json()
    assert s[0]["invocation_count"] == 1 and s[0]["last_invoked_at"], s
