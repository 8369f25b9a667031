"""Managed files on the local backend through the real stack: POST /files
(streamed multipart), records, filters, PATCH/DELETE, downloads served by nginx
(X-Accel-Redirect, Range, Content-Disposition), usage, quota, content-addressed
blobs removed with their last record."""
import hashlib
import os
import time
import threading
import urllib.parse

from conftest import VAR, Client, api_pids, new_client, wait_until

FILES_DIR = os.path.join(VAR, "files")
MB = 1024 * 1024


def blobs():
    out = set()
    for d, _, fs in os.walk(os.path.join(FILES_DIR, "blobs")):
        out.update(fs)
    return out


def leftovers():
    """Bytes of uploads in progress: nothing may stay there after a request.
    (pending/ holds uploads awaiting confirm: see pending().) nginx removes a
    refused PUT's body file when it finalizes the request, which may be just
    after the client has the answer: so a second is given for it to go."""
    def left():
        return [f for sub in ("tmp", "incoming") for f in os.listdir(os.path.join(FILES_DIR, sub))]
    deadline = time.time() + 1.0
    while left() and time.time() < deadline:
        time.sleep(0.05)
    return left()


def pending(file_id):
    return os.path.exists(os.path.join(FILES_DIR, "pending", file_id))


def upload(c, data, name="a.txt", ctype="text/plain", **fields):
    return c.post("/files", files={"file": (name, data, ctype)}, data=fields)


def test_upload_list_get_download_round_trip(client):
    data = os.urandom(300_000)
    r = upload(client, data, name="report.bin", ctype="application/x-thing",
               description="Quarterly numbers", tags="b,a")
    assert r.status_code == 201, r.text
    f = r.json()
    assert set(f) == {"file_id", "filename", "size_bytes", "content_type", "scope", "status",
                      "description", "tags", "sha256_hash", "agent_slug", "session_id",
                      "created_at", "updated_at"}
    assert f["file_id"].startswith("fil_") and len(f["file_id"]) == 26
    assert (f["filename"], f["size_bytes"], f["content_type"]) == ("report.bin", len(data), "application/x-thing")
    assert (f["scope"], f["status"], f["tags"]) == ("user", "confirmed", ["a", "b"])
    assert f["sha256_hash"] == hashlib.sha256(data).hexdigest()
    assert f["agent_slug"] is None and f["session_id"] is None
    assert client.get(f"/files/{f['file_id']}").json() == f
    d = client.get(f"/files/{f['file_id']}/download")
    assert d.status_code == 200 and d.content == data
    assert d.headers["Content-Type"] == "application/x-thing"
    assert d.headers["Content-Disposition"] == 'attachment; filename="report.bin"'
    rg = client.get(f"/files/{f['file_id']}/download", headers={"Range": "bytes=100-199"})
    assert rg.status_code == 206 and rg.content == data[100:200]
    assert leftovers() == []


def test_non_ascii_filename_gets_rfc5987_disposition(client):
    name = 'résumé "final" €.txt'
    f = upload(client, b"x", name="résumé.txt").json()
    assert f["filename"] == "résumé.txt"
    # (Multipart clients send '"' as %22, as browsers do; PATCH takes it as is.)
    assert client.patch(f"/files/{f['file_id']}", json={"filename": name}).json()["filename"] == name
    cd = client.get(f"/files/{f['file_id']}/download").headers["Content-Disposition"]
    assert cd.startswith('attachment; filename="r__sum__ _final_ ___.txt"; filename*=UTF-8\'\'')
    assert urllib.parse.unquote(cd.split("UTF-8''")[1]) == name


def test_identical_uploads_share_a_blob_removed_with_the_last(client, other_client):
    data = os.urandom(50_000)
    sha = hashlib.sha256(data).hexdigest()
    a = upload(client, data).json()
    b = upload(other_client, data).json()
    assert sha in blobs()
    assert client.delete(f"/files/{a['file_id']}").status_code == 204
    assert sha in blobs() and other_client.get(f"/files/{b['file_id']}/download").content == data
    assert other_client.delete(f"/files/{b['file_id']}").status_code == 204
    assert sha not in blobs()
    assert client.get(f"/files/{a['file_id']}").status_code == 404


def test_list_filters_paging_and_total(client):
    ids = {}
    for name, tags, desc in [("alpha.txt", "red,big", "first"), ("beta.txt", "red", "Second one"),
                             ("gamma.csv", "big", None), ("delta.txt", "", "has ALPHA inside")]:
        fields = {"tags": tags}
        if desc:
            fields["description"] = desc
        ids[name] = upload(client, name.encode(), name=name, **fields).json()["file_id"]

    def names(q):
        r = client.get("/files" + q)
        assert r.status_code == 200, r.text
        return sorted(f["filename"] for f in r.json()), int(r.headers["X-Total-Count"])

    assert names("") == (sorted(ids), 4)
    assert names("?tags=red") == (["alpha.txt", "beta.txt"], 2)
    assert names("?tags=big,red") == (["alpha.txt"], 1)
    assert names("?tags=red,nope") == ([], 0)
    assert names("?search=alpha") == (["alpha.txt", "delta.txt"], 2)
    assert names("?search=second") == (["beta.txt"], 1)
    assert names("?search=.csv&tags=big") == (["gamma.csv"], 1)
    assert names("?search=100%25") == ([], 0)
    assert names("?scope=user") == (sorted(ids), 4)
    assert names("?scope=agent") == ([], 0)
    page = client.get("/files?limit=2&offset=1")
    assert len(page.json()) == 2 and page.headers["X-Total-Count"] == "4"
    for q, loc in [("?scope=bogus", "scope"), ("?tags=a,,b", "tags"), ("?limit=0", "limit")]:
        r = client.get("/files" + q)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", loc], (q, r.text)


def test_patch_and_delete(client):
    f = upload(client, b"abc", name="old.txt").json()
    r = client.patch(f"/files/{f['file_id']}", json={"filename": "new.txt", "tags": ["z", "y"],
                                                       "description": None})
    assert r.status_code == 200, r.text
    assert (r.json()["filename"], r.json()["tags"], r.json()["description"]) == ("new.txt", ["y", "z"], None)
    assert client.patch(f"/files/{f['file_id']}", json={"size_bytes": 1}).status_code == 422
    assert client.patch(f"/files/{f['file_id']}", json={"filename": "a/b"}).status_code == 422
    assert client.delete(f"/files/{f['file_id']}").status_code == 204
    assert client.get(f"/files/{f['file_id']}").status_code == 404
    assert client.delete(f"/files/{f['file_id']}").status_code == 404


def test_another_users_file_is_404_everywhere(client, other_client):
    f = upload(client, b"secret").json()
    fid = f["file_id"]
    for method, path, kw in [("GET", f"/files/{fid}", {}), ("GET", f"/files/{fid}/download", {}),
                             ("PATCH", f"/files/{fid}", {"json": {"filename": "x"}}),
                             ("DELETE", f"/files/{fid}", {}),
                             ("POST", f"/files/{fid}/confirm", {"json": {"sha256_hash": "0" * 64}})]:
        r = other_client.request(method, path, **kw)
        assert r.status_code == 404 and r.json() == {"detail": "File not found"}, (method, path, r.text)
    assert client.get(f"/files/{fid}/download").content == b"secret"
    assert fid not in [x["file_id"] for x in other_client.get("/files").json()]


def test_usage_is_exact(client):
    assert client.get("/files/usage").json() == {"total_files": 0, "total_size_bytes": 0,
                                                 "quota_bytes": 100 * MB, "quota_used_percent": 0,
                                                 "plan": "free"}
    upload(client, b"x" * 1000)
    f = upload(client, b"y" * 234).json()
    u = client.get("/files/usage").json()
    assert (u["total_files"], u["total_size_bytes"]) == (2, 1234)
    client.delete(f"/files/{f['file_id']}")
    assert client.get("/files/usage").json()["total_size_bytes"] == 1000


def test_over_10mb_is_413_pointing_to_presigned_upload(client):
    before = blobs()
    r = upload(client, b"\0" * (10 * MB + 1))
    assert r.status_code == 413 and "presigned" in r.json()["detail"]
    r = upload(client, os.urandom(16) + b"\0" * (10 * MB - 16))  # exactly 10 MB is fine
    assert r.status_code == 201, r.text
    assert wait_until(lambda: leftovers() == [])
    assert blobs() - before == {r.json()["sha256_hash"]}


def test_quota_holds_against_concurrent_reservations():
    c = new_client("free")
    size = 20 * MB  # five fit exactly into 100 MB
    results = []

    def one():
        r = Client(c.key).post("/files/presigned-upload", json={
            "filename": "part.bin", "size_bytes": size, "content_type": "application/octet-stream"})
        results.append(r)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = sorted(r.status_code for r in results)
    assert codes == [201] * 5 + [403] * 3, codes
    denied = [r for r in results if r.status_code == 403][0].json()["detail"]
    assert "quota" in denied.lower() and "plan free" in denied
    assert c.get("/files/usage").json()["total_size_bytes"] == 5 * size
    r = upload(c, b"one byte too many")
    assert r.status_code == 403 and "quota" in r.json()["detail"].lower()
    assert wait_until(lambda: leftovers() == [])


def test_deleting_an_agent_removes_its_files(client, make_agent):
    a = make_agent()
    data = os.urandom(4096)
    f = upload(client, data, agent_slug=a["slug"]).json()
    assert (f["scope"], f["agent_slug"]) == ("agent", a["slug"])
    assert client.get("/files?scope=agent").json()[0]["file_id"] == f["file_id"]
    assert client.delete(f"/agents/{a['slug']}").status_code == 204
    assert client.get(f"/files/{f['file_id']}").status_code == 404
    assert f["sha256_hash"] not in blobs()
    assert client.get("/files/usage").json()["total_size_bytes"] == 0


def test_upload_into_unknown_agent_is_404(client):
    r = upload(client, b"x", agent_slug="no-such-agent")
    assert r.status_code == 404 and r.json() == {"detail": "Agent not found"}
    assert wait_until(lambda: leftovers() == [])


def test_workers_survive_all_of_it():
    master, workers = api_pids()
    assert master and workers


def test_filtered_offset_pages_agree_from_either_end():
    """Past half of a filtered list the page is read from its other end: every
    offset must still give exactly the slice of the whole filtered list."""
    from conftest import db_query
    c = new_client("pro")
    uid = c.get("/users/me").json()["id"]
    tag = lambda i: ",even," if i % 2 == 0 else ",odd,"
    rows = ",".join(
        f"('fil_pg{uid[-8:]}{i:04d}','{uid}','f{i}.txt',1,'text/plain','user','confirmed',"
        f"'{'report' if i % 3 else 'memo'} {i}','{tag(i)}',NULL,"
        f"NOW(3) - INTERVAL {i // 2} SECOND,NOW(3))" for i in range(60))  # pairs share a time
    db_query("INSERT INTO files (id, user_id, filename, size_bytes, content_type, scope, status,"
             " description, tags, sha256, created_at, updated_at) VALUES " + rows)
    for q in ("tags=even", "search=report", "search=report&tags=odd&scope=user"):
        whole = c.get(f"/files?{q}&limit=100")
        total = int(whole.headers["X-Total-Count"])
        ids = [f["file_id"] for f in whole.json()]
        assert len(ids) == total and total > 10, q
        # Both sides of the middle and the very end (the user's rate limit
        # allows 100 requests a minute, so not every offset).
        for off in sorted({0, 1, total // 2 - 1, total // 2, total // 2 + 1, total - 4,
                           total - 3, total - 1, total, total + 1}):
            r = c.get(f"/files?{q}&limit=3&offset={off}")
            assert r.status_code == 200, r.text
            assert [f["file_id"] for f in r.json()] == ids[off:off + 3], (q, off)
            assert r.headers["X-Total-Count"] == str(total)


def test_filtered_counts_follow_every_change():
    """Workers reuse a filtered X-Total-Count while the user's files are
    unchanged: every upload, edit and delete must show in the next answer of
    every worker (several requests, so several workers answer)."""
    c = new_client("pro")
    q = "/files?tags=q3&search=report&limit=1"

    def totals():
        return {c.get(q).headers["X-Total-Count"] for _ in range(8)}

    ids = [upload(c, b"x%d" % i, name=f"report-{i}.txt", tags="q3").json()["file_id"] for i in range(3)]
    upload(c, b"other", name="notes.txt", tags="q3")
    assert totals() == {"3"}
    upload(c, b"y", name="report-9.txt", tags="q3,extra")
    assert totals() == {"4"}
    assert c.patch(f"/files/{ids[0]}", json={"tags": ["q4"]}).status_code == 200
    assert totals() == {"3"}
    assert c.patch(f"/files/{ids[1]}", json={"filename": "summary.txt"}).status_code == 200
    assert totals() == {"2"}
    assert c.delete(f"/files/{ids[2]}").status_code == 204
    assert totals() == {"1"}
    other = new_client("pro")  # another user's matching upload is not ours
    upload(other, b"z", name="report-x.txt", tags="q3")
    assert totals() == {"1"}
