"""Attachments and session outputs with real agents: an attached file appears
in the sandbox under /files/agent/ (read-only unless attached writable, a
writable one's changes saved back), and what the agent writes under
/files/session/ becomes session files listed in the result, downloadable byte
for byte, visible again in the session's later calls."""
import hashlib
import os
import uuid

import requests

from agent_code import deployed_agent, needs_runner
from conftest import assert_422
from test_deploy import runner_pid

FILES_JS = r"""
const fs = require('fs');
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', () => {
  const [cmd, a, b] = Buffer.concat(chunks).toString('utf8').split('|');
  const out = [];
  try {
    if (cmd === 'read') out.push(fs.readFileSync(a, 'utf8'));
    if (cmd === 'ls') out.push(fs.readdirSync(a).sort().join(','));
    if (cmd === 'write') { fs.writeFileSync(a, b); out.push('wrote'); }
    if (cmd === 'mode') out.push((fs.statSync(a).mode & 0o777).toString(8));
    if (cmd === 'bin') { fs.writeFileSync(a, Buffer.from(b, 'base64')); out.push('wrote'); }
    if (cmd === 'tree') {  // every file under a: its path, mode and sha256
      const walk = d => fs.readdirSync(d, {withFileTypes: true}).forEach(e => {
        const p = d + '/' + e.name;
        if (e.isDirectory()) return walk(p);
        const sha = require('crypto').createHash('sha256').update(fs.readFileSync(p)).digest('hex');
        out.push(p + ' ' + (fs.statSync(p).mode & 0o777).toString(8) + ' ' + sha + '\n');
      });
      walk(a);
    }
  } catch (e) { out.push('ERR ' + e.code); }
  process.stdout.write(out.join(''));
});
"""


def run(client, slug, prompt, **kw):
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": prompt, **kw}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def upload(client, data, name):
    r = client.post("/files", files={"file": (name, data, "text/plain")})
    assert r.status_code == 201, r.text
    return r.json()


@needs_runner
def test_attachment_is_read_only_in_the_sandbox_and_session_files_come_back(client):
    a = deployed_agent(client, FILES_JS)
    slug = a["slug"]
    f = upload(client, b"attached content", "in.txt")
    r = client.post(f"/agents/{slug}/files", json={"file_id": f["file_id"]})
    assert r.status_code == 201, r.text
    att = r.json()
    assert (att["mount_path"], att["read_only"], att["filename"]) == ("/files/agent/in.txt", True, "in.txt")
    assert client.get(f"/agents/{slug}").json()["needs_redeploy"] is True
    assert [x["file_id"] for x in client.get(f"/agents/{slug}/files").json()] == [f["file_id"]]
    assert run(client, slug, "read|/files/agent/in.txt")["response_content"] == "attached content"
    assert run(client, slug, "mode|/files/agent/in.txt")["response_content"] == "444"
    assert run(client, slug, "write|/files/agent/in.txt|changed")["response_content"] == "ERR EACCES"
    assert client.get(f"/files/{f['file_id']}/download").content == b"attached content"

    # Session outputs: listed in the result, session-scope records, byte for byte.
    sid = "s-" + uuid.uuid4().hex[:8]
    res = run(client, slug, "write|/files/session/out.txt|produced by the agent", session_id=sid)
    assert [(x["filename"], x["size_bytes"]) for x in res["files"]] == [("out.txt", 21)]
    listed = client.get("/files?scope=session").json()
    assert len(listed) == 1 and listed[0]["file_id"] == res["files"][0]["file_id"]
    assert (listed[0]["agent_slug"], listed[0]["session_id"], listed[0]["scope"]) == (slug, sid, "session")
    got = client.get(f"/files/{listed[0]['file_id']}/download")
    assert got.content == b"produced by the agent"
    assert listed[0]["sha256_hash"] == hashlib.sha256(b"produced by the agent").hexdigest()
    # Seen again in the session's next call; unchanged files are not listed again.
    res2 = run(client, slug, "read|/files/session/out.txt", session_id=sid)
    assert res2["response_content"] == "produced by the agent" and res2["files"] == []
    # Changed: the same record, new bytes.
    res3 = run(client, slug, "write|/files/session/out.txt|v2", session_id=sid)
    assert [x["file_id"] for x in res3["files"]] == [listed[0]["file_id"]]
    assert client.get(f"/files/{listed[0]['file_id']}/download").content == b"v2"
    assert client.get("/files/usage").json()["total_size_bytes"] == len(b"attached content") + 2

    # A new sandbox of the same session (the old one deleted) gets them back.
    assert client.delete(f"/agents/{slug}/sessions/{sid}").status_code == 204
    res4 = run(client, slug, "read|/files/session/out.txt", session_id=sid)
    assert res4["response_content"] == "v2" and res4["files"] == []
    assert res4["sandbox_id"] != res3["sandbox_id"]

    # Detaching applies from the next invocation on.
    assert client.delete(f"/agents/{slug}/files/{f['file_id']}").status_code == 204
    assert run(client, slug, "ls|/files/agent")["response_content"] == ""
    assert client.delete(f"/agents/{slug}/files/{f['file_id']}").status_code == 404


@needs_runner
def test_many_attachments_arrive_whole_in_one_call(client):
    """An agent's attachments are placed together before each call (one tar
    in the sandbox, issue 31): every one arrives byte for byte at its path
    with its mode, nested, past tar's 100-byte names and not ASCII alike."""
    slug = deployed_agent(client, FILES_JS)["slug"]
    want = {}
    paths = [f"/files/agent/doc{i:02d}.txt" for i in range(20)] + [
        "/files/agent/deep/er/still/nested.bin", "/files/agent/" + "long-" * 30 + "/name.txt",
        "/files/agent/ünïcödé/naïve.txt", "/files/agent/empty.txt"]
    for i, path in enumerate(paths):
        data = b"" if path.endswith("empty.txt") else uuid.uuid4().bytes * (i + 1)
        writable = i % 5 == 0
        f = upload(client, data, "f.txt")
        r = client.post(f"/agents/{slug}/files", json={"file_id": f["file_id"], "mount_path": path,
                                                      "read_only": not writable})
        assert r.status_code == 201, r.text
        want[path] = ("644" if writable else "444", hashlib.sha256(data).hexdigest())
    for _ in range(2):  # a new sandbox, then a spare made while the first ran
        lines = run(client, slug, "tree|/files/agent")["response_content"].splitlines()
        got = {p: (m, h) for p, m, h in (ln.rsplit(" ", 2) for ln in lines)}
        assert got == want


@needs_runner
def test_detached_attachment_leaves_a_sessions_sandbox(client):
    """A session keeps its sandbox between calls: an attachment detached
    between two of them is gone from /files/agent at the next, with nothing
    else attached (no files to place for that call)."""
    slug = deployed_agent(client, FILES_JS)["slug"]
    f = upload(client, b"for now", "a.txt")
    assert client.post(f"/agents/{slug}/files", json={"file_id": f["file_id"]}).status_code == 201
    sid = "s-" + uuid.uuid4().hex[:8]
    first = run(client, slug, "ls|/files/agent", session_id=sid)
    assert first["response_content"] == "a.txt"
    assert client.delete(f"/agents/{slug}/files/{f['file_id']}").status_code == 204
    second = run(client, slug, "ls|/files/agent", session_id=sid)
    assert second["sandbox_id"] == first["sandbox_id"]
    assert second["response_content"] == ""


@needs_runner
def test_writable_attachment_is_saved_back(client):
    a = deployed_agent(client, FILES_JS)
    slug = a["slug"]
    f = upload(client, b"v1", "notes.txt")
    r = client.post(f"/agents/{slug}/files", json={"file_id": f["file_id"], "read_only": False,
                                                  "mount_path": "/files/agent/sub/notes.txt"})
    assert r.status_code == 201, r.text
    res = run(client, slug, "write|/files/agent/sub/notes.txt|version two")
    assert res["response_content"] == "wrote" and res["files"] == []
    rec = client.get(f"/files/{f['file_id']}").json()
    assert (rec["size_bytes"], rec["sha256_hash"]) == (11, hashlib.sha256(b"version two").hexdigest())
    assert rec["updated_at"] > f["updated_at"]
    assert client.get(f"/files/{f['file_id']}/download").content == b"version two"
    # Deleting the file detaches it everywhere.
    assert client.delete(f"/files/{f['file_id']}").status_code == 204
    assert client.get(f"/agents/{slug}/files").json() == []


def proc_status_mib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


@needs_runner
def test_a_large_attachment_never_sits_in_the_runners_memory(client):
    """64 MiB attached arrive byte for byte while the runner's peak memory
    grows by a fraction of that: the attachments' tar goes through a file and
    is spliced into the sandbox. Holding the blob and then the tar in memory,
    it grew by twice the file (100 MiB: +200 MiB), on every call at once."""
    slug = deployed_agent(client, FILES_JS)["slug"]
    data = os.urandom(64 << 20)
    sha = hashlib.sha256(data).hexdigest()
    p = client.post("/files/presigned-upload", json={"filename": "big.bin", "size_bytes": len(data),
                                                      "content_type": "application/octet-stream"}).json()
    assert requests.put(p["upload_url"], data=data).status_code == 200
    assert client.post(f"/files/{p['file_id']}/confirm", json={"sha256_hash": sha}).status_code == 200
    assert client.post(f"/agents/{slug}/files", json={"file_id": p["file_id"]}).status_code == 201
    pid = runner_pid()
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")  # the peak (VmHWM) starts again from what the runner holds now
    before = proc_status_mib(pid, "VmRSS")
    assert run(client, slug, "tree|/files/agent")["response_content"] == f"/files/agent/big.bin 444 {sha}\n"
    grown = proc_status_mib(pid, "VmHWM") - before
    assert grown < 24, f"the runner's peak memory grew by {grown:.0f} MiB for a 64 MiB attachment"


def test_attach_bad_input(client, other_client, make_agent):
    a = make_agent()
    slug = a["slug"]
    mine = upload(client, b"x", "x.txt")
    theirs = upload(other_client, b"y", "y.txt")
    r = client.post(f"/agents/{slug}/files", json={"file_id": theirs["file_id"]})
    assert r.status_code == 404 and r.json() == {"detail": "File not found"}
    for bad in ["/etc/passwd", "/files/agent/", "/files/agent/../x", "/files/session/x",
                "/files/agent/a//b", "relative/x", "/files/agent/./x"]:
        assert_422(client.post(f"/agents/{slug}/files", json={"file_id": mine["file_id"], "mount_path": bad}),
                   ("body", "mount_path"))
    assert_422(client.post(f"/agents/{slug}/files", json={}), ("body", "file_id"))
    assert_422(client.post(f"/agents/{slug}/files", json={"file_id": mine["file_id"], "read_only": "no"}),
               ("body", "read_only"))
    assert client.post(f"/agents/{slug}/files", json={"file_id": mine["file_id"]}).status_code == 201
    r = client.post(f"/agents/{slug}/files", json={"file_id": mine["file_id"]})
    assert r.status_code == 409
    assert other_client.get(f"/agents/{slug}/files").status_code == 404
    assert other_client.delete(f"/agents/{slug}/files/{mine['file_id']}").status_code == 404
    p = client.post("/files/presigned-upload", json={"filename": "p.txt", "size_bytes": 1,
                                                      "content_type": "text/plain"}).json()
    assert client.post(f"/agents/{slug}/files", json={"file_id": p["file_id"]}).status_code == 409
