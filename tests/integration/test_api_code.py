"""PUT /agents/{slug}/code: the gzip tarball of a `local` agent."""
import glob
import hashlib
import http.client
import io
import json
import os
import re
import tarfile
import urllib.parse

from conftest import BASE_URL, VAR, db_query

RFC3339_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
GZ = {"Content-Type": "application/gzip"}
LIMIT = 50 * 1024 * 1024


def tarball(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


PROJECT = tarball({
    "agent.json": json.dumps({"name": "t", "version": "1.0.0", "entrypoint": "index.js",
                              "runtime": "node"}).encode(),
    "index.js": b"console.log('hi')\n",
})


def code_file(agent_id):
    return os.path.join(VAR, "data", "code", agent_id + ".tar.gz")


def local_agent(make_agent):
    return make_agent(source_type="local", git_repo_url=None)


def test_upload_returns_sha256_size_time(client, make_agent):
    a = local_agent(make_agent)
    r = client.put(f"/agents/{a['slug']}/code", data=PROJECT, headers=GZ)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"sha256", "size", "uploaded_at"}
    assert body["sha256"] == hashlib.sha256(PROJECT).hexdigest()
    assert body["size"] == len(PROJECT)
    assert RFC3339_MS.match(body["uploaded_at"])
    with open(code_file(a["id"]), "rb") as f:
        assert f.read() == PROJECT
    # with code present, a local agent can be deployed
    assert client.post(f"/agents/{a['slug']}/deploy").status_code == 202


def test_reupload_replaces_code(client, make_agent):
    a = local_agent(make_agent)
    other = tarball({"agent.json": b"{}", "x.js": b"2"})
    assert client.put(f"/agents/{a['slug']}/code", data=PROJECT, headers=GZ).status_code == 200
    r = client.put(f"/agents/{a['slug']}/code", data=other, headers=GZ)
    assert r.status_code == 200
    assert r.json()["sha256"] == hashlib.sha256(other).hexdigest()
    with open(code_file(a["id"]), "rb") as f:
        assert f.read() == other


def test_accepted_content_types(client, make_agent):
    a = local_agent(make_agent)
    for ct in ("application/gzip", "application/x-gzip", "application/octet-stream",
               "application/gzip; charset=binary", "APPLICATION/GZIP"):
        r = client.put(f"/agents/{a['slug']}/code", data=PROJECT, headers={"Content-Type": ct})
        assert r.status_code == 200, (ct, r.text)


def test_non_gzip_is_400_and_keeps_old_code(client, make_agent):
    a = local_agent(make_agent)
    assert client.put(f"/agents/{a['slug']}/code", data=PROJECT, headers=GZ).status_code == 200
    for bad in (b"not a gzip file at all", b"\x1f", b"", tarball({})[:1] + b"x" * 100):
        r = client.put(f"/agents/{a['slug']}/code", data=bad, headers=GZ)
        assert r.status_code == 400, (bad[:10], r.text)
        assert isinstance(r.json()["detail"], str)
    with open(code_file(a["id"]), "rb") as f:
        assert f.read() == PROJECT, "a failed upload must never replace good code"
    row = db_query(f"SELECT code_sha256 FROM agents WHERE id = '{a['id']}'")
    assert row == [[hashlib.sha256(PROJECT).hexdigest()]]
    assert not glob.glob(os.path.join(VAR, "data", "code", ".upload-*")), "temporary files left behind"


def test_wrong_content_type_is_415(client, make_agent):
    a = local_agent(make_agent)
    for ct in ("text/plain", "application/json", "multipart/form-data; boundary=x",
               "application/gzipx", None):
        headers = {"Content-Type": ct} if ct else {}
        r = client.put(f"/agents/{a['slug']}/code", data=PROJECT, headers=headers)
        if ct is None:  # requests sends no Content-Type for raw bytes
            assert "Content-Type" not in r.request.headers
        assert r.status_code == 415, (ct, r.text)
        assert isinstance(r.json()["detail"], str)
    assert not os.path.exists(code_file(a["id"]))
    assert client.post(f"/agents/{a['slug']}/deploy").status_code == 400


def test_git_agent_is_400(client, make_agent):
    a = make_agent()
    r = client.put(f"/agents/{a['slug']}/code", data=PROJECT, headers=GZ)
    assert r.status_code == 400, r.text
    assert isinstance(r.json()["detail"], str)
    assert not os.path.exists(code_file(a["id"]))


def test_unknown_agent_is_404(client):
    r = client.put("/agents/ghost/code", data=PROJECT, headers=GZ)
    assert r.status_code == 404
    assert r.json() == {"detail": "Agent not found"}


def test_upload_sets_needs_redeploy_on_deployed_agent(client, make_agent):
    a = local_agent(make_agent)
    client.put(f"/agents/{a['slug']}/code", data=PROJECT, headers=GZ)
    assert client.get(f"/agents/{a['slug']}").json()["needs_redeploy"] is False, \
        "never deployed: nothing to redeploy"
    db_query(f"UPDATE agents SET status = 'active', deployed_at = NOW(3) WHERE id = '{a['id']}'")
    assert client.put(f"/agents/{a['slug']}/code", data=PROJECT, headers=GZ).status_code == 200
    assert client.get(f"/agents/{a['slug']}").json()["needs_redeploy"] is True


def test_delete_agent_removes_code(client, make_agent):
    a = local_agent(make_agent)
    client.put(f"/agents/{a['slug']}/code", data=PROJECT, headers=GZ)
    assert os.path.exists(code_file(a["id"]))
    assert client.delete(f"/agents/{a['slug']}").status_code == 204
    assert not os.path.exists(code_file(a["id"]))


def put_declared_length(client, slug, length):
    """Sends only the headers of a PUT declaring `length` bytes: nginx must refuse
    on the header alone, before any byte of the body is read."""
    u = urllib.parse.urlsplit(BASE_URL)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.putrequest("PUT", f"{u.path}/agents/{slug}/code")
        for k, v in client.s.headers.items():
            conn.putheader(k, v)
        conn.putheader("Content-Type", "application/gzip")
        conn.putheader("Content-Length", str(length))
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def test_over_50mb_is_413_json_from_nginx(client, make_agent):
    a = local_agent(make_agent)
    status, headers, body = put_declared_length(client, a["slug"], LIMIT + 1)
    assert status == 413
    assert headers.get("Content-Type", "").startswith("application/json"), headers
    assert isinstance(json.loads(body)["detail"], str)
    assert not os.path.exists(code_file(a["id"]))
    # the agent and the worker are fine afterwards
    assert client.put(f"/agents/{a['slug']}/code", data=PROJECT, headers=GZ).status_code == 200


def test_multi_megabyte_upload_streams_through(client, make_agent):
    """Larger than the JSON body limit (1 MiB) and the worker's 64 KiB read buffer."""
    a = local_agent(make_agent)
    big = tarball({"agent.json": b"{}", "blob.bin": os.urandom(3 * 1024 * 1024 + 17)})
    r = client.put(f"/agents/{a['slug']}/code", data=big, headers=GZ)
    assert r.status_code == 200, r.text
    assert r.json() == {**r.json(), "sha256": hashlib.sha256(big).hexdigest(), "size": len(big)}
    assert os.path.getsize(code_file(a["id"])) == len(big)
