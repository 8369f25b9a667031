"""Presigned uploads (capability URL, PUT through nginx, confirm) and the bad
input list of issue 10: each gets a clear 4xx in the contract's shape, leaves no
bytes behind and no worker dead."""
import hashlib
import os
import time

import pytest
import requests

from conftest import Client, api_pids, assert_422, wait_until
from test_files import blobs, leftovers, pending

MB = 1024 * 1024


def presign(c, size, **extra):
    body = {"filename": "big.bin", "size_bytes": size, "content_type": "application/octet-stream"}
    body.update(extra)
    return c.post("/files/presigned-upload", json=body)


def confirm(c, fid, data):
    return c.post(f"/files/{fid}/confirm", json={"sha256_hash": hashlib.sha256(data).hexdigest()})


@pytest.fixture
def workers_alive():
    before = api_pids()
    yield
    assert api_pids() == before, "an API worker died"


def test_presigned_upload_put_confirm_download(client):
    data = os.urandom(12 * MB + 5)
    r = presign(client, len(data), description="big one", tags="x,y")
    assert r.status_code == 201, r.text
    p = r.json()
    assert set(p) == {"file_id", "upload_url", "expires_at"} and p["expires_at"].endswith("Z")
    rec = client.get(f"/files/{p['file_id']}").json()
    assert (rec["status"], rec["sha256_hash"], rec["tags"]) == ("pending", None, ["x", "y"])
    assert client.get(f"/files/{p['file_id']}/download").status_code == 409
    # No bearer token: the URL is the capability.
    put = requests.put(p["upload_url"], data=data)
    assert put.status_code == 200, put.text
    c = confirm(client, p["file_id"], data)
    assert c.status_code == 200, c.text
    assert (c.json()["status"], c.json()["sha256_hash"]) == ("confirmed", hashlib.sha256(data).hexdigest())
    assert client.get(f"/files/{p['file_id']}/download").content == data
    assert client.get("/files/usage").json()["total_size_bytes"] == len(data)
    assert leftovers() == [] and not pending(p["file_id"])


def test_replayed_and_tampered_urls_are_refused(client, workers_alive):
    data = b"z" * 1000
    p = presign(client, len(data)).json()
    url = p["upload_url"]
    sig = url.split("signature=")[1]
    flipped = url[:-len(sig)] + ("0" if sig[0] != "0" else "1") + sig[1:]
    other_id = presign(client, len(data)).json()["file_id"]
    for bad in [flipped, url.replace(p["file_id"], other_id), url.split("&signature")[0],
                url.replace("expires=", "expires=1")]:
        r = requests.put(bad, data=data)
        assert r.status_code == 403 and "detail" in r.json(), (bad, r.text)
    assert requests.put(url, data=data).status_code == 200
    r = requests.put(url, data=data)
    assert r.status_code == 409 and "already been used" in r.json()["detail"]
    assert confirm(client, p["file_id"], data).status_code == 200
    assert requests.put(url, data=data).status_code == 409
    assert wait_until(lambda: leftovers() == [])


def test_put_of_the_wrong_size_is_400_and_leaves_nothing(client, workers_alive):
    p = presign(client, 100).json()
    r = requests.put(p["upload_url"], data=b"x" * 101)
    assert r.status_code == 400 and "declared with 100" in r.json()["detail"]
    assert wait_until(lambda: leftovers() == []) and not pending(p["file_id"])
    assert requests.put(p["upload_url"], data=b"x" * 100).status_code == 200
    assert pending(p["file_id"])
    assert client.delete(f"/files/{p['file_id']}").status_code == 204
    assert not pending(p["file_id"])


def test_confirm_with_a_wrong_hash_discards_the_bytes(client, workers_alive):
    data = os.urandom(5000)
    p = presign(client, len(data)).json()
    before = blobs()
    r = client.post(f"/files/{p['file_id']}/confirm", json={"sha256_hash": "ab" * 32})
    assert r.status_code == 400 and "uploaded yet" in r.json()["detail"]
    assert requests.put(p["upload_url"], data=data).status_code == 200
    r = confirm(client, p["file_id"], data + b"!")
    assert r.status_code == 400 and "discarded" in r.json()["detail"]
    assert leftovers() == [] and not pending(p["file_id"]) and blobs() == before
    assert client.get(f"/files/{p['file_id']}").json()["status"] == "pending"
    assert_422(client.post(f"/files/{p['file_id']}/confirm", json={"sha256_hash": "xyz"}),
               ("body", "sha256_hash"))
    assert_422(client.post(f"/files/{p['file_id']}/confirm", json={}), ("body", "sha256_hash"))


def test_put_after_expiry_is_refused_and_the_upload_swept(client, workers_alive):
    p = presign(client, 10, expires_in_seconds=1).json()
    assert client.get("/files/usage").json()["total_size_bytes"] == 10
    time.sleep(2.1)  # past the expiry the URL carries (whole seconds)
    r = requests.put(p["upload_url"], data=b"0123456789")
    assert r.status_code == 403 and "expired" in r.json()["detail"]
    assert leftovers() == []
    # Any list sweeps expired pending uploads: the record and its reservation go.
    assert p["file_id"] not in [f["file_id"] for f in client.get("/files").json()]
    assert client.get(f"/files/{p['file_id']}").status_code == 404
    assert client.get("/files/usage").json()["total_size_bytes"] == 0


def test_presign_validation(client, workers_alive):
    assert_422(client.post("/files/presigned-upload", json={}),
               ("body", "filename"), ("body", "size_bytes"), ("body", "content_type"))
    assert_422(presign(client, 10, content_type="not a media type"), ("body", "content_type"))
    assert_422(presign(client, 10, content_type="text/plain\r\nX-Evil: 1"), ("body", "content_type"))
    assert_422(presign(client, -1), ("body", "size_bytes"))
    assert_422(presign(client, 10, tags="a,,b"), ("body", "tags"))
    assert_422(presign(client, 10, owner="me"), ("body", "owner"))
    assert_422(presign(client, 10, filename="../etc/passwd"), ("body", "filename"))
    r = presign(client, 10, agent_slug="nope")
    assert r.status_code == 404 and r.json() == {"detail": "Agent not found"}
    assert client.get("/files/usage").json()["total_size_bytes"] == 0


# ---- bad multipart bodies ----

BOUNDARY = "XyZ123"


def raw_post(c, body, boundary=BOUNDARY):
    return c.post("/files", data=body, headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})


def part(name, data, filename=None, ctype=None):
    disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
    head = f"--{BOUNDARY}\r\nContent-Disposition: {disp}\r\n" + (f"Content-Type: {ctype}\r\n" if ctype else "")
    return head.encode() + b"\r\n" + data + b"\r\n"


END = f"--{BOUNDARY}--\r\n".encode()


@pytest.mark.parametrize("what,body,loc", [
    ("missing file part", part("description", b"d") + END, ("body", "file")),
    ("two file parts", part("file", b"a", "a.txt") + part("file", b"b", "b.txt") + END, ("body", "file")),
    ("boundary never ends", part("file", b"a" * 5000, "a.txt")[:-2], ("body",)),
    ("truncated body", part("file", b"abc", "a.txt")[:40], ("body",)),
    ("no boundary at all", b"just some bytes", ("body",)),
    ("filename with a slash", part("file", b"a", "dir/a.txt") + END, ("body", "file")),
    ("filename ..", part("file", b"a", "..") + END, ("body", "file")),
    ("filename with a control character", part("file", b"a", "a\x01b") + END, ("body", "file")),
    ("filename of 10 KB", part("file", b"a", "n" * 10240) + END, ("body", "file")),
    ("file part without a filename", part("file", b"a") + END, ("body", "file")),
    ("tags with an empty entry", part("tags", b"a,,b") + part("file", b"a", "a.txt") + END, ("body", "tags")),
    ("tags ending in a comma", part("tags", b"a,") + part("file", b"a", "a.txt") + END, ("body", "tags")),
    ("content type not a media type", part("file", b"a", "a.txt", "nonsense") + END, ("body", "file")),
    ("unknown field", part("owner", b"me") + part("file", b"a", "a.txt") + END, ("body", "owner")),
    ("description not UTF-8", part("description", b"\xff\xfe") + part("file", b"a", "a.txt") + END,
     ("body", "description")),
])
def test_bad_multipart_is_422_and_leaves_nothing(client, workers_alive, what, body, loc):
    before = blobs()
    r = raw_post(client, body)
    assert_422(r, loc)
    assert wait_until(lambda: leftovers() == []), what
    assert blobs() == before and client.get("/files").json() == []


def test_nul_in_filename_is_422(client, workers_alive):
    body = (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; '
            "filename*=UTF-8''a%00b.txt\r\n\r\nx\r\n").encode() + END
    assert_422(raw_post(client, body), ("body", "file"))
    assert wait_until(lambda: leftovers() == [])


def test_not_multipart_is_415(client):
    r = client.post("/files", json={"file": "x"})
    assert r.status_code == 415 and "multipart/form-data" in r.json()["detail"]


def test_upload_url_needs_no_token_but_the_api_does(anon, client):
    assert anon.post("/files/presigned-upload", json={}).status_code == 401
    assert anon.get("/files").status_code == 401
    p = presign(client, 3).json()
    assert Client().put(p["upload_url"].split("/api/v1")[1], data=b"abc").status_code == 200


@pytest.mark.parametrize("how", ["multipart", "presigned"])
def test_an_empty_file_is_stored(client, workers_alive, how):
    """A file of no bytes (a .gitkeep, an empty config) fits any quota. The
    quota's reservation changed no row for it, which read as over the quota:
    every empty upload got 403 "Storage quota exceeded: this upload needs 0
    bytes"."""
    used = client.get("/files/usage").json()["total_size_bytes"]
    if how == "multipart":
        r = client.post("/files", files={"file": ("empty.txt", b"", "text/plain")})
        assert r.status_code == 201, r.text
        fid = r.json()["file_id"]
    else:
        r = presign(client, 0)
        assert r.status_code == 201, r.text
        fid = r.json()["file_id"]
        assert requests.put(r.json()["upload_url"], data=b"").status_code == 200
        assert confirm(client, fid, b"").status_code == 200
    rec = client.get(f"/files/{fid}").json()
    assert (rec["status"], rec["size_bytes"]) == ("confirmed", 0)
    assert rec["sha256_hash"] == hashlib.sha256(b"").hexdigest()
    got = client.get(f"/files/{fid}/download")
    assert got.status_code == 200 and got.content == b""
    assert client.get("/files/usage").json()["total_size_bytes"] == used
