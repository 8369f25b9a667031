"""Agents CRUD and the lifecycle endpoints of issue 2, against the contract in
shared/API.md: record shape, slug derivation, lists, PATCH semantics, delete,
deploy, sandbox stop and invoke on a non-active agent."""
import datetime
import re
import time

import pytest

from conftest import assert_422, db_query

RFC3339_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
AGENT_ID = re.compile(r"^agt_[0-9A-Za-z]{22}$")
AGENT_KEYS = {"id", "name", "slug", "description", "source_type", "git_repo_url", "git_branch",
              "timeout_seconds", "min_warm", "network", "status", "status_message", "sandbox_id", "needs_redeploy",
              "created_at", "updated_at", "deployed_at",
              # spend limits (issue 32, test_budgets.py)
              "max_cost_usd_per_day", "max_cost_usd_per_month", "webhook_url"}
REPO = "https://example.com/acme/agent.git"


def parse_ts(s):
    assert RFC3339_MS.match(s), s
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)


def assert_agent_shape(a):
    assert set(a) == AGENT_KEYS, set(a) ^ AGENT_KEYS
    assert AGENT_ID.match(a["id"]), a["id"]
    assert re.match(r"^[a-z0-9]+(-[a-z0-9]+)*$", a["slug"]) and len(a["slug"]) <= 63
    assert a["source_type"] in ("git", "local")
    assert a["status"] in ("draft", "deploying", "active", "error", "stopped")
    assert isinstance(a["needs_redeploy"], bool)
    assert isinstance(a["timeout_seconds"], int)
    parse_ts(a["created_at"])
    parse_ts(a["updated_at"])
    if a["deployed_at"] is not None:
        parse_ts(a["deployed_at"])


def count_agents(client):
    r = client.get("/agents", params={"limit": 100})
    assert r.status_code == 200, r.text
    return int(r.headers["X-Total-Count"])


def mark_deployed(agent_id, status="active"):
    """What a successful deploy by the runner leaves behind (the runner is not
    under test here)."""
    db_query(f"UPDATE agents SET status = '{status}', deployed_at = NOW(3), needs_redeploy = 0"
             f" WHERE id = '{agent_id}'")


# ---- create ----

def test_create_returns_the_full_record(client):
    body = {"name": "Support Bot", "slug": "support-bot", "description": "Answers tickets",
            "source_type": "git", "git_repo_url": REPO, "git_branch": "release/v1",
            "timeout_seconds": 300}
    before = datetime.datetime.now(datetime.timezone.utc)
    r = client.post("/agents", json=body)
    assert r.status_code == 201, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    a = r.json()
    assert_agent_shape(a)
    for k, v in body.items():
        assert a[k] == v, k
    assert a["status"] == "draft"
    assert a["status_message"] is None and a["sandbox_id"] is None and a["deployed_at"] is None
    assert a["needs_redeploy"] is False
    assert a["created_at"] == a["updated_at"]
    created = parse_ts(a["created_at"])
    assert abs((created - before).total_seconds()) < 30, (created, before)
    g = client.get("/agents/support-bot")
    assert g.status_code == 200
    assert g.json() == a


def test_create_defaults(client):
    r = client.post("/agents", json={"name": "Minimal", "git_repo_url": REPO})
    assert r.status_code == 201, r.text
    a = r.json()
    assert a["source_type"] == "git"
    assert a["timeout_seconds"] == 120
    assert a["git_branch"] is None and a["description"] is None


def test_ids_are_unique(client):
    ids = {client.post("/agents", json={"name": f"n{i}", "git_repo_url": REPO}).json()["id"]
           for i in range(5)}
    assert len(ids) == 5
    assert all(AGENT_ID.match(i) for i in ids)


def test_local_agent_needs_no_repo(client):
    r = client.post("/agents", json={"name": "Local one", "source_type": "local"})
    assert r.status_code == 201, r.text
    assert r.json()["source_type"] == "local"
    assert r.json()["git_repo_url"] is None


def test_git_agent_requires_repo_url(client):
    r = client.post("/agents", json={"name": "No repo"})
    detail = assert_422(r, ("body", "git_repo_url"))
    assert detail[0]["type"] == "missing"
    assert count_agents(client) == 0


def test_name_is_required(client):
    detail = assert_422(client.post("/agents", json={"git_repo_url": REPO}), ("body", "name"))
    assert [e["type"] for e in detail if e["loc"] == ["body", "name"]] == ["missing"]


def test_one_entry_per_offending_field(client):
    r = client.post("/agents", json={"git_repo_url": "not a url", "timeout_seconds": 0,
                                     "source_type": "svn"})
    assert_422(r, ("body", "name"), ("body", "git_repo_url"), ("body", "timeout_seconds"),
               ("body", "source_type"))


@pytest.mark.parametrize("name,slug", [
    ("My Agent!!", "my-agent"),
    ("  Hello   World  ", "hello-world"),
    ("A--B__C", "a-b-c"),
    ("CamelCase 42", "camelcase-42"),
    ("v2.0 (beta)", "v2-0-beta"),
    ("already-a-slug", "already-a-slug"),
])
def test_slug_derived_from_name(client, name, slug):
    r = client.post("/agents", json={"name": name, "git_repo_url": REPO})
    assert r.status_code == 201, r.text
    assert r.json()["slug"] == slug
    assert r.json()["name"] == name


def test_taken_derived_slug_gets_suffix(client):
    slugs = [client.post("/agents", json={"name": "My Agent!!", "git_repo_url": REPO}).json()["slug"]
             for _ in range(3)]
    assert slugs == ["my-agent", "my-agent-2", "my-agent-3"]


def test_explicit_taken_slug_is_409(client, make_agent):
    make_agent(slug="taken")
    r = client.post("/agents", json={"name": "Other", "slug": "taken", "git_repo_url": REPO})
    assert r.status_code == 409, r.text
    assert isinstance(r.json()["detail"], str)
    assert count_agents(client) == 1
    assert client.get("/agents/taken").json()["name"] != "Other"


def test_long_name_slug_cut_to_63(client):
    name = "a" * 70
    a1 = client.post("/agents", json={"name": name, "git_repo_url": REPO}).json()
    a2 = client.post("/agents", json={"name": name, "git_repo_url": REPO}).json()
    assert a1["slug"] == "a" * 63
    assert a2["slug"] == "a" * 61 + "-2"
    assert a1["name"] == name


def test_slug_cut_never_ends_with_dash(client):
    r = client.post("/agents", json={"name": "x" * 62 + " yz", "git_repo_url": REPO})
    assert r.status_code == 201, r.text
    assert r.json()["slug"] == "x" * 62


@pytest.mark.parametrize("slug", ["Bad Slug", "UPPER", "-lead", "trail-", "dou--ble", "a" * 64,
                                  "", "ünï", "a_b", "a/b"])
def test_invalid_explicit_slug_is_422(client, slug):
    r = client.post("/agents", json={"name": "x", "slug": slug, "git_repo_url": REPO})
    assert_422(r, ("body", "slug"))
    assert count_agents(client) == 0


def test_slug_of_63_characters_is_fine(client):
    r = client.post("/agents", json={"name": "x", "slug": "b" * 63, "git_repo_url": REPO})
    assert r.status_code == 201, r.text


# ---- list ----

def test_list_is_a_bare_array_with_total(client, make_agent):
    made = {make_agent()["id"] for _ in range(3)}
    r = client.get("/agents")
    assert r.status_code == 200
    assert isinstance(r.json(), list)
    assert r.headers["X-Total-Count"] == "3"
    assert {a["id"] for a in r.json()} == made
    for a in r.json():
        assert_agent_shape(a)


def test_list_paginates(client, make_agent):
    made = {make_agent()["id"] for _ in range(5)}
    seen = []
    for offset in (0, 2, 4):
        r = client.get("/agents", params={"limit": 2, "offset": offset})
        assert r.status_code == 200
        assert r.headers["X-Total-Count"] == "5"
        assert len(r.json()) == (2 if offset < 4 else 1)
        seen += [a["id"] for a in r.json()]
    assert sorted(seen) == sorted(made)
    r = client.get("/agents", params={"limit": 2, "offset": 50})
    assert r.json() == [] and r.headers["X-Total-Count"] == "5"


def test_list_default_limit_is_20(client, make_agent):
    for _ in range(21):
        make_agent()
    r = client.get("/agents")
    assert len(r.json()) == 20
    assert r.headers["X-Total-Count"] == "21"
    assert len(client.get("/agents?limit=100").json()) == 21
    assert len(client.get("/agents?limit=1").json()) == 1


@pytest.mark.parametrize("query,loc", [
    ("limit=0", "limit"), ("limit=101", "limit"), ("limit=abc", "limit"), ("limit=-1", "limit"),
    ("limit=1.5", "limit"), ("limit=", "limit"), ("limit=%00", "limit"), ("limit=1%002", "limit"),
    ("limit=99999999999999999999999", "limit"), ("offset=-1", "offset"), ("offset=x", "offset"),
])
def test_list_bad_query_is_422(client, query, loc):
    r = client.get("/agents?" + query)
    detail = assert_422(r, ("query", loc))
    assert all(e["loc"][0] == "query" for e in detail)


# ---- get ----

def test_get_unknown_is_404(client):
    r = client.get("/agents/nope")
    assert r.status_code == 404
    assert r.json() == {"detail": "Agent not found"}


def test_get_with_trailing_slash_and_encoded_slug(client, make_agent):
    a = make_agent(slug="enc-me")
    assert client.get("/agents/enc-me/").json()["id"] == a["id"]
    assert client.get("/agents/%65nc-m%65").json()["id"] == a["id"]


# ---- patch ----

@pytest.mark.parametrize("field,value", [
    ("name", "Renamed"),
    ("description", "Now with a description"),
    ("git_repo_url", "git@github.com:acme/other.git"),
    ("git_branch", "v1.2.3"),
    ("timeout_seconds", 600),
    ("timeout_seconds", 1),
    ("source_type", "local"),
])
def test_patch_each_field(client, make_agent, field, value):
    a = make_agent(description="old", git_branch="main")
    time.sleep(0.01)  # updated_at has millisecond resolution
    r = client.patch(f"/agents/{a['slug']}", json={field: value})
    assert r.status_code == 200, r.text
    b = r.json()
    assert_agent_shape(b)
    assert b[field] == value
    for k in AGENT_KEYS - {field, "updated_at"}:
        assert b[k] == a[k], k
    assert parse_ts(b["updated_at"]) > parse_ts(a["updated_at"])
    assert client.get(f"/agents/{a['slug']}").json() == b


def test_patch_nullable_fields_to_null(client, make_agent):
    a = make_agent(description="d", git_branch="main")
    r = client.patch(f"/agents/{a['slug']}", json={"description": None, "git_branch": None})
    assert r.status_code == 200, r.text
    assert r.json()["description"] is None and r.json()["git_branch"] is None


def test_patch_empty_body_changes_nothing_but_is_ok(client, make_agent):
    a = make_agent()
    r = client.patch(f"/agents/{a['slug']}", json={})
    assert r.status_code == 200, r.text
    b = r.json()
    for k in AGENT_KEYS - {"updated_at"}:
        assert b[k] == a[k], k


def test_patch_slug_moves_the_agent(client, make_agent):
    a = make_agent(slug="before")
    r = client.patch("/agents/before", json={"slug": "after"})
    assert r.status_code == 200, r.text
    assert r.json()["slug"] == "after" and r.json()["id"] == a["id"]
    assert client.get("/agents/before").status_code == 404
    assert client.get("/agents/after").json()["id"] == a["id"]


def test_patch_to_taken_slug_is_409(client, make_agent):
    make_agent(slug="first")
    b = make_agent(slug="second")
    r = client.patch("/agents/second", json={"slug": "first", "name": "changed"})
    assert r.status_code == 409, r.text
    assert isinstance(r.json()["detail"], str)
    assert client.get("/agents/second").json() == b


def test_patch_to_own_slug_is_fine(client, make_agent):
    make_agent(slug="same")
    r = client.patch("/agents/same", json={"slug": "same"})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("body,loc", [
    ({"timeout_seconds": 0}, "timeout_seconds"),
    ({"timeout_seconds": 601}, "timeout_seconds"),
    ({"name": ""}, "name"),
    ({"name": None}, "name"),
    ({"slug": None}, "slug"),
    ({"slug": "Not Valid"}, "slug"),
    ({"source_type": "svn"}, "source_type"),
    ({"git_repo_url": "ftp://x/y"}, "git_repo_url"),
    ({"git_branch": "bad..branch"}, "git_branch"),
    ({"git_branch": "with space"}, "git_branch"),
    ({"git_repo_url": None}, "git_repo_url"),
    ({"status": "active"}, "status"),
    ({"id": "agt_x"}, "id"),
    ({"needs_redeploy": True}, "needs_redeploy"),
])
def test_patch_invalid_is_422_and_changes_nothing(client, make_agent, body, loc):
    a = make_agent()
    assert_422(client.patch(f"/agents/{a['slug']}", json=body), ("body", loc))
    assert client.get(f"/agents/{a['slug']}").json() == a


def test_patch_git_to_local_without_repo(client, make_agent):
    a = make_agent()
    r = client.patch(f"/agents/{a['slug']}", json={"source_type": "local", "git_repo_url": None})
    assert r.status_code == 200, r.text
    assert r.json()["source_type"] == "local" and r.json()["git_repo_url"] is None
    # and back to git needs a URL again
    assert_422(client.patch(f"/agents/{a['slug']}", json={"source_type": "git"}),
               ("body", "git_repo_url"))


def test_patch_unknown_is_404(client):
    r = client.patch("/agents/nope", json={"name": "x"})
    assert r.status_code == 404
    assert r.json() == {"detail": "Agent not found"}


# ---- needs_redeploy ----

def test_needs_redeploy_stays_false_before_first_deploy(client, make_agent):
    a = make_agent()
    r = client.patch(f"/agents/{a['slug']}", json={"git_branch": "dev", "git_repo_url": REPO + "x"})
    assert r.status_code == 200
    assert r.json()["needs_redeploy"] is False


@pytest.mark.parametrize("change", [{"git_branch": "dev"}, {"git_repo_url": "https://example.com/b.git"},
                                    {"source_type": "local"}])
def test_needs_redeploy_after_git_settings_change(client, make_agent, change):
    a = make_agent(git_branch="main")
    mark_deployed(a["id"])
    r = client.patch(f"/agents/{a['slug']}", json={"name": "still same code", "timeout_seconds": 30})
    assert r.json()["needs_redeploy"] is False, "name/timeout apply without a redeploy"
    r = client.patch(f"/agents/{a['slug']}", json=change)
    assert r.status_code == 200, r.text
    assert r.json()["needs_redeploy"] is True
    r = client.patch(f"/agents/{a['slug']}", json={"description": "x"})
    assert r.json()["needs_redeploy"] is True, "stays set until the next deploy"


def test_unchanged_git_settings_do_not_need_redeploy(client, make_agent):
    a = make_agent(git_branch="main")
    mark_deployed(a["id"])
    r = client.patch(f"/agents/{a['slug']}", json={"git_branch": "main", "git_repo_url": a["git_repo_url"]})
    assert r.json()["needs_redeploy"] is False


# ---- delete ----

def test_delete_then_404(client, make_agent):
    a = make_agent()
    keep = make_agent()
    assert client.post(f"/agents/{a['slug']}/secrets", json={"key": "K", "value": "v"}).status_code == 201
    r = client.delete(f"/agents/{a['slug']}")
    assert r.status_code == 204
    assert r.content == b""
    assert client.get(f"/agents/{a['slug']}").status_code == 404
    assert client.delete(f"/agents/{a['slug']}").status_code == 404
    assert [x["id"] for x in client.get("/agents").json()] == [keep["id"]]
    assert db_query(f"SELECT COUNT(*) FROM secrets WHERE agent_id = '{a['id']}'") == [["0"]]
    assert db_query(f"SELECT COUNT(*) FROM agents WHERE id = '{a['id']}'") == [["0"]]


def test_slug_is_free_again_after_delete(client, make_agent):
    a = make_agent(slug="reuse")
    assert client.delete("/agents/reuse").status_code == 204
    b = make_agent(slug="reuse")
    assert b["id"] != a["id"]


# ---- deploy, sandbox, invoke ----

def test_deploy_is_202_and_second_deploy_409(client, make_agent):
    a = make_agent()
    r = client.post(f"/agents/{a['slug']}/deploy")
    assert r.status_code == 202, r.text
    d = r.json()
    assert_agent_shape(d)
    assert d["id"] == a["id"] and d["status"] == "deploying"
    r2 = client.post(f"/agents/{a['slug']}/deploy")
    assert r2.status_code == 409, r2.text
    assert isinstance(r2.json()["detail"], str)
    jobs = db_query(f"SELECT COUNT(*) FROM deploy_jobs WHERE agent_id = '{a['id']}'")
    assert jobs == [["1"]], "the refused deploy must not enqueue a job"


def test_deploy_local_without_code_is_400(client, make_agent):
    a = make_agent(source_type="local", git_repo_url=None)
    r = client.post(f"/agents/{a['slug']}/deploy")
    assert r.status_code == 400, r.text
    assert isinstance(r.json()["detail"], str)
    assert client.get(f"/agents/{a['slug']}").json()["status"] == "draft"
    assert db_query(f"SELECT COUNT(*) FROM deploy_jobs WHERE agent_id = '{a['id']}'") == [["0"]]


@pytest.mark.parametrize("status", ["draft", "deploying", "error", "stopped"])
def test_stop_sandbox_of_non_active_agent_is_409(client, make_agent, status):
    a = make_agent()
    db_query(f"UPDATE agents SET status = '{status}' WHERE id = '{a['id']}'")
    r = client.delete(f"/agents/{a['slug']}/sandbox")
    assert r.status_code == 409, r.text
    assert status in r.json()["detail"]
    assert client.get(f"/agents/{a['slug']}").json()["status"] == status


def test_invoke_draft_agent_is_409(client, make_agent):
    a = make_agent()
    r = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": "hello"})
    assert r.status_code == 409, r.text
    assert r.json() == {"detail": "Agent is not active (status: draft)"}


@pytest.mark.parametrize("method,suffix", [("POST", "/deploy"), ("DELETE", "/sandbox"),
                                           ("POST", "/invoke"), ("GET", "/secrets")])
def test_lifecycle_of_unknown_agent_is_404(client, method, suffix):
    r = client.request(method, "/agents/ghost" + suffix, json={"prompt": "x"} if suffix == "/invoke" else None)
    assert r.status_code == 404, r.text
    assert r.json() == {"detail": "Agent not found"}
