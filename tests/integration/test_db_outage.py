"""MariaDB stopped and started again under a mixed load (fault injection):
while it is away every kind of request gets a 503 in the contract's shape at
once (no hang, no 500, no SQL in the answer); afterwards the same workers
answer again by themselves, nothing was recorded twice, and the usage totals
equal the sum of the recorded invocations."""
import concurrent.futures
import time

import pytest

from agent_code import deployed_agent, needs_runner
from conftest import api_pids, new_client
from test_deploy_faults import run_watcher, start_mariadb, stop_mariadb

ECHO_JS = """
let d = '';
process.stdin.on('data', c => d += c).on('end', () => process.stdout.write('echo:' + d));
"""

SQL_WORDS = ("select ", "insert ", "update ", "mysql", "mariadb", "sqlstate", "syntax")


def mixed(client, slug, i):
    """One request of a mix: reads, a write, an invocation."""
    kind = i % 4
    if kind == 0:
        return client.get("/agents")
    if kind == 1:
        return client.post("/agents", json={"name": f"outage {i}", "git_repo_url": "https://example.com/x.git"})
    if kind == 2:
        return client.get("/usage")
    return client.post(f"/agents/{slug}/invoke", json={"prompt": f"p{i}"}, timeout=60)


def sum_of_invocations(client, slug):
    items = client.get(f"/agents/{slug}/invocations", params={"limit": 100}).json()
    return items, sum(i["input_tokens"] + i["output_tokens"] for i in items)


@needs_runner
@pytest.mark.slow
def test_requests_during_a_database_outage(client):
    watcher = run_watcher()
    if watcher:
        pytest.skip(f"scripts/run (pid {watcher}) watches this stack and would stop it")
    c = new_client("pro")
    a = deployed_agent(c, ECHO_JS)
    for i in range(3):
        assert c.post(f"/agents/{a['slug']}/invoke", json={"prompt": f"before{i}"}).status_code == 200
    master, _ = api_pids()
    stop_mariadb()
    try:
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            answers = list(ex.map(lambda i: mixed(c, a["slug"], i), range(24)))
        took = time.time() - t0
    finally:
        start_mariadb()
    for r in answers:
        assert r.status_code == 503, (r.request.method, r.request.url, r.status_code, r.text)
        detail = r.json().get("detail")
        assert isinstance(detail, str) and detail, r.text
        assert not any(w in r.text.lower() for w in SQL_WORDS), r.text
        assert r.headers.get("Retry-After", "").isdigit(), r.headers
    assert took < 30, f"24 requests took {took:.1f} s while the database was away"
    # The workers reconnect by themselves; the master never died.
    assert api_pids()[0] == master
    deadline = time.time() + 30
    while time.time() < deadline and c.get("/agents").status_code != 200:
        time.sleep(0.5)
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        after = list(ex.map(lambda i: mixed(c, a["slug"], i), range(16)))
    assert [r.status_code for r in after] == [200, 201, 200, 200] * 4, [r.text[:100] for r in after]
    # Nothing recorded twice or half: three calls before, four after, none
    # from the outage; the usage totals are the sum of what is recorded.
    items, tokens = sum_of_invocations(c, a["slug"])
    assert len(items) == 7, [i["status"] for i in items]
    assert len({i["invocation_id"] for i in items}) == 7
    usage = c.get("/usage").json()
    assert usage["total_invocations"] == 7, usage
    assert usage["input_tokens"] + usage["output_tokens"] == tokens, usage
