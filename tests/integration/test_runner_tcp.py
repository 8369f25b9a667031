"""The runner's TCP transport (docs/runner-protocol.md, "TCP") against the
stack's own runner, which scripts/lib.sh write_config starts with
`runner_listen = 127.0.0.1:0` and a generated `runner_secret_file`: the
handshake spoken from Python, the sealed request and answer that follow it
(spoken by the C client, agenthost-runner-ping, through a relay here that
records and tampers with the bytes: Python has no secretstream), the address
the runner registers, and the API's routing of an agent's calls to the address
of the runner that holds it."""
import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import subprocess
import threading

import pytest

from agent_code import ECHO_JS, VAR, config_get, deployed_agent, needs_runner
from conftest import BUILD, db_query, log_files, wait_until

LISTEN = config_get("runner_listen", "")
SECRET_FILE = config_get("runner_secret_file", "")
pytestmark = pytest.mark.skipif(not LISTEN or not SECRET_FILE,
                                reason="the stack's runner does not take TCP (runner_listen unset)")
REFUSAL = {"ok": False, "error": "authentication failed"}
PING = os.path.join(BUILD, "lib", "runner", "agenthost-runner-ping")
# Handshake bytes before the sealed streams: challenge (80) + proof (77) from
# the runner, the answer line (130) from the client.
DOWN_HS, UP_HS = 80 + 77, 130
HEADER, LENGTH, OVERHEAD = 24, 4, 17


def read_secret():
    with open(SECRET_FILE, "rb") as f:
        return f.read().rstrip(b" \t\r\n")


def derive(secret):
    return hashlib.blake2b(secret, digest_size=32, key=b"agenthost-runner-secret-v1").digest()


def mac(key, role, sn, cn):
    return hmac.new(key, b"agenthost-runner " + role + sn + cn, hashlib.sha512).digest()[:32]


def unix_ping():
    path = config_get("runner_socket", os.path.join(VAR, "run", "runner.sock"))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall(b'{"op":"ping"}\n')
        return json.loads(s.makefile("rb").readline())


def runner_address():
    """The address the stack's runner registered (its id from a ping)."""
    rid = unix_ping()["runner_id"]
    rows = db_query(f"SELECT address FROM runners WHERE id = '{rid}'")
    assert len(rows) == 1, rows
    return rows[0][0]


def connect():
    host, port = runner_address().rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    return s, s.makefile("rb")


def read_challenge(f):
    line = f.readline()
    m = re.fullmatch(rb"AHRUNNER-AUTH1 ([0-9a-f]{64})\n", line)
    assert m, line
    return bytes.fromhex(m.group(1).decode())


def answer(key, sn, cn=None):
    cn = cn or secrets.token_bytes(32)
    return cn, (cn.hex() + " " + mac(key, b"client", sn, cn).hex() + "\n").encode()


def refused(s, f):
    """The runner said "authentication failed" and closed the connection."""
    assert json.loads(f.readline()) == REFUSAL
    assert f.read() == b""
    s.close()
    return True


def test_runner_registers_its_tcp_address():
    addr = runner_address()
    host, port = LISTEN.rsplit(":", 1)
    assert re.fullmatch(r"127\.0\.0\.1:\d+", addr), addr
    got = int(addr.rsplit(":", 1)[1])
    assert got > 0 and (port == "0" or got == int(port))


def test_request_without_handshake_is_refused():
    s, f = connect()
    read_challenge(f)
    s.sendall(b'{"op":"ping"}\n')
    assert refused(s, f)


def test_garbage_and_overlong_answers_are_refused():
    for junk in (b"hello\n", b"\n", b"0" * 400 + b"\n"):
        s, f = connect()
        read_challenge(f)
        s.sendall(junk)
        if len(junk) < 160:
            assert refused(s, f)
            continue
        # The runner stops reading at the line cap; closing with unread input
        # may reset the connection before its refusal is read.
        try:
            assert refused(s, f)
        except ConnectionResetError:
            s.close()


def test_wrong_secret_is_refused():
    s, f = connect()
    sn = read_challenge(f)
    _, line = answer(derive(read_secret() + b"x"), sn)
    s.sendall(line)
    assert refused(s, f)


def test_secret_itself_as_key_is_refused():
    """The MAC key is derived from the secret, not the secret's bytes."""
    s, f = connect()
    sn = read_challenge(f)
    _, line = answer(read_secret()[:32].ljust(32, b"\0"), sn)
    s.sendall(line)
    assert refused(s, f)


def handshake(key):
    """A raw client's valid handshake; returns the socket and its reader."""
    s, f = connect()
    sn = read_challenge(f)
    cn, line = answer(key, sn)
    s.sendall(line)
    proof = f.readline()
    m = re.fullmatch(rb"AHRUNNER-OK ([0-9a-f]{64})\n", proof)
    assert m, proof
    assert hmac.compare_digest(bytes.fromhex(m.group(1).decode()), mac(key, b"server", sn, cn))
    return s, f


HANDSHAKES_PER_PEER = 8  # lib/runner/handshakes.h, of 32 in all


def test_one_local_user_holds_only_its_share_of_handshakes():
    """Issue 26: connections that never answer the challenge each hold a
    handshake slot for 5 s. Opened from this host, from any of its loopback
    addresses (a local user may pick them all), they get at most this host's
    share: the other slots stay for other API hosts (tests/unit/
    test_handshakes.c shows another address getting one). Closing them gives
    the slots back."""
    host, port = runner_address().rsplit(":", 1)
    held, refused_now = [], 0
    try:
        for i in range(40):
            s = socket.create_connection((host, int(port)), timeout=10,
                                         source_address=(f"127.0.{i // 8}.{1 + i % 8}", 0))
            f = s.makefile("rb")
            if f.readline().startswith(b"AHRUNNER-AUTH1 "):
                held.append(s)
            else:
                refused_now += 1
                s.close()
        assert len(held) == HANDSHAKES_PER_PEER, (len(held), refused_now)
        # A real client from this host meanwhile is told why, after its retries.
        p = ping(runner_address())
        assert p.returncode == 1 and b"too many handshakes in flight" in p.stderr, p.stderr
    finally:
        for s in held:
            s.close()
    # The runner sees each close as a failed handshake and frees its slot.
    assert wait_until(lambda: handshake_or_none(derive(read_secret())), timeout=10)
    p = ping(runner_address())
    assert p.returncode == 0, p.stderr


def handshake_or_none(key):
    try:
        s, _ = handshake(key)
    except (AssertionError, OSError):
        return None
    s.close()
    return True


def test_right_secret_gets_a_proof_then_a_request_in_clear_is_refused():
    """After the proof only sealed frames count: a plain request line gets no
    answer (in clear or otherwise), just the connection closed."""
    s, f = handshake(derive(read_secret()))
    s.sendall(b'{"op":"ping"}\n')
    s.shutdown(socket.SHUT_WR)
    assert f.read() == b""
    s.close()


# ---- the sealed request and answer, through a recording relay --------------

class Relay:
    """Forwards one connection to the runner, recording each direction's
    bytes ("up": client to runner, "down": back). flip = (direction, index)
    flips the low bit of that byte; cut = (direction, n) forwards only the
    first n bytes of that direction, then ends it."""

    def __init__(self, flip=None, cut=None):
        self.flip, self.cut = flip, cut
        self.seen = {"up": bytearray(), "down": bytearray()}
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self.server.getsockname()[1]
        self.threads = [threading.Thread(target=self._serve, daemon=True)]
        self.threads[0].start()

    def _serve(self):
        self.server.settimeout(30)
        client, _ = self.server.accept()
        host, port = runner_address().rsplit(":", 1)
        runner = socket.create_connection((host, int(port)), timeout=30)
        client.settimeout(30)
        for src, dst, d in ((client, runner, "up"), (runner, client, "down")):
            t = threading.Thread(target=self._pump, args=(src, dst, d), daemon=True)
            t.start()
            self.threads.append(t)

    def _pump(self, src, dst, d):
        try:
            while True:
                data = bytearray(src.recv(65536))
                start = len(self.seen[d])
                self.seen[d] += data
                if self.flip and self.flip[0] == d and start <= self.flip[1] < start + len(data):
                    data[self.flip[1] - start] ^= 1
                if self.cut and self.cut[0] == d and start + len(data) > self.cut[1]:
                    dst.sendall(data[:max(0, self.cut[1] - start)])
                    break
                if not data:
                    break
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self):
        for t in self.threads:
            t.join(timeout=30)
        self.server.close()


def ping(address, request=None):
    args = [PING, address, SECRET_FILE] + ([json.dumps(request)] if request else [])
    return subprocess.run(args, capture_output=True, timeout=60)


def relayed(request=None, **tamper):
    relay = Relay(**tamper)
    try:
        return ping(relay.address, request), relay.seen
    finally:
        relay.close()


MARKER = "sk-marker-" + secrets.token_hex(8)
PING_REQ = {"op": "ping", "env": {"OPENAI_API_KEY": MARKER}}


def runner_log():
    with open(os.path.join(VAR, "log", "runner.log"), "rb") as fh:
        return fh.read()


def test_request_and_answer_cross_the_wire_sealed():
    p, seen = relayed(PING_REQ)
    assert p.returncode == 0, p.stderr
    ans = json.loads(p.stdout)
    assert ans["ok"] is True and ans["runner_id"] == unix_ping()["runner_id"]
    up, down = bytes(seen["up"][UP_HS:]), bytes(seen["down"][DOWN_HS:])
    # The framing of docs/runner-protocol.md exactly: header, length, sealed.
    req = json.dumps(PING_REQ).encode()
    assert len(up) == HEADER + LENGTH + len(req) + OVERHEAD
    assert int.from_bytes(up[HEADER:HEADER + LENGTH], "big") == len(req) + OVERHEAD
    assert len(down) == HEADER + LENGTH + len(p.stdout.rstrip(b"\n")) + OVERHEAD
    # Nothing of either message in clear.
    for needle in (MARKER.encode(), b'"op"', b"ping", b"OPENAI"):
        assert needle not in up, needle
    for needle in (b'"ok"', b"runner_id", ans["runner_id"].encode(), b"true"):
        assert needle not in down, needle
    assert down[:HEADER] != up[:HEADER]


def test_flipped_bit_in_the_answer_is_refused_by_the_client():
    p, _ = relayed(flip=("down", DOWN_HS + HEADER + LENGTH + 5))
    assert p.returncode == 1 and p.stdout == b""
    assert b"failed authentication" in p.stderr, p.stderr


REFUSED_FRAME = b"request refused: a frame failed authentication"


def test_flipped_bit_in_the_request_is_refused_by_the_runner():
    before = runner_log().count(REFUSED_FRAME)
    p, _ = relayed(PING_REQ, flip=("up", UP_HS + HEADER + LENGTH + 8))
    assert p.returncode == 1 and p.stdout == b"", p.stdout
    assert b"ended before" in p.stderr, p.stderr  # no answer at all
    assert wait_until(lambda: runner_log().count(REFUSED_FRAME) > before)


def test_truncated_answer_is_refused_by_the_client():
    p, _ = relayed(cut=("down", DOWN_HS + HEADER + LENGTH + 10))
    assert p.returncode == 1 and p.stdout == b""
    assert b"truncated" in p.stderr, p.stderr


def test_sealed_request_replayed_on_another_connection_is_refused():
    """A recorded request, sent after a valid handshake of a new connection:
    its keys were that first connection's, so the runner does not open it."""
    p, seen = relayed(PING_REQ)
    assert p.returncode == 0, p.stderr
    before = runner_log().count(REFUSED_FRAME)
    s, f = handshake(derive(read_secret()))
    s.sendall(bytes(seen["up"][UP_HS:]))
    assert f.read() == b""
    s.close()
    assert wait_until(lambda: runner_log().count(REFUSED_FRAME) > before)


def test_replayed_answer_is_refused():
    key = derive(read_secret())
    s, f = connect()
    sn = read_challenge(f)
    cn, line = answer(key, sn)
    s.sendall(line)
    assert f.readline().startswith(b"AHRUNNER-OK ")
    s.close()
    # The same answer on a new connection: the runner's nonce has changed.
    s, f = connect()
    assert read_challenge(f) != sn
    s.sendall(line)
    assert refused(s, f)


def test_failures_are_logged_without_the_secret():
    s, f = connect()
    sn = read_challenge(f)
    s.sendall(answer(derive(b"not the secret at all"), sn)[1])
    assert refused(s, f)
    secret = read_secret()
    log = os.path.join(VAR, "log", "runner.log")
    with open(log, "rb") as fh:
        assert b"authentication failed" in fh.read()
    for path in log_files():
        with open(path, "rb") as fh:
            assert secret not in fh.read(), path


# ---- routing in the API -----------------------------------------------------

def _invoke(client, slug, prompt):
    return client.post(f"/agents/{slug}/invoke", json={"prompt": prompt}, timeout=120)


def _completed(r):
    return r.status_code == 200 and r.json()["status"] == "completed"


@needs_runner
def test_invocations_go_to_the_agents_runner(client):
    a = deployed_agent(client, ECHO_JS)
    rows = db_query(f"SELECT r.id, r.address FROM agents a JOIN runners r ON r.id = a.runner_id "
                    f"WHERE a.id = '{a['id']}'")
    assert len(rows) == 1 and rows[0][1] == runner_address(), rows
    rid, addr = rows[0]
    # This host's own runner is reached on its unix socket, whatever address
    # it registered for the others: pointing the row nowhere changes nothing.
    try:
        db_query(f"UPDATE runners SET address = '127.0.0.1:1' WHERE id = '{rid}'")
        r = _invoke(client, a["slug"], "local")
        assert _completed(r) and r.json()["response_content"] == "local", r.text
    finally:
        db_query(f"UPDATE runners SET address = '{addr}' WHERE id = '{rid}'")
    # An agent held by another runner goes to that runner's address: nothing
    # listens there, so the call fails...
    other = "elsewhere-" + a["id"][-8:]
    try:
        db_query(f"INSERT INTO runners (id, address, capacity, started_at, heartbeat_at) "
                 f"VALUES ('{other}', '127.0.0.1:1', 1, NOW(3), NOW(3))")
        db_query(f"UPDATE agents SET runner_id = '{other}' WHERE id = '{a['id']}'")
        assert not _completed(_invoke(client, a["slug"], "nowhere"))
        # ...and a runner that gets a request meant for another one refuses it
        # rather than run an agent whose image it does not hold.
        db_query(f"UPDATE runners SET address = '{addr}' WHERE id = '{other}'")
        r = _invoke(client, a["slug"], "misrouted")
        assert not _completed(r)
        assert r.json()["invocation"]["error"] == \
            "sandbox runner error: request meant for another runner", r.text
    finally:
        db_query(f"UPDATE agents SET runner_id = '{rid}' WHERE id = '{a['id']}'")
        db_query(f"DELETE FROM runners WHERE id = '{other}'")
    assert _completed(_invoke(client, a["slug"], "back"))


@needs_runner
def test_agent_without_a_runner_falls_back_to_the_local_socket(client):
    a = deployed_agent(client, ECHO_JS)
    (rid,), = db_query(f"SELECT runner_id FROM agents WHERE id = '{a['id']}'")
    try:
        db_query(f"UPDATE agents SET runner_id = NULL WHERE id = '{a['id']}'")
        r = _invoke(client, a["slug"], "local")
        assert _completed(r) and r.json()["response_content"] == "local", r.text
    finally:
        db_query(f"UPDATE agents SET runner_id = '{rid}' WHERE id = '{a['id']}'")
