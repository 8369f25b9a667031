"""The agenthost client's files commands against the real stack: upload (multipart,
and the presigned flow above 10 MB), list with filters, get, download byte for
byte (never over an existing file without --force, to stdout with -o -),
update, delete, usage, attachments, --json, errors with the API's detail; and a
download the API answers with a redirect (the S3 backend), followed without
sending the key to the other host."""
import hashlib
import http.server
import json
import os
import subprocess
import threading

import pytest

from conftest import create_user
from test_cli import CLI, cli_env, home, on_pty, run, user  # noqa: F401 (fixtures)


def upload(env, path, *args):
    r = run(env, "files", "upload", str(path), *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_upload_list_get_download_update_delete_usage(user, tmp_path):
    _e, _k, env = user
    src = tmp_path / "notes.txt"
    src.write_bytes(b"first line\n\x00binary\xff tail\n")
    rec = upload(env, src, "--description", "meeting notes", "--tags", "work,q4")
    assert (rec["filename"], rec["size_bytes"], rec["status"]) == ("notes.txt", src.stat().st_size, "confirmed")
    assert sorted(rec["tags"]) == ["q4", "work"] and rec["content_type"] == "text/plain"
    assert rec["sha256_hash"] == hashlib.sha256(src.read_bytes()).hexdigest()
    other = upload(env, _file(tmp_path, "other.bin", b"x" * 100), "--tags", "work")
    fid = rec["file_id"]

    ids = lambda *a: [f["file_id"] for f in json.loads(run(env, "files", "list", *a, "--json").stdout)]
    assert set(ids()) == {fid, other["file_id"]}
    assert ids("--tags", "work,q4") == [fid]
    assert ids("--search", "meeting") == [fid]
    assert ids("--scope", "agent") == []
    assert ids("--limit", "1", "--offset", "1") and len(ids("--limit", "1")) == 1
    table = run(env, "files", "list").stdout.splitlines()
    assert table[0].split()[:2] == ["id", "filename"] and any(fid in ln and "q4,work" in ln for ln in table)

    r = run(env, "files", "get", fid)
    assert r.returncode == 0 and "description:  meeting notes" in r.stdout

    out = tmp_path / "dl"
    out.mkdir()
    r = run(env, "files", "download", fid, cwd=out)
    assert r.returncode == 0, r.stderr
    assert (out / "notes.txt").read_bytes() == src.read_bytes()
    r = subprocess_bytes(env, "files", "download", fid, "-o", "-")
    assert r == src.read_bytes()
    (out / "sub").mkdir()
    assert run(env, "files", "download", fid, "-o", str(out / "sub")).returncode == 0
    assert (out / "sub" / "notes.txt").read_bytes() == src.read_bytes()

    r = run(env, "files", "update", fid, "--description", "changed", "--tags", "home", "--json")
    assert r.returncode == 0, r.stderr
    assert (json.loads(r.stdout)["description"], json.loads(r.stdout)["tags"]) == ("changed", ["home"])
    assert run(env, "files", "update", fid).returncode == 2     # nothing to change

    usage = json.loads(run(env, "files", "usage", "--json").stdout)
    assert usage["total_files"] == 2 and usage["total_size_bytes"] == src.stat().st_size + 100
    assert run(env, "files", "delete", fid).returncode == 2     # not a terminal, no --yes
    assert run(env, "files", "delete", fid, "--yes").returncode == 0
    r = run(env, "files", "get", fid)
    assert (r.returncode, r.stderr) == (1, "error: File not found (HTTP 404)\n")
    assert json.loads(run(env, "files", "usage", "--json").stdout)["total_files"] == 1


def _file(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def subprocess_bytes(env, *args):
    r = subprocess.run([CLI, *args], env=env, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_download_never_overwrites_without_force(user, tmp_path):
    _e, _k, env = user
    rec = upload(env, _file(tmp_path, "report.csv", b"a,b\n1,2\n"))
    target = _file(tmp_path, "mine.csv", b"precious")
    r = run(env, "files", "download", rec["file_id"], "-o", str(target))
    assert r.returncode == 2 and "exists" in r.stderr and "--force" in r.stderr
    assert target.read_bytes() == b"precious"
    r = run(env, "files", "download", rec["file_id"], "-o", str(target), "--force")
    assert r.returncode == 0, r.stderr
    assert target.read_bytes() == b"a,b\n1,2\n"
    # and nothing of the transfer was left beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.csv", "report.csv", "xdg"]


def test_presigned_upload_above_10_mb_round_trips(user, tmp_path):
    _e, _k, env = user
    data = os.urandom(11 << 20)
    rec = upload(env, _file(tmp_path, "big.bin", data), "--tags", "big", "--description", "eleven")
    assert (rec["status"], rec["size_bytes"]) == ("confirmed", len(data))
    assert rec["sha256_hash"] == hashlib.sha256(data).hexdigest() and rec["tags"] == ["big"]
    assert rec["description"] == "eleven"
    r = run(env, "files", "download", rec["file_id"], "-o", str(tmp_path / "back.bin"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "back.bin").read_bytes() == data


def test_progress_bar_on_a_terminal_and_not_in_a_pipe(user, tmp_path):
    _e, _k, env = user
    small = _file(tmp_path, "small.txt", b"s" * 5000)
    big = _file(tmp_path, "big.bin", os.urandom((10 << 20) + 1))
    for f in (small, big):
        status, out = on_pty(env, ["files", "upload", str(f)])
        assert status == 0 and "uploading 100%" in out, out
    fid = json.loads(run(env, "files", "list", "--search", "big.bin", "--json").stdout)[0]["file_id"]
    status, out = on_pty(env, ["files", "download", fid, "-o", str(tmp_path / "back.bin")])
    assert status == 0 and "downloading 100%" in out, out
    r = run(env, "files", "upload", str(big))
    assert r.returncode == 0 and "uploading" not in r.stderr and "\r" not in r.stderr
    r = run(env, "files", "download", fid, "-o", str(tmp_path / "again.bin"))
    assert r.returncode == 0 and r.stderr == f"Saved {tmp_path / 'again.bin'} ({(10 << 20) + 1} bytes)\n"


def test_attachments_add_list_rm(user, tmp_path):
    _e, _k, env = user
    assert run(env, "agents", "create", "With Files").returncode == 0
    fid = upload(env, _file(tmp_path, "data.json", b"{}"))["file_id"]
    r = run(env, "agents", "files", "add", "with-files", fid, "--json")
    assert r.returncode == 0, r.stderr
    att = json.loads(r.stdout)
    assert (att["mount_path"], att["read_only"]) == ("/files/agent/data.json", True)
    fid2 = upload(env, _file(tmp_path, "scratch.txt", b"s"))["file_id"]
    r = run(env, "agents", "files", "add", "with-files", fid2, "--path", "/files/agent/w/s.txt", "--writable")
    assert r.returncode == 0 and "/files/agent/w/s.txt" in r.stderr
    listed = json.loads(run(env, "agents", "files", "list", "with-files", "--json").stdout)
    assert {(a["file_id"], a["read_only"]) for a in listed} == {(fid, True), (fid2, False)}
    assert "data.json" in run(env, "agents", "files", "list", "with-files").stdout
    assert run(env, "agents", "files", "rm", "with-files", fid).returncode == 0
    listed = json.loads(run(env, "agents", "files", "list", "with-files", "--json").stdout)
    assert [a["file_id"] for a in listed] == [fid2]
    r = run(env, "agents", "files", "rm", "with-files", fid)
    assert r.returncode == 1 and "HTTP 404" in r.stderr
    scoped = upload(env, _file(tmp_path, "own.txt", b"o"), "--agent", "with-files")
    assert (scoped["scope"], scoped["agent_slug"]) == ("agent", "with-files")
    listed = json.loads(run(env, "files", "list", "--scope", "agent", "--json").stdout)
    assert [f["file_id"] for f in listed] == [scoped["file_id"]]


def test_another_users_file_is_not_found(user, tmp_path, home):
    _e, _k, env = user
    fid = upload(env, _file(tmp_path, "secret.txt", b"mine"))["file_id"]
    other = cli_env(home, create_user()[1])
    for args in (("get", fid), ("download", fid, "-o", str(tmp_path / "x")), ("delete", fid, "--yes"),
                 ("update", fid, "--description", "x")):
        r = run(other, "files", *args)
        assert r.returncode == 1 and "not found" in r.stderr.lower(), (args, r.stderr)
        assert len(r.stderr.splitlines()) == 1
    assert not (tmp_path / "x").exists()
    r = run(env, "files", "upload", str(tmp_path / "missing.txt"))
    assert r.returncode == 2 and "missing.txt" in r.stderr


class _Recorder(http.server.BaseHTTPRequestHandler):
    """A stand-in for the API or the object store: answers from routes and
    records the requests (port, method, path, Authorization, body)."""
    routes, seen = {}, []

    def _answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        port = self.server.server_port
        self.seen.append((port, self.command, self.path, self.headers.get("Authorization"), body))
        status, headers, out = self.routes.get((port, self.command, self.path), (404, {}, b'{"detail":"no"}'))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_PUT = do_POST = do_DELETE = _answer

    def log_message(self, *a):
        pass


@pytest.fixture
def fake():
    """Two loopback servers, (api port, store port), and the recorder."""
    _Recorder.routes, _Recorder.seen = {}, []
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder) for _ in range(2)]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield servers[0].server_port, servers[1].server_port, _Recorder
    for s in servers:
        s.shutdown()
        s.server_close()


JSON = {"Content-Type": "application/json"}
FAKE_KEY = "ahk_test0000_0000000000"


def test_download_follows_the_redirect_without_the_key(tmp_path, home, fake):
    api, store, rec = fake
    data = os.urandom(300000)
    meta = {"file_id": "fil_r", "filename": "photo.png", "size_bytes": len(data)}
    rec.routes.update({
        (api, "GET", "/api/v1/files/fil_r"): (200, JSON, json.dumps(meta).encode()),
        (api, "GET", "/api/v1/files/fil_r/download"): (302, {"Location": f"http://127.0.0.1:{store}/obj?sig=1"}, b""),
        (store, "GET", "/obj?sig=1"): (200, {"Content-Type": "image/png"}, data),
    })
    env = cli_env(home, FAKE_KEY, AGENTHOST_URL=f"http://127.0.0.1:{api}/api/v1")
    r = run(env, "files", "download", "fil_r", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "photo.png").read_bytes() == data
    auth = {(port, path): a for port, _m, path, a, _b in rec.seen}
    assert auth[(api, "/api/v1/files/fil_r/download")] == "Bearer " + FAKE_KEY
    assert auth[(store, "/obj?sig=1")] is None


def test_failed_presigned_put_drops_the_pending_record(tmp_path, home, fake):
    api, store, rec = fake
    data = os.urandom((10 << 20) + 10)
    rec.routes.update({
        (api, "POST", "/api/v1/files/presigned-upload"): (201, JSON, json.dumps(
            {"file_id": "fil_p", "upload_url": f"http://127.0.0.1:{store}/put?sig=2",
             "expires_at": "2030-01-01T00:00:00.000Z"}).encode()),
        (store, "PUT", "/put?sig=2"): (403, {"Content-Type": "application/xml"}, b"<Error>expired</Error>"),
        (api, "DELETE", "/api/v1/files/fil_p"): (204, {}, b""),
    })
    env = cli_env(home, FAKE_KEY, AGENTHOST_URL=f"http://127.0.0.1:{api}/api/v1")
    r = run(env, "files", "upload", str(_file(tmp_path, "big.csv", data)), "--tags", "t")
    assert r.returncode == 1 and "fil_p" in r.stderr and "HTTP 403" in r.stderr, r.stderr
    calls = [(port, m, path) for port, m, path, _a, _b in rec.seen]
    assert calls == [(api, "POST", "/api/v1/files/presigned-upload"), (store, "PUT", "/put?sig=2"),
                     (api, "DELETE", "/api/v1/files/fil_p")]
    asked = json.loads(rec.seen[0][4])
    assert asked == {"filename": "big.csv", "size_bytes": len(data), "content_type": "text/csv", "tags": "t"}
    put = rec.seen[1]
    assert put[3] is None and put[4] == data     # no key to the store; the bytes as they are
