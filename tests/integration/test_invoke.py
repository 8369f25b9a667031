"""POST /agents/{slug}/invoke, sessions and invocation history, through the real
stack: agents are uploaded as tarballs, deployed by the runner and run in
sandboxes. Each test uses a fresh user, whose invoke budget is 10 a minute."""
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import time
import uuid

import pytest

from agent_code import (ECHO_JS, EARLY_JS, VAR, cost, deploy, deployed_agent, exact,
                        needs_runner, project, runner_available)
from conftest import assert_422

ID = r"[0-9A-Za-z]{22}"
TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
# The contract's, plus the call's files and its phases (timing: issue 31;
# tests/integration/test_invoke_timing.py checks them).
RESULT_KEYS = {"invocation_id", "session_id", "sandbox_id", "response_content", "input_tokens", "files",
               "output_tokens", "total_cost_usd", "duration_ms", "status", "error", "created_at", "trigger",
               "timing"}
# Token counts pinned from cl100k_base (tests/unit/test_tokenize.c has the same rows).
SENTENCE = "Hello, world! How are you today? Fine; thanks -- for asking..."
SENTENCE_TOKENS = 16
UMLAUTS = "Grüße aus München: schöne Straße, Äpfel und Öl."
UMLAUTS_TOKENS = 17
NULS = "a\x00b\x00\x00c \x00"
NULS_TOKENS = 8


def invoke(client, slug, prompt, **fields):
    body = {"prompt": prompt}
    body.update(fields)
    return client.post(f"/agents/{slug}/invoke", json=body, timeout=120)


def check_result(res, status="completed"):
    assert set(res) == RESULT_KEYS, res
    assert res["trigger"] == "api"  # a client's call (issue 32: schedules say "schedule")
    assert re.fullmatch("inv_" + ID, res["invocation_id"])
    assert re.fullmatch(TIME, res["created_at"])
    assert res["status"] == status
    assert isinstance(res["duration_ms"], int) and res["duration_ms"] >= 0
    if status == "completed":
        assert res["error"] is None
    else:
        assert isinstance(res["error"], str) and res["error"]
    return res


def history(client, slug, **params):
    r = client.get(f"/agents/{slug}/invocations", params=params)
    assert r.status_code == 200, r.text
    return r


# ---- no runner needed -------------------------------------------------------

def test_invoke_requires_active_agent(client, make_agent):
    a = make_agent()
    r = invoke(client, a["slug"], "hi")
    assert r.status_code == 409, r.text
    assert r.json() == {"detail": "Agent is not active (status: draft)"}


def test_invoke_of_unknown_or_foreign_agent_is_404(client, other_client, make_agent):
    a = make_agent()
    for c, slug in ((other_client, a["slug"]), (client, "no-such-agent")):
        assert invoke(c, slug, "hi").status_code == 404
        assert c.get(f"/agents/{slug}/sessions").status_code == 404
        assert c.get(f"/agents/{slug}/invocations").status_code == 404
        assert c.delete(f"/agents/{slug}/sessions/s1").status_code == 404


@pytest.mark.parametrize("body, loc", [
    ({}, ("body", "prompt")),
    ({"prompt": None}, ("body", "prompt")),
    ({"prompt": 5}, ("body", "prompt")),
    ({"prompt": ["a"]}, ("body", "prompt")),
    ({"prompt": "x", "session_id": ""}, ("body", "session_id")),
    ({"prompt": "x", "session_id": "a b"}, ("body", "session_id")),
    ({"prompt": "x", "session_id": "s/1"}, ("body", "session_id")),
    ({"prompt": "x", "session_id": "s" * 129}, ("body", "session_id")),
    ({"prompt": "x", "session_id": 7}, ("body", "session_id")),
    ({"prompt": "x", "timeout_seconds": 0}, ("body", "timeout_seconds")),
    ({"prompt": "x", "timeout_seconds": 601}, ("body", "timeout_seconds")),
    ({"prompt": "x", "timeout_seconds": "5"}, ("body", "timeout_seconds")),
    ({"prompt": "x", "timeout_seconds": 1.5}, ("body", "timeout_seconds")),
    ({"prompt": "x", "model": "big"}, ("body", "model")),
])
def test_invoke_bad_bodies(client, make_agent, body, loc):
    a = make_agent()
    assert_422(client.post(f"/agents/{a['slug']}/invoke", json=body), loc)


def test_invoke_malformed_json(client, make_agent):
    a = make_agent()
    r = client.post(f"/agents/{a['slug']}/invoke", data=b'{"prompt": ',
                    headers={"Content-Type": "application/json"})
    detail = assert_422(r, ("body",))
    assert detail[0]["type"] == "json_invalid"


def test_prompt_that_is_not_utf8_is_422(client, make_agent):
    a = make_agent()
    r = client.post(f"/agents/{a['slug']}/invoke", data=b'{"prompt": "a\xffb"}',
                    headers={"Content-Type": "application/json"})
    detail = assert_422(r, ("body",))
    assert detail[0]["type"] == "json_invalid"


def test_prompt_over_cap(client, make_agent):
    a = make_agent()
    r = invoke(client, a["slug"], "x" * (2 * 1024 * 1024 + 1))
    detail = assert_422(r, ("body", "prompt"))
    assert detail[0]["type"] == "string_too_long"


def test_body_over_route_limit_is_413(client, make_agent):
    a = make_agent()
    r = client.post(f"/agents/{a['slug']}/invoke", data=b"x" * (17 * 1024 * 1024),
                    headers={"Content-Type": "application/json"}, timeout=60)
    assert r.status_code == 413


def test_empty_history_and_sessions(client, make_agent):
    a = make_agent()
    for path in ("sessions", "invocations"):
        r = client.get(f"/agents/{a['slug']}/{path}")
        assert r.status_code == 200 and r.json() == []
        assert r.headers["X-Total-Count"] == "0"
    assert_422(client.get(f"/agents/{a['slug']}/invocations?limit=0"), ("query", "limit"))
    assert client.delete(f"/agents/{a['slug']}/sessions/nope").status_code == 404


# ---- running agents ---------------------------------------------------------

@needs_runner
def test_echo_exact_tokens_and_cost(client):
    a = deployed_agent(client, ECHO_JS)
    r = invoke(client, a["slug"], SENTENCE)
    assert r.status_code == 200, r.text
    res = check_result(exact(r))
    assert res["response_content"] == SENTENCE
    assert res["input_tokens"] == SENTENCE_TOKENS and res["output_tokens"] == SENTENCE_TOKENS
    assert res["total_cost_usd"] == cost(SENTENCE_TOKENS, SENTENCE_TOKENS)
    assert re.fullmatch("ses_" + ID, res["session_id"])
    assert re.fullmatch("sbx_" + ID, res["sandbox_id"])

    r = invoke(client, a["slug"], UMLAUTS)
    res2 = check_result(exact(r))
    assert res2["response_content"] == UMLAUTS
    assert (res2["input_tokens"], res2["output_tokens"]) == (UMLAUTS_TOKENS, UMLAUTS_TOKENS)
    assert res2["total_cost_usd"] == cost(UMLAUTS_TOKENS, UMLAUTS_TOKENS)
    # Every call without session_id gets its own session id.
    assert res2["session_id"] != res["session_id"]

    h = history(client, a["slug"])
    assert h.headers["X-Total-Count"] == "2"
    items = exact(h)
    assert [i["invocation_id"] for i in items] == [res2["invocation_id"], res["invocation_id"]]
    assert items[0]["prompt"] == UMLAUTS and items[1]["prompt"] == SENTENCE
    for got, want in ((items[0], res2), (items[1], res)):
        # (the session files a call produced are in its result, not in the history)
        assert {k: v for k, v in got.items() if k != "prompt"} == {k: v for k, v in want.items() if k != "files"}
    # Ephemeral calls leave no session behind.
    assert client.get(f"/agents/{a['slug']}/sessions").json() == []


@needs_runner
def test_session_keeps_files_and_loses_them_after_redeploy(client):
    a = deployed_agent(client)
    slug = a["slug"]
    r = invoke(client, slug, "!write first", session_id="chat-1")
    assert r.status_code == 200, r.text
    first = r.json()
    assert first["session_id"] == "chat-1"
    r = invoke(client, slug, "!read", session_id="chat-1")
    assert r.json()["response_content"] == "first|first"
    assert r.json()["sandbox_id"] == first["sandbox_id"]
    # An ephemeral call never sees a session's files.
    assert invoke(client, slug, "!read").json()["response_content"] == "none|none"

    sessions = client.get(f"/agents/{slug}/sessions")
    assert sessions.headers["X-Total-Count"] == "1"
    s = sessions.json()[0]
    assert s["id"] == "chat-1" and s["invocation_count"] == 2
    assert s["sandbox_id"] == first["sandbox_id"]
    assert re.fullmatch(TIME, s["created_at"]) and re.fullmatch(TIME, s["last_invoked_at"])

    deploy(client, slug)
    r = invoke(client, slug, "!read", session_id="chat-1")
    assert r.status_code == 200, r.text
    assert r.json()["response_content"] == "none|none"
    s = client.get(f"/agents/{slug}/sessions").json()[0]
    assert s["invocation_count"] == 1  # the session started anew
    assert s["sandbox_id"] == r.json()["sandbox_id"]


@needs_runner
def test_ephemeral_calls_get_fresh_sandboxes_and_new_code_after_redeploy(client):
    """After an ephemeral call the runner builds the agent's next sandbox ahead
    (a spare): every call still gets a sandbox of its own, and one built over
    the old image is never used once the agent is redeployed with new code."""
    a = deployed_agent(client)
    slug = a["slug"]
    seen = set()
    for i in range(3):
        r = invoke(client, slug, f"!write e{i}")
        assert r.status_code == 200, r.text
        seen.add(r.json()["sandbox_id"])
        assert invoke(client, slug, "!read").json()["response_content"] == "none|none"
    assert len(seen) == 3
    v2 = "process.stdin.resume(); process.stdin.on('end', () => process.stdout.write('v2'));"
    r = client.put(f"/agents/{slug}/code", data=project(v2),
                   headers={"Content-Type": "application/gzip"})
    assert r.status_code == 200, r.text
    deploy(client, slug)
    r = invoke(client, slug, "!read")
    assert r.status_code == 200, r.text
    assert r.json()["response_content"] == "v2"


@needs_runner
def test_delete_session_destroys_its_sandbox(client):
    a = deployed_agent(client)
    slug = a["slug"]
    assert invoke(client, slug, "!write kept", session_id="s.1:a-b_c").status_code == 200
    assert invoke(client, slug, "!write other", session_id="s2").status_code == 200
    assert client.delete(f"/agents/{slug}/sessions/s.1:a-b_c").status_code == 204
    assert [s["id"] for s in client.get(f"/agents/{slug}/sessions").json()] == ["s2"]
    assert client.delete(f"/agents/{slug}/sessions/s.1:a-b_c").status_code == 404
    # The id can be used again: a new, empty session.
    assert invoke(client, slug, "!read", session_id="s.1:a-b_c").json()["response_content"] == "none|none"
    assert invoke(client, slug, "!read", session_id="s2").json()["response_content"] == "other|other"


@needs_runner
def test_stopped_agent_is_409_and_sessions_end(client):
    a = deployed_agent(client)
    slug = a["slug"]
    assert invoke(client, slug, "!write x", session_id="s").status_code == 200
    r = client.delete(f"/agents/{slug}/sandbox")
    assert r.status_code == 200 and r.json()["status"] == "stopped"
    r = invoke(client, slug, "!read", session_id="s")
    assert r.status_code == 409
    assert r.json()["detail"] == "Agent is not active (status: stopped)"
    assert client.get(f"/agents/{slug}/sessions").json()[0]["sandbox_id"] is None
    deploy(client, slug)
    assert invoke(client, slug, "!read", session_id="s").json()["response_content"] == "none|none"


@needs_runner
@pytest.mark.slow
def test_timeout_is_504_and_recorded(client):
    a = deployed_agent(client, timeout_seconds=2)
    slug = a["slug"]
    t0 = time.time()
    r = invoke(client, slug, "!sleep", timeout_seconds=1)
    assert r.status_code == 504, r.text
    assert time.time() - t0 < 15
    body = exact(r)
    assert body["detail"] == "Invocation timed out after 1 seconds"
    res = check_result(body["invocation"], "failed")
    assert "timed out" in res["error"]
    # The agent's own timeout applies without timeout_seconds.
    r = invoke(client, slug, "!sleep")
    assert r.status_code == 504
    assert r.json()["detail"] == "Invocation timed out after 2 seconds"
    items = history(client, slug).json()
    assert [i["status"] for i in items] == ["failed", "failed"]
    assert items[1]["invocation_id"] == res["invocation_id"]
    assert items[1]["prompt"] == "!sleep"


@needs_runner
def test_crash_is_500_and_recorded(client):
    a = deployed_agent(client)
    r = invoke(client, a["slug"], "!crash")
    assert r.status_code == 500, r.text
    body = exact(r)
    res = check_result(body["invocation"], "failed")
    # The error names the exit and where its stderr is (issue 29:
    # test_invocation_logs.py); the stderr itself is not in the answer.
    note = (f"; its stderr is in the invocation's logs: GET /api/v1/agents/{a['slug']}"
            f"/invocations/{res['invocation_id']}/logs")
    assert res["error"] == "agent exited with status 1" + note
    assert body["detail"] == "Invocation failed: agent exited with status 1" + note
    assert res["response_content"] == "partial output"
    assert "stderr must stay" not in r.text
    assert res["total_cost_usd"] == cost(res["input_tokens"], res["output_tokens"])
    h = history(client, a["slug"]).json()
    assert h[0]["invocation_id"] == res["invocation_id"] and h[0]["status"] == "failed"
    assert h[0]["error"] == res["error"]


@needs_runner
def test_prompts_empty_nul_and_one_megabyte(client):
    a = deployed_agent(client, ECHO_JS)
    slug = a["slug"]
    r = invoke(client, slug, "")
    assert r.status_code == 200, r.text
    res = exact(r)
    assert res["response_content"] == "" and res["input_tokens"] == 0 and res["output_tokens"] == 0
    assert res["total_cost_usd"] == 0

    r = invoke(client, slug, NULS)
    res = exact(r)
    assert res["response_content"] == NULS
    assert (res["input_tokens"], res["output_tokens"]) == (NULS_TOKENS, NULS_TOKENS)

    # A lone surrogate escape is decoded as U+FFFD, so the agent gets valid UTF-8.
    r = client.post(f"/agents/{slug}/invoke", data=b'{"prompt": "a\\ud800b"}',
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    assert r.json()["response_content"] == "a\ufffdb"

    big = ("lorem ipsum dolor sit amet " * 40000)[:1000000]
    r = invoke(client, slug, big)
    assert r.status_code == 200, r.text[:300]
    res = exact(r)
    assert res["response_content"] == big
    assert res["input_tokens"] == res["output_tokens"] > 100000
    assert res["total_cost_usd"] == cost(res["input_tokens"], res["output_tokens"])
    h = history(client, slug, limit=1).json()[0]
    assert h["prompt"] == big and h["response_content"] == big


@needs_runner
def test_binary_and_empty_output(client):
    a = deployed_agent(client)
    r = invoke(client, a["slug"], "!binary")
    assert r.status_code == 200, r.text
    # Invalid UTF-8 becomes U+FFFD (one per maximal invalid subpart); NUL survives.
    assert r.json()["response_content"] == "a\ufffd\ufffd\x00b\ufffdcé"
    assert history(client, a["slug"]).json()[0]["response_content"] == "a\ufffd\ufffd\x00b\ufffdcé"
    r = invoke(client, a["slug"], "!nothing")
    res = exact(r)
    assert r.status_code == 200 and res["response_content"] == "" and res["output_tokens"] == 0
    assert res["total_cost_usd"] == cost(res["input_tokens"], 0)


@needs_runner
def test_agent_exiting_before_reading_stdin(client):
    a = deployed_agent(client, EARLY_JS)
    for prompt in ("", "short", "x" * 1000000):
        r = invoke(client, a["slug"], prompt)
        assert r.status_code == 200, r.text[:300]
        assert r.json()["response_content"] == "early"


@needs_runner
def test_secrets_apply_at_call_time_and_host_env_stays_out(client):
    a = deployed_agent(client)
    slug = a["slug"]
    assert client.post(f"/agents/{slug}/secrets", json={"key": "MY_TOKEN", "value": "one"}).status_code == 201
    env = json.loads(invoke(client, slug, "!env").json()["response_content"])
    assert env["MY_TOKEN"] == "one"
    assert not [k for k in env if k.startswith("AGENTHOST_")]
    assert "DB_PASSWORD" not in env and "MYSQL_PWD" not in env
    assert client.post(f"/agents/{slug}/secrets", json={"key": "MY_TOKEN", "value": "two"}).status_code == 201
    assert json.loads(invoke(client, slug, "!env").json()["response_content"])["MY_TOKEN"] == "two"
    # Secret values never show up in the history's error or anywhere but the output.
    assert client.delete(f"/agents/{slug}/secrets/MY_TOKEN").status_code == 204
    assert "MY_TOKEN" not in json.loads(invoke(client, slug, "!env").json()["response_content"])


@needs_runner
def test_history_is_newest_first_and_paginated(client):
    a = deployed_agent(client, ECHO_JS)
    ids = [invoke(client, a["slug"], f"call {i}").json()["invocation_id"] for i in range(3)]
    r = history(client, a["slug"], limit=2)
    assert r.headers["X-Total-Count"] == "3"
    assert [i["invocation_id"] for i in r.json()] == ids[::-1][:2]
    assert [i["prompt"] for i in r.json()] == ["call 2", "call 1"]
    r = history(client, a["slug"], limit=2, offset=2)
    assert [i["invocation_id"] for i in r.json()] == ids[:1]


@needs_runner
@pytest.mark.slow
def test_ten_concurrent_invocations(client):
    a = deployed_agent(client, ECHO_JS)
    prompts = [f"parallel {i} {uuid.uuid4().hex}" for i in range(10)]
    with concurrent.futures.ThreadPoolExecutor(10) as ex:
        results = list(ex.map(lambda p: invoke(client, a["slug"], p), prompts))
    assert [r.status_code for r in results] == [200] * 10, [r.text for r in results]
    assert [r.json()["response_content"] for r in results] == prompts
    assert len({r.json()["sandbox_id"] for r in results}) == 10
    assert history(client, a["slug"]).headers["X-Total-Count"] == "10"
    assert client.get("/usage").json()["total_invocations"] == 10


@needs_runner
@pytest.mark.slow
def test_concurrent_calls_in_one_session_run_one_after_another(client):
    a = deployed_agent(client)
    with concurrent.futures.ThreadPoolExecutor(5) as ex:
        results = list(ex.map(lambda _: invoke(client, a["slug"], "!append", session_id="shared"),
                              range(5)))
    assert [r.status_code for r in results] == [200] * 5, [r.text for r in results]
    assert sorted(int(r.json()["response_content"]) for r in results) == [1, 2, 3, 4, 5]
    s = client.get(f"/agents/{a['slug']}/sessions").json()
    assert len(s) == 1 and s[0]["invocation_count"] == 5


@needs_runner
@pytest.mark.slow
def test_output_over_cap_fails(client):
    a = deployed_agent(client)
    r = invoke(client, a["slug"], "!flood")
    assert r.status_code == 500, r.text[:300]
    body = r.json()
    assert body["detail"] == "Invocation failed: output exceeded 10485760 bytes"
    assert body["invocation"]["status"] == "failed"


def _restart_runner():
    with open(os.path.join(VAR, "run", "runner.cmd")) as f:
        cmd = f.read().strip()
    with open(os.path.join(VAR, "log", "runner.log"), "ab") as log:
        p = subprocess.Popen(["setsid", "bash", "-c", cmd], stdin=subprocess.DEVNULL,
                             stdout=log, stderr=log)
    with open(os.path.join(VAR, "run", "runner.pid"), "w") as f:
        f.write(f"{p.pid}\n")
    deadline = time.time() + 30
    while not runner_available():
        assert time.time() < deadline, "runner did not come back"
        time.sleep(0.2)


@needs_runner
@pytest.mark.slow
def test_runner_killed_during_invocation(client):
    a = deployed_agent(client)
    pidfile = os.path.join(VAR, "run", "runner.pid")
    if not os.path.exists(os.path.join(VAR, "run", "runner.cmd")):
        pytest.skip("no runner.cmd to restart the runner with")
    with open(pidfile) as f:
        pid = int(f.read())
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        fut = ex.submit(invoke, client, a["slug"], "!sleep", timeout_seconds=60)
        time.sleep(1.5)
        os.kill(pid, signal.SIGKILL)
        try:
            r = fut.result(timeout=30)
        finally:
            _restart_runner()
    assert r.status_code == 500, r.text
    assert r.json()["detail"] == "Invocation failed: sandbox runner unavailable"
    assert history(client, a["slug"]).json()[0]["status"] == "failed"
    # The agent still runs once the runner is back.
    assert invoke(client, a["slug"], "back").json()["response_content"] == "back"

