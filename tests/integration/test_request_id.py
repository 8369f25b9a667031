"""Request ids for operators (issue 29): nginx's $request_id is the response's
X-Request-Id, and the same id is on the API's log line for that request and
on the runner's lines for the run it asked for (the run's line and the
agent's stderr). With log_format = json the runner writes one JSON object a
line, the id in request_id; a log_format other than text or json stops it at
start."""
import json
import os
import subprocess

from agent_code import VAR, deployed_agent, needs_runner
from test_deploy_faults import runner_with, start_runner, stop_runner
from test_invocation_logs import LOGS_JS

RUNNER_LOG = os.path.join(VAR, "log", "runner.log")
API_LOG = os.path.join(VAR, "log", "api.log")


def lines_since(path, offset):
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace").splitlines()


def invoke(client, slug, text):
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": json.dumps({"text": text})}, timeout=120)
    assert r.status_code == 200, r.text
    rid = r.headers["X-Request-Id"]
    assert len(rid) == 32 and all(c in "0123456789abcdef" for c in rid), rid
    return r.json(), rid


@needs_runner
def test_request_id_in_the_api_and_runner_logs(client):
    a = deployed_agent(client, LOGS_JS)
    ro, ao = os.path.getsize(RUNNER_LOG), os.path.getsize(API_LOG)
    res, rid = invoke(client, a["slug"], "traced")
    api = [l for l in lines_since(API_LOG, ao) if f"req={rid} " in l]
    assert any(f"POST /agents/{a['slug']}/invoke 200" in l for l in api), api
    runner = [l for l in lines_since(RUNNER_LOG, ro) if f"req={rid} " in l]
    inv = res["invocation_id"]
    assert any(f"inv={inv} agent=" in l and "exit=0" in l for l in runner), runner
    assert any(f"[inv={inv}] said: traced" in l for l in runner), runner  # the agent's stderr
    # Another request's id is not on them.
    _res2, rid2 = invoke(client, a["slug"], "other")
    assert rid2 != rid
    assert not [l for l in lines_since(RUNNER_LOG, ro) if f"req={rid} " in l and "other" in l]


@needs_runner
def test_runner_json_lines(client):
    a = deployed_agent(client, LOGS_JS)
    with runner_with(log_format="json"):
        ro = os.path.getsize(RUNNER_LOG)
        res, rid = invoke(client, a["slug"], 'quote " and \\ back')
        lines = lines_since(RUNNER_LOG, ro)
    objs = [json.loads(l) for l in lines if l.startswith("{")]
    assert objs and all(set(o) == {"time", "level", "program", "pid", "request_id", "msg"} for o in objs)
    ours = [o for o in objs if o["request_id"] == rid]
    inv = res["invocation_id"]
    assert any(o["msg"] == f'[inv={inv}] said: quote " and \\x5c back' for o in ours), ours
    assert any("exit=0" in o["msg"] and o["program"] == "agenthost-runner" for o in ours)
    # Every line the runner wrote as it stopped and started is JSON too.
    assert all(l.startswith("{") for l in lines if "agenthost-runner" in l), lines[:5]


def test_unknown_log_format_stops_the_runner_at_start():
    with open(os.path.join(VAR, "run", "runner.cmd")) as f:
        cmd = f.read().strip()
    stop_runner()
    try:
        r = subprocess.run(["bash", "-c", f"exec env AGENTHOST_LOG_FORMAT=xml {cmd}"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode != 0
        assert 'log_format must be text or json, not "xml"' in r.stderr, r.stderr[-500:]
    finally:
        start_runner()
