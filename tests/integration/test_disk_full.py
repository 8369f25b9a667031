"""The data directory's disk full (fault injection): a code upload that does
not fit is refused with 507 in the contract's shape and leaves no partial file
and no record; once there is room again the same upload goes through. The
test puts a 256 KiB tmpfs over the stack's code directory and removes it."""
import os
import subprocess

import pytest

from agent_code import VAR, config_get
from conftest import new_client

DATA = config_get("data_dir", os.path.join(VAR, "data"))
CODE = os.path.join(DATA, "code")


@pytest.fixture
def full_code_dir():
    os.makedirs(CODE, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "ahtest-full", CODE],
                   check=True)
    try:
        yield CODE
    finally:
        subprocess.run(["umount", "-l", CODE], check=True)


def local_agent(client):
    r = client.post("/agents", json={"name": "disk full", "source_type": "local"})
    assert r.status_code == 201, r.text
    return r.json()


def gz_of(size):
    """A gzip stream of `size` bytes that does not compress (random data)."""
    import gzip
    import io
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=0) as g:
        g.write(os.urandom(size))
    return buf.getvalue()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_upload_to_a_full_disk_is_507_and_leaves_nothing(full_code_dir):
    c = new_client()
    a = local_agent(c)
    body = gz_of(1 << 20)
    r = c.put(f"/agents/{a['slug']}/code", data=body,
              headers={"Content-Type": "application/gzip"})
    assert r.status_code == 507, r.text
    assert "storage is full" in r.json()["detail"], r.text
    left = [os.path.join(dp, f) for dp, _dn, fs in os.walk(full_code_dir) for f in fs]
    assert left == [], left
    # No record of code: a deploy still says there is nothing to deploy.
    r = c.post(f"/agents/{a['slug']}/deploy")
    assert r.status_code == 400 and "No code uploaded" in r.json()["detail"], r.text
    # Room again: the same upload goes through.
    subprocess.run(["mount", "-o", "remount,size=8m", full_code_dir], check=True)
    r = c.put(f"/agents/{a['slug']}/code", data=body, headers={"Content-Type": "application/gzip"})
    assert r.status_code == 200, r.text
    assert r.json()["size"] == len(body)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_upload_with_the_file_store_full_is_507_and_leaves_nothing():
    """The code fits its own directory, but its copy in the file store (which
    runners on other hosts fetch it from) does not: still 507, nothing kept."""
    if config_get("storage_backend", "local") != "local":
        pytest.skip("the file store is not on this host's disk")
    store_tmp = os.path.join(config_get("files_dir", os.path.join(VAR, "files")), "tmp")
    c = new_client()
    a = local_agent(c)
    body = gz_of(1 << 20)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "ahtest-full", store_tmp],
                   check=True)
    try:
        r = c.put(f"/agents/{a['slug']}/code", data=body, headers={"Content-Type": "application/gzip"})
        assert r.status_code == 507, r.text
        assert "storage is full" in r.json()["detail"], r.text
        assert os.listdir(store_tmp) == []
    finally:
        subprocess.run(["umount", "-l", store_tmp], check=True)
    left = [f for f in os.listdir(CODE) if a["id"] in f or f.startswith(".upload-")]
    assert left == [], left
    r = c.post(f"/agents/{a['slug']}/deploy")
    assert r.status_code == 400 and "No code uploaded" in r.json()["detail"], r.text
    r = c.put(f"/agents/{a['slug']}/code", data=body, headers={"Content-Type": "application/gzip"})
    assert r.status_code == 200, r.text


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_file_upload_to_a_full_disk_is_507_and_changes_nothing():
    """POST /files whose bytes do not fit the file store's disk: 507 in the
    contract's shape, no record, no quota used, no partial file."""
    if config_get("storage_backend", "local") != "local":
        pytest.skip("the file store is not on this host's disk")
    store_tmp = os.path.join(config_get("files_dir", os.path.join(VAR, "files")), "tmp")
    c = new_client()
    body = os.urandom(1 << 20)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "ahtest-full", store_tmp],
                   check=True)
    try:
        r = c.post("/files", files={"file": ("big.bin", body, "application/octet-stream")})
        assert r.status_code == 507, r.text
        assert "storage is full" in r.json()["detail"], r.text
        assert os.listdir(store_tmp) == []
    finally:
        subprocess.run(["umount", "-l", store_tmp], check=True)
    r = c.get("/files")
    assert r.status_code == 200 and r.json() == [] and r.headers["X-Total-Count"] == "0"
    usage = c.get("/files/usage").json()
    assert usage["total_files"] == 0 and usage["total_size_bytes"] == 0, usage
    r = c.post("/files", files={"file": ("big.bin", body, "application/octet-stream")})
    assert r.status_code == 201, r.text
    assert r.json()["size_bytes"] == len(body)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_streamed_presigned_upload_to_a_full_disk_is_507():
    """A presigned PUT whose body the worker writes itself (an install's nginx
    streams it, nginx/upload-body-streamed.conf; the checkout's hands over its
    own file): on a full disk, 507 and nothing left, and the same URL works
    once there is room. Sent over FastCGI to a private API master."""
    import urllib.parse
    from fcgi import PrivateApi, fcgi_begin, fcgi_read_response, fcgi_record
    if config_get("storage_backend", "local") != "local":
        pytest.skip("the file store is not on this host's disk")
    store_tmp = os.path.join(config_get("files_dir", os.path.join(VAR, "files")), "tmp")
    c = new_client()
    data = os.urandom(512 * 1024)
    r = c.post("/files/presigned-upload", json={"filename": "big.bin", "size_bytes": len(data),
                                                "content_type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    url = urllib.parse.urlsplit(r.json()["upload_url"])

    def put(api):
        s = fcgi_begin(api.sock, {"REQUEST_METHOD": "PUT", "REQUEST_URI": f"{url.path}?{url.query}",
                                  "QUERY_STRING": url.query, "REMOTE_ADDR": "10.1.2.3",
                                  "CONTENT_TYPE": "application/octet-stream",
                                  "CONTENT_LENGTH": str(len(data))})
        try:
            try:  # the worker may answer before it has read it all
                for i in range(0, len(data), 32768):
                    s.sendall(fcgi_record(5, data[i:i + 32768]))
                s.sendall(fcgi_record(5, b""))
            except (BrokenPipeError, ConnectionResetError):
                pass
            out = fcgi_read_response(s, timeout=60)
        finally:
            s.close()
        head, body = out.split(b"\r\n\r\n", 1)
        return int(head[8:11]), body

    with PrivateApi() as api:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "ahtest-full", store_tmp],
                       check=True)
        try:
            status, body = put(api)
            assert status == 507, body
            assert b"storage is full" in body
            assert os.listdir(store_tmp) == []
        finally:
            subprocess.run(["umount", "-l", store_tmp], check=True)
        status, body = put(api)
        assert status == 200, body
