"""An agent whose runner's heartbeat is old is taken over by this host's
runner on its next call (handlers/invoke_takeover.c). The heartbeat's time
comes with the call's lookup and its age is worked out by the API host's
clock; the cluster kit (tests/cluster) kills real runners."""
from agent_code import deployed_agent, needs_runner
from conftest import db_query

ECHO_JS = ("let b=''; process.stdin.on('data', d => b += d);"
           " process.stdin.on('end', () => process.stdout.write(b));\n")


@needs_runner
def test_agent_of_a_runner_gone_silent_moves_to_a_live_one(client):
    a = deployed_agent(client, ECHO_JS)
    (rid, sha), = db_query(f"SELECT runner_id, image_sha256 FROM agents WHERE id = '{a['id']}'")
    if sha is None:
        import pytest
        pytest.skip("the agent's image is not in the file store: it cannot move")
    ghost = "ghost-" + a["id"][-8:]
    try:
        db_query(f"INSERT INTO runners (id, address, capacity, started_at, heartbeat_at) VALUES"
                 f" ('{ghost}', '127.0.0.1:1', 1, NOW(3) - INTERVAL 1 HOUR, NOW(3) - INTERVAL 1 HOUR)")
        db_query(f"UPDATE agents SET runner_id = '{ghost}' WHERE id = '{a['id']}'")
        r = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": "moved"}, timeout=120)
        assert r.status_code == 200 and r.json()["response_content"] == "moved", r.text
        assert db_query(f"SELECT runner_id FROM agents WHERE id = '{a['id']}'") == [[rid]]
    finally:
        db_query(f"UPDATE agents SET runner_id = '{rid}' WHERE id = '{a['id']}'")
        db_query(f"DELETE FROM runners WHERE id = '{ghost}'")
