"""/agents/{slug}/mounts: create, list, change and delete mounts of the caller's
buckets; path rules; every change flags the agent needs_redeploy; deleting a
bucket that mounts use. The mounts inside a sandbox are test_mounts_fuse.py."""
import re
import uuid

import pytest

from conftest import assert_422
from s3server import storage_ports

RECORD = {"id", "bucket_slug", "mount_path", "source_prefix", "read_only", "enabled",
          "cache_enabled", "cache_ttl_seconds", "created_at", "updated_at"}


@pytest.fixture
def agent(make_agent):
    return make_agent()


@pytest.fixture
def bkt(client):
    r = client.post("/buckets", json={"name": "data " + uuid.uuid4().hex[:6], "provider": "s3",
                                      "bucket_name": "agent-data"})
    assert r.status_code == 201, r.text
    return r.json()


def path(agent, mid=None):
    return f"/agents/{agent['slug']}/mounts" + (f"/{mid}" if mid else "")


def mount(client, agent, bkt, **kw):
    body = {"bucket_slug": bkt["slug"], "mount_path": "/data"}
    body.update(kw)
    r = client.post(path(agent), json=body)
    assert r.status_code == 201, r.text
    return r.json()


def count(client, agent):
    r = client.get(path(agent))
    assert r.status_code == 200, r.text
    return int(r.headers["X-Total-Count"])


def clear_redeploy(agent):
    from conftest import db_query
    db_query(f"UPDATE agents SET needs_redeploy = 0 WHERE id = '{agent['id']}'")


def needs_redeploy(client, agent):
    return client.get(f"/agents/{agent['slug']}").json()["needs_redeploy"]


def test_create_returns_the_record_and_flags_the_agent(client, agent, bkt):
    m = mount(client, agent, bkt, mount_path="/mnt/data", source_prefix="team/a", read_only=True)
    assert set(m) == RECORD
    assert re.fullmatch(r"mnt_[A-Za-z0-9]{22}", m["id"])
    assert (m["bucket_slug"], m["mount_path"], m["source_prefix"]) == (bkt["slug"], "/mnt/data", "team/a")
    assert (m["read_only"], m["enabled"], m["cache_enabled"]) == (True, True, False)
    assert needs_redeploy(client, agent) is True
    assert client.get(path(agent, m["id"])).json() == m


def test_defaults(client, agent, bkt):
    m = mount(client, agent, bkt)
    assert (m["source_prefix"], m["read_only"], m["enabled"]) == ("", False, True)


def test_list_is_a_bare_array_with_total(client, agent, bkt):
    mount(client, agent, bkt, mount_path="/a")
    mount(client, agent, bkt, mount_path="/b")
    r = client.get(path(agent), params={"limit": 1})
    assert r.status_code == 200 and len(r.json()) == 1 and r.headers["X-Total-Count"] == "2"


@pytest.mark.parametrize("mount_path", [
    "relative/path", "/", "/data/../etc", "/data/./x", "..", "/data//x", "/data/",
    "/proc", "/proc/x", "/sys/fs", "/dev/shm", "/app", "/app/data", "/files", "/files/agent/x",
    "/usr/lib/x", "/tmp", "/data\u0000x", "/data\nx", "/" + "a" * 4096,
])
def test_bad_mount_path_is_422_and_stores_nothing(client, agent, bkt, mount_path):
    clear_redeploy(agent)
    assert_422(client.post(path(agent), json={"bucket_slug": bkt["slug"], "mount_path": mount_path}),
               ("body", "mount_path"))
    assert count(client, agent) == 0
    assert needs_redeploy(client, agent) is False


def test_lookalikes_of_reserved_paths_are_fine(client, agent, bkt):
    for p in ("/application", "/filesystem", "/procedures", "/data/proc"):
        mount(client, agent, bkt, mount_path=p)


@pytest.mark.parametrize("prefix", ["/abs", "a/../b", "../x", "a//b"])
def test_bad_source_prefix_is_422(client, agent, bkt, prefix):
    assert_422(client.post(path(agent), json={"bucket_slug": bkt["slug"], "mount_path": "/d",
                                              "source_prefix": prefix}), ("body", "source_prefix"))
    assert count(client, agent) == 0


@pytest.mark.parametrize("body,loc", [
    ({"mount_path": "/d"}, "bucket_slug"),
    ({"bucket_slug": "x"}, "mount_path"),
    ({"bucket_slug": "x", "mount_path": "/d", "read_only": "yes"}, "read_only"),
    ({"bucket_slug": "x", "mount_path": "/d", "cache_ttl_seconds": 0}, "cache_ttl_seconds"),
    ({"bucket_slug": "x", "mount_path": "/d", "id": "mnt_x"}, "id"),
])
def test_bad_body_is_422(client, agent, body, loc):
    assert_422(client.post(path(agent), json=body), ("body", loc))


def test_nested_or_equal_paths_are_409(client, agent, bkt):
    mount(client, agent, bkt, mount_path="/data/a")
    for p in ("/data/a", "/data", "/data/a/b"):
        r = client.post(path(agent), json={"bucket_slug": bkt["slug"], "mount_path": p})
        assert r.status_code == 409, r.text
        assert "/data/a" in r.json()["detail"]
    mount(client, agent, bkt, mount_path="/data/ab")
    assert count(client, agent) == 2


def test_unknown_and_another_users_bucket_is_404_and_stores_nothing(client, other_client, agent):
    r = other_client.post("/buckets", json={"name": "theirs", "provider": "s3", "bucket_name": "their-data"})
    assert r.status_code == 201
    theirs = r.json()["slug"]
    clear_redeploy(agent)
    for slug in (theirs, "no-such-bucket"):
        r = client.post(path(agent), json={"bucket_slug": slug, "mount_path": "/d"})
        assert r.status_code == 404, r.text
        assert isinstance(r.json()["detail"], str)
    assert count(client, agent) == 0
    assert needs_redeploy(client, agent) is False


def test_another_users_agent_is_404(client, other_client, agent, bkt):
    m = mount(client, agent, bkt)
    assert other_client.get(path(agent)).status_code == 404
    assert other_client.get(path(agent, m["id"])).status_code == 404
    assert other_client.delete(path(agent, m["id"])).status_code == 404
    assert count(client, agent) == 1


def test_patch_changes_validates_and_flags(client, agent, bkt):
    m = mount(client, agent, bkt)
    clear_redeploy(agent)
    r = client.patch(path(agent, m["id"]), json={"enabled": False, "cache_enabled": True,
                                                  "cache_ttl_seconds": 300, "mount_path": "/other"})
    assert r.status_code == 200, r.text
    got = r.json()
    assert (got["enabled"], got["cache_enabled"], got["cache_ttl_seconds"], got["mount_path"]) == \
        (False, True, 300, "/other")
    assert needs_redeploy(client, agent) is True
    assert_422(client.patch(path(agent, m["id"]), json={"mount_path": "/app"}), ("body", "mount_path"))
    assert client.patch(path(agent, "mnt_" + "x" * 22), json={"enabled": True}).status_code == 404
    assert client.get(path(agent, m["id"])).json()["mount_path"] == "/other"


def test_delete_is_204_and_flags(client, agent, bkt):
    m = mount(client, agent, bkt)
    clear_redeploy(agent)
    r = client.delete(path(agent, m["id"]))
    assert r.status_code == 204 and r.content == b""
    assert client.get(path(agent, m["id"])).status_code == 404
    assert needs_redeploy(client, agent) is True


def test_deleting_a_mounted_bucket_is_409_naming_agents_unless_forced(client, make_agent, bkt):
    a1, a2 = make_agent(), make_agent()
    mount(client, a1, bkt)
    mount(client, a2, bkt)
    r = client.delete(f"/buckets/{bkt['slug']}")
    assert r.status_code == 409, r.text
    assert a1["slug"] in r.json()["detail"] and a2["slug"] in r.json()["detail"]
    assert client.get(f"/buckets/{bkt['slug']}").status_code == 200
    clear_redeploy(a1)
    r = client.delete(f"/buckets/{bkt['slug']}", params={"force": "true"})
    assert r.status_code == 204, r.text
    assert client.get(f"/buckets/{bkt['slug']}").status_code == 404
    assert count(client, a1) == 0 and count(client, a2) == 0
    assert needs_redeploy(client, a1) is True


def test_deleting_an_agent_takes_its_mounts(client, make_agent, bkt):
    a = make_agent()
    mount(client, a, bkt)
    assert client.delete(f"/agents/{a['slug']}").status_code == 204
    assert client.delete(f"/buckets/{bkt['slug']}").status_code == 204


def test_live_responses_match_the_document(client, other_client, make_agent):
    """Buckets and mounts, successes and errors, as docs/openapi.yaml says."""
    import yaml
    from test_openapi import DOC_PATH, check_response
    with open(DOC_PATH, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    lo, _ = storage_ports()  # a loopback port storage_allow_hosts lists; nothing listens
    r = client.post("/buckets", json={"name": "Doc", "provider": "s3", "bucket_name": "doc-data",
                                      "endpoint_url": f"http://127.0.0.1:{lo}"})
    check_response(doc, "POST", "/buckets", r)
    b = r.json()["slug"]
    check_response(doc, "POST", "/buckets", client.post("/buckets", json={"name": "x", "slug": b,
                                                                          "provider": "s3", "bucket_name": "abc"}))
    check_response(doc, "POST", "/buckets", client.post("/buckets", json={"provider": "ftp"}))
    check_response(doc, "GET", "/buckets", client.get("/buckets"))
    check_response(doc, "GET", "/buckets/{slug}", client.get(f"/buckets/{b}"))
    check_response(doc, "GET", "/buckets/{slug}", other_client.get(f"/buckets/{b}"))
    check_response(doc, "PATCH", "/buckets/{slug}", client.patch(f"/buckets/{b}", json={"region": "eu-west-1"}))
    check_response(doc, "POST", "/buckets/{slug}/test", client.post(f"/buckets/{b}/test"))
    check_response(doc, "POST", "/buckets/{slug}/credentials",
                   client.post(f"/buckets/{b}/credentials", json={"access_key_id": "A", "secret_access_key": "B"}))
    check_response(doc, "POST", "/buckets/{slug}/test", client.post(f"/buckets/{b}/test"))
    a = make_agent()
    p = f"/agents/{a['slug']}/mounts"
    r = client.post(p, json={"bucket_slug": b, "mount_path": "/data", "cache_enabled": True})
    check_response(doc, "POST", "/agents/{slug}/mounts", r)
    mid = r.json()["id"]
    check_response(doc, "POST", "/agents/{slug}/mounts", client.post(p, json={"bucket_slug": b, "mount_path": "/data"}))
    check_response(doc, "POST", "/agents/{slug}/mounts", client.post(p, json={"bucket_slug": "nope", "mount_path": "/x"}))
    check_response(doc, "POST", "/agents/{slug}/mounts", client.post(p, json={"bucket_slug": b, "mount_path": "/app"}))
    check_response(doc, "GET", "/agents/{slug}/mounts", client.get(p))
    check_response(doc, "GET", "/agents/{slug}/mounts/{id}", client.get(f"{p}/{mid}"))
    check_response(doc, "PATCH", "/agents/{slug}/mounts/{id}", client.patch(f"{p}/{mid}", json={"read_only": True}))
    check_response(doc, "DELETE", "/buckets/{slug}", client.delete(f"/buckets/{b}"))
    check_response(doc, "DELETE", "/agents/{slug}/mounts/{id}", client.delete(f"{p}/{mid}"))
    check_response(doc, "GET", "/agents/{slug}/mounts/{id}", client.get(f"{p}/{mid}"))
    check_response(doc, "DELETE", "/buckets/{slug}", client.delete(f"/buckets/{b}"))


def test_bucket_changes_flag_the_agents_that_mount_it(client, make_agent, bkt):
    a, other = make_agent(), make_agent()
    mount(client, a, bkt)
    for change in (lambda: client.patch(f"/buckets/{bkt['slug']}", json={"region": "eu-west-1"}),
                   lambda: client.post(f"/buckets/{bkt['slug']}/credentials",
                                       json={"access_key_id": "A", "secret_access_key": "B"})):
        clear_redeploy(a)
        clear_redeploy(other)
        assert change().status_code == 200
        assert needs_redeploy(client, a) is True
        assert needs_redeploy(client, other) is False
