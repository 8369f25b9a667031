"""A FastCGI client and an agenthost-api master of a test's own (the stack's
database and configuration file, its own sockets, AGENTHOST_<KEY> overrides), for
tests that need the API with another configuration or want to signal it without
touching the shared stack."""
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import socket
import tempfile

from conftest import BUILD, CONFIG, wait_until


def fcgi_record(rtype, content, req_id=1):
    return struct.pack("!BBHHBB", 1, rtype, req_id, len(content), 0, 0) + content


def fcgi_params(params):
    out = b""
    for k, v in params.items():
        k, v = k.encode(), v.encode()
        for n in (len(k), len(v)):
            out += struct.pack("!B", n) if n < 128 else struct.pack("!I", n | 0x80000000)
        out += k + v
    return out


def fcgi_read_response(sock, timeout=15):
    """Reads records until FCGI_END_REQUEST; returns the stdout bytes."""
    sock.settimeout(timeout)
    buf, out = b"", b""
    while True:
        while len(buf) < 8:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed before END_REQUEST")
            buf += chunk
        _v, rtype, _id, clen, plen, _r = struct.unpack("!BBHHBB", buf[:8])
        while len(buf) < 8 + clen + plen:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed inside a record")
            buf += chunk
        content, buf = buf[8:8 + clen], buf[8 + clen + plen:]
        if rtype == 6:
            out += content
        elif rtype == 3:
            return out


def fcgi_begin(path, params, body=None):
    """Opens a request; with body, sends it and the end of stdin too, in the same
    write: the API may answer (and close) as soon as it has what it needs, and a
    later write would then fail with EPIPE."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    out = fcgi_record(1, struct.pack("!HB5x", 1, 0))  # BEGIN_REQUEST, responder, no keep-conn
    out += fcgi_record(4, fcgi_params(params)) + fcgi_record(4, b"")
    if body is not None:
        out += (fcgi_record(5, body) if body else b"") + fcgi_record(5, b"")
    s.sendall(out)
    return s


class PrivateApi:
    """`with PrivateApi(AGENTHOST_X="1", unset=["AGENTHOST_Y"]) as api:` starts an
    agenthost-api master with the stack's configuration file, these environment
    overrides and its own sockets in a temporary directory (without a scheduler
    unless AGENTHOST_SCHEDULER says so); leaving the block
    stops it (and its workers) and removes the directory."""

    def __init__(self, unset=(), jwks=False, **overrides):
        self.jwks = jwks  # wait until its refresher has the identity provider's keys
        self.dir = tempfile.mkdtemp(prefix="ahqa-")
        self.env = dict(os.environ, AGENTHOST_CONFIG=CONFIG,
                        AGENTHOST_FCGI_SOCKET=os.path.join(self.dir, "api.sock"),
                        AGENTHOST_FCGI_INVOKE_SOCKET=os.path.join(self.dir, "inv.sock"),
                        AGENTHOST_FCGI_METRICS_SOCKET=os.path.join(self.dir, "metrics.sock"),
                        AGENTHOST_CRUD_WORKERS="2", AGENTHOST_INVOKE_WORKERS="1",
                        # No scheduler: on the stack's database it would claim the
                        # stack's due ticks, and SIGTERM lets a run in hand finish
                        # (as an operator's stop does, up to the longest call): a
                        # sleeping agent's tick held the stop 15 s.
                        AGENTHOST_SCHEDULER="false")
        self.env.update(overrides)
        for k in unset:
            self.env.pop(k, None)
        self.sock = os.path.join(self.dir, "api.sock")
        self.proc = None
        self.log = None

    def __enter__(self):
        self.log = open(os.path.join(self.dir, "api.log"), "wb")
        # A session of its own, so that whatever is left can be killed as a group.
        self.proc = subprocess.Popen([os.path.join(BUILD, "handlers", "agenthost-api")], env=self.env,
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     start_new_session=True)
        try:
            assert wait_until(lambda: os.path.exists(self.sock), timeout=10), "the private API did not start"
            if self.jwks:
                assert wait_until(lambda: b"JWKS from" in open(self.log.name, "rb").read(), timeout=15), \
                    "the private API never fetched the identity provider's keys"
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        """SIGTERM: the master stops its workers and waits for them (a SIGKILLed
        master would leave them running). SIGKILL to the group if that hangs."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.log:
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def get(self, path, token=None):
        """GET /api/v1<path> with an optional bearer token, from a client address
        of its own; returns (status, JSON body)."""
        params = {"REQUEST_METHOD": "GET", "REQUEST_URI": "/api/v1" + path,
                  "REMOTE_ADDR": f"10.{random.randint(0, 255)}.{random.randint(0, 255)}.{random.randint(1, 254)}"}
        if token:
            params["HTTP_AUTHORIZATION"] = "Bearer " + token
        s = fcgi_begin(self.sock, params, body=b"")
        try:
            out = fcgi_read_response(s)
        finally:
            s.close()
        head, body = out.split(b"\r\n\r\n", 1)
        assert head.startswith(b"Status: "), head[:100]
        return int(head[8:11]), json.loads(body)
