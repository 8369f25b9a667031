"""Invocation logs (issue 29): the last 64 KiB of what an invocation's agent
wrote to stderr is kept with it, GET /agents/{slug}/invocations/{id}/logs
returns it, and a failed invocation's error says it is there. The agent's
secrets (and the model key, and the gateway's token: every value of the
environment the API sends) are replaced by "[redacted]" in the runner, on the
stream, before anything is logged or stored: a secret written in two pieces,
one cut by the start of the kept window and one cut by the program's end
never leave a piece of it. Warm and session calls keep their stderr too. The
logs go with the history (retention) and with the agent; another user's or
an unknown invocation is 404."""
import json
import os
import secrets
import time
import uuid

from agent_code import VAR, deployed_agent, needs_runner
from conftest import admin, db_query, wait_until
from test_warm import wait_warm

LOG = os.path.join(VAR, "log", "runner.log")
KEEP = 64 * 1024

# The prompt is JSON {"cmd", "name", "n"}; the secret is the env var "name".
LOGS_JS = r"""
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', () => {
  const q = JSON.parse(Buffer.concat(chunks).toString() || '{}');
  const s = process.env[q.name || 'NONE'] || '';
  const e = process.stderr;
  const done = code => { process.stdout.write('done'); process.exitCode = code; };
  switch (q.cmd) {
  case 'fail':
    e.write('why: the config file is missing\n', () => done(1));
    break;
  case 'split': { /* the secret in two writes, apart in time: two reads of the pipe */
    const k = q.n;
    e.write('token=' + s.slice(0, k), () => setTimeout(() =>
      e.write(s.slice(k) + ' end\n', () => done(0)), 300));
    break;
  }
  case 'window': /* the secret, then n bytes: the window's start falls in it */
    e.write('head ' + s + 'x'.repeat(q.n), () => done(0));
    break;
  case 'half': /* the first n bytes of the secret, then the end */
    e.write('oops ' + s.slice(0, q.n), () => done(2));
    break;
  case 'env':
    e.write(JSON.stringify(process.env) + '\n', () => done(0));
    break;
  default:
    e.write('said: ' + (q.text || '') + '\n', () => done(0));
  }
});
"""


# Started ahead (min_warm): writes to stdout and stderr before its prompt.
WARM_JS = r"""
process.stdout.write('t0=' + Date.now() + ';');
process.stderr.write('booting with ' + process.env.API_TOKEN + '\n');
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', () => {
  const q = JSON.parse(Buffer.concat(chunks).toString());
  process.stderr.write('said: ' + q.text + '\n', () => process.stdout.write('done'));
});
"""


def call(client, slug, status=200, **prompt):
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": json.dumps(prompt)}, timeout=120)
    assert r.status_code == status, r.text[:500]
    body = r.json()
    return body if status == 200 else body["invocation"]


def logs(client, slug, inv_id):
    r = client.get(f"/agents/{slug}/invocations/{inv_id}/logs")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"invocation_id", "logs", "truncated"} and body["invocation_id"] == inv_id
    return body


def pieces(secret, n=6):
    return [secret[i:i + n] for i in range(len(secret) - n + 1)]


def assert_no_piece(text, secret, n=6):
    for p in pieces(secret, n):
        assert p not in text, f"a piece of the secret ({p!r}) was kept"


def agent_with_secret(client, **fields):
    a = deployed_agent(client, LOGS_JS, **fields)
    secret = "sv-" + secrets.token_hex(24)
    r = client.post(f"/agents/{a['slug']}/secrets", json={"key": "API_TOKEN", "value": secret})
    assert r.status_code == 201, r.text
    return a, secret


@needs_runner
def test_failed_call_names_the_exit_and_its_logs(client):
    a = deployed_agent(client, LOGS_JS)
    res = call(client, a["slug"], 500, cmd="fail")
    inv = res["invocation_id"]
    assert res["error"].startswith("agent exited with status 1; its stderr is in the invocation's logs")
    assert f"/agents/{a['slug']}/invocations/{inv}/logs" in res["error"]
    got = logs(client, a["slug"], inv)
    assert got == {"invocation_id": inv, "logs": "why: the config file is missing\n", "truncated": False}
    # The history says the same.
    h = client.get(f"/agents/{a['slug']}/invocations").json()
    assert h[0]["invocation_id"] == inv and h[0]["error"] == res["error"]


@needs_runner
def test_success_keeps_stderr_and_silence_is_empty(client):
    a = deployed_agent(client, LOGS_JS)
    res = call(client, a["slug"], text="héllo")
    assert logs(client, a["slug"], res["invocation_id"])["logs"] == "said: héllo\n"
    # A program that writes nothing: empty logs, and a failure says so.
    b = deployed_agent(client)  # agent_code's TOOL_JS: "!nothing" writes nothing
    r = client.post(f"/agents/{b['slug']}/invoke", json={"prompt": "!nothing"}, timeout=120)
    assert r.status_code == 200, r.text
    got = logs(client, b["slug"], r.json()["invocation_id"])
    assert got["logs"] == "" and got["truncated"] is False


@needs_runner
def test_secret_split_across_two_writes_is_redacted(client):
    a, secret = agent_with_secret(client)
    res = call(client, a["slug"], cmd="split", name="API_TOKEN", n=len(secret) // 2)
    got = logs(client, a["slug"], res["invocation_id"])
    assert got["logs"] == "token=[redacted] end\n"
    assert_no_piece(got["logs"], secret)
    # Nor in the runner's log, which gets the same redacted stream.
    with open(LOG, encoding="utf-8", errors="replace") as f:
        assert secret[:12] not in f.read() and secret[-12:] not in open(LOG, errors="replace").read()


@needs_runner
def test_window_cut_inside_a_secret_keeps_no_piece(client):
    a, secret = agent_with_secret(client)
    # The last 64 KiB of what the agent wrote start 5 bytes before the
    # secret's end: kept raw, they would begin with those 5 bytes.
    res = call(client, a["slug"], cmd="window", name="API_TOKEN", n=KEEP - 5)
    got = logs(client, a["slug"], res["invocation_id"])
    assert got["truncated"] is True
    text = got["logs"]
    assert_no_piece(text, secret, 4)
    # Redacted first, then cut: the cut falls in "[redacted]", and the
    # window starts after it rather than with a piece of it.
    assert text == "x" * (KEEP - 5)


@needs_runner
def test_program_ending_inside_a_secret_leaves_no_piece(client):
    a, secret = agent_with_secret(client)
    res = call(client, a["slug"], 500, cmd="half", name="API_TOKEN", n=20)
    got = logs(client, a["slug"], res["invocation_id"])
    assert got["logs"] == "oops [redacted]"
    assert "agent exited with status 2" in res["error"]


@needs_runner
def test_every_value_of_the_environment_is_redacted(client):
    a, secret = agent_with_secret(client)
    r = client.post(f"/agents/{a['slug']}/secrets", json={"key": "OTHER", "value": "second-" + uuid.uuid4().hex})
    assert r.status_code == 201, r.text
    res = call(client, a["slug"], cmd="env")
    env = json.loads(logs(client, a["slug"], res["invocation_id"])["logs"])
    assert env["API_TOKEN"] == "[redacted]" and env["OTHER"] == "[redacted]"
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"  # not a secret: kept


@needs_runner
def test_session_and_warm_calls_keep_stderr(client):
    a = deployed_agent(client, LOGS_JS)
    sid = "logs-" + uuid.uuid4().hex[:8]
    for text in ("one", "two"):
        r = client.post(f"/agents/{a['slug']}/invoke", timeout=120,
                        json={"prompt": json.dumps({"text": text}), "session_id": sid})
        assert r.status_code == 200, r.text
        assert logs(client, a["slug"], r.json()["invocation_id"])["logs"] == f"said: {text}\n"
    # A warm process: what it wrote while it waited for its call (its secret
    # among it) is part of that call's logs, redacted.
    w = deployed_agent(client, WARM_JS, min_warm=1)
    secret = "sv-" + secrets.token_hex(20)
    assert client.post(f"/agents/{w['slug']}/secrets", json={"key": "API_TOKEN", "value": secret}).status_code == 201
    call(client, w["slug"], text="first")  # starts the warm process of the new environment
    wait_warm(w["id"], 1)
    sent = time.time() * 1000
    res = call(client, w["slug"], text="warm")
    t0 = int(res["response_content"].split(";")[0][3:])
    assert t0 < sent, "the call was not served by a warm process"
    assert logs(client, w["slug"], res["invocation_id"])["logs"] == "booting with [redacted]\nsaid: warm\n"


@needs_runner
def test_other_users_unknown_and_other_agents_invocations_are_404(client, other_client):
    a = deployed_agent(client, LOGS_JS)
    res = call(client, a["slug"], text="mine")
    inv = res["invocation_id"]
    # Another user: the agent is not theirs (as if it did not exist).
    r = other_client.get(f"/agents/{a['slug']}/invocations/{inv}/logs")
    assert r.status_code == 404 and r.json() == {"detail": "Agent not found"}
    # Another user's own agent of the same slug: the invocation is not its.
    r = other_client.post("/agents", json={"name": "x", "slug": a["slug"],
                                            "git_repo_url": "https://example.com/r.git"})
    assert r.status_code == 201, r.text
    r = other_client.get(f"/agents/{a['slug']}/invocations/{inv}/logs")
    assert r.status_code == 404 and r.json() == {"detail": "Invocation not found"}
    # The same user's other agent, and an unknown id.
    r = client.post("/agents", json={"name": "y", "git_repo_url": "https://example.com/r.git"})
    r = client.get(f"/agents/{r.json()['slug']}/invocations/{inv}/logs")
    assert r.status_code == 404 and r.json() == {"detail": "Invocation not found"}
    r = client.get(f"/agents/{a['slug']}/invocations/inv_{'0' * 22}/logs")
    assert r.status_code == 404 and r.json() == {"detail": "Invocation not found"}
    assert client.get(f"/agents/{a['slug']}/invocations/{inv}/logs").json()["logs"] == "said: mine\n"


@needs_runner
def test_logs_go_with_the_history_and_the_agent(client):
    a = deployed_agent(client, LOGS_JS)
    old = call(client, a["slug"], text="old")["invocation_id"]
    new = call(client, a["slug"], text="new")["invocation_id"]
    assert db_query(f"SELECT COUNT(*) FROM invocation_logs WHERE invocation_id IN ('{old}','{new}')") == [["2"]]
    db_query(f"UPDATE invocations SET created_at = NOW(3) - INTERVAL 40 DAY WHERE id = '{old}'")
    admin("purge-history", "--days", "30")
    assert client.get(f"/agents/{a['slug']}/invocations/{old}/logs").status_code == 404
    assert db_query(f"SELECT COUNT(*) FROM invocation_logs WHERE invocation_id = '{old}'") == [["0"]]
    assert logs(client, a["slug"], new)["logs"] == "said: new\n"
    assert client.delete(f"/agents/{a['slug']}").status_code == 204
    assert db_query(f"SELECT COUNT(*) FROM invocation_logs WHERE invocation_id = '{new}'") == [["0"]]



# Writes its secret to stderr, then exits unless its prompt comes within 0.5 s:
# a warm process of it dies waiting.
DIES_JS = r"""
process.stderr.write('waiting with ' + process.env.API_TOKEN + '\n');
const t = setTimeout(() => process.exit(3), 500);
process.stdin.on('data', () => {});
process.stdin.on('end', () => { clearTimeout(t); process.stdout.write('ok'); });
"""


@needs_runner
def test_warm_process_dead_before_its_call_is_logged_redacted(client):
    """A warm process that died waiting for a call: the runner logs what it
    wrote to stderr (why it died) with its secret redacted, like a call's."""
    w = deployed_agent(client, DIES_JS, min_warm=1)
    secret = "sv-" + secrets.token_hex(20)
    assert client.post(f"/agents/{w['slug']}/secrets", json={"key": "API_TOKEN", "value": secret}).status_code == 201
    offset = os.path.getsize(LOG)
    for _ in range(2):
        r = client.post(f"/agents/{w['slug']}/invoke", json={"prompt": "x"}, timeout=120)
        assert r.status_code == 200 and r.json()["response_content"] == "ok", r.text
        time.sleep(1.5)  # the warm process it left dies meanwhile

    def logged():
        with open(LOG, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")
    assert wait_until(lambda: "ended while it waited" in logged(), timeout=20), logged()[-2000:]
    text = logged()
    assert "[redacted]" in text and "waiting with" in text
    assert_no_piece(text, secret)
