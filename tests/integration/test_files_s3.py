"""Managed files on the S3 backend: an agenthost-api of the test's own
(storage_backend = s3, the stack's database) in front of s3rver on loopback,
spoken to over FastCGI. Uploads land as content-addressed objects, downloads
redirect to presigned GETs, presigned uploads hand out real S3 presigned PUT
URLs, and deleting the last record removes the object. A runner on the S3
store keeps its own copy of each attachment it places."""
import hashlib
import json
import os
import random
import socket
import struct
import uuid

import pytest
import requests

from agent_code import config_get, deployed_agent, needs_runner
from conftest import VAR, Client, create_user
from fcgi import PrivateApi, fcgi_params, fcgi_read_response, fcgi_record
from s3server import KEY, SECRET, S3rver
from test_deploy_faults import runner_with


@pytest.fixture(scope="module")
def s3():
    s = S3rver("files")
    yield s
    s.stop()


def s3_env(s3):
    """The configuration of the S3 store on s3, as environment overrides."""
    return dict(AGENTHOST_STORAGE_BACKEND="s3", AGENTHOST_S3_ENDPOINT=s3.endpoint,
                AGENTHOST_S3_BUCKET=s3.bucket, AGENTHOST_S3_REGION="us-east-1",
                AGENTHOST_S3_ACCESS_KEY_ID=KEY, AGENTHOST_S3_SECRET_ACCESS_KEY=SECRET)


def s3_api(s3):
    return PrivateApi(**s3_env(s3))


@pytest.fixture(scope="module")
def api(s3):
    with s3_api(s3) as a:
        yield a


@pytest.fixture
def token():
    return create_user()[1]


def call(api, token, method, path, body=b"", ctype=None):
    """One request over FastCGI; returns (status, headers dict, body bytes)."""
    params = {"REQUEST_METHOD": method, "REQUEST_URI": "/api/v1" + path, "HTTP_HOST": "files.test",
              "REMOTE_ADDR": f"10.{random.randint(0, 255)}.{random.randint(0, 255)}.{random.randint(1, 254)}",
              "CONTENT_LENGTH": str(len(body)), "HTTP_AUTHORIZATION": "Bearer " + token}
    if ctype:
        params["CONTENT_TYPE"] = ctype
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(api.sock)
    out = fcgi_record(1, struct.pack("!HB5x", 1, 0)) + fcgi_record(4, fcgi_params(params)) + fcgi_record(4, b"")
    for i in range(0, len(body), 65535):  # a record holds at most 64 KiB
        out += fcgi_record(5, body[i:i + 65535])
    s.sendall(out + fcgi_record(5, b""))
    try:
        out = fcgi_read_response(s)
    finally:
        s.close()
    head, data = out.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0][8:11]), headers, data


def post_file(api, token, data, name="a.bin", ctype="application/octet-stream"):
    b = "S3bound"
    body = (f'--{b}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            f"Content-Type: {ctype}\r\n\r\n").encode() + data + f"\r\n--{b}--\r\n".encode()
    st, _, out = call(api, token, "POST", "/files", body, f"multipart/form-data; boundary={b}")
    assert st == 201, out
    return json.loads(out)


def post_json(api, token, path, obj):
    st, _, out = call(api, token, "POST", path, json.dumps(obj).encode(), "application/json")
    return st, json.loads(out)


def test_upload_download_delete_on_s3(s3, api, token):
    data = os.urandom(200_000)
    sha = hashlib.sha256(data).hexdigest()
    f = post_file(api, token, data, name="ünï.bin", ctype="application/x-test")
    assert f["sha256_hash"] == sha
    assert f"blobs/{sha}" in s3.keys()
    st, h, _ = call(api, token, "GET", f"/files/{f['file_id']}/download")
    assert st == 302 and h["Location"].startswith(s3.endpoint + "/files/blobs/" + sha + "?")
    assert h["X-Content-Type-Options"] == "nosniff"
    got = requests.get(h["Location"])
    assert got.status_code == 200 and got.content == data
    # The bucket's answer is the bucket's: no CSP of ours, but the presigned
    # URL makes it an attachment of the recorded type (README, "Downloads").
    assert got.headers["Content-Type"] == "application/x-test"
    assert got.headers["Content-Disposition"].startswith("attachment;")
    assert "filename*=UTF-8''%C3%BCn%C3%AF.bin" in got.headers["Content-Disposition"]
    # A second record of the same bytes shares the object; the last delete removes it.
    g = post_file(api, token, data)
    assert call(api, token, "DELETE", f"/files/{f['file_id']}")[0] == 204
    assert f"blobs/{sha}" in s3.keys()
    assert call(api, token, "DELETE", f"/files/{g['file_id']}")[0] == 204
    assert f"blobs/{sha}" not in s3.keys()


def test_presigned_upload_is_a_real_s3_put(s3, api, token):
    data = os.urandom(300_000)
    st, p = post_json(api, token, "/files/presigned-upload",
                      {"filename": "p.bin", "size_bytes": len(data), "content_type": "application/octet-stream"})
    assert st == 201, p
    url = p["upload_url"]
    assert url.startswith(f"{s3.endpoint}/files/pending/{p['file_id']}?") and "X-Amz-Signature=" in url
    assert requests.put(url, data=data).status_code == 200
    assert f"pending/{p['file_id']}" in s3.keys()
    st, rec = post_json(api, token, f"/files/{p['file_id']}/confirm",
                        {"sha256_hash": hashlib.sha256(data).hexdigest()})
    assert st == 200 and rec["status"] == "confirmed", rec
    keys = s3.keys()
    assert f"blobs/{rec['sha256_hash']}" in keys and f"pending/{p['file_id']}" not in keys
    st, h, _ = call(api, token, "GET", f"/files/{p['file_id']}/download")
    assert requests.get(h["Location"]).content == data
    assert call(api, token, "DELETE", f"/files/{p['file_id']}")[0] == 204
    assert f"blobs/{rec['sha256_hash']}" not in s3.keys()


def test_wrong_hash_on_s3_discards_the_object(s3, api, token):
    st, p = post_json(api, token, "/files/presigned-upload",
                      {"filename": "p.bin", "size_bytes": 3, "content_type": "text/plain"})
    st, out = post_json(api, token, f"/files/{p['file_id']}/confirm", {"sha256_hash": "0" * 64})
    assert st == 400 and "uploaded yet" in out["detail"]
    assert requests.put(p["upload_url"], data=b"abc").status_code == 200
    st, out = post_json(api, token, f"/files/{p['file_id']}/confirm", {"sha256_hash": "0" * 64})
    assert st == 400 and "discarded" in out["detail"]
    assert f"pending/{p['file_id']}" not in s3.keys()
    assert call(api, token, "DELETE", f"/files/{p['file_id']}")[0] == 204
    assert not [k for k in s3.keys() if p["file_id"] in k]


def test_replayed_s3_put_after_confirm_leaves_no_object(s3, api, token):
    """S3 cannot count a presigned URL's uses: a replay after confirm writes
    pending/<id> again, and the sweep (once a minute per worker, so a fresh API
    here) removes it."""
    data = b"replayed"
    st, p = post_json(api, token, "/files/presigned-upload",
                      {"filename": "r.bin", "size_bytes": len(data), "content_type": "text/plain"})
    assert requests.put(p["upload_url"], data=data).status_code == 200
    st, rec = post_json(api, token, f"/files/{p['file_id']}/confirm",
                        {"sha256_hash": hashlib.sha256(data).hexdigest()})
    assert st == 200
    assert requests.put(p["upload_url"], data=data).status_code == 200
    assert f"pending/{p['file_id']}" in s3.keys()
    with s3_api(s3) as fresh:
        assert call(fresh, token, "GET", "/files")[0] == 200
    assert f"pending/{p['file_id']}" not in s3.keys()
    assert call(api, token, "DELETE", f"/files/{p['file_id']}")[0] == 204
    assert not [k for k in s3.keys() if p["file_id"] in k or rec["sha256_hash"] in k]


# Prints the file its prompt names.
CAT_JS = ("const fs = require('fs'); let p = ''; process.stdin.on('data', d => p += d);"
          " process.stdin.on('end', () => { try { process.stdout.write(fs.readFileSync(p)); }"
          " catch (e) { process.stdout.write('ERR ' + e.code); } });\n")


def invoke(token, slug, prompt):
    """A call through the stack's own API (nginx): it runs on the stack's
    runner, whatever store that runner was started with."""
    r = Client(token).post(f"/agents/{slug}/invoke", json={"prompt": prompt}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["response_content"]


@needs_runner
def test_attachments_on_s3_are_fetched_once_per_runner(token):
    """On the S3 store a runner keeps a copy of each attachment it placed
    (named by its SHA-256, so never stale) and does not fetch it from the
    bucket again on every call: with the bucket gone, the next call still
    has it. The agent is deployed first; the runner then runs on the S3
    store, and the file is uploaded and attached through an API on it."""
    slug = deployed_agent(Client(token), CAT_JS)["slug"]
    data = "".join(uuid.uuid4().hex for _ in range(1500)).encode()  # 48 KB
    sha = hashlib.sha256(data).hexdigest()
    bucket = S3rver("files")  # of its own: this test stops it
    env = {k[len("AGENTHOST_"):].lower(): v for k, v in s3_env(bucket).items()}
    try:
        with runner_with(**env), s3_api(bucket) as api:
            f = post_file(api, token, data, name="kb.txt")
            st, out = post_json(api, token, f"/agents/{slug}/files",
                                {"file_id": f["file_id"], "mount_path": "/files/agent/kb.txt"})
            assert st == 201, out
            assert f"blobs/{sha}" in bucket.keys()
            assert invoke(token, slug, "/files/agent/kb.txt") == data.decode()
            bucket.stop()  # the bucket is gone from here on
            assert invoke(token, slug, "/files/agent/kb.txt") == data.decode()
            copy = os.path.join(config_get("data_dir", os.path.join(VAR, "data")), "blob-cache", sha)
            with open(copy, "rb") as fh:
                assert fh.read() == data
            assert os.stat(copy).st_mode & 0o777 == 0o600
    finally:
        bucket.stop()
