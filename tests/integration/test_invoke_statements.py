"""An invocation does only the work its agent needs (issue 31): what the
invoke worker asks MariaDB for one plain call of an agent without files,
mounts, session or budgets, read from the server's general log (the API
worker's own connection, found by the call's history INSERT). Each statement
is a round trip on every call's path; the lookup that authenticates the call
also reads what the call needs besides the agent (the budgets, the runner's
heartbeat), so four remain: that lookup, the environment (secrets, session
and files in one), the history row, the budgets' charge. Budget and takeover
behaviour itself is tested in test_invoke_budget.py, test_budgets.py and the
cluster kit."""
import pytest

from agent_code import deployed_agent, needs_runner
from conftest import db_query

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


def call_statements(client, slug):
    """The statements the call's invoke worker ran for it, in order."""
    def call():
        r = client.post(f"/agents/{slug}/invoke", json={"prompt": "hi"}, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()["invocation_id"]
    inv_id, rows = general_log(call)
    # The only call while the log was on: its worker's connection wrote the row.
    mine = [t for t, kind, arg in rows if kind == "Execute" and ("INSERT INTO invocations" in arg
                                                                  or "CALL invocation_record" in arg)]
    assert len(mine) == 1, [r for r in rows if "invocations" in r[2]]
    assert db_query(f"SELECT COUNT(*) FROM invocations WHERE id = '{inv_id}'") == [["1"]]
    return [arg for t, kind, arg in rows if t == mine[0] and kind in ("Execute", "Query")
            and not any(w in arg for w in NOT_THE_CALLS)]


@needs_runner
def test_plain_call_runs_four_statements(client):
    a = deployed_agent(client, ECHO_JS)
    for _ in range(2):  # the worker's statements prepared, the sandbox pool warm
        assert client.post(f"/agents/{a['slug']}/invoke", json={"prompt": "x"},
                           timeout=120).status_code == 200
    stmts = call_statements(client, a["slug"])
    short = [s[:90] for s in stmts]
    assert len(stmts) == 4, short
    assert "FROM api_keys k" in stmts[0], short          # the call's own lookup
    assert "FROM secrets" in stmts[1], short             # environment, session, files
    assert "INSERT INTO invocations" in stmts[2], short  # the history row
    assert "INSERT INTO budget_spend" in stmts[3], short  # the spend, for budgets set later


STDERR_JS = ("let b=''; process.stdin.on('data', d => b += d);"
             " process.stdin.on('end', () => { process.stderr.write('note: ' + b + '\\n');"
             " process.stdout.write(b); });\n")


@needs_runner
def test_call_with_stderr_records_its_logs_in_the_same_round_trip(client):
    """Issue 29: keeping stderr costs no round trip: the history row and the
    logs row are one CALL (one transaction), not START TRANSACTION, two
    INSERTs and COMMIT."""
    a = deployed_agent(client, STDERR_JS)
    for _ in range(2):
        assert client.post(f"/agents/{a['slug']}/invoke", json={"prompt": "x"},
                           timeout=120).status_code == 200
    stmts = call_statements(client, a["slug"])
    short = [s[:90] for s in stmts]
    assert len(stmts) == 4, short
    assert "CALL invocation_record_logs" in stmts[2], short
    inv = client.get(f"/agents/{a['slug']}/invocations").json()[0]
    logs = client.get(f"/agents/{a['slug']}/invocations/{inv['invocation_id']}/logs").json()
    assert logs["logs"] == "note: hi\n" and logs["truncated"] is False, logs


def qcache_hits():
    return int(db_query("SHOW GLOBAL STATUS LIKE 'Qcache_hits'")[0][1])


@needs_runner
def test_the_calls_lookup_is_answered_from_the_query_cache(client):
    """The lookup that authenticates a call reads the runner's heartbeat time,
    not its age (no NOW()): MariaDB's query cache then answers it, and the
    environment's statement, until one of their rows changes. A heartbeat
    (every runner_heartbeat_seconds) is such a change, so of four calls in a
    row at most one or two miss."""
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
    # Both statements from the cache: 8; the lookup never from it: at most 4.
    assert qcache_hits() - before >= 6


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
