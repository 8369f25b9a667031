"""The runner restarted during calls, as `systemctl restart agenthost-runner`
does it (SIGTERM, then a new runner; issue 33): every call in flight ends
clearly. A call that finishes within runner_shutdown_grace_seconds is
answered; one that runs past it answers the contract's 500 for a failed
invocation, whose error says the runner was stopped or restarted, and is
recorded `failed`; a call sent while the runner stops answers 503 with
Retry-After (nothing ran) or, once the new runner is up, 200. None hangs, and the new runner serves the next calls.
(test_runner_crash.py kills the runner with SIGKILL instead.)"""
import os
import signal
import time

from agent_code import deployed_agent, needs_runner
from conftest import wait_until
from test_deploy import restart_runner, runner_pid
from test_invoke_async import listed
from test_runner_crash import ECHO_JS, call_in_background

GRACE = 4

# Answers after the given number of milliseconds (the prompt).
SLEEP_JS = """
let d = '';
process.stdin.on('data', c => d += c).on('end', () => {
  setTimeout(() => process.stdout.write('done'), parseInt(d, 10));
});
"""


def agent_nodes():
    """The agents' node processes on this host (in their sandboxes, cwd /app)."""
    out = set()
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if open(f"/proc/{p}/comm").read().strip() == "node" and os.readlink(f"/proc/{p}/cwd") == "/app":
                    out.add(int(p))
            except OSError:
                pass
    return out


def stop_runner(pid):
    os.kill(pid, signal.SIGTERM)


def start_runner_with_grace(seconds):
    """The stack's runner command line, with a shorter grace for this test."""
    os.environ["AGENTHOST_RUNNER_SHUTDOWN_GRACE_SECONDS"] = str(seconds)
    try:
        return restart_runner(None)
    finally:
        del os.environ["AGENTHOST_RUNNER_SHUTDOWN_GRACE_SECONDS"]


def gone(pid):
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        return True


def reap(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    return gone(pid)


@needs_runner
def test_runner_restart_ends_every_call_clearly(client):
    sleeper = deployed_agent(client, SLEEP_JS)
    echo = deployed_agent(client, ECHO_JS)
    # A runner whose grace this test knows.
    first = runner_pid()
    stop_runner(first)
    assert wait_until(lambda: reap(first), 60, 0.2), "the runner did not stop"
    pid = start_runner_with_grace(GRACE)
    try:
        before = agent_nodes()
        short = call_in_background(client, sleeper["slug"], {"prompt": "1500", "timeout_seconds": 60})
        long = call_in_background(client, sleeper["slug"], {"prompt": "40000", "timeout_seconds": 60})
        sess = call_in_background(client, sleeper["slug"],
                                  {"prompt": "40000", "timeout_seconds": 60, "session_id": "restart"})
        # All three in their sandboxes (polled: a loaded machine takes longer;
        # the short one may already have answered, which the test allows).
        wait_until(lambda: len(agent_nodes() - before) >= 3, 30, 0.05)
        t0 = time.time()
        stop_runner(pid)                    # systemctl restart: first the stop
        during = call_in_background(client, echo["slug"], {"prompt": "x", "timeout_seconds": 30})
        assert wait_until(lambda: reap(pid), GRACE + 30, 0.2), "the runner did not stop"
        stopped = time.time() - t0
        for t, _ in (short, long, sess, during):
            t.join(GRACE + 40)
            assert not t.is_alive(), "a call hung across the runner's restart"
    finally:
        restart_runner(None)                # then the start, with the stack's own settings
    r = short[1]["r"]
    assert r.status_code == 200 and r.json()["response_content"] == "done", r.text
    for name, (_, out) in (("long", long), ("session", sess)):
        r = out["r"]
        print(name, r.status_code, r.text, out["seconds"])
        assert r.status_code == 500, r.text
        detail = r.json().get("detail")
        assert isinstance(detail, str) and "runner was stopped or restarted" in detail, r.text
        assert r.json()["invocation"]["status"] == "failed", r.text
        assert out["seconds"] < GRACE + 30, out
    # Sent while the runner was stopping: answered either way, never left waiting.
    r = during[1]["r"]
    print("during", r.status_code, r.text, during[1]["seconds"])
    assert r.status_code in (200, 503), r.text
    if r.status_code == 503:
        assert "runner" in r.json()["detail"].lower() and r.headers.get("Retry-After"), r.text
    hist = client.get(f"/agents/{sleeper['slug']}/invocations", params={"limit": 5}).json()
    statuses = sorted(h["status"] for h in hist[:3])
    assert statuses == ["completed", "failed", "failed"], hist[:3]
    assert stopped < GRACE + 30
    r = client.post(f"/agents/{echo['slug']}/invoke", json={"prompt": "again"}, timeout=60)
    assert r.status_code == 200 and r.json()["response_content"] == "ok", r.text


@needs_runner
def test_an_async_call_across_a_restart_ends_failed_without_being_read(client):
    """An asynchronous call running past the grace of a runner restart: its
    own process records it failed, saying the runner was restarted, though
    nobody reads it by id (the history listing shows it)."""
    sleeper = deployed_agent(client, SLEEP_JS)
    slug = sleeper["slug"]
    first = runner_pid()
    stop_runner(first)
    assert wait_until(lambda: reap(first), 60, 0.2), "the runner did not stop"
    pid = start_runner_with_grace(GRACE)
    try:
        before = agent_nodes()
        r = client.post(f"/agents/{slug}/invoke", json={"prompt": "40000", "timeout_seconds": 60,
                                                        "async": True})
        assert r.status_code == 202, r.text
        inv = r.json()["invocation_id"]
        assert wait_until(lambda: agent_nodes() - before, 60, 0.05), "the call never reached its sandbox"
        stop_runner(pid)
        assert wait_until(lambda: reap(pid), GRACE + 30, 0.2), "the runner did not stop"
    finally:
        restart_runner(None)
    rec = listed(client, slug, inv, timeout=60)
    assert rec["status"] == "failed" and "runner was stopped or restarted" in rec["error"], rec
