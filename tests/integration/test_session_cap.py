"""The per-plan cap of concurrent sessions (free: 3). A session is live from
the call that starts it until it is deleted, ends (stop, redeploy) or expires
when idle; the sessions of all the user's agents count. A call that would
start one more gets 429 with code "session_limit" and changes nothing; calls
in live sessions and calls without session_id go on working."""
import concurrent.futures

import yaml

from agent_code import TOOL_JS, deployed_agent, needs_runner
from conftest import db_query
from test_openapi import DOC_PATH, check_response


def invoke(client, slug, prompt, **fields):
    return client.post(f"/agents/{slug}/invoke", json=dict(prompt=prompt, **fields), timeout=120)


def session_ids(client, slug):
    return sorted(s["id"] for s in client.get(f"/agents/{slug}/sessions").json())


def history_count(client, slug):
    return client.get(f"/agents/{slug}/invocations").headers["X-Total-Count"]


def assert_at_cap(r):
    assert r.status_code == 429, r.text
    body = r.json()
    assert body["code"] == "session_limit"
    assert "free plan allows 3 concurrent sessions" in body["detail"]
    assert "DELETE /agents/{slug}/sessions/{id}" in body["detail"]
    assert int(r.headers["Retry-After"]) >= 1
    with open(DOC_PATH, encoding="utf-8") as f:
        check_response(yaml.safe_load(f), "POST", "/agents/{slug}/invoke", r)


@needs_runner
def test_free_plan_session_cap(client):
    a = deployed_agent(client, TOOL_JS)
    b = deployed_agent(client, TOOL_JS)
    for slug, sid in ((a["slug"], "s1"), (a["slug"], "s2"), (b["slug"], "s3")):
        r = invoke(client, slug, f"!write {sid}", session_id=sid)
        assert r.status_code == 200, r.text
    calls = history_count(client, a["slug"])

    # One more session, on either agent: refused, and nothing changed.
    assert_at_cap(invoke(client, a["slug"], "!read", session_id="s4"))
    assert session_ids(client, a["slug"]) == ["s1", "s2"]
    assert history_count(client, a["slug"]) == calls

    # Live sessions and one-off calls still work.
    r = invoke(client, a["slug"], "!read", session_id="s1")
    assert r.status_code == 200 and r.json()["response_content"] == "s1|s1"
    r = invoke(client, b["slug"], "!read")
    assert r.status_code == 200 and r.json()["response_content"] == "none|none"

    # Deleting a session frees its place.
    assert client.delete(f"/agents/{a['slug']}/sessions/s1").status_code == 204
    r = invoke(client, a["slug"], "!write s4", session_id="s4")
    assert r.status_code == 200, r.text

    # An expired session (as the idle reclaim leaves it) frees its place too;
    # starting it again is a new session, which the cap counts.
    db_query(f"UPDATE sessions SET state = 'expired', sandbox_id = NULL"
             f" WHERE agent_id = '{a['id']}' AND id = 's2'")
    assert invoke(client, a["slug"], "!read", session_id="s5").status_code == 200
    assert_at_cap(invoke(client, a["slug"], "!read", session_id="s2"))


@needs_runner
def test_two_new_sessions_at_cap_minus_one_admit_one(client):
    a = deployed_agent(client, TOOL_JS)
    for sid in ("s1", "s2"):
        assert invoke(client, a["slug"], "!read", session_id=sid).status_code == 200
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        results = list(ex.map(lambda sid: invoke(client, a["slug"], "!read", session_id=sid),
                              ("race-a", "race-b")))
    assert sorted(r.status_code for r in results) == [200, 429], [r.text for r in results]
    assert_at_cap(next(r for r in results if r.status_code == 429))
    won = next(r for r in results if r.status_code == 200).json()["session_id"]
    assert session_ids(client, a["slug"]) == sorted(["s1", "s2", won])

