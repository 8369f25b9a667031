"""Bucket mounts inside sandboxes, against s3rver on loopback (started and
stopped by PID here): an agent lists and reads an object put with the S3 API,
cannot write to a read-only mount, writes through a writable one, sees only
its prefix; credentials never reach the sandbox or rclone's argv; a dead
rclone fails the call naming the mount; a redeploy without the mount stops
its rclone; a mount that cannot work fails the deploy; a mount being started
holds up no other agent's call."""
import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid

import pytest

from agent_code import VAR, deploy, needs_runner, project, wait_status
from conftest import BUILD, proc_stat, wait_until
from s3server import KEY, SECRET, S3rver, storage_port

pytestmark = needs_runner

S3_TOOL = os.path.join(BUILD, "tests", "unit", "s3_tool")

# "!ls DIR", "!cat FILE", "!write FILE TEXT", "!env": a JSON answer.
FS_JS = r"""
const fs = require('fs');
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', () => {
  const [cmd, a, ...rest] = Buffer.concat(chunks).toString().split(' ');
  let out;
  try {
    if (cmd === '!ls') out = fs.readdirSync(a).sort();
    else if (cmd === '!cat') out = fs.readFileSync(a, 'utf8');
    else if (cmd === '!write') { fs.writeFileSync(a, rest.join(' ')); out = 'written'; }
    else if (cmd === '!env') out = JSON.stringify(process.env) + fs.readFileSync('/proc/self/mountinfo', 'utf8');
  } catch (e) { out = 'ERR ' + e.code; }
  process.stdout.write(JSON.stringify(out));
});
"""


@pytest.fixture(scope="module")
def s3():
    s = S3rver("agent-data")
    yield s
    s.stop()


def object_text(s3, key):
    with open(os.path.join(s3.dir, s3.bucket, key + "._S3rver_object")) as f:
        return f.read()


CREATED = []


@pytest.fixture(autouse=True)
def delete_agents(client):
    """The agents a test made go with it, and with them their rclone processes."""
    yield
    while CREATED:
        client.delete(f"/agents/{CREATED.pop()}")


def bucket(client, s3, secret=SECRET, endpoint=None):
    r = client.post("/buckets", json={"name": "b " + uuid.uuid4().hex[:6], "provider": "s3",
                                      "bucket_name": s3.bucket, "endpoint_url": endpoint or s3.endpoint})
    assert r.status_code == 201, r.text
    slug = r.json()["slug"]
    r = client.post(f"/buckets/{slug}/credentials", json={"access_key_id": KEY, "secret_access_key": secret})
    assert r.status_code == 200, r.text
    return slug


def agent_with_mounts(client, mounts, deploy_it=True):
    r = client.post("/agents", json={"name": "fs " + uuid.uuid4().hex[:8], "source_type": "local"})
    assert r.status_code == 201, r.text
    slug = r.json()["slug"]
    CREATED.append(slug)
    r = client.put(f"/agents/{slug}/code", data=project(FS_JS), headers={"Content-Type": "application/gzip"})
    assert r.status_code == 200, r.text
    for m in mounts:
        r = client.post(f"/agents/{slug}/mounts", json=m)
        assert r.status_code == 201, r.text
    if deploy_it:
        deploy(client, slug)
    return slug


def run(client, slug, prompt, status=200):
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": prompt}, timeout=120)
    assert r.status_code == status, r.text
    return json.loads(r.json()["response_content"]) if status == 200 else r.json()


def rclone_pids():
    """rclone processes of this stack (their mount points are under its data dir)."""
    out = subprocess.run(["pgrep", "-a", "rclone"], capture_output=True, text=True).stdout
    return {int(l.split()[0]): l for l in out.splitlines() if os.path.join(VAR, "data", "mounts") in l}


def dead(pid):
    """Gone, or a zombie none of whose threads still runs: rclone is a Go
    program, and its leader shows "Z" while its other threads are still
    exiting and its FUSE connection still open."""
    try:
        zombie = proc_stat(pid)[0] in ("Z", "X")
        return zombie and len(os.listdir(f"/proc/{pid}/task")) <= 1
    except FileNotFoundError:
        return True


def test_agent_reads_lists_and_sees_only_its_prefix(client, s3):
    tag = uuid.uuid4().hex[:8]
    s3.put(S3_TOOL, f"{tag}/in/hello.txt", "hello from S3")
    s3.put(S3_TOOL, f"{tag}/outside.txt", "not for the agent")
    slug = agent_with_mounts(client, [{"bucket_slug": bucket(client, s3), "mount_path": "/mnt/data",
                                       "source_prefix": f"{tag}/in", "read_only": True}])
    assert run(client, slug, "!ls /mnt/data") == ["hello.txt"]
    assert run(client, slug, "!cat /mnt/data/hello.txt") == "hello from S3"
    s3.put(S3_TOOL, f"{tag}/in/later.txt", "put after the deploy")
    assert run(client, slug, "!cat /mnt/data/later.txt") == "put after the deploy"


def test_read_only_mount_refuses_writes(client, s3):
    tag = uuid.uuid4().hex[:8]
    slug = agent_with_mounts(client, [{"bucket_slug": bucket(client, s3), "mount_path": "/ro",
                                       "source_prefix": tag, "read_only": True}])
    assert run(client, slug, "!write /ro/x.txt nope") == "ERR EROFS"
    assert not os.path.exists(os.path.join(s3.dir, s3.bucket, tag))


def test_writable_mount_writes_into_the_bucket(client, s3):
    tag = uuid.uuid4().hex[:8]
    b = bucket(client, s3)
    slug = agent_with_mounts(client, [{"bucket_slug": b, "mount_path": "/data", "source_prefix": tag,
                                       "read_only": False},
                                      {"bucket_slug": b, "mount_path": "/tmp/scratch/bkt",
                                       "source_prefix": tag + "/tmp"}])
    assert run(client, slug, "!write /data/out.txt written by the agent") == "written"
    assert object_text(s3, f"{tag}/out.txt") == "written by the agent"
    assert run(client, slug, "!write /tmp/scratch/bkt/t.txt under tmp") == "written"
    assert object_text(s3, f"{tag}/tmp/t.txt") == "under tmp"


def test_credentials_never_reach_the_sandbox_or_argv(client, s3):
    slug = agent_with_mounts(client, [{"bucket_slug": bucket(client, s3), "mount_path": "/data"}])
    seen = run(client, slug, "!env")
    assert SECRET not in seen and "RCLONE" not in seen
    pids = rclone_pids()
    assert pids
    for pid in pids:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read()
        assert SECRET.encode() not in argv and b"AWS_CA_BUNDLE" not in argv
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
        assert not any(e.startswith(b"AWS_") for e in env)  # a clean environment


def test_dead_rclone_fails_the_call_naming_the_mount_then_recovers(client, s3):
    slug = agent_with_mounts(client, [{"bucket_slug": bucket(client, s3), "mount_path": "/crashy"}])
    assert run(client, slug, "!ls /crashy") is not None
    before = set(rclone_pids())
    agent_id = client.get(f"/agents/{slug}").json()["id"]
    mine = [p for p, line in rclone_pids().items() if agent_id in line]
    assert len(mine) == 1
    os.kill(mine[0], signal.SIGKILL)
    assert wait_until(lambda: dead(mine[0]), timeout=10)  # the runner reaps it only when it looks
    body = run(client, slug, "!ls /crashy", status=500)
    assert "Bucket mount at /crashy" in body["invocation"]["error"], body
    assert isinstance(run(client, slug, "!ls /crashy"), list)
    assert set(rclone_pids()) != before


def test_redeploy_without_the_mount_stops_its_rclone(client, s3):
    slug = agent_with_mounts(client, [{"bucket_slug": bucket(client, s3), "mount_path": "/gone"}])
    agent_id = client.get(f"/agents/{slug}").json()["id"]
    assert [p for p, l in rclone_pids().items() if agent_id in l]
    m = client.get(f"/agents/{slug}/mounts").json()[0]
    assert client.patch(f"/agents/{slug}/mounts/{m['id']}", json={"enabled": False}).status_code == 200
    deploy(client, slug)
    assert wait_until(lambda: not [p for p, l in rclone_pids().items() if agent_id in l], timeout=10)
    assert run(client, slug, "!ls /gone") == "ERR ENOENT"


def test_deleting_the_agent_stops_its_rclone(client, s3):
    slug = agent_with_mounts(client, [{"bucket_slug": bucket(client, s3), "mount_path": "/d"}])
    agent_id = client.get(f"/agents/{slug}").json()["id"]
    assert client.delete(f"/agents/{slug}").status_code == 204
    CREATED.remove(slug)
    assert wait_until(lambda: not [p for p, l in rclone_pids().items() if agent_id in l], timeout=10)


def test_mount_with_bad_credentials_fails_the_deploy_naming_it(client, s3):
    from s3server import StrictS3
    strict = StrictS3("agent-data")
    try:
        r = client.post("/buckets", json={"name": "strict", "provider": "s3", "bucket_name": "agent-data",
                                          "endpoint_url": strict.endpoint})
        slug_b = r.json()["slug"]
        client.post(f"/buckets/{slug_b}/credentials", json={"access_key_id": KEY, "secret_access_key": "wrong"})
        slug = agent_with_mounts(client, [{"bucket_slug": slug_b, "mount_path": "/bad"}], deploy_it=False)
        assert client.post(f"/agents/{slug}/deploy").status_code == 202
        a = wait_status(client, slug)
        assert a["status"] == "error"
        assert "/bad" in a["status_message"] and "credentials" in a["status_message"]
    finally:
        strict.stop()


def test_gcs_bucket_mounts_through_a_service_account(client):
    """rclone's GCS backend against the test's token + JSON API server (the one
    /test uses): the JWT exchange, a listing and a download, inside the sandbox."""
    from gcsserver import GcsServer, key_file, new_key
    key = new_key()
    gcs = GcsServer("gcs-data", key, {"team/notes.txt": b"notes from GCS", "other.txt": b"no"})
    try:
        r = client.post("/buckets", json={"name": "g " + uuid.uuid4().hex[:6], "provider": "gcs",
                                          "bucket_name": "gcs-data", "endpoint_url": gcs.endpoint})
        assert r.status_code == 201, r.text
        b = r.json()["slug"]
        r = client.post(f"/buckets/{b}/credentials", json={"service_account_json": key_file(key, gcs.token_uri)})
        assert r.status_code == 200, r.text
        slug = agent_with_mounts(client, [{"bucket_slug": b, "mount_path": "/gcs", "source_prefix": "team",
                                           "read_only": True}])
        assert run(client, slug, "!ls /gcs") == ["notes.txt"]
        assert run(client, slug, "!cat /gcs/notes.txt") == "notes from GCS"
    finally:
        for s in list(CREATED):
            client.delete(f"/agents/{s}")
            CREATED.remove(s)
        gcs.stop()


def test_stuck_rclone_times_the_call_out_and_never_hangs_the_runner(client, s3):
    """A FUSE process that stops answering: the call ends at its timeout (the
    agent is killed out of its wait), other agents run meanwhile, and the runner
    never blocks on the mount (it checks the mount table, not the filesystem)."""
    slug = agent_with_mounts(client, [{"bucket_slug": bucket(client, s3), "mount_path": "/stuck"}])
    other = agent_with_mounts(client, [])
    agent_id = client.get(f"/agents/{slug}").json()["id"]
    (pid,) = [p for p, l in rclone_pids().items() if agent_id in l]
    os.kill(pid, signal.SIGSTOP)
    try:
        r = client.post(f"/agents/{slug}/invoke", json={"prompt": "!ls /stuck", "timeout_seconds": 3},
                        timeout=60)
        assert r.status_code == 504, r.text
        assert run(client, other, "!ls /app") == ["agent.json", "index.js"]
    finally:
        os.kill(pid, signal.SIGCONT)
    assert isinstance(run(client, slug, "!ls /stuck"), list)


def test_redeploy_after_rclone_died_mounts_anew(client, s3):
    slug = agent_with_mounts(client, [{"bucket_slug": bucket(client, s3), "mount_path": "/again"}])
    agent_id = client.get(f"/agents/{slug}").json()["id"]
    (pid,) = [p for p, l in rclone_pids().items() if agent_id in l]
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: dead(pid), timeout=10)
    deploy(client, slug)
    assert isinstance(run(client, slug, "!ls /again"), list)


class Gate:
    """A relay to s3rver on a storage port; once shut, it takes each new
    connection and never answers (a bucket host that hangs)."""

    def __init__(self, s3):
        self.target = int(s3.endpoint.rsplit(":", 1)[1])
        self.shut = False
        self.conns = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", storage_port()))
        self.sock.listen(16)
        self.endpoint = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            if self.shut:
                continue
            u = socket.create_connection(("127.0.0.1", self.target))
            self.conns.append(u)
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self.pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def pipe(a, b):
        try:
            while (data := a.recv(65536)):
                b.sendall(data)
        except OSError:
            pass
        for x in (a, b):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


def test_a_mount_starting_holds_up_no_other_agents_call(client, s3):
    """An rclone start takes up to 10 s (its bucket host hangs here): the
    runner starts it outside its lock, so another agent's call, whose own
    mount needs that lock too, is served while the first call still waits."""
    gate = Gate(s3)
    try:
        tag = uuid.uuid4().hex[:8]
        s3.put(S3_TOOL, f"{tag}/in/hello.txt", "hello")
        slow = agent_with_mounts(client, [{"bucket_slug": bucket(client, s3, endpoint=gate.endpoint),
                                           "mount_path": "/slow", "source_prefix": f"{tag}/in"}])
        other = agent_with_mounts(client, [{"bucket_slug": bucket(client, s3), "mount_path": "/data"}])
        agent_id = client.get(f"/agents/{slow}").json()["id"]
        (pid,) = [p for p, line in rclone_pids().items() if agent_id in line]
        os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: dead(pid), timeout=10)
        run(client, slow, "!ls /slow", status=500)  # the dead one goes; the next call mounts anew
        gate.shut = True
        answers = []
        waiting = threading.Thread(target=lambda: answers.append(
            client.post(f"/agents/{slow}/invoke", json={"prompt": "!ls /slow"}, timeout=120)))
        waiting.start()
        assert wait_until(lambda: any(agent_id in line for line in rclone_pids().values()), timeout=30)
        assert isinstance(run(client, other, "!ls /data"), list)
        assert waiting.is_alive() and not answers, "the other agent's call waited for the mount"
        waiting.join()
        assert answers[0].status_code == 500, answers[0].text
        assert "Bucket mount at /slow" in answers[0].json()["invocation"]["error"]
    finally:
        gate.close()
