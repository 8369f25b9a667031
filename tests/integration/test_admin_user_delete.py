"""`agenthost-admin user delete EMAIL --yes`: a user goes with everything of
theirs (agents, history, uploaded code, files and their bytes, keys), while
another user's data, even bytes shared with the deleted user's files, stays."""
import os
import uuid

from conftest import Client, admin, create_user, db_query
from test_api_code import PROJECT, code_file
from test_files import blobs, upload


def user_with_data():
    email, key = create_user("pro")
    c = Client(key, email)
    a = c.post("/agents", json={"name": "gone " + uuid.uuid4().hex[:6], "source_type": "local"}).json()
    r = c.put(f"/agents/{a['slug']}/code", data=PROJECT,
              headers={"Content-Type": "application/gzip"})
    assert r.status_code in (200, 201), r.text
    uid = c.get("/users/me").json()["id"]
    aid = db_query(f"SELECT id FROM agents WHERE user_id = '{uid}'")[0][0]
    return c, uid, aid


def test_user_delete_removes_everything_of_theirs_only():
    c, uid, aid = user_with_data()
    other = Client(create_user("pro")[1])
    shared = os.urandom(5000)
    mine = upload(c, shared, name="shared.bin").json()
    theirs = upload(other, shared, name="same-bytes.bin").json()
    only_mine = upload(c, os.urandom(3000), name="own.bin", agent_slug=c.get("/agents").json()[0]["slug"]).json()
    assert mine["sha256_hash"] == theirs["sha256_hash"]
    assert os.path.exists(code_file(aid))

    p = admin("user", "delete", c.email, "--yes")
    assert "1 agents, 2 files" in p.stdout, p.stdout

    assert c.get("/users/me").status_code == 401          # the key is gone
    for table, col in [("users", "id"), ("agents", "user_id"), ("api_keys", "user_id"),
                       ("files", "user_id"), ("invocations", "user_id")]:
        assert db_query(f"SELECT COUNT(*) FROM {table} WHERE {col} = '{uid}'") == [["0"]], table
    assert not os.path.exists(code_file(aid))
    assert only_mine["sha256_hash"] not in blobs()
    # The other user's file, whose bytes the deleted one shared, is whole.
    assert theirs["sha256_hash"] in blobs()
    r = other.get(f"/files/{theirs['file_id']}/download")
    assert r.status_code == 200 and r.content == shared
    assert other.get("/files/usage").json()["total_size_bytes"] == 5000


def test_user_delete_asks_for_yes_and_names_unknown_users():
    c, uid, aid = user_with_data()
    p = admin("user", "delete", c.email, check=False)
    assert p.returncode == 2 and "--yes" in p.stderr
    assert c.get("/users/me").status_code == 200
    assert os.path.exists(code_file(aid))
    p = admin("user", "delete", "nobody-" + uuid.uuid4().hex[:6] + "@test.example", "--yes", check=False)
    assert p.returncode == 1 and "no user" in p.stderr
