"""Asynchronous invocations and cancel (issue 28): "async": true answers 202
with the invocation id and status "running" at once; GET
/agents/{slug}/invocations/{id} shows the call running and then its record,
exactly as the history holds it; POST …/cancel stops a running call (SIGTERM,
then SIGKILL after the grace period), which is recorded "cancelled" and billed
for its prompt and the output it wrote; cancelling a finished call is a 422
naming the id. The call does not hold an invoke worker: more calls than
invoke_workers are accepted at once. A runner killed mid-call and an owner
process killed mid-call (an API restart) each end the call "failed" with the
reason, never "running" forever, though nobody reads them: the history
listing shows them failed. "stream" and "async" together is a 422 naming
the field, and nothing is recorded."""
import json
import os
import signal
import time

import pytest

from agent_code import VAR, deployed_agent, needs_runner
from conftest import BUILD, Client, create_user, proc_stat, wait_until
from test_deploy import restart_runner, runner_pid

# The prompt is JSON {"n", "ms"}: n lines, one every ms milliseconds. On
# SIGTERM it writes "bye" and exits 0 (unless "stubborn": it ignores SIGTERM).
TICKS_JS = r"""
let d = '';
process.stdin.on('data', c => d += c).on('end', () => {
  const q = JSON.parse(d || '{}');
  if (q.stubborn) process.on('SIGTERM', () => process.stdout.write('ignored;'));
  else process.on('SIGTERM', () => process.stdout.write('bye', () => process.exit(0)));
  let i = 0;
  const t = setInterval(() => {
    process.stdout.write('tick' + i + '\n');
    if (++i >= q.n) { clearInterval(t); process.stdout.write('done'); }
  }, q.ms || 100);
});
"""


def start(client, slug, status=202, **body):
    body.setdefault("prompt", json.dumps({"n": 3, "ms": 100}))
    r = client.post(f"/agents/{slug}/invoke", json=dict(body, **{"async": True}), timeout=30)
    assert r.status_code == status, r.text
    return r


def get(client, slug, inv):
    r = client.get(f"/agents/{slug}/invocations/{inv}")
    assert r.status_code == 200, r.text
    return r.json()


def finished(client, slug, inv, timeout=60):
    got = {}

    def done():
        got["r"] = get(client, slug, inv)
        return got["r"]["status"] != "running"
    assert wait_until(done, timeout=timeout, interval=0.2), got
    return got["r"]


@needs_runner
def test_async_answers_at_once_and_get_shows_running_then_the_record(client):
    a = deployed_agent(client, TICKS_JS)
    slug = a["slug"]
    r = start(client, slug, prompt=json.dumps({"n": 5, "ms": 400}))
    body = r.json()
    assert set(body) == {"invocation_id", "session_id", "status", "created_at"}
    assert body["status"] == "running"
    inv = body["invocation_id"]
    assert r.headers["Location"] == f"/api/v1/agents/{slug}/invocations/{inv}"
    # The rate-limit headers, as any invocation: it counted.
    assert int(r.headers["X-RateLimit-Remaining"]) < int(r.headers["X-RateLimit-Limit"])
    running = get(client, slug, inv)
    assert running["status"] == "running" and running["invocation_id"] == inv
    assert running["cancel_requested"] is False
    rec = finished(client, slug, inv)
    assert rec["status"] == "completed" and rec["error"] is None
    assert rec["response_content"] == "".join(f"tick{i}\n" for i in range(5)) + "done"
    assert rec["session_id"] == body["session_id"] and rec["created_at"] == body["created_at"]
    assert rec["total_cost_usd"] > 0 and rec["output_tokens"] > 0
    # Exactly the history's entry.
    hist = client.get(f"/agents/{slug}/invocations").json()
    assert [h for h in hist if h["invocation_id"] == inv] == [rec]


@needs_runner
def test_async_in_a_session_keeps_its_state(client):
    js = r"""
const fs = require('fs');
let d = '';
process.stdin.on('data', c => d += c).on('end', () => {
  let n = 0;
  try { n = +fs.readFileSync('/tmp/count'); } catch (e) {}
  fs.writeFileSync('/tmp/count', String(n + 1));
  process.stdout.write('call ' + (n + 1));
});
"""
    a = deployed_agent(client, js)
    slug = a["slug"]
    first = start(client, slug, prompt="x", session_id="s-async").json()
    assert first["session_id"] == "s-async"
    assert finished(client, slug, first["invocation_id"])["response_content"] == "call 1"
    second = start(client, slug, prompt="x", session_id="s-async").json()
    assert finished(client, slug, second["invocation_id"])["response_content"] == "call 2"


def stream_until_output(client, slug, prompt):
    """A streamed call, read until its first output: the agent runs its loop
    (a cancel now reaches its SIGTERM handler). Returns (id, the rest)."""
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": prompt, "stream": True},
                    stream=True, timeout=120)
    lines = r.iter_lines()
    inv = None
    for line in lines:
        if line.startswith(b'data: {"invocation_id"') and inv is None:
            inv = json.loads(line[6:])["invocation_id"]
        if line.startswith(b'data: {"text"'):
            break
    return inv, lines


def last_event(lines):
    name = None
    for line in lines:
        if line.startswith(b"event: "):
            name = line[7:].decode()
        elif line.startswith(b"data: "):
            data = json.loads(line[6:])
    return name, data


@needs_runner
def test_cancel_stops_an_async_call_and_bills_what_ran(client):
    a = deployed_agent(client, TICKS_JS)
    slug = a["slug"]
    inv = start(client, slug, prompt=json.dumps({"n": 1000, "ms": 200})).json()["invocation_id"]
    time.sleep(3)
    r = client.post(f"/agents/{slug}/invocations/{inv}/cancel")
    assert r.status_code == 200, r.text
    rec = r.json()
    assert rec["status"] == "cancelled", rec
    assert rec["error"] == "cancelled on request (POST .../cancel)"
    assert "done" not in (rec["response_content"] or "")
    assert rec["input_tokens"] > 0 and rec["total_cost_usd"] > 0  # billed for what ran
    assert get(client, slug, inv) == rec
    # Cancelling it again: it is finished.
    r = client.post(f"/agents/{slug}/invocations/{inv}/cancel")
    assert r.status_code == 422, r.text
    d = r.json()["detail"]
    assert d[0]["loc"] == ["path", "id"] and "already finished (status: cancelled)" in d[0]["msg"]
    assert get(client, slug, inv) == rec  # unchanged


@needs_runner
def test_cancel_sends_sigterm_to_the_agent_and_bills_its_output(client):
    a = deployed_agent(client, TICKS_JS)
    slug = a["slug"]
    inv, lines = stream_until_output(client, slug, json.dumps({"n": 1000, "ms": 200}))
    r = client.post(f"/agents/{slug}/invocations/{inv}/cancel")
    assert r.status_code == 200, r.text
    rec = r.json()
    out = rec["response_content"]
    assert rec["status"] == "cancelled"
    assert out.startswith("tick0\n") and out.endswith("bye"), out  # its SIGTERM handler ran
    assert rec["output_tokens"] > 0 and rec["total_cost_usd"] > 0
    name, data = last_event(lines)
    assert name == "error" and data["invocation"]["status"] == "cancelled"


@needs_runner
@pytest.mark.slow
def test_cancel_kills_a_program_that_ignores_sigterm(client):
    a = deployed_agent(client, TICKS_JS)
    slug = a["slug"]
    prompt = json.dumps({"n": 1000, "ms": 200, "stubborn": True})
    inv, lines = stream_until_output(client, slug, prompt)
    r = client.post(f"/agents/{slug}/invocations/{inv}/cancel")
    assert r.status_code in (200, 202), r.text
    name, data = last_event(lines)  # the stream ends: SIGKILL after the grace
    rec = finished(client, slug, inv, timeout=30)
    assert rec["status"] == "cancelled", rec
    assert "ignored;" in rec["response_content"]  # it got SIGTERM, then SIGKILL


@needs_runner
def test_cancel_of_a_finished_call_is_422_and_unknown_is_404(client, other_client):
    a = deployed_agent(client, TICKS_JS)
    slug = a["slug"]
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": json.dumps({"n": 1})}, timeout=60)
    assert r.status_code == 200, r.text
    inv = r.json()["invocation_id"]
    r = client.post(f"/agents/{slug}/invocations/{inv}/cancel")
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["path", "id"]
    assert "status: completed" in r.json()["detail"][0]["msg"]
    assert client.post(f"/agents/{slug}/invocations/inv_nope/cancel").status_code == 404
    assert client.get(f"/agents/{slug}/invocations/inv_nope").status_code == 404
    # Another user sees neither the call nor the agent.
    assert other_client.get(f"/agents/{slug}/invocations/{inv}").status_code == 404
    assert other_client.post(f"/agents/{slug}/invocations/{inv}/cancel").status_code == 404


@needs_runner
def test_stream_and_async_together_is_422_and_records_nothing(client):
    a = deployed_agent(client, TICKS_JS)
    slug = a["slug"]
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "x", "async": True, "stream": True})
    assert r.status_code == 422, r.text
    d = r.json()["detail"]
    assert [e["loc"] for e in d] == [["body", "stream"]]
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "x", "async": "yes"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "async"], r.text
    assert client.get(f"/agents/{slug}/invocations").json() == []


@needs_runner
@pytest.mark.slow
def test_more_async_calls_than_invoke_workers_are_accepted(client):
    """invoke_workers (16 in the test config) are not held by asynchronous
    calls: 18 calls that each run about 6 s are all accepted while the first
    ones still run, and each ends recorded. rate_limit_invoke is per user, so
    two users with an agent each make 9 calls."""
    email, key = create_user()
    users = [client, Client(key, email)]
    slugs = [deployed_agent(c, TICKS_JS)["slug"] for c in users]
    calls = []
    for i in range(18):
        k = i % 2
        r = start(users[k], slugs[k], prompt=json.dumps({"n": 3, "ms": 2000}))
        calls.append((k, r.json()["invocation_id"]))
    # All 18 accepted; the first is still running (it takes 6 s): none of
    # them waited for another to end.
    k, first = calls[0]
    assert get(users[k], slugs[k], first)["status"] == "running"
    for k, inv in calls:
        rec = finished(users[k], slugs[k], inv, timeout=120)
        # Each ran, or was refused by a host at its sandbox budget: either
        # way recorded, never left running.
        assert rec["status"] in ("completed", "failed"), rec
        if rec["status"] == "failed":
            assert "capacity" in rec["error"] or "busy" in rec["error"], rec


def api_owner_pids():
    """The processes that own asynchronous calls: agenthost-api processes
    that are neither the master nor one of its workers (of this stack's
    build: other stacks may run on the host)."""
    api = os.path.join(BUILD, "handlers", "agenthost-api").encode()
    with open(os.path.join(VAR, "run", "api.pid")) as f:
        master = int(f.read().strip())
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == master:
            continue
        try:
            ppid = int(proc_stat(d)[1])
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")[0]
        except (OSError, ValueError, IndexError):
            continue
        if cmd == api and ppid != master:
            out.append(int(d))
    return out


def usage(client):
    u = client.get("/usage?days=1").json()
    return u["total_invocations"], float(u["total_cost_usd"])


def listed(client, slug, inv, timeout=30):
    """The call's entry in the history listing once it has one (never
    reading the invocation by id: only a sweep can have recorded it)."""
    got = {}

    def there():
        got["h"] = [h for h in client.get(f"/agents/{slug}/invocations").json()
                    if h["invocation_id"] == inv]
        return got["h"]
    assert wait_until(there, timeout=timeout, interval=0.2), f"{inv} never listed"
    assert len(got["h"]) == 1, got
    return got["h"][0]


@needs_runner
def test_owner_killed_mid_call_ends_failed_with_the_reason(client):
    """An API restart that kills the process owning a call (a host's
    shutdown): the API's periodic sweep records the call failed, saying so,
    though nobody reads it; the listing, GET and the usage agree."""
    a = deployed_agent(client, TICKS_JS)
    slug = a["slug"]
    before = set(api_owner_pids())
    used = usage(client)
    inv = start(client, slug, prompt=json.dumps({"n": 100, "ms": 200})).json()["invocation_id"]
    owners = set(api_owner_pids()) - before
    assert len(owners) == 1, owners
    os.kill(owners.pop(), signal.SIGKILL)
    rec = listed(client, slug, inv)
    assert rec["status"] == "failed", rec
    assert "lost" in rec["error"] and "API" in rec["error"], rec
    assert rec["input_tokens"] > 0 and rec["total_cost_usd"] > 0  # its prompt, as any failure
    assert get(client, slug, inv) == rec
    now = usage(client)
    assert now[0] == used[0] + 1 and abs(now[1] - used[1] - rec["total_cost_usd"]) < 1e-9, (used, now)
    # Cancelling it now: it is finished.
    assert client.post(f"/agents/{slug}/invocations/{inv}/cancel").status_code == 422
    # Its run went on in the runner without an owner: gone with its agent, so
    # that the next tests' sandbox counts do not meet it.
    assert client.delete(f"/agents/{slug}").status_code == 204


@needs_runner
@pytest.mark.slow
def test_runner_killed_mid_async_call_ends_failed(client):
    a = deployed_agent(client, TICKS_JS)
    slug = a["slug"]
    inv = start(client, slug, prompt=json.dumps({"n": 100, "ms": 200})).json()["invocation_id"]
    time.sleep(2)  # it runs in its sandbox
    old = runner_pid()
    os.kill(old, signal.SIGKILL)
    try:
        rec = listed(client, slug, inv, timeout=45)  # nobody reads it by id
        assert rec["status"] == "failed", rec
        assert "runner" in rec["error"], rec
        assert get(client, slug, inv) == rec
    finally:
        restart_runner(old)
    # The service works again, asynchronously too.
    inv = start(client, slug).json()["invocation_id"]
    assert finished(client, slug, inv)["status"] == "completed"
