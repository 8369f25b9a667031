"""Revocation across API hosts (issue 31): a key revoked, or a user disabled,
through host A fails on the very next request on host B, whatever host B's
workers (or its database node's query cache) had seen of the key before.
API.md: a revoked credential is a 401 (WWW-Authenticate: Bearer), a disabled
user a 403; both in the error shape."""
import uuid

from conftest import Client, admin, new_user

# More requests than host B has CRUD workers: every one of them has used the
# key before it is revoked, and every one must refuse it after.
WARM = 24


def agent_of(client):
    """A git agent (never deployed): GET /agents/{slug} is the scoped lookup
    (the key and the agent in one query), /users/me the plain one."""
    r = client.post("/agents", json={"name": "rv " + uuid.uuid4().hex[:10],
                                     "git_repo_url": "https://example.com/a.git"})
    assert r.status_code == 201, r.text
    return r.json()["slug"]


def warm(client, slug):
    for _ in range(WARM):
        assert client.get("/users/me").status_code == 200
        assert client.get(f"/agents/{slug}").status_code == 200


def assert_refused(r, status):
    assert r.status_code == status, (r.status_code, r.text)
    assert isinstance(r.json()["detail"], str)
    if status == 401:
        assert r.headers.get("WWW-Authenticate") == "Bearer"


def test_key_revoked_on_a_fails_next_on_b(cluster):
    owner = new_user()
    slug = agent_of(owner)
    made = owner.post("/api-keys", json={"name": "victim"})
    assert made.status_code == 201, made.text
    victim_b = Client(made.json()["key"], "b")
    warm(victim_b, slug)
    r = owner.delete(f"/api-keys/{made.json()['api_key']['id']}")  # through host A
    assert r.status_code == 204, r.text
    # The next request on B, then enough to reach every worker, both lookups.
    assert_refused(victim_b.get(f"/agents/{slug}"), 401)
    for _ in range(WARM):
        assert_refused(victim_b.get("/users/me"), 401)
        assert_refused(victim_b.get(f"/agents/{slug}"), 401)
    # The owner's other key is untouched, on both hosts.
    assert owner.get(f"/agents/{slug}").status_code == 200
    assert owner.on("b").get(f"/agents/{slug}").status_code == 200


def test_key_revoked_on_b_fails_next_on_a(cluster):
    owner = new_user()
    slug = agent_of(owner)
    made = owner.post("/api-keys", json={"name": "victim"}).json()
    victim_a = Client(made["key"], "a")
    warm(victim_a, slug)
    assert owner.on("b").delete(f"/api-keys/{made['api_key']['id']}").status_code == 204
    assert_refused(victim_a.get("/users/me"), 401)
    for _ in range(WARM):
        assert_refused(victim_a.get(f"/agents/{slug}"), 401)


def test_user_disabled_fails_next_on_b_until_enabled(cluster):
    user = new_user()
    slug = agent_of(user)
    on_b = user.on("b")
    warm(on_b, slug)
    email = on_b.get("/users/me").json()["email"]
    admin("user", "disable", email)  # host A's configuration: database node 1 first
    try:
        assert_refused(on_b.get(f"/agents/{slug}"), 403)
        for _ in range(WARM):
            assert_refused(on_b.get("/users/me"), 403)
            assert_refused(on_b.get(f"/agents/{slug}"), 403)
            # nor can it mint a key to get around it
            assert_refused(on_b.post("/api-keys", json={"name": "around"}), 403)
    finally:
        admin("user", "enable", email)
    assert on_b.get(f"/agents/{slug}").status_code == 200
    assert user.get("/users/me").status_code == 200
