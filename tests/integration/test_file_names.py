"""File names with bidirectional control characters (issue #26): U+202A..U+202E
and U+2066..U+2069 reorder what follows them on screen, so
"invoice\u202efdp.exe" shows as "invoiceexe.pdf" in a listing, the dashboard,
a browser's save dialog or a terminal. Every way a name gets in refuses them
with 422 naming the field, and changes nothing: an upload (the multipart
filename, plain or RFC 5987 encoded), a presigned upload, a rename, tags, an
attachment's mount path; a session file an agent writes under such a name is
not kept. Names in right-to-left scripts are names like any other."""
import urllib.parse

import pytest

from agent_code import deployed_agent, needs_runner
from conftest import assert_422
from test_files import blobs
from test_files_agents import FILES_JS, run
from test_files_upload import END, part, presign, raw_post

BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"]
SPOOF = "invoice\u202efdp.exe"


def bidi_422(r, *loc):
    assert_422(r, loc)
    entry = next(e for e in r.json()["detail"] if tuple(e["loc"]) == loc)
    assert "bidirectional" in entry["msg"], entry
    return entry


def nothing_stored(client, before):
    assert client.get("/files").json() == []
    assert client.get("/files/usage").json()["total_size_bytes"] == 0
    assert blobs() == before


@pytest.mark.parametrize("ch", BIDI, ids=lambda c: f"U+{ord(c):04X}")
def test_upload_refuses_each_bidi_control(client, ch):
    before = blobs()
    r = client.post("/files", files={"file": (f"a{ch}b.txt", b"x", "text/plain")})
    bidi_422(r, "body", "file")
    nothing_stored(client, before)


def test_upload_refuses_an_encoded_filename(client):
    before = blobs()
    enc = urllib.parse.quote(SPOOF.encode())
    body = (f"--XyZ123\r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''{enc}"
            "\r\n\r\nx\r\n").encode() + END
    bidi_422(raw_post(client, body), "body", "file")
    body = part("file", b"x", "a.txt") + END
    bidi_422(raw_post(client, part("tags", "q4,\u2067x".encode()) + body), "body", "tags")
    nothing_stored(client, before)


def test_presigned_upload_refuses_them(client):
    bidi_422(presign(client, 10, filename=SPOOF), "body", "filename")
    bidi_422(presign(client, 10, filename="a.bin", tags="\u202dx"), "body", "tags")
    nothing_stored(client, blobs())


def test_rename_and_retag_refuse_them(client):
    f = client.post("/files", files={"file": ("report.pdf", b"%PDF", "application/pdf")}).json()
    bidi_422(client.patch(f"/files/{f['file_id']}", json={"filename": SPOOF}), "body", "filename")
    bidi_422(client.patch(f"/files/{f['file_id']}", json={"tags": "ok,\u2069"}), "body", "tags")
    got = client.get(f"/files/{f['file_id']}").json()
    assert (got["filename"], got["tags"], got["updated_at"]) == ("report.pdf", [], f["updated_at"])
    assert client.get(f"/files/{f['file_id']}/download").headers["Content-Disposition"] == \
        'attachment; filename="report.pdf"'


def test_attachment_mount_path_refuses_them(client, make_agent):
    a = make_agent()
    f = client.post("/files", files={"file": ("in.txt", b"x", "text/plain")}).json()
    for mp in (f"/files/agent/{SPOOF}", "/files/agent/d\u2066/in.txt"):
        r = client.post(f"/agents/{a['slug']}/files", json={"file_id": f["file_id"], "mount_path": mp})
        assert_422(r, ("body", "mount_path"))
    assert client.get(f"/agents/{a['slug']}/files").json() == []


def test_right_to_left_names_are_names(client):
    # Hebrew and Arabic show right to left by themselves; no control needed.
    for name in ("\u05d3\u05d5\u05d7.txt", "\u062a\u0642\u0631\u064a\u0631.pdf"):
        r = client.post("/files", files={"file": (name, b"x", "text/plain")})
        assert r.status_code == 201 and r.json()["filename"] == name, r.text


@needs_runner
def test_a_session_file_so_named_is_not_kept(client):
    slug = deployed_agent(client, FILES_JS)["slug"]
    res = run(client, slug, f"write|/files/session/{SPOOF}|spoof", session_id="bidi")
    assert res["response_content"] == "wrote" and res["files"] == []
    res = run(client, slug, "write|/files/session/plain.txt|fine", session_id="bidi")
    assert [x["filename"] for x in res["files"]] == ["plain.txt"]
    assert [x["filename"] for x in client.get("/files?scope=session").json()] == ["plain.txt"]
