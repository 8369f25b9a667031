"""A call wakes one idle invoke worker, not the whole pool (issue 31). nginx
opens a new FastCGI connection for every invocation (it keeps none to the
invoke pool: a call holds its worker for minutes); every idle worker used to
be woken by it, and all but one found nothing to accept: on a two-core host,
16 workers' context switches per call. Counted here by the idle workers'
context switches across one request: a worker waiting for a connection does
nothing else, so one that switched was woken. (Every worker holds both
pools' sockets, so the whole API is watched, less the processes that wake on
their own: the background sweeps, the key-set refresher.)"""
import re
import time

from conftest import api_pids


def switches(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", f.read(), re.M).group(1))


def idle_workers(seconds=1.0):
    """The API's processes that did not wake within the window."""
    procs = api_pids()[1]
    before = {p: switches(p) for p in procs}
    time.sleep(seconds)
    return [p for p in procs if switches(p) == before[p]]


def test_a_call_wakes_one_invoke_worker(client):
    # Refused at once (no such agent), so no worker is busy: every one of them
    # waits for a connection before and after.
    for _ in range(3):
        assert client.post("/agents/no-such-agent/invoke", json={"prompt": "x"}).status_code == 404
    workers = idle_workers()
    assert len(workers) >= 8, workers  # the test config's pools: enough to tell
    before = {p: switches(p) for p in workers}
    assert client.post("/agents/no-such-agent/invoke", json={"prompt": "x"}).status_code == 404
    time.sleep(0.5)
    woken = [p for p in workers if switches(p) != before[p]]
    # The one that answered; a second at most, should a periodic one have
    # been due just then.
    assert len(woken) <= 2, f"{len(woken)} of {len(workers)} idle API workers woken by one call"
