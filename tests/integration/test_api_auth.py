"""Bearer authentication with API keys (every broken shape is a 401 with
WWW-Authenticate: Bearer; a disabled user is a 403), last_used_at, and tenant
isolation: another user's resources are 404 and never listed."""
import datetime
import re

import pytest

from conftest import Client, admin, db_query, new_client

RFC3339_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
REPO = "https://example.com/acme/agent.git"


def broken_headers(valid_key):
    """(description, Authorization header value or None) pairs that must all fail."""
    kid, secret = valid_key[4:12], valid_key[13:]
    flipped = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    return [
        ("no header", None),
        ("empty", ""),
        ("Bearer alone", "Bearer"),
        ("Bearer and space", "Bearer "),
        ("Basic", "Basic dXNlcjpwYXNzd29yZA=="),
        ("Token scheme", "Token " + valid_key),
        ("key without scheme", valid_key),
        ("too short", "Bearer ahk_abc"),
        ("too long", "Bearer " + valid_key + "x"),
        ("wrong prefix", "Bearer ahx_" + kid + "_" + secret),
        ("upper prefix", "Bearer AHK_" + kid + "_" + secret),
        ("wrong separator", "Bearer ahk_" + kid + "-" + secret),
        ("non-base62", "Bearer ahk_" + kid + "_" + secret[:-1] + "!"),
        ("non-ASCII", "Bearer ahk_" + kid + "_" + secret[:-1] + "\u00e9"),
        ("two tokens", "Bearer " + valid_key + " " + valid_key),
        ("a JWT-looking thing", "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."),
        ("right shape, unknown id", "Bearer ahk_ZZZZZZZZ_" + secret),
        ("valid id, wrong secret", "Bearer ahk_" + kid + "_" + flipped),
        ("valid id, secret of zeros", "Bearer ahk_" + kid + "_0000000000"),
    ]


def request_with(client, method, path, header, **kw):
    c = Client()
    c.s.headers["X-Forwarded-For"] = client.s.headers["X-Forwarded-For"]
    if header is not None:
        c.s.headers["Authorization"] = header.encode("utf-8")
    return c.request(method, path, **kw)


def assert_401(r):
    assert r.status_code == 401, r.text
    assert r.headers.get("WWW-Authenticate") == "Bearer"
    assert r.headers["Content-Type"].startswith("application/json")
    assert isinstance(r.json()["detail"], str) and r.json()["detail"]


@pytest.mark.parametrize("endpoint", [("GET", "/users/me"), ("GET", "/agents"),
                                      ("POST", "/agents"), ("POST", "/api-keys"),
                                      ("DELETE", "/agents/x"), ("PUT", "/agents/x/code")])
def test_broken_credentials_are_401(client, endpoint):
    method, path = endpoint
    for desc, header in broken_headers(client.key):
        kw = {"json": {"name": "never", "git_repo_url": REPO}} if method == "POST" else {}
        r = request_with(client, method, path, header, **kw)
        assert r.status_code == 401, (desc, r.status_code, r.text)
        assert_401(r)
    # nothing was done on the user's behalf
    assert client.get("/agents").json() == []
    assert client.get("/api-keys").headers["X-Total-Count"] == "1"


def test_scheme_is_case_insensitive_and_extra_spaces_ok(client):
    for header in ("bearer " + client.key, "BEARER " + client.key, "Bearer   " + client.key):
        assert request_with(client, "GET", "/users/me", header).status_code == 200, header


def test_users_me(client):
    r = client.get("/users/me")
    assert r.status_code == 200
    me = r.json()
    assert set(me) == {"id", "email", "plan", "quota_bytes", "created_at",
                       "max_cost_usd_per_day", "max_cost_usd_per_month"}  # spend limits (test_budgets.py)
    assert me["email"] == client.email
    assert me["plan"] == "free"
    assert re.match(r"^usr_[0-9A-Za-z]{22}$", me["id"])
    assert RFC3339_MS.match(me["created_at"])
    assert me["quota_bytes"] in (100 * 1024 * 1024, 100 * 1000 * 1000), "free plan: 100 MB"


def test_revoked_key_is_401(client):
    made = client.post("/api-keys", json={"name": "tmp"}).json()
    client.delete(f"/api-keys/{made['api_key']['id']}")
    assert_401(Client(made["key"]).get("/agents"))


def test_expired_key_is_401(client):
    made = client.post("/api-keys", json={"name": "tmp"}).json()
    c = Client(made["key"])
    assert c.get("/users/me").status_code == 200
    db_query(f"UPDATE api_keys SET expires_at = NOW(3) - INTERVAL 1 SECOND"
             f" WHERE id = '{made['api_key']['id']}'")
    assert_401(c.get("/users/me"))


def test_disabled_user_is_403_then_enabled_again(client):
    assert client.get("/users/me").status_code == 200
    admin("user", "disable", client.email)
    try:
        for method, path in (("GET", "/users/me"), ("GET", "/agents"), ("POST", "/api-keys")):
            r = client.request(method, path)
            assert r.status_code == 403, (path, r.text)
            assert isinstance(r.json()["detail"], str)
        # a disabled user cannot mint keys to get around it
        assert client.get("/api-keys").status_code == 403
    finally:
        admin("user", "enable", client.email)
    assert client.get("/users/me").status_code == 200
    assert client.get("/api-keys").headers["X-Total-Count"] == "1"


def test_last_used_at_is_set_on_use(client):
    made = client.post("/api-keys", json={"name": "fresh"}).json()
    kid = made["api_key"]["id"]

    def record():
        return next(k for k in client.get("/api-keys").json() if k["id"] == kid)
    assert record()["last_used_at"] is None
    before = datetime.datetime.now(datetime.timezone.utc)
    assert Client(made["key"]).get("/agents").status_code == 200
    used = record()["last_used_at"]
    assert used is not None and RFC3339_MS.match(used)
    t = datetime.datetime.strptime(used, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    assert abs((t - before).total_seconds()) < 30
    # the key in use by `client` itself was touched too
    mine = [k for k in client.get("/api-keys").json() if k["prefix"] == client.key[:12]]
    assert mine and mine[0]["last_used_at"] is not None


def test_last_used_at_written_at_most_once_a_minute(client):
    client.get("/users/me")
    first = db_query(f"SELECT last_used_at FROM api_keys WHERE key_id = '{client.key[4:12]}'")
    for _ in range(5):
        client.get("/users/me")
    assert db_query(f"SELECT last_used_at FROM api_keys WHERE key_id = '{client.key[4:12]}'") == first


def test_public_routes_need_no_key_and_ignore_a_bad_one(anon):
    for header in (None, "Bearer ahk_bad", "Basic x"):
        for path in ("/health", "/openapi.json"):
            r = request_with(anon, "GET", path, header)
            assert r.status_code == 200, (path, header, r.text)


# ---- tenant isolation ----

@pytest.fixture
def theirs(other_client):
    """Another user's agent with a secret and code, and its state to compare with."""
    a = other_client.post("/agents", json={"name": "Private", "slug": "private", "source_type": "local"}).json()
    assert other_client.post("/agents/private/secrets", json={"key": "THEIR_SECRET", "value": "v"}).status_code == 201
    return a


def test_other_users_agent_is_404_everywhere(client, other_client, theirs):
    gz = b"\x1f\x8b" + b"\x00" * 20
    attempts = [
        ("GET", "/agents/private", {}),
        ("PATCH", "/agents/private", {"json": {"name": "hijacked"}}),
        ("PATCH", "/agents/private", {"json": {"slug": "mine-now"}}),
        ("POST", "/agents/private/deploy", {}),
        ("DELETE", "/agents/private/sandbox", {}),
        ("POST", "/agents/private/invoke", {"json": {"prompt": "hi"}}),
        ("PUT", "/agents/private/code", {"data": gz, "headers": {"Content-Type": "application/gzip"}}),
        ("GET", "/agents/private/secrets", {}),
        ("POST", "/agents/private/secrets", {"json": {"key": "INJECTED", "value": "x"}}),
        ("DELETE", "/agents/private/secrets/THEIR_SECRET", {}),
        ("DELETE", "/agents/private", {}),
    ]
    for method, path, kw in attempts:
        r = client.request(method, path, **kw)
        assert r.status_code == 404, (method, path, r.status_code, r.text)
        assert r.json() == {"detail": "Agent not found"}, (method, path)
    # the owner's agent is untouched
    g = other_client.get("/agents/private")
    assert g.status_code == 200
    assert g.json() == theirs
    assert [s["key"] for s in other_client.get("/agents/private/secrets").json()] == ["THEIR_SECRET"]
    assert db_query(f"SELECT COUNT(*) FROM deploy_jobs WHERE agent_id = '{theirs['id']}'") == [["0"]]
    assert db_query(f"SELECT code_sha256 FROM agents WHERE id = '{theirs['id']}'") == [["NULL"]]


def test_lists_never_show_other_users_records(client, other_client, theirs):
    mine = client.post("/agents", json={"name": "Mine", "git_repo_url": REPO}).json()
    r = client.get("/agents")
    assert [a["id"] for a in r.json()] == [mine["id"]]
    assert r.headers["X-Total-Count"] == "1"
    assert theirs["id"] not in r.text
    other_client.post("/api-keys", json={"name": "their-key"})
    keys = client.get("/api-keys")
    assert "their-key" not in keys.text and keys.headers["X-Total-Count"] == "1"
    assert [a["id"] for a in other_client.get("/agents").json()] == [theirs["id"]]


def test_same_slug_for_two_users(client, other_client, theirs):
    mine = client.post("/agents", json={"name": "Mine", "slug": "private", "git_repo_url": REPO})
    assert mine.status_code == 201, mine.text
    assert client.get("/agents/private").json()["id"] == mine.json()["id"]
    assert other_client.get("/agents/private").json()["id"] == theirs["id"]
    # a secret of the same name on each is separate
    client.post("/agents/private/secrets", json={"key": "THEIR_SECRET", "value": "mine"})
    assert client.delete("/agents/private/secrets/THEIR_SECRET").status_code == 204
    assert [s["key"] for s in other_client.get("/agents/private/secrets").json()] == ["THEIR_SECRET"]


def test_derived_slug_ignores_other_users(client, other_client):
    other_client.post("/agents", json={"name": "Common Name", "git_repo_url": REPO})
    r = client.post("/agents", json={"name": "Common Name", "git_repo_url": REPO})
    assert r.json()["slug"] == "common-name"


def test_users_me_is_per_key(client):
    other = new_client()
    assert client.get("/users/me").json()["email"] == client.email
    assert other.get("/users/me").json()["email"] == other.email
