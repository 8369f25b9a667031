"""What one invocation keeps of the files its agent wrote is bounded by what
its sandbox held, not by the user's quota alone (issue 26, part 4): a sparse
file is not blown up into a blob of its apparent size, a flood of files stops
at the per-call cap, collection never outlives the call's timeout, and calls
at once cannot each take what only one of them may keep. Whatever is not kept
is said in the result's (and the history's) `files_error`, those taken before
it are kept, and nothing else changes."""
import concurrent.futures
import os

from agent_code import VAR, config_get, deployed_agent, needs_runner
from conftest import new_client

OUT_JS = r"""
const fs = require('fs');
const cp = require('child_process');
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', () => {
  const [cmd, a, b] = Buffer.concat(chunks).toString('utf8').split('|');
  const d = '/files/session/';
  if (cmd === 'sparse') {
    fs.writeFileSync(d + 'a.txt', 'ok');
    const fd = fs.openSync(d + a, 'w');
    fs.ftruncateSync(fd, Number(b));
    fs.closeSync(fd);
  }
  if (cmd === 'many')
    for (let i = 0; i < Number(a); i++)
      fs.writeFileSync(d + 'f' + String(i).padStart(4, '0') + (b ? 'x'.repeat(Number(b)) : ''), '');
  if (cmd === 'real') fs.writeFileSync(d + a, Buffer.alloc(Number(b), 7));
  if (cmd === 'fifo') { fs.unlinkSync(a); cp.execFileSync('/usr/bin/mkfifo', [a]); }
  if (cmd === 'trunc') fs.truncateSync(a, Number(b));
  if (cmd === 'hang') { fs.writeFileSync(d + 'late.txt', 'x'); setInterval(() => {}, 1000); return; }
  process.stdout.write('done');
});
"""

MIB = 1 << 20
MAX_FILES = int(config_get("session_output_max_files", "100"))
FILES_TMP = os.path.join(config_get("files_dir", os.path.join(VAR, "files")), "tmp")


def invoke(client, slug, prompt, **kw):
    return client.post(f"/agents/{slug}/invoke", json={"prompt": prompt, **kw}, timeout=300)


def used(client):
    return client.get("/files/usage").json()["total_size_bytes"]


def history(client, slug, inv_id):
    rows = client.get(f"/agents/{slug}/invocations?limit=100").json()
    return next(x for x in rows if x["invocation_id"] == inv_id)


@needs_runner
def test_sparse_file_is_not_blown_up_into_a_blob():
    """`truncate -s 200M` takes no block of the sandbox's disk: copied out it
    would be 200 MB of host storage the disk never held. A pro user's quota
    would take it; the call keeps what came before it and says why not it."""
    c = new_client("pro")
    slug = deployed_agent(c, OUT_JS)["slug"]
    r = invoke(c, slug, f"sparse|big.bin|{200 * MIB}")
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["status"] == "completed" and res["response_content"] == "done"
    assert [(f["filename"], f["size_bytes"]) for f in res["files"]] == [("a.txt", 2)]
    assert "big.bin is a sparse file" in res["files_error"], res
    assert used(c) == 2
    assert [f["filename"] for f in c.get("/files?scope=session").json()] == ["a.txt"]
    assert history(c, slug, res["invocation_id"])["files_error"] == res["files_error"]


@needs_runner
def test_sparse_writable_attachment_is_not_saved_back():
    c = new_client("pro")
    slug = deployed_agent(c, OUT_JS)["slug"]
    up = c.post("/files", files={"file": ("notes.txt", b"v1", "text/plain")}).json()
    r = c.post(f"/agents/{slug}/files", json={"file_id": up["file_id"], "read_only": False})
    assert r.status_code == 201, r.text
    r = invoke(c, slug, f"trunc|/files/agent/notes.txt|{200 * MIB}")
    assert r.status_code == 200, r.text
    err = r.json()["files_error"]
    assert "the attachment at /files/agent/notes.txt is a sparse file" in err, err
    assert c.get(f"/files/{up['file_id']}/download").content == b"v1"
    assert used(c) == 2


@needs_runner
def test_many_empty_files_stop_at_the_per_call_cap():
    """2,000 empty files cost no byte: the file cap stops them. The first
    ones by name are kept, the result says the rest were not."""
    c = new_client()
    slug = deployed_agent(c, OUT_JS)["slug"]
    r = invoke(c, slug, "many|2000", session_id="flood")
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["status"] == "completed"
    names = [f["filename"] for f in res["files"]]
    assert names == [f"f{i:04d}" for i in range(MAX_FILES)]
    err = res["files_error"]
    assert f"over {MAX_FILES} files" in err and f"f{MAX_FILES:04d}" in err, err
    listed = c.get("/files?scope=session&limit=1")
    assert listed.headers["X-Total-Count"] == str(MAX_FILES)
    # The session's next call: the kept ones are unchanged, the next ones come.
    r = invoke(c, slug, "many|0", session_id="flood")
    assert r.status_code == 200, r.text
    assert [f["filename"] for f in r.json()["files"]] == [f"f{i:04d}" for i in range(MAX_FILES, 2 * MAX_FILES)]


@needs_runner
def test_a_listing_past_its_old_cap_still_keeps_the_first_files():
    """16,000 files with long names: their listing was over the 4 MiB the
    runner read, and every output of the call was dropped without a word."""
    c = new_client()
    slug = deployed_agent(c, OUT_JS)["slug"]
    r = invoke(c, slug, "many|16000|240")
    assert r.status_code == 200, r.text
    res = r.json()
    assert [f["filename"] for f in res["files"]] == [f"f{i:04d}" + "x" * 240 for i in range(MAX_FILES)]
    assert f"over {MAX_FILES} files" in res["files_error"], res["files_error"]


@needs_runner
def test_collecting_an_attachment_never_outlives_the_timeout():
    """A writable attachment the agent replaced with a named pipe: reading it
    back once waited two minutes past the call's timeout (and the API gave up
    on the runner first: 504). The call now answers within its time."""
    c = new_client()
    slug = deployed_agent(c, OUT_JS)["slug"]
    up = c.post("/files", files={"file": ("notes.txt", b"v1", "text/plain")}).json()
    r = c.post(f"/agents/{slug}/files", json={"file_id": up["file_id"], "read_only": False})
    assert r.status_code == 201, r.text
    r = invoke(c, slug, "fifo|/files/agent/notes.txt", timeout_seconds=3)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed"
    assert c.get(f"/files/{up['file_id']}/download").content == b"v1"


@needs_runner
def test_a_call_that_used_all_its_time_has_none_left_to_collect():
    """Collecting counts in the call's timeout: an agent stopped at its
    timeout leaves no time for it, and the result says its file was not kept
    (it was collected after the timeout, on steps with their own two minutes)."""
    c = new_client()
    slug = deployed_agent(c, OUT_JS)["slug"]
    r = invoke(c, slug, "hang", timeout_seconds=2)
    assert r.status_code == 504, r.text
    inv = r.json()["invocation"]
    assert inv["files"] == [] and "timeout ran out" in inv["files_error"], inv
    assert used(c) == 0
    assert history(c, slug, inv["invocation_id"])["files_error"] == inv["files_error"]


@needs_runner
def test_calls_at_once_share_the_quota_and_say_what_they_could_not_keep():
    """Three calls at once each write 40 MB for a user with 100 MB free: two
    keep theirs, the third says the quota stopped it, and no copy is left on
    the host."""
    c = new_client()
    slug = deployed_agent(c, OUT_JS)["slug"]
    quota = c.get("/files/usage").json()["quota_bytes"]
    size = 40 * MIB
    assert 2 * size <= quota < 3 * size
    with concurrent.futures.ThreadPoolExecutor(3) as ex:
        rs = list(ex.map(lambda i: invoke(c, slug, f"real|out{i}.bin|{size}"), range(3)))
    assert all(r.status_code == 200 for r in rs), [r.text for r in rs]
    kept = [r.json() for r in rs if r.json()["files"]]
    refused = [r.json() for r in rs if not r.json()["files"]]
    assert len(kept) == 2 and len(refused) == 1
    assert all("files_error" not in x for x in kept)
    assert "storage quota" in refused[0]["files_error"], refused[0]
    assert used(c) == 2 * size
    left = [f for f in os.listdir(FILES_TMP)] if os.path.isdir(FILES_TMP) else []
    assert not [f for f in left if os.path.getsize(os.path.join(FILES_TMP, f)) == size], left
