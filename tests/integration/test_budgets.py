"""Spend limits (issue 32): max_cost_usd_per_day and max_cost_usd_per_month on
an API key, an agent and the user, against the real stack.

Asserted: the fields are validated (a 422 naming the field for a negative
budget, more than 6 decimals, an exponent, a non-number) and change nothing
then; set, shown and cleared with null on each of the three; a call that would
start past a budget is refused with 402 naming the budget (scope, period,
limit, spend) and when it resets (the next UTC midnight or month, also as
Retry-After), is not recorded, and the tightest budget applies; GET /usage
shows what each budget has left; calls racing at the edge of a budget spend at
most one call's worth past it (the spend lives in MariaDB, admission is one
transaction); with the model gateway on, a call crossing its budget mid-run
has its model access ended at the crossing (later requests get an Anthropic
billing_error) and the invocation records it.
"""
import datetime
import json
import os
import signal
import threading
import uuid
from decimal import Decimal

import pytest

from agent_code import ECHO_JS, deployed_agent, exact, model_cost, needs_runner
from conftest import assert_422, call_held_at_its_charge, db_query, db_session, proc_stat, wait_until
from test_deploy import restart_runner, runner_pid

FIELDS = ("max_cost_usd_per_day", "max_cost_usd_per_month")


def next_midnight():
    now = datetime.datetime.now(datetime.timezone.utc)
    return (now + datetime.timedelta(days=1)).strftime("%Y-%m-%dT00:00:00Z")


def next_month():
    now = datetime.datetime.now(datetime.timezone.utc)
    y, m = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
    return f"{y:04d}-{m:02d}-01T00:00:00Z"


def key_id(client):
    prefix = client.key.split("_")[1]
    return next(k["id"] for k in client.get("/api-keys").json() if k["prefix"] == "ahk_" + prefix)


# ---- fields ----

# Raw JSON values: a number's digits reach the API as written.
BAD = [("-1", "greater_than_equal"), ('"-0.5"', "greater_than_equal"),
       ("0.1234567", "decimal_max_places"), ('"2.0000001"', "decimal_max_places"),
       ("1e3", "decimal_parsing"), ("true", "decimal_type"), ('"ten"', "decimal_parsing"),
       ("1000000", "decimal_parsing")]


@pytest.mark.parametrize("value,kind", BAD)
@pytest.mark.parametrize("field", FIELDS)
def test_bad_budgets_are_422_naming_the_field(client, make_agent, field, value, kind):
    agent = make_agent(max_cost_usd_per_day=5)
    kid = key_id(client)
    h = {"Content-Type": "application/json"}
    for method, path in (("patch", f"/agents/{agent['slug']}"), ("patch", f"/api-keys/{kid}"),
                         ("patch", "/users/me"), ("post", "/api-keys"), ("post", "/agents")):
        extra = {"name": "x" + uuid.uuid4().hex[:6], "git_repo_url": "https://example.com/r.git"} \
            if path == "/agents" else {}
        body = json.dumps(extra)[:-1] + (", " if extra else "") + f'"{field}": {value}}}'
        r = getattr(client, method)(path, data=body, headers=h)
        detail = assert_422(r, ("body", field))
        assert any(e["type"] == kind for e in detail), (path, detail)
    # Nothing changed.
    assert client.get(f"/agents/{agent['slug']}").json()["max_cost_usd_per_day"] == 5.0
    assert client.get("/users/me").json()[field] is None
    assert len(client.get("/agents").json()) == 1
    assert len(client.get("/api-keys").json()) == 1


def test_budgets_set_shown_and_cleared(client, make_agent):
    agent = make_agent(max_cost_usd_per_month="12.5")
    assert (agent["max_cost_usd_per_day"], agent["max_cost_usd_per_month"]) == (None, 12.5)
    h = {"Content-Type": "application/json"}
    r = client.patch(f"/agents/{agent['slug']}", data='{"max_cost_usd_per_day": 0.000001}', headers=h)
    assert r.status_code == 200, r.text
    assert exact(r)["max_cost_usd_per_day"] == Decimal("0.000001")
    assert r.json()["max_cost_usd_per_month"] == 12.5  # untouched
    r = client.patch(f"/agents/{agent['slug']}", json={"max_cost_usd_per_month": None, "name": "n2"})
    assert (r.json()["max_cost_usd_per_day"], r.json()["max_cost_usd_per_month"]) == (0.000001, None)

    r = client.post("/api-keys", json={"name": "capped", "max_cost_usd_per_day": "2.25"})
    assert r.status_code == 201, r.text
    k = r.json()["api_key"]
    assert (k["max_cost_usd_per_day"], k["max_cost_usd_per_month"]) == (2.25, None)
    r = client.patch(f"/api-keys/{k['id']}", json={"max_cost_usd_per_month": 40})
    assert r.status_code == 200, r.text
    assert (r.json()["max_cost_usd_per_day"], r.json()["max_cost_usd_per_month"]) == (2.25, 40.0)
    assert r.json()["name"] == "capped"
    listed = next(x for x in client.get("/api-keys").json() if x["id"] == k["id"])
    assert listed["max_cost_usd_per_month"] == 40.0
    r = client.patch(f"/api-keys/{k['id']}", json={"max_cost_usd_per_day": None})
    assert r.json()["max_cost_usd_per_day"] is None
    assert client.patch("/api-keys/key_nope", json={"name": "x"}).status_code == 404

    r = client.patch("/users/me", json={"max_cost_usd_per_day": 3, "max_cost_usd_per_month": 50})
    assert r.status_code == 200, r.text
    assert (r.json()["max_cost_usd_per_day"], r.json()["max_cost_usd_per_month"]) == (3.0, 50.0)
    assert client.get("/users/me").json()["max_cost_usd_per_month"] == 50.0
    r = client.patch("/users/me", json={"max_cost_usd_per_month": None})
    assert (r.json()["max_cost_usd_per_day"], r.json()["max_cost_usd_per_month"]) == (3.0, None)


def test_another_users_key_is_not_found(client, other_client):
    kid = key_id(other_client)
    assert client.patch(f"/api-keys/{kid}", json={"max_cost_usd_per_day": 1}).status_code == 404
    assert other_client.get("/api-keys").json()[0]["max_cost_usd_per_day"] is None


# ---- the command line ----

def test_cli_sets_and_shows_budgets(client, tmp_path):
    from test_cli import cli_env, run
    env = cli_env(tmp_path, client.key)
    r = run(env, "agents", "create", "capped", "--max-day", "1.5")
    assert r.returncode == 0, r.stderr
    assert "max usd/day:    1.5" in r.stdout
    kid = key_id(client)
    r = run(env, "keys", "update", kid, "--max-month", "20", "--max-day", "none")
    assert r.returncode == 0, r.stderr
    k = next(x for x in client.get("/api-keys").json() if x["id"] == kid)
    assert (k["max_cost_usd_per_day"], k["max_cost_usd_per_month"]) == (None, 20.0)
    assert "20.0" in run(env, "keys", "list").stdout
    r = run(env, "budget", "--max-month", "100")
    assert r.returncode == 0 and "max usd/month: 100.0" in r.stdout, r.stdout + r.stderr
    r = run(env, "usage")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("budgets:")[1].splitlines()
    assert any(line.split()[:3] == ["agent", "capped", "day"] for line in lines), r.stdout
    assert any(line.split()[:1] == ["key"] and "month" in line for line in lines), r.stdout
    r = run(env, "agents", "update", "capped", "--max-day", "0.1234567")
    assert r.returncode != 0 and "max_cost_usd_per_day" in r.stderr, r.stderr


# ---- admission ----

def spent(client, scope, period):
    b = [x for x in exact(client.get("/usage"))["budgets"] if x["scope"] == scope and x["period"] == period]
    assert len(b) == 1, b
    return b[0]


def history(client, slug):
    return len(client.get(f"/agents/{slug}/invocations").json())


@needs_runner
def test_call_past_a_budget_is_refused_with_402(client):
    slug = deployed_agent(client, ECHO_JS)["slug"]
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "hello budget"})
    assert r.status_code == 200, r.text
    c = exact(r)["total_cost_usd"]
    assert c > 0
    kid = key_id(client)

    # The key's daily budget is exactly what was spent: spent.
    assert client.patch(f"/api-keys/{kid}", json={"max_cost_usd_per_day": str(c)}).status_code == 200
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "hello budget"})
    assert r.status_code == 402, r.text
    b = exact(r)
    assert b["code"] == "budget_exceeded"
    assert "daily budget" in b["detail"] and "API key" in b["detail"]
    assert b["budget"] == {"scope": "key", "scope_id": kid, "period": "day", "limit_usd": c,
                           "spent_usd": c, "resets_at": next_midnight()}
    assert 0 < int(r.headers["Retry-After"]) <= 86400
    assert history(client, slug) == 1  # not recorded

    # The tightest applies: the agent's month and the user's day as well; the
    # month, which resets last, is named.
    assert client.patch(f"/agents/{slug}", json={"max_cost_usd_per_month": str(c / 2)}).status_code == 200
    assert client.patch("/users/me", json={"max_cost_usd_per_day": 100}).status_code == 200
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "hello budget"})
    assert r.status_code == 402, r.text
    assert r.json()["budget"]["scope"] == "agent" and r.json()["budget"]["period"] == "month"
    assert r.json()["budget"]["resets_at"] == next_month()
    assert "agent's monthly budget" in r.json()["detail"]

    # Cleared: the call runs again, and is charged to every budget.
    client.patch(f"/agents/{slug}", json={"max_cost_usd_per_month": None})
    client.patch(f"/api-keys/{kid}", json={"max_cost_usd_per_day": None})
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "hello budget"})
    assert r.status_code == 200, r.text
    u = spent(client, "user", "day")
    assert (u["spent_usd"], u["limit_usd"], u["remaining_usd"]) == (2 * c, 100, 100 - 2 * c)
    assert u["resets_at"] == next_midnight()

    # The user's own budget refuses too.
    client.patch("/users/me", json={"max_cost_usd_per_day": str(c)})
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "hello budget"})
    assert r.status_code == 402 and r.json()["budget"]["scope"] == "user", r.text
    assert spent(client, "user", "day")["remaining_usd"] == 0


@needs_runner
def test_usage_lists_each_budget_with_what_remains(client):
    slug = deployed_agent(client, ECHO_JS)["slug"]
    kid = key_id(client)
    client.patch(f"/agents/{slug}", json={"max_cost_usd_per_day": 1, "max_cost_usd_per_month": 5})
    client.patch(f"/api-keys/{kid}", json={"max_cost_usd_per_month": "0.5"})
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "what remains"})
    assert r.status_code == 200, r.text
    c = exact(r)["total_cost_usd"]
    got = {(b["scope"], b["period"]): b for b in exact(client.get("/usage"))["budgets"]}
    assert set(got) == {("agent", "day"), ("agent", "month"), ("key", "month")}
    assert got[("agent", "day")]["name"] == slug
    assert got[("agent", "month")]["remaining_usd"] == 5 - c
    assert got[("key", "month")]["spent_usd"] == c and got[("key", "month")]["scope_id"] == kid
    assert got[("key", "month")]["resets_at"] == next_month()


@needs_runner
def test_a_jwt_callers_budgets_without_a_key():
    """A call signed in with a JWT has no API key: its user's and its agent's
    budgets count, and apply."""
    import test_jwt
    if "jwt_hs256_secret_file" not in test_jwt.CONF:
        pytest.skip("the stack has no HS256 secret")
    from conftest import Client
    client = Client(test_jwt.hs256(test_jwt.claims()))
    slug = deployed_agent(client, ECHO_JS)["slug"]
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "signed in"})
    assert r.status_code == 200, r.text
    c = exact(r)["total_cost_usd"]
    client.patch("/users/me", json={"max_cost_usd_per_month": str(c)})
    assert spent(client, "user", "month")["spent_usd"] == c
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "signed in"})
    assert r.status_code == 402 and r.json()["budget"]["scope"] == "user", r.text


# ---- the race at the edge ----

def race(client, slug, n):
    """n calls fired at once; their statuses."""
    barrier, out = threading.Barrier(n), []

    def one():
        barrier.wait()
        r = client.post(f"/agents/{slug}/invoke", json={"prompt": "race to the edge"}, timeout=120)
        # 503 only when the runner had no room (nothing ran), never a failed admission.
        assert r.status_code != 503 or "runner" in r.json()["detail"], r.text
        out.append(r.status_code)
    ts = [threading.Thread(target=one) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(out) == n, "a call failed its assertion"
    return out


@needs_runner
@pytest.mark.parametrize("room", [Decimal("1.5"), Decimal("3.5")])
def test_calls_racing_at_the_edge_spend_one_call_past_it_at_most(client, room):
    """The budget allows `room` more calls; 8 fire at once. Whatever the
    interleaving, what the period spent stays within one call of the limit."""
    slug = deployed_agent(client, ECHO_JS)["slug"]
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "race to the edge"})
    assert r.status_code == 200, r.text
    c = exact(r)["total_cost_usd"]
    limit = (c + room * c).quantize(Decimal("0.000001"))
    r = client.patch(f"/agents/{slug}", json={"max_cost_usd_per_day": str(limit)})
    assert r.status_code == 200, r.text
    codes = race(client, slug, 8)
    assert set(codes) <= {200, 402, 503}, codes  # 503: the runner had no room: nothing ran
    assert codes.count(200) >= 1
    s = spent(client, "agent", "day")["spent_usd"]
    assert s == c * (1 + codes.count(200))
    assert s <= limit + c, (codes, s, limit)
    # And the next call, with nothing in flight, is refused only if spent.
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "race to the edge"})
    assert r.status_code == (402 if s >= limit else 200), r.text


def deadlocks():
    return int(db_query("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")[0][1])


# InnoDB refreshes information_schema.innodb_trx only when it was last read
# more than 0.1 s before: polled faster, it never changes.
POLL = {"timeout": 10, "interval": 0.3}


def rows_waiting_for_locks():
    return int(db_query("SELECT COUNT(*) FROM information_schema.innodb_trx"
                        " WHERE trx_state = 'LOCK WAIT'")[0][0])


@needs_runner
def test_an_admission_chosen_as_a_deadlocks_victim_is_run_again(client):
    """The server may roll an admission back while it locks its rows: a
    deadlock here, on a cluster another node's write set (which reports it
    at the result's fetch: a full run got a 500 so, see lib/db). The call
    must still be admitted, run and charged once.

    A transaction of the test's own holds a shared lock on the agent's month
    row (so the admission's INSERT IGNOREs before its transaction pass), the
    admission locks the day row and waits for the month row, and the test
    then asks for the day row: a cycle, and InnoDB rolls back the lighter
    transaction, the admission (the test's has written 300 rows first)."""
    slug = deployed_agent(client, ECHO_JS)["slug"]
    agent = client.get(f"/agents/{slug}").json()["id"]
    r = client.patch(f"/agents/{slug}", json={"max_cost_usd_per_day": "100",
                                               "max_cost_usd_per_month": "100"})
    assert r.status_code == 200, r.text
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "make the rows"})
    assert r.status_code == 200, r.text
    before = spent(client, "agent", "day")["spent_usd"]
    deadlocks_before = deadlocks()

    row = ("SELECT spent FROM budget_spend WHERE scope = 'agent' AND scope_id = '%s'"
           " AND period = '%s' AND period_start = %s %s;\n")
    heavy = uuid.uuid4().hex[:8]
    sql = db_session()
    out = []
    try:
        sql.stdin.write(
            "START TRANSACTION;\n"
            "INSERT INTO budget_spend (scope, scope_id, period, period_start) SELECT 'key',"
            f" CONCAT('key_heavy_{heavy}_', seq), 'day', UTC_DATE() FROM seq_1_to_300;\n"
            + row % (agent, "month", "DATE_FORMAT(UTC_DATE(), '%Y-%m-01')", "LOCK IN SHARE MODE"))
        sql.stdin.flush()
        assert wait_until(lambda: int(db_query(
            "SELECT COUNT(*) FROM information_schema.innodb_trx"
            " WHERE trx_rows_modified >= 300")[0][0]) == 1, **POLL)
        t = threading.Thread(target=lambda: out.append(client.post(
            f"/agents/{slug}/invoke", json={"prompt": "through the deadlock"}, timeout=60)))
        t.start()
        assert wait_until(lambda: rows_waiting_for_locks() == 1, **POLL), \
            "the admission never waited for the month row"
        sql.stdin.write(row % (agent, "day", "UTC_DATE()", "FOR UPDATE"))
        sql.stdin.flush()
        # The admission, rolled back, runs again and waits behind the test's
        # transaction, which now holds both rows; its end lets the call in.
        assert wait_until(lambda: rows_waiting_for_locks() == 1 or not t.is_alive(), **POLL)
        sql.stdin.write("ROLLBACK;\n")
        sql.stdin.close()
        t.join(60)
    finally:
        sql.kill()
        sql.wait()
    assert out and out[0].status_code == 200, out and out[0].text
    assert deadlocks() == deadlocks_before + 1, "no deadlock happened: nothing was tested"
    assert spent(client, "agent", "day")["spent_usd"] == before + exact(out[0])["total_cost_usd"]
    assert db_query(f"SELECT COUNT(*) FROM budget_spend WHERE scope_id LIKE 'key_heavy_{heavy}%'") \
        == [["0"]]


@needs_runner
def test_a_calls_history_row_and_its_charge_commit_together(client):
    """The history row and the budgets' charge are one transaction: while
    the charge waits for the user's spend rows (held by a transaction of the
    test's own), the call is not in the history either (a row committed
    before its charge was lost with a worker killed between the two); then
    both are there, the cost charged once."""
    slug = deployed_agent(client, ECHO_JS)["slug"]
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "the spend rows"})
    assert r.status_code == 200, r.text
    day = f"SELECT spent FROM budget_spend WHERE scope = 'agent' AND period = 'day' AND" \
          f" period_start = UTC_DATE() AND scope_id = (SELECT id FROM agents WHERE slug = '{slug}')"
    (before,), = db_query(day)
    prompt = "together " + uuid.uuid4().hex
    recorded = f"SELECT COUNT(*) FROM invocations WHERE prompt = '{prompt}'"

    def not_recorded_yet():
        assert db_query(recorded) == [["0"]], "the history row was committed before its charge"
    r = call_held_at_its_charge(client, slug, prompt, not_recorded_yet)
    assert db_query(recorded) == [["1"]]
    (after,), = db_query(day)
    assert Decimal(after) - Decimal(before) == Decimal(str(exact(r)["total_cost_usd"]))


# ---- the model gateway: access ends at the crossing ----

# Calls the model up to cmd.n times, one after the other, and prints each
# answer's status and body.
LOOP_JS = r"""
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', async () => {
  const cmd = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const out = [];
  for (let i = 0; i < cmd.n; i++) {
    const r = await fetch(process.env.ANTHROPIC_BASE_URL + '/v1/messages', {
      method: 'POST',
      headers: {'x-api-key': process.env.ANTHROPIC_API_KEY, 'anthropic-version': '2023-06-01',
                'content-type': 'application/json'},
      body: JSON.stringify({model: 'test-model', max_tokens: 64,
                            messages: [{role: 'user', content: 'SAY: ' + i}]}),
    });
    out.push({status: r.status, body: await r.text()});
  }
  process.stdout.write(JSON.stringify(out));
});
"""


@pytest.fixture
def gateway():
    from messages_standin import StandIn
    from test_deploy_faults import runner_with
    key = "sk-ant-test-" + uuid.uuid4().hex
    srv = StandIn(key=key).start()
    try:
        with runner_with(model_gateway="on", model_key_value=key, model_gateway_upstream=srv.url):
            yield srv
    finally:
        srv.stop()


@needs_runner
def test_gateway_ends_model_access_at_the_crossing(gateway, client):
    from messages_standin import USAGE_IN, USAGE_OUT
    answer = model_cost(USAGE_IN, USAGE_OUT, 0, 10)
    slug = deployed_agent(client, LOOP_JS)["slug"]
    limit = (answer * Decimal("2.5")).quantize(Decimal("0.000001"))
    r = client.patch(f"/agents/{slug}", json={"max_cost_usd_per_day": str(limit)})
    assert r.status_code == 200, r.text

    r = client.post(f"/agents/{slug}/invoke", json={"prompt": json.dumps({"n": 6})}, timeout=120)
    # The agent itself finished; the invocation records that its model access ended.
    assert r.status_code == 500, r.text
    inv = exact(r)["invocation"]
    assert inv["status"] == "failed"
    assert "model access ended: budget reached" in inv["error"], inv["error"]
    assert "agent's daily budget" in inv["error"]
    seen = json.loads(inv["response_content"])
    # Three answers: the third crossed the budget; no request after it left the sandbox.
    assert [a["status"] for a in seen] == [200, 200, 200, 402, 402, 402]
    err = json.loads(seen[3]["body"])
    assert err["type"] == "error" and err["error"]["type"] == "billing_error"
    assert "budget" in err["error"]["message"]
    assert len(gateway.messages()) == 3
    # Charged once, exactly: the gateway per answer, the API nothing more.
    assert inv["total_cost_usd"] == 3 * answer
    assert spent(client, "agent", "day")["spent_usd"] == 3 * answer
    assert spent(client, "agent", "day")["remaining_usd"] == 0
    hist = client.get(f"/agents/{slug}/invocations").json()
    assert "budget reached" in hist[0]["error"]

    # The next call does not start.
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": json.dumps({"n": 1})})
    assert r.status_code == 402, r.text
    assert len(gateway.messages()) == 3


@needs_runner
def test_a_new_day_starts_with_yesterdays_dearest_call(client):
    """Far from the edge, calls run side by side from the day's first: the
    day's row knows what a call may cost from yesterday's (without it, calls
    in flight would hold a budget's rest until the first of them ended)."""
    agent = deployed_agent(client, ECHO_JS)
    r = client.post(f"/agents/{agent['slug']}/invoke", json={"prompt": "race to the edge"})
    c = exact(r)["total_cost_usd"]
    db_query("DELETE FROM budget_spend WHERE scope = 'agent' AND scope_id = '%s'" % agent["id"])
    db_query("INSERT INTO budget_spend (scope, scope_id, period, period_start, spent, max_call)"
             f" VALUES ('agent', '{agent['id']}', 'day', UTC_DATE() - INTERVAL 1 DAY, 1, {c})")
    r = client.patch(f"/agents/{agent['slug']}", json={"max_cost_usd_per_day": str(100 * c)})
    assert r.status_code == 200, r.text
    codes = race(client, agent["slug"], 4)
    assert codes.count(200) == 4, codes


@needs_runner
def test_the_spend_purge_waits_for_no_current_row(client):
    """Spend rows of periods that are over go by a DELETE each runner makes
    at its start and every minute. It walked the whole table, locking every
    row on its way, so a call holding one user's current rows held it up,
    and it held up everyone's calls whose rows it had walked. Now it walks
    only rows that are over (schema/034): a transaction of the test's own
    holds a current row while the runner starts again, and the old rows
    still go at once."""
    r = client.post(f"/agents/{deployed_agent(client, ECHO_JS)['slug']}/invoke", json={"prompt": "x"})
    assert r.status_code == 200, r.text
    uid = client.get("/users/me").json()["id"]
    tag = uuid.uuid4().hex[:8]
    db_query("INSERT INTO budget_spend (scope, scope_id, period, period_start) VALUES"
             f" ('key', 'key_old_{tag}', 'day', '2020-01-01'),"
             f" ('key', 'key_old_{tag}', 'month', '2020-01-01')")
    old = f"SELECT COUNT(*) FROM budget_spend WHERE scope_id = 'key_old_{tag}'"
    sql = db_session()
    try:
        # The user's rows come first in the table's order ('user' < 'key').
        sql.stdin.write("START TRANSACTION;\nSELECT spent FROM budget_spend WHERE scope = 'user'"
                        f" AND scope_id = '{uid}' AND period = 'day' FOR UPDATE;\nSELECT 'held';\n")
        sql.stdin.flush()
        rows = [sql.stdout.readline().strip() for _ in range(2)]
        assert rows[1] == "held", rows
        pid = runner_pid()
        os.kill(pid, signal.SIGTERM)
        assert wait_until(lambda: not os.path.exists(f"/proc/{pid}") or proc_stat(pid)[0] == "Z",
                          timeout=60), "the runner did not stop"
        restart_runner(None)
        assert wait_until(lambda: db_query(old) == [["0"]], timeout=20), \
            "the purge waited for a current row held elsewhere"
    finally:
        sql.stdin.write("COMMIT;\n")
        sql.stdin.close()
        sql.wait(10)
