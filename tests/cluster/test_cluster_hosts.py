"""Two API hosts on one Galera cluster: what one host writes, the other serves
(each host's API and runner talk to a different database node), and an
invocation through either host runs on the runner that holds the agent."""
import concurrent.futures
import os
import subprocess

from conftest import BUILD, CVAR, deployed, log_text, new_agent, sql


def runner_host(agent_id):
    """'a' or 'b': whose runner holds the agent (by the address it registered)."""
    rows = sql(f"SELECT r.address FROM agents a JOIN runners r ON r.id = a.runner_id "
               f"WHERE a.id = '{agent_id}'")
    assert len(rows) == 1, rows
    return "a" if rows[0][0].startswith("127.0.2.1:") else "b"


def test_deploy_through_a_invoke_through_b(user):
    agent = deployed(user)  # created, uploaded and deployed through host A
    b = user.on("b")
    assert b.get(f"/agents/{agent['slug']}").json()["status"] == "active"
    r = b.post(f"/agents/{agent['slug']}/invoke", json={"prompt": "hello from b"})
    assert r.status_code == 200, r.text
    inv = r.json()
    assert inv["response_content"] == "hello from b"
    # Recorded once, and host A's history shows what host B recorded.
    hist = user.get(f"/agents/{agent['slug']}/invocations").json()
    assert [h["invocation_id"] for h in hist] == [inv["invocation_id"]]
    # It ran on the agent's runner, not on host B's own (unless that is the one).
    holder = runner_host(agent["id"])
    other = "b" if holder == "a" else "a"
    assert f"inv={inv['invocation_id']} " in log_text(holder, "runner")
    assert f"inv={inv['invocation_id']} " not in log_text(other, "runner")


def test_sessions_continue_across_hosts(user):
    agent = deployed(user)
    b = user.on("b")
    r = user.post(f"/agents/{agent['slug']}/invoke",
                  json={"prompt": "!write kept", "session_id": "s-cross"})
    assert r.status_code == 200, r.text
    r = b.post(f"/agents/{agent['slug']}/invoke", json={"prompt": "!read", "session_id": "s-cross"})
    assert r.status_code == 200, r.text
    assert r.json()["response_content"] == "kept|kept"


def test_migrate_at_once_on_two_nodes_applies_each_file_once():
    """Two hosts' `agenthost-admin migrate` at the same time, through different
    nodes: the lock row lets one apply and the other wait, and neither fails."""
    def migrate(host):
        env = dict(os.environ, AGENTHOST_CONFIG=os.path.join(CVAR, host, "agenthost.conf"))
        return subprocess.run([os.path.join(BUILD, "lib", "admin", "agenthost-admin"), "migrate"],
                              env=env, capture_output=True, text=True, timeout=300)
    before = sql("SELECT COUNT(*) FROM schema_migrations")[0][0]
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        results = list(ex.map(migrate, ["a", "b"]))
    for res in results:
        assert res.returncode == 0, res.stdout + res.stderr
    assert sql("SELECT COUNT(*) FROM schema_migrations")[0][0] == before
    assert sql("SELECT holder FROM schema_lock WHERE id = 1") == [["NULL"]]


def test_a_write_through_one_host_reads_back_through_the_other(user):
    """Each host reads through its own node (and its query cache): a change
    made through one host is what the other answers right after."""
    slug = new_agent(user)
    b = user.on("b")
    for i in range(20):
        writer, reader = (user, b) if i % 2 else (b, user)
        r = writer.patch(f"/agents/{slug}", json={"description": f"revision {i}"})
        assert r.status_code == 200, r.text
        assert reader.get(f"/agents/{slug}").json()["description"] == f"revision {i}"
