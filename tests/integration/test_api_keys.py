"""/api-keys: create (shown once), list (never the key), revoke (401 at once)."""
import re

import pytest

from conftest import Client, assert_422, db_dump

KEY = re.compile(r"^ahk_[0-9A-Za-z]{8}_[0-9A-Za-z]{10}$")
KEY_ID = re.compile(r"^key_[0-9A-Za-z]{22}$")
RFC3339_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
RECORD_KEYS = {"id", "name", "prefix", "created_at", "last_used_at",
               "max_cost_usd_per_day", "max_cost_usd_per_month"}  # spend limits: test_budgets.py


def create(client, **body):
    r = client.post("/api-keys", json=body) if body else client.post("/api-keys")
    assert r.status_code == 201, r.text
    return r.json()


def keys_of(client):
    r = client.get("/api-keys", params={"limit": 100})
    assert r.status_code == 200, r.text
    return r


def test_create_shape(client):
    r = client.post("/api-keys", json={"name": "ci"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert set(body) == {"api_key", "key"}
    key, rec = body["key"], body["api_key"]
    assert KEY.match(key), key
    assert set(rec) == RECORD_KEYS
    assert KEY_ID.match(rec["id"])
    assert rec["name"] == "ci"
    assert rec["prefix"] == key[:12]
    assert RFC3339_MS.match(rec["created_at"])
    assert rec["last_used_at"] is None


@pytest.mark.parametrize("how", ["no body", "empty object", "null name"])
def test_default_name(client, how):
    if how == "no body":
        body = create(client)
    elif how == "empty object":
        body = client.post("/api-keys", json={}).json()
    else:
        body = client.post("/api-keys", json={"name": None}).json()
    assert body["api_key"]["name"] == "Default"
    assert KEY.match(body["key"])


def test_new_key_works_for_the_same_user(client):
    me = client.get("/users/me").json()
    key = create(client, name="second")["key"]
    other = Client(key)
    r = other.get("/users/me")
    assert r.status_code == 200, r.text
    assert r.json()["id"] == me["id"]
    # and it sees the same agents
    client.post("/agents", json={"name": "shared", "git_repo_url": "https://example.com/x.git"})
    assert [a["slug"] for a in other.get("/agents").json()] == ["shared"]


def test_keys_are_distinct(client):
    made = [create(client) for _ in range(5)]
    assert len({m["key"] for m in made}) == 5
    assert len({m["key"][4:12] for m in made}) == 5
    assert len({m["api_key"]["id"] for m in made}) == 5


def test_list_never_contains_the_key(client):
    made = [create(client, name=f"k{i}") for i in range(3)]
    r = keys_of(client)
    assert r.headers["X-Total-Count"] == "4"  # plus the key the admin command printed
    body = r.json()
    assert isinstance(body, list) and len(body) == 4
    for rec in body:
        assert set(rec) == RECORD_KEYS
        assert re.match(r"^ahk_[0-9A-Za-z]{8}$", rec["prefix"])
    for m in made:
        assert m["key"] not in r.text
        assert m["key"][13:] not in r.text, "the secret part must never be listed"
    assert {m["api_key"]["id"] for m in made} <= {rec["id"] for rec in body}
    assert client.key not in r.text


def test_list_paginates(client):
    for i in range(3):
        create(client)
    r = client.get("/api-keys?limit=2")
    assert len(r.json()) == 2 and r.headers["X-Total-Count"] == "4"
    r2 = client.get("/api-keys?limit=2&offset=2")
    assert len(r2.json()) == 2
    assert not {k["id"] for k in r.json()} & {k["id"] for k in r2.json()}
    assert_422(client.get("/api-keys?limit=0"), ("query", "limit"))
    assert_422(client.get("/api-keys?offset=-5"), ("query", "offset"))


def test_key_not_stored_in_clear(client):
    key = create(client)["key"]
    dump = db_dump()
    assert key[4:12].encode() in dump, "the public key id is stored"
    assert key.encode() not in dump
    assert key[13:].encode() not in dump


def test_delete_revokes_at_once(client):
    made = create(client, name="short-lived")
    victim = Client(made["key"])
    assert victim.get("/users/me").status_code == 200
    r = client.delete(f"/api-keys/{made['api_key']['id']}")
    assert r.status_code == 204 and r.content == b""
    r = victim.get("/users/me")
    assert r.status_code == 401
    assert r.headers.get("WWW-Authenticate") == "Bearer"
    assert isinstance(r.json()["detail"], str)
    # every worker must refuse it, not just the one that handled the delete
    for _ in range(10):
        assert Client(made["key"]).get("/agents").status_code == 401
    assert client.get("/users/me").status_code == 200, "the other keys keep working"
    assert made["api_key"]["id"] not in {k["id"] for k in keys_of(client).json()}
    assert client.delete(f"/api-keys/{made['api_key']['id']}").status_code == 404


def test_a_key_can_revoke_itself(client):
    made = create(client)
    own = Client(made["key"])
    assert own.delete(f"/api-keys/{made['api_key']['id']}").status_code == 204
    assert own.get("/users/me").status_code == 401


def test_other_users_key_is_404(client, other_client):
    theirs = create(other_client, name="theirs")
    r = client.delete(f"/api-keys/{theirs['api_key']['id']}")
    assert r.status_code == 404
    assert r.json() == {"detail": "API key not found"}
    assert Client(theirs["key"]).get("/users/me").status_code == 200
    assert theirs["api_key"]["id"] not in keys_of(client).text
    assert theirs["api_key"]["prefix"] not in keys_of(client).text


@pytest.mark.parametrize("key_id", ["key_doesnotexist0000000000", "nope", "%2F", "x" * 300])
def test_delete_unknown_is_404(client, key_id):
    r = client.delete(f"/api-keys/{key_id}")
    assert r.status_code == 404, r.text
    assert isinstance(r.json()["detail"], str)


@pytest.mark.parametrize("body,loc", [
    ({"name": ""}, ("body", "name")),
    ({"name": "n" * 256}, ("body", "name")),
    ({"name": 5}, ("body", "name")),
    ({"name": ["a"]}, ("body", "name")),
    ({"name": "a\u0000b"}, ("body", "name")),
    ({"name": "ok", "key": "ahk_AAAAAAAA_BBBBBBBBBB"}, ("body", "key")),
    ({"prefix": "ahk_x"}, ("body", "prefix")),
])
def test_bad_bodies_are_422(client, body, loc):
    before = keys_of(client).headers["X-Total-Count"]
    assert_422(client.post("/api-keys", json=body), loc)
    assert keys_of(client).headers["X-Total-Count"] == before


def test_name_of_255_characters(client):
    assert create(client, name="n" * 255)["api_key"]["name"] == "n" * 255
