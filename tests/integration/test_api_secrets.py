"""/agents/{slug}/secrets: set/overwrite, list, delete, reserved and malformed
names, value limits, and that values are sealed at rest and never logged."""
import re
import secrets as pysecrets
import time

import pytest

from agent_code import deployed_agent, needs_runner
from conftest import assert_422, db_dump, db_query, log_files

RFC3339_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
SECRET_KEYS = {"key", "created_at", "updated_at"}


@pytest.fixture
def agent(make_agent):
    return make_agent()


def path(agent):
    return f"/agents/{agent['slug']}/secrets"


def token():
    return "tok" + pysecrets.token_hex(16)


def listed(client, agent):
    r = client.get(path(agent))
    assert r.status_code == 200, r.text
    return r


def test_set_is_201_without_value(client, agent):
    value = token()
    r = client.post(path(agent), json={"key": "API_TOKEN", "value": value})
    assert r.status_code == 201, r.text
    body = r.json()
    assert set(body) == SECRET_KEYS
    assert body["key"] == "API_TOKEN"
    assert RFC3339_MS.match(body["created_at"]) and body["created_at"] == body["updated_at"]
    assert value not in r.text


def test_overwrite_keeps_created_at(client, agent):
    first = client.post(path(agent), json={"key": "K", "value": "one"}).json()
    time.sleep(0.01)  # millisecond timestamps
    r = client.post(path(agent), json={"key": "K", "value": "two"})
    assert r.status_code == 201, r.text
    second = r.json()
    assert second["created_at"] == first["created_at"]
    assert second["updated_at"] > first["updated_at"]
    lst = listed(client, agent).json()
    assert lst == [second]


def test_overwrite_changes_the_sealed_value(client, agent):
    client.post(path(agent), json={"key": "K", "value": "one"})
    before = db_query(f"SELECT HEX(nonce), HEX(ciphertext) FROM secrets WHERE agent_id = '{agent['id']}'")
    client.post(path(agent), json={"key": "K", "value": "two-longer"})
    after = db_query(f"SELECT HEX(nonce), HEX(ciphertext) FROM secrets WHERE agent_id = '{agent['id']}'")
    assert len(after) == 1
    assert after[0][0] != before[0][0], "a fresh nonce for every seal"
    assert after[0][1] != before[0][1]


def test_list_shows_names_only(client, agent):
    values = {}
    for k in ("ZED", "alpha", "_under", "Mid_9"):
        values[k] = token()
        assert client.post(path(agent), json={"key": k, "value": values[k]}).status_code == 201
    r = listed(client, agent)
    assert r.headers["X-Total-Count"] == "4"
    body = r.json()
    assert isinstance(body, list)
    assert sorted(s["key"] for s in body) == sorted(values)
    for s in body:
        assert set(s) == SECRET_KEYS
        assert RFC3339_MS.match(s["created_at"]) and RFC3339_MS.match(s["updated_at"])
    for v in values.values():
        assert v not in r.text


def test_list_of_agent_without_secrets_is_empty(client, agent):
    r = listed(client, agent)
    assert r.json() == [] and r.headers["X-Total-Count"] == "0"


def test_delete_then_404(client, agent):
    client.post(path(agent), json={"key": "GONE", "value": "x"})
    client.post(path(agent), json={"key": "STAY", "value": "y"})
    r = client.delete(path(agent) + "/GONE")
    assert r.status_code == 204 and r.content == b""
    assert [s["key"] for s in listed(client, agent).json()] == ["STAY"]
    r = client.delete(path(agent) + "/GONE")
    assert r.status_code == 404
    assert isinstance(r.json()["detail"], str)
    assert client.delete(path(agent) + "/NEVER").status_code == 404


def test_names_are_case_sensitive(client, agent):
    client.post(path(agent), json={"key": "Token", "value": "a"})
    client.post(path(agent), json={"key": "TOKEN", "value": "b"})
    assert sorted(s["key"] for s in listed(client, agent).json()) == ["TOKEN", "Token"]
    assert client.delete(path(agent) + "/token").status_code == 404


def test_secrets_are_per_agent(client, make_agent):
    a, b = make_agent(), make_agent()
    client.post(path(a), json={"key": "ONLY_A", "value": "x"})
    assert listed(client, b).json() == []
    assert client.delete(path(b) + "/ONLY_A").status_code == 404
    assert [s["key"] for s in listed(client, a).json()] == ["ONLY_A"]


@pytest.mark.parametrize("key", ["ANTHROPIC_API_KEY", "PATH", "HOME", "NODE_OPTIONS", "AGENTHOST_X",
                                 "AGENTHOST_", "AGENTHOST_MASTER_KEY"])
def test_reserved_names_are_422(client, agent, key):
    detail = assert_422(client.post(path(agent), json={"key": key, "value": "v"}), ("body", "key"))
    assert len(detail) == 1
    assert listed(client, agent).json() == []


@pytest.mark.parametrize("key", ["1ABC", "A-B", "A B", "", "A" * 129, "É", "a.b", "A\u0000B", "$X",
                                 " A", "A\n"])
def test_bad_key_patterns_are_422(client, agent, key):
    assert_422(client.post(path(agent), json={"key": key, "value": "v"}), ("body", "key"))
    assert listed(client, agent).json() == []


@pytest.mark.parametrize("key", ["_", "a", "A" * 128, "_x9", "path", "Home", "AGENTHOSTX"])
def test_valid_key_edges(client, agent, key):
    r = client.post(path(agent), json={"key": key, "value": "v"})
    assert r.status_code == 201, r.text
    assert r.json()["key"] == key


def test_value_limits(client, agent):
    assert client.post(path(agent), json={"key": "MAX", "value": "x" * 65536}).status_code == 201
    assert client.post(path(agent), json={"key": "EMPTY", "value": ""}).status_code == 201
    assert_422(client.post(path(agent), json={"key": "OVER", "value": "x" * 65537}), ("body", "value"))
    # 64 KiB is a byte limit: 40000 two-byte characters are 80000 bytes
    assert_422(client.post(path(agent), json={"key": "WIDE", "value": "\u00e9" * 40000}), ("body", "value"))
    assert sorted(s["key"] for s in listed(client, agent).json()) == ["EMPTY", "MAX"]


@pytest.mark.parametrize("body,locs", [
    ({}, [("body", "key"), ("body", "value")]),
    ({"key": "K"}, [("body", "value")]),
    ({"value": "v"}, [("body", "key")]),
    ({"key": "K", "value": 5}, [("body", "value")]),
    ({"key": "K", "value": None}, [("body", "value")]),
    ({"key": "K", "value": ["v"]}, [("body", "value")]),
    ({"key": "K", "value": {"v": 1}}, [("body", "value")]),
    ({"key": 7, "value": "v"}, [("body", "key")]),
    ({"key": None, "value": "v"}, [("body", "key")]),
    ({"key": "K", "value": "a\u0000b"}, [("body", "value")]),
    ({"key": "K", "value": "v", "created_at": "x"}, [("body", "created_at")]),
])
def test_bad_bodies_are_422(client, agent, body, locs):
    assert_422(client.post(path(agent), json=body), *locs)
    assert listed(client, agent).json() == []


def test_value_is_not_stored_in_clear(client, agent):
    value = token()
    assert client.post(path(agent), json={"key": "SEALED", "value": value}).status_code == 201
    rows = db_query(f"SELECT LENGTH(nonce), LENGTH(ciphertext) FROM secrets"
                    f" WHERE agent_id = '{agent['id']}' AND name = 'SEALED'")
    assert rows == [["24", str(len(value) + 16)]], "secretbox: 24-byte nonce, 16-byte tag"
    dump = db_dump()
    assert b"SEALED" in dump, "the dump must include the secrets table"
    assert value.encode() not in dump
    assert value.encode().hex().encode() not in dump.lower()


def test_same_value_seals_differently(client, agent):
    value = token()
    client.post(path(agent), json={"key": "A", "value": value})
    client.post(path(agent), json={"key": "B", "value": value})
    rows = db_query(f"SELECT HEX(ciphertext) FROM secrets WHERE agent_id = '{agent['id']}'")
    assert len(rows) == 2 and rows[0] != rows[1]


def test_value_is_never_logged(client, agent):
    ok_value, refused_value = token(), token()
    client.post(path(agent), json={"key": "LOGME", "value": ok_value})
    client.post(path(agent), json={"key": "PATH", "value": refused_value})          # 422
    client.post(path(agent), json={"key": "X", "value": refused_value, "bad": 1})   # 422
    client.post(path(agent), data='{"key":"Y","value":"' + refused_value + '"',      # malformed
                headers={"Content-Type": "application/json"})
    files = log_files()
    assert any(f.endswith("api.log") for f in files), files
    for f in files:
        with open(f, "rb") as fh:
            data = fh.read()
        assert ok_value.encode() not in data, f
        assert refused_value.encode() not in data, f


# ---- what the agent's sandbox can hold ----------------------------------------

TOTAL_MAX = 224 * 1024  # names and values, each NAME=value and a NUL

# Prints how many S_ variables it was given and their bytes.
COUNT_JS = """
process.stdin.resume();
process.stdin.on('end', () => {
  const s = Object.entries(process.env).filter(([k]) => k.startsWith('S_'));
  process.stdout.write(s.length + ' ' + s.reduce((n, [k, v]) => n + k.length + v.length + 2, 0));
});
"""


def set_value(client, agent, key, n):
    return client.post(path(agent), json={"key": key, "value": "v" * n})


@needs_runner
def test_secrets_past_what_the_sandbox_holds_are_refused(client):
    """Each value may be 64 KiB, but the sandbox's environment holds 256 KiB:
    a fourth 64 KiB secret once made every call of the agent fail at its
    start ("the sandbox failed to run the agent"). Now the total is capped
    at 224 KiB with a 422 that says so, and an agent at the cap runs."""
    agent = deployed_agent(client, COUNT_JS)
    for k in ("S_A", "S_B", "S_C"):
        assert set_value(client, agent, k, 65536).status_code == 201
    used = 3 * (3 + 65536 + 2)
    room = TOTAL_MAX - used - (3 + 2)
    over = set_value(client, agent, "S_D", room + 1)
    detail = assert_422(over, ("body", "value"))
    assert detail[0]["type"] == "secrets_too_large", detail
    assert str(TOTAL_MAX) in detail[0]["msg"] and str(TOTAL_MAX + 1) in detail[0]["msg"], detail
    assert [s["key"] for s in listed(client, agent).json()] == ["S_A", "S_B", "S_C"]  # unchanged
    assert set_value(client, agent, "S_D", room).status_code == 201  # exactly at the cap
    # Overwriting counts the new value in place of the old one.
    assert set_value(client, agent, "S_A", 65536).status_code == 201
    assert_422(set_value(client, agent, "S_A", 65536 + 1), ("body", "value"))
    r = client.post(f"/agents/{agent['slug']}/invoke", json={"prompt": "x"}, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["response_content"] == f"4 {TOTAL_MAX}"


def test_an_agent_has_at_most_1000_secrets(client, agent):
    db_query("INSERT INTO secrets (agent_id, name, nonce, ciphertext, created_at, updated_at)"
             f" SELECT '{agent['id']}', CONCAT('S_', seq), RANDOM_BYTES(24), RANDOM_BYTES(17),"
             " NOW(3), NOW(3) FROM seq_1_to_999")
    assert client.post(path(agent), json={"key": "LAST", "value": "x"}).status_code == 201
    over = client.post(path(agent), json={"key": "ONE_MORE", "value": "x"})
    detail = assert_422(over, ("body", "key"))
    assert detail[0]["type"] == "too_many_secrets" and "1000" in detail[0]["msg"], detail
    # Overwriting one of the thousand is no new variable.
    assert client.post(path(agent), json={"key": "LAST", "value": "y"}).status_code == 201


@needs_runner
def test_a_call_whose_secrets_outgrew_the_sandbox_says_why(client, make_agent):
    """Two secrets set at once may pass the cap together; the call then
    fails with a reason the user can act on, not a bare sandbox failure.
    (Secretbox binds no name or agent, so copied rows still decrypt.)"""
    agent = deployed_agent(client, COUNT_JS)
    for k in ("S_A", "S_B", "S_C"):
        assert set_value(client, agent, k, 65536).status_code == 201
    db_query("INSERT INTO secrets (agent_id, name, nonce, ciphertext, created_at, updated_at)"
             " SELECT agent_id, CONCAT(name, '_2'), nonce, ciphertext, NOW(3), NOW(3)"
             f" FROM secrets WHERE agent_id = '{agent['id']}'")
    r = client.post(f"/agents/{agent['slug']}/invoke", json={"prompt": "x"}, timeout=120)
    assert r.status_code == 500, r.text
    err = r.json()["invocation"]["error"]
    assert "environment" in err and "remove or shorten secrets" in err, err
