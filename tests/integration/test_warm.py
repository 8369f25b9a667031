"""Warm agents (issue 15): min_warm on the agent record, and warm processes in
the runner. A warm process is the agent's own program started before the call;
the agents here report when their top-level code ran (t0, from the host's
clock, which the sandbox shares), so a test can tell a process started before
its call from one started by it, without timing anything. Nothing else the
caller sees may differ from a call without warm processes."""
import json
import os
import socket
import time
import uuid

import pytest

from agent_code import config_get, deploy, deployed_agent, needs_runner, project, VAR
from conftest import assert_422, db_query, new_client, wait_until

# Top-level code runs at start; the answer says when (t0), what came before the
# prompt ("early:" on stdout), the prompt, a secret and the working directory.
# "sleep N" as the prompt answers after N seconds.
REPORT_JS = r"""
const fs = require('fs');
const t0 = Date.now();
const MARK = 'v1';
process.stdout.write('early:');
let buf = '';
process.stdin.on('data', d => buf += d);
process.stdin.on('end', () => {
  let calls = 1;  // calls in this sandbox: a session's go on counting
  try { calls += Number(fs.readFileSync('/tmp/calls', 'utf8')); } catch (e) {}
  fs.writeFileSync('/tmp/calls', String(calls));
  const reply = () => process.stdout.write(JSON.stringify({
    t0, mark: MARK, prompt: buf, secret: process.env.MY_SECRET ?? null, cwd: process.cwd(), calls}));
  const m = /^sleep (\d+(\.\d+)?)$/.exec(buf);
  if (m) setTimeout(reply, Number(m[1]) * 1000); else reply();
});
"""

# Exits on its own half a second after it starts unless its prompt came: a warm
# process of it dies while it waits.
DIES_WAITING_JS = r"""
const quit = setTimeout(() => process.exit(7), 500);
let buf = '';
process.stdin.on('data', d => { clearTimeout(quit); buf += d; });
process.stdin.on('end', () => process.stdout.write('got ' + buf));
"""

# Reads its prompt with a blocking read at the top level.
SYNC_READ_JS = r"""
const t0 = Date.now();
const prompt = require('fs').readFileSync(0, 'utf8');
process.stdout.write('early:' + JSON.stringify({t0, prompt}));
"""

THROW_JS = "throw new Error('boom at start-up');\n"
EXIT_JS = "process.stderr.write('leaving\\n'); process.exit(3);\n"


@pytest.fixture
def pro():
    """A pro user (up to 10 warm processes an agent) whose agents are deleted
    afterwards: warm processes hold sandboxes, which count against the host's
    sandbox budget that other tests fill."""
    c = new_client("pro")
    yield c
    for a in c.get("/agents").json():
        c.delete(f"/agents/{a['slug']}")


def runner_ping(agent_id=None):
    req = {"op": "ping"}
    if agent_id:
        req["agent_id"] = agent_id
    return runner_op(req)


@pytest.fixture(scope="module", autouse=True)
def room():
    """Warm processes start only while the host's sandbox budget has room (as
    spare sandboxes do), and the tests before this module leave idle session
    sandboxes (kept for session_idle_seconds) and spares that fill it: their
    agents' sandboxes go first, so the counts below do not depend on what ran
    before."""
    for (aid,) in db_query("SELECT id FROM agents WHERE status = 'active'"):
        assert runner_op({"op": "destroy_agent", "agent_id": aid}).get("ok"), aid


def runner_op(req):
    path = config_get("runner_socket", os.path.join(VAR, "run", "runner.sock"))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall(json.dumps(req).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


def warm_of(agent_id):
    return runner_ping(agent_id).get("agent_warm", 0)


def wait_warm(agent_id, n, timeout=30):
    assert wait_until(lambda: warm_of(agent_id) >= n, timeout=timeout), \
        f"{warm_of(agent_id)} of {n} warm processes after {timeout} s"


def invoke(client, slug, prompt="hi", **fields):
    return client.post(f"/agents/{slug}/invoke", json=dict(prompt=prompt, **fields), timeout=120)


def report(resp):
    assert resp.status_code == 200, resp.text
    out = resp.json()["response_content"]
    assert out.startswith("early:"), out  # written before the prompt came: part of the answer
    return json.loads(out[len("early:"):])


def warm_call(client, agent, prompt="hi", **fields):
    """A call that must be served by a warm process: its program started before it."""
    wait_warm(agent["id"], 1)
    sent = time.time() * 1000
    res = report(invoke(client, agent["slug"], prompt, **fields))
    assert res["t0"] < sent, "the call was not served by a warm process"
    return res


# ---- the field -------------------------------------------------------------

def test_min_warm_field_create_patch_and_caps(make_agent, client):
    a = make_agent()
    assert a["min_warm"] == 0
    b = make_agent(min_warm=1)
    assert b["min_warm"] == 1
    assert client.get(f"/agents/{b['slug']}").json()["min_warm"] == 1
    r = client.patch(f"/agents/{b['slug']}", json={"min_warm": 0})
    assert r.status_code == 200 and r.json()["min_warm"] == 0, r.text
    # A free user's plan allows one; nothing is changed by a refused request.
    assert_422(client.patch(f"/agents/{b['slug']}", json={"min_warm": 2}), ("body", "min_warm"))
    assert_422(client.patch(f"/agents/{b['slug']}", json={"min_warm": -1}), ("body", "min_warm"))
    assert_422(client.patch(f"/agents/{b['slug']}", json={"min_warm": "1"}), ("body", "min_warm"))
    assert_422(client.post("/agents", json={"name": "x", "git_repo_url": "https://example.com/r.git",
                                            "min_warm": 2}), ("body", "min_warm"))
    assert client.get(f"/agents/{b['slug']}").json()["min_warm"] == 0


def test_min_warm_cap_is_the_plan_and_warm_max():
    pro = new_client("pro")
    cap = min(10, int(config_get("warm_max", "10")))
    r = pro.post("/agents", json={"name": "w", "git_repo_url": "https://example.com/r.git",
                                  "min_warm": cap})
    assert r.status_code == 201 and r.json()["min_warm"] == cap, r.text
    assert_422(pro.patch(f"/agents/{r.json()['slug']}", json={"min_warm": cap + 1}),
               ("body", "min_warm"))


# ---- warm processes --------------------------------------------------------

@needs_runner
def test_warm_call_same_result_env_and_early_output(pro):
    c = pro
    a = deployed_agent(c, REPORT_JS, min_warm=2)
    assert c.post(f"/agents/{a['slug']}/secrets", json={"key": "MY_SECRET", "value": "one"}).status_code == 201
    first = report(invoke(c, a["slug"], "first"))  # gives the runner the call's environment
    assert first["secret"] == "one"
    wait_warm(a["id"], 2)
    res = warm_call(c, a, "second")
    assert res == dict(first, t0=res["t0"], prompt="second")
    assert res["cwd"] == "/app"
    assert runner_ping()["warm"] >= 1  # counted in the runner's state


@needs_runner
def test_ready_when_blocked_in_a_read_of_stdin(pro):
    """Readiness is seen (well before the 5 s after which a process counts as
    ready anyway) for both ways of reading stdin: a blocking read here, the
    stream's 'data' events in the other tests."""
    c = pro
    a = deployed_agent(c, SYNC_READ_JS, min_warm=1)
    assert report(invoke(c, a["slug"], "cold"))["prompt"] == "cold"
    wait_warm(a["id"], 1, timeout=4)
    assert warm_call(c, a, "warm")["prompt"] == "warm"


@needs_runner
def test_secret_change_applies_to_the_next_call(pro):
    c = pro
    a = deployed_agent(c, REPORT_JS, min_warm=2)
    assert c.post(f"/agents/{a['slug']}/secrets", json={"key": "MY_SECRET", "value": "one"}).status_code == 201
    report(invoke(c, a["slug"]))
    assert warm_call(c, a)["secret"] == "one"
    wait_warm(a["id"], 2)
    # Set a moment ago, while warm processes of the old value wait.
    assert c.post(f"/agents/{a['slug']}/secrets", json={"key": "MY_SECRET", "value": "two"}).status_code == 201
    assert report(invoke(c, a["slug"]))["secret"] == "two"
    assert warm_call(c, a)["secret"] == "two"
    wait_warm(a["id"], 1)
    assert c.delete(f"/agents/{a['slug']}/secrets/MY_SECRET").status_code == 204
    assert report(invoke(c, a["slug"]))["secret"] is None


@needs_runner
def test_redeploy_and_stop_retire_warm_processes(pro):
    c = pro
    a = deployed_agent(c, REPORT_JS, min_warm=2)
    report(invoke(c, a["slug"]))
    assert warm_call(c, a)["mark"] == "v1"
    wait_warm(a["id"], 2)
    r = c.put(f"/agents/{a['slug']}/code", data=project(REPORT_JS.replace("'v1'", "'v2'")),
              headers={"Content-Type": "application/gzip"})
    assert r.status_code == 200, r.text
    deploy(c, a["slug"])
    # The runner retires them right after it switches the agent to the new image
    # (a call in between could not take one: their image is not the call's).
    assert wait_until(lambda: warm_of(a["id"]) == 0, timeout=10)
    assert report(invoke(c, a["slug"]))["mark"] == "v2"
    assert warm_call(c, a)["mark"] == "v2"
    wait_warm(a["id"], 1)
    r = c.delete(f"/agents/{a['slug']}/sandbox")
    assert r.status_code == 200, r.text
    assert warm_of(a["id"]) == 0


@needs_runner
def test_patch_min_warm_retires_and_resizes(pro):
    c = pro
    a = deployed_agent(c, REPORT_JS, min_warm=3)
    report(invoke(c, a["slug"]))
    wait_warm(a["id"], 3)
    assert c.patch(f"/agents/{a['slug']}", json={"min_warm": 1}).status_code == 200
    assert warm_of(a["id"]) == 0
    report(invoke(c, a["slug"]))
    wait_warm(a["id"], 1)
    assert c.patch(f"/agents/{a['slug']}", json={"min_warm": 0}).status_code == 200
    assert warm_of(a["id"]) == 0
    sent = time.time() * 1000
    assert report(invoke(c, a["slug"]))["t0"] >= sent
    time.sleep(1.5)  # the warm thread's tick: nothing may start for min_warm = 0
    assert warm_of(a["id"]) == 0


@needs_runner
@pytest.mark.parametrize("js", [THROW_JS, EXIT_JS], ids=["throws", "exits"])
def test_crash_at_start_up_gives_the_normal_failure(js, pro):
    c = pro
    cold = deployed_agent(c, js)
    warm = deployed_agent(c, js, min_warm=2)
    want = invoke(c, cold["slug"])
    assert want.status_code == 500, want.text
    for _ in range(3):
        got = invoke(c, warm["slug"])
        assert got.status_code == want.status_code, got.text
        # The same cause; the note naming the invocation's logs names its own.
        assert cause(got.json()["detail"]) == cause(want.json()["detail"])
        assert cause(got.json()["invocation"]["error"]) == cause(want.json()["invocation"]["error"])
        assert logs_of(c, warm["slug"], got) == logs_of(c, cold["slug"], want)
        time.sleep(0.5)  # warm processes would have started and died meanwhile
    assert warm_of(warm["id"]) == 0  # never kept, never handed a prompt


def cause(error):
    return error.split("; its stderr is in the invocation's logs: ")[0]


def logs_of(client, slug, resp):
    inv = resp.json()["invocation"]["invocation_id"]
    return client.get(f"/agents/{slug}/invocations/{inv}/logs").json()["logs"]


@needs_runner
def test_a_warm_process_that_dies_waiting_is_never_handed_a_prompt(pro):
    c = pro
    a = deployed_agent(c, DIES_WAITING_JS, min_warm=2)
    for prompt, pause in (("one", 1.0), ("two", 1.0), ("three", 3.0)):
        r = invoke(c, a["slug"], prompt)
        assert r.status_code == 200, r.text
        assert r.json()["response_content"] == "got " + prompt
        time.sleep(pause)  # the warm processes it left die meanwhile
    with open(os.path.join(VAR, "log", "runner.log"), errors="replace") as f:
        log = f.read()
    assert any(f"agent={a['id']} " in line and "ended while it waited" in line
               for line in log.splitlines())
    assert warm_of(a["id"]) == 0


@needs_runner
def test_timeout_counts_from_the_call(pro):
    c = pro
    a = deployed_agent(c, REPORT_JS, min_warm=1, timeout_seconds=2)
    report(invoke(c, a["slug"]))
    wait_warm(a["id"], 1)
    time.sleep(2.5)  # the warm process has waited longer than the timeout
    res = warm_call(c, a, "sleep 1")
    assert res["prompt"] == "sleep 1"
    wait_warm(a["id"], 1)
    r = invoke(c, a["slug"], "sleep 3")
    assert r.status_code == 504, r.text


@needs_runner
def test_min_warm_zero_starts_nothing(pro):
    c = pro
    a = deployed_agent(c, REPORT_JS)
    for _ in range(2):
        sent = time.time() * 1000
        assert report(invoke(c, a["slug"]))["t0"] >= sent
    time.sleep(1.5)
    assert warm_of(a["id"]) == 0


@needs_runner
def test_sessions_next_process_is_warm(pro):
    c = pro
    a = deployed_agent(c, REPORT_JS, min_warm=1)
    sid = "warm-" + uuid.uuid4().hex[:8]
    assert c.post(f"/agents/{a['slug']}/secrets", json={"key": "MY_SECRET", "value": "one"}).status_code == 201
    first = report(invoke(c, a["slug"], "one", session_id=sid))
    assert first["calls"] == 1
    # The session's next process starts in its sandbox after the answer.
    second = warm_call(c, a, "two", session_id=sid)
    assert (second["calls"], second["secret"], second["prompt"]) == (2, "one", "two")
    third = warm_call(c, a, "three", session_id=sid)
    assert third["calls"] == 3
    # A secret set while the session's next process waits applies to the next call.
    wait_warm(a["id"], 1)
    assert c.post(f"/agents/{a['slug']}/secrets", json={"key": "MY_SECRET", "value": "two"}).status_code == 201
    fourth = report(invoke(c, a["slug"], "four", session_id=sid))
    assert (fourth["calls"], fourth["secret"]) == (4, "two")
    assert warm_call(c, a, "five", session_id=sid)["secret"] == "two"


@needs_runner
def test_idle_warm_processes_are_dropped(pro):
    """After warm_idle_seconds (a runner setting: 10 s here, its least) without
    a call, an agent's warm processes and its sessions' waiting ones go; the
    next call runs cold and brings them back."""
    from test_deploy_faults import runner_with
    c = pro
    a = deployed_agent(c, REPORT_JS, min_warm=1)
    sid = "idle-" + uuid.uuid4().hex[:8]
    with runner_with(warm_idle_seconds="10"):
        report(invoke(c, a["slug"]))
        report(invoke(c, a["slug"], session_id=sid))
        wait_warm(a["id"], 2)
        assert runner_ping()["warm"] >= 2
        assert wait_until(lambda: warm_of(a["id"]) == 0, timeout=25), "still warm after 25 s idle"
        sent = time.time() * 1000
        assert report(invoke(c, a["slug"]))["t0"] >= sent
        assert warm_call(c, a)["calls"] == 1
