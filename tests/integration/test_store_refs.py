"""An agent's uploaded code and built image kept in the file store (so that a
runner on another machine can take the agent over, docs/cluster.md) hold a
reference of their own in file_blobs: a managed file of the same bytes, once
deleted, never takes them away, a redeploy keeps the image it replaced (each
deploy's record holds its image's reference, for a rollback, up to
deploy_images_kept: test_deploys.py), and deleting the agent leaves nothing
of either behind."""
import hashlib

from agent_code import ECHO_JS, deploy, needs_runner, project
from conftest import db_query, new_client
from test_files import blobs, upload


def refs(sha):
    rows = db_query(f"SELECT refcount FROM file_blobs WHERE sha256 = '{sha}'")
    return int(rows[0][0]) if rows else 0


@needs_runner
def test_code_and_image_blobs_are_referenced_and_released():
    c = new_client("pro")
    a = c.post("/agents", json={"name": "kept", "source_type": "local"}).json()
    code = project(ECHO_JS)
    r = c.put(f"/agents/{a['slug']}/code", data=code, headers={"Content-Type": "application/gzip"})
    assert r.status_code == 200, r.text
    code_sha = hashlib.sha256(code).hexdigest()
    assert r.json()["sha256"] == code_sha and code_sha in blobs() and refs(code_sha) == 1

    # A managed file of the very same bytes: one reference more, and its
    # deletion gives back only its own.
    f = upload(c, code, name="code.tar.gz", ctype="application/gzip").json()
    assert f["sha256_hash"] == code_sha and refs(code_sha) == 2
    assert c.delete(f"/files/{f['file_id']}").status_code == 204
    assert code_sha in blobs() and refs(code_sha) == 1

    deploy(c, a["slug"])
    first = db_query(f"SELECT image_sha256 FROM agents WHERE id = '{a['id']}'")[0][0]
    assert first in blobs() and refs(first) == 1
    deploy(c, a["slug"])  # the same code built again
    second = db_query(f"SELECT image_sha256 FROM agents WHERE id = '{a['id']}'")[0][0]
    # One reference per deploy record: the same bytes built twice hold two.
    assert second in blobs() and refs(second) == (2 if second == first else 1)
    assert first in blobs() and refs(first) == (2 if second == first else 1)

    assert c.delete(f"/agents/{a['slug']}").status_code == 204
    assert code_sha not in blobs() and second not in blobs() and first not in blobs()
    assert refs(code_sha) == 0 and refs(second) == 0 and refs(first) == 0
