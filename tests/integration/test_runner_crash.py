"""The runner SIGKILLed in the middle of an invocation (fault injection): the
call answers a clear 5xx in the contract's shape well within its timeout (no
hang), the invocation is recorded `failed`, the next call succeeds once the
runner is back, and what the killed runner's sandboxes held (slot cgroups,
veths) is not left to nobody."""
import os
import signal
import threading
import time

import pytest

from agent_code import deployed_agent, needs_runner
from conftest import proc_stat, wait_until
from test_deploy import restart_runner, runner_pid
from test_invoke_faults import free_slot_leftovers

# Answers after 8 s, so that the runner dies while the agent runs.
SLOW_JS = """
let d = '';
process.stdin.on('data', c => d += c).on('end', () => {
  setTimeout(() => process.stdout.write('late'), 8000);
});
"""

ECHO_JS = """
let d = '';
process.stdin.on('data', c => d += c).on('end', () => process.stdout.write('ok'));
"""


def call_in_background(client, slug, body):
    out = {}

    def run():
        t0 = time.time()
        try:
            out["r"] = client.post(f"/agents/{slug}/invoke", json=body, timeout=60)
        finally:
            out["seconds"] = time.time() - t0
    t = threading.Thread(target=run)
    t.start()
    return t, out


def agent_running(marker_pid_of_runner):
    """True once the runner has a keeper child (the call's sandbox runs)."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            ppid = int(proc_stat(d)[1])
            with open(f"/proc/{d}/comm") as f:
                comm = f.read().strip()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == marker_pid_of_runner and comm.startswith("agenthost-keep"):
            return True
    return False


@needs_runner
@pytest.mark.slow
@pytest.mark.parametrize("session", [None, "crash-session"], ids=["ephemeral", "session"])
def test_runner_killed_mid_invocation(client, session):
    slow = deployed_agent(client, SLOW_JS)
    echo = deployed_agent(client, ECHO_JS)
    stale = free_slot_leftovers()
    body = {"prompt": "hello", "timeout_seconds": 30}
    if session:
        body["session_id"] = session
    old = runner_pid()
    t, out = call_in_background(client, slow["slug"], body)
    time.sleep(2)  # the call has reached its sandbox: node runs its timer
    os.kill(old, signal.SIGKILL)
    t.join(45)
    assert not t.is_alive(), "the call hung after its runner died"
    r = out["r"]
    print("the call answered", r.status_code, r.text, out["seconds"])
    # A clear server-side failure in the contract's shape, well before the
    # call's own 30 s timeout: the connection to the runner broke.
    assert r.status_code in (500, 502, 503), r.text
    assert isinstance(r.json().get("detail"), str) and r.json()["detail"], r.text
    assert "runner" in r.json()["detail"].lower() or "sandbox" in r.json()["detail"].lower(), r.text
    assert out["seconds"] < 20, out
    hist = client.get(f"/agents/{slow['slug']}/invocations", params={"limit": 1}).json()
    assert hist[0]["status"] == "failed", hist[0]
    restart_runner(old)
    # The service works again, for this agent and another.
    r = client.post(f"/agents/{echo['slug']}/invoke", json={"prompt": "x"}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["response_content"] == "ok"
    # The killed runner's sandboxes die with it (their keepers are its
    # children): nothing of theirs stays held by nobody.
    left = wait_until(lambda: not (free_slot_leftovers() - stale), timeout=20, interval=0.5)
    assert left, f"left behind by the killed runner: {free_slot_leftovers() - stale}"
