"""A runner with every connection thread taken (256 connections, each waiting
for its request) refuses the next one at once with "overloaded": the call was
not run, so the client is told to come back (503 with Retry-After, the
contract's error shape), as for a host at its sandbox budget, not that its
agent failed (500). The test holds the connections itself, on the runner's
socket, and lets them go after."""
import os
import socket

import pytest

from agent_code import ECHO_JS, VAR, config_get, deployed_agent, needs_runner

pytestmark = needs_runner

MAX_CONNECTIONS = 256  # lib/runner/server.c


# 1 MiB: its run request (base64) cannot fit the socket's buffers, so the
# API is still sending it when the runner has answered and closed. A short
# one is sent before the runner gets to it, unless the API's worker is held
# up between its connect and its send (a full run met that once).
@pytest.mark.parametrize("prompt", ["hi", "x" * (1 << 20)], ids=["short", "still-sending"])
def test_a_call_to_an_overloaded_runner_is_503_with_retry_after(client, prompt):
    a = deployed_agent(client, ECHO_JS)
    path = config_get("runner_socket", os.path.join(VAR, "run", "runner.sock"))
    held = []
    try:
        for _ in range(MAX_CONNECTIONS):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            held.append(s)
        r = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": prompt}, timeout=60)
        assert r.status_code == 503, r.text
        assert int(r.headers["Retry-After"]) >= 1
        assert r.json() == {"detail": "No capacity to run the agent now (runner overloaded). "
                                      f"Try again in {r.headers['Retry-After']} seconds."}
    finally:
        for s in held:
            s.close()
    # Nothing ran: the history has no row for it; and the runner takes calls again.
    h = client.get(f"/agents/{a['slug']}/invocations")
    assert h.headers["X-Total-Count"] == "0"
    r = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": "again"}, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["response_content"] == "again"
