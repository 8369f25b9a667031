"""Issue 26 (3): the presigned upload URL is public, so nginx must not store a
byte of a body before the URL's signature, expiry and declared size are
checked, must store no more than the declared size, and must bound the
connections one address holds there. Each test runs against both ways a body
reaches the worker: the test stack's nginx (nginx writes the body to a file of
its own, snippets/upload-body.conf) and a second nginx of the test's own with
an install's snippet (streamed to the worker, upload-body-streamed.conf), both
in front of the stack's API."""
import hashlib
import http.client
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import urllib.parse

import pytest

from conftest import BASE_URL, ROOT, VAR, new_client, wait_until
from test_api_ratelimit import WindowChanged, in_one_window
from test_files import FILES_DIR, leftovers, pending

MB = 1024 * 1024
SENT = 40 * MB         # what an attacker gets onto the wire before we look
DECLARED = 50 * MB     # the Content-Length it announces
STACK_PORT = urllib.parse.urlsplit(BASE_URL).port


def stored_bytes(nginx_dirs):
    """Bytes of request bodies on disk: nginx's body files (incoming/ and its
    client_body_temp_path) and the worker's own (tmp/)."""
    total = 0
    for top in [os.path.join(FILES_DIR, "incoming"), os.path.join(FILES_DIR, "tmp"), *nginx_dirs]:
        for d, _, fs in os.walk(top):
            for f in fs:
                try:
                    total += os.lstat(os.path.join(d, f)).st_size
                except FileNotFoundError:
                    pass
    return total


class Front:
    """An nginx in front of the stack's API: its port, where it keeps bodies
    (its client_body_temp_path, beside the files directory's)."""

    def __init__(self, name, port, var):
        self.name, self.port = name, port
        self.body_dir = os.path.join(var, "nginx", "tmp", "body")

    def stored(self):
        return stored_bytes([self.body_dir])


def free_port_pair():
    """A loopback port free with the next one (lib.sh's nginx listens on both)."""
    while True:
        a, b = socket.socket(), socket.socket()
        try:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            b.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
        finally:
            a.close()
            b.close()


def start_streamed_nginx(var, port):
    """The checkout's nginx config rendered by scripts/lib.sh with an install's
    upload-body.conf, its own directory and port, the stack's API sockets."""
    env = dict(os.environ, ROOT=ROOT, VAR=var, PORT=str(port), AGENTHOST_RUN_DIR=os.path.join(VAR, "run"),
               FILES_DIR=FILES_DIR, AGENTHOST_UPLOAD_BODY="streamed", AGENTHOST_TRUST_XFF="1")
    os.makedirs(os.path.join(var, "run"), exist_ok=True)
    os.chmod(var, 0o755)
    subprocess.run(["bash", "-c", f". {ROOT}/scripts/lib.sh && nginx_conf"], env=env, check=True)
    conf = os.path.join(var, "nginx", "nginx.conf")
    subprocess.run(["nginx", "-q", "-c", conf, "-p", os.path.join(var, "nginx")], check=True,
                   stdin=subprocess.DEVNULL)
    return os.path.join(var, "run", "nginx.pid")


@pytest.fixture(scope="module", params=["in-file", "streamed"])
def front(request):
    if request.param == "in-file":
        yield Front("in-file", STACK_PORT, VAR)
        return
    var = os.path.join(VAR, "streamed-front")
    shutil.rmtree(var, ignore_errors=True)
    port = free_port_pair()
    pidfile = start_streamed_nginx(var, port)
    try:
        assert wait_until(lambda: _health(port), timeout=10), "the streamed nginx did not start"
        yield Front("streamed", port, var)
    finally:
        if os.path.exists(pidfile):
            pid = int(open(pidfile).read())
            os.kill(pid, signal.SIGTERM)
            wait_until(lambda: not os.path.exists(f"/proc/{pid}"), timeout=10)
        shutil.rmtree(var, ignore_errors=True)


def _health(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"GET /api/v1/health HTTP/1.0\r\n\r\n")
            return s.recv(12).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def addr():
    return f"10.{random.randint(0, 255)}.{random.randint(0, 255)}.{random.randint(1, 254)}"


def open_put(front, path_query, headers, xff=None):
    s = socket.create_connection(("127.0.0.1", front.port), timeout=30)
    head = f"PUT {path_query} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: {xff or addr()}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    s.sendall(head.encode())
    return s


def send_quietly(s, chunks):
    """Sends what nginx takes; it may stop reading or close once it answered."""
    try:
        for c in chunks:
            s.sendall(c)
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        pass


def read_answer(s, timeout=20):
    """(status, body) of the first answer on s; (None, b"") if none came."""
    s.settimeout(timeout)
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            got = s.recv(65536)
            if not got:
                return None, b""
            buf += got
        head, body = buf.split(b"\r\n\r\n", 1)
        m = re.search(rb"\r\ncontent-length: *(\d+)", head, re.I)
        while m and len(body) < int(m.group(1)):
            got = s.recv(65536)
            if not got:
                break
            body += got
        return int(head[9:12]), body
    except (socket.timeout, ConnectionResetError):
        return None, b""


def raw(n):
    block = b"\0" * MB
    for _ in range(n // MB):
        yield block


def chunked(n):
    block = b"%x\r\n" % MB + b"\0" * MB + b"\r\n"
    for _ in range(n // MB):
        yield block


def attack(front, path_query, headers, body):
    """Sends the head and SENT bytes of a body of DECLARED bytes (or an unended
    chunked one), then looks at what is on disk while the request is still
    open: a front that stores before it checks has most of SENT there now."""
    s = open_put(front, path_query, headers)
    try:
        send_quietly(s, body)
        status, answer = read_answer(s)
        return status, answer, front.stored()
    finally:
        s.close()


def presign(c, size):
    r = c.post("/files/presigned-upload", json={"filename": "big.bin", "size_bytes": size,
                                                "content_type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    u = urllib.parse.urlsplit(r.json()["upload_url"])
    return r.json()["file_id"], f"{u.path}?{u.query}"


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_bad_url_is_refused_before_one_byte_is_stored(front, framing):
    """The issue's attack: a made-up URL and a large body."""
    c = new_client()
    fid, good = presign(c, 1000)
    headers = ({"Content-Length": str(DECLARED)} if framing == "content-length"
               else {"Transfer-Encoding": "chunked"})
    for url, why in [("/api/v1/files/fil_x/upload?expires=1&signature=00", "Invalid upload URL"),
                     (good.replace("signature=", "signature=0"), "Invalid upload URL")]:
        body = raw(SENT) if framing == "content-length" else chunked(SENT)
        status, answer, stored = attack(front, url, headers, body)
        assert stored == 0, f"{front.name}: {stored} bytes of an unsigned body stored"
        assert status == 403 and why.encode() in answer, (status, answer)
    assert leftovers() == [] and not pending(fid)


def test_a_body_longer_than_declared_is_refused_before_it_is_stored(front):
    """A valid URL for 1000 bytes: a longer Content-Length, or a body without
    one, is refused before a byte of it is stored."""
    c = new_client()
    fid, url = presign(c, 1000)
    status, answer, stored = attack(front, url, {"Content-Length": str(DECLARED)}, raw(SENT))
    assert stored == 0, f"{front.name}: {stored} bytes past the declared 1000 stored"
    assert status == 400 and b"declared with 1000" in answer, (status, answer)
    status, answer, stored = attack(front, url, {"Transfer-Encoding": "chunked"}, chunked(SENT))
    assert stored == 0, f"{front.name}: {stored} bytes of a body of no declared length stored"
    assert status == 411 and b"Content-Length" in answer, (status, answer)
    assert leftovers() == [] and not pending(fid)
    assert c.get(f"/files/{fid}").json()["status"] == "pending"


def test_bytes_past_the_declared_size_are_cut_off(front):
    """Content-Length as declared and more bytes after it: the upload holds the
    declared bytes and nothing of the rest is stored."""
    c = new_client()
    data = os.urandom(1000)
    fid, url = presign(c, len(data))
    s = open_put(front, url, {"Content-Length": str(len(data))})
    try:
        send_quietly(s, [data + b"\0" * MB])
        status, answer = read_answer(s)
    finally:
        s.close()
    assert status == 200, answer
    assert os.path.getsize(os.path.join(FILES_DIR, "pending", fid)) == len(data)
    assert open(os.path.join(FILES_DIR, "pending", fid), "rb").read() == data
    assert leftovers() == []
    r = c.post(f"/files/{fid}/confirm", json={"sha256_hash": hashlib.sha256(data).hexdigest()})
    assert r.status_code == 200, r.text


def upload_conn_limit():
    conf = open(os.path.join(VAR, "nginx", "snippets", "agenthost-locations.conf")).read()
    m = re.search(r"^\s*limit_conn agenthost_upload (\d+);", conf, re.M)
    assert m, "no per-address connection limit on the upload URL"
    return int(m.group(1))


def test_connections_to_the_upload_url_are_limited_per_address(front):
    """One address holding the limit's number of connections open there (each
    refused, its body still coming: nginx reads and drops it) gets 429 for one
    more; another address does not, and the first gets in again once they
    ended."""
    limit = upload_conn_limit()
    bad = "/api/v1/files/fil_x/upload?expires=1&signature=00"
    me = addr()
    held = []
    try:
        for _ in range(limit):
            s = open_put(front, bad, {"Content-Length": str(DECLARED)}, xff=me)
            s.sendall(b"\0" * 1000)  # and the rest never
            assert read_answer(s)[0] == 403
            held.append(s)
        assert _status(front, bad, me) == 429, f"{front.name}: {limit} connections from one address"
        assert _status(front, bad, addr()) == 403
    finally:
        for s in held:
            s.close()
    assert wait_until(lambda: _status(front, bad, me) == 403, timeout=10)


def _status(front, url, xff):
    s = open_put(front, url, {"Content-Length": "10"}, xff=xff)
    try:
        send_quietly(s, [b"0123456789"])
        return read_answer(s)[0]
    finally:
        s.close()


def test_the_worker_reads_no_more_than_the_declared_size():
    """Without nginx's check (another front, or a FastCGI client): a body past
    the declared size is refused at its first byte too much, with nothing of
    it kept, and a PUT without CONTENT_LENGTH is 411."""
    from fcgi import fcgi_begin, fcgi_read_response, fcgi_record
    c = new_client()
    data = os.urandom(1000)
    fid, url = presign(c, len(data))
    query = url.split("?", 1)[1]

    def put(length, stdin, end):
        params = {"REQUEST_METHOD": "PUT", "REQUEST_URI": url, "QUERY_STRING": query,
                  "REMOTE_ADDR": addr(), "CONTENT_TYPE": "application/octet-stream"}
        if length is not None:
            params["CONTENT_LENGTH"] = str(length)
        s = fcgi_begin(os.path.join(VAR, "run", "api.sock"), params)
        try:
            send_quietly(s, [fcgi_record(5, stdin[i:i + 32768]) for i in range(0, len(stdin), 32768)]
                         + ([fcgi_record(5, b"")] if end else []))
            try:
                out = fcgi_read_response(s, timeout=20)
            except (socket.timeout, ConnectionError):
                return None, b"", stored_bytes([])
            head, body = out.split(b"\r\n\r\n", 1)
            return int(head[8:11]), body, stored_bytes([])
        finally:
            s.close()

    # The stdin goes on (unended): a worker that reads past the declared size
    # is still writing it when we look.
    status, body, stored = put(len(data), data + b"\0" * (4 * MB), end=False)
    assert stored == 0, f"{stored} bytes past the declared 1000 stored by the worker"
    assert status == 400 and b"more than the 1000 bytes" in body, (status, body)
    status, body, _ = put(None, data, end=True)
    assert status == 411 and b"Content-Length" in body, (status, body)
    assert leftovers() == [] and not pending(fid)
    status, body, _ = put(len(data), data, end=True)
    assert status == 200, body
    assert open(os.path.join(FILES_DIR, "pending", fid), "rb").read() == data


def test_the_check_counts_against_the_rate_limit_and_says_so(front):
    """The check before the body is what the per-address rate limit counts: an
    address past it gets the API's 429 with its headers (nginx's auth_request
    would make any answer but 2xx/401/403 a 500), and an upload let through
    is not counted twice. (Fixed one-minute windows: a run across two is run
    again, as in test_api_ratelimit.)"""
    c = new_client()
    limit = int(c.get("/health").headers["X-RateLimit-Limit"])

    def run():
        fid, url = presign(c, 3)
        me, window = addr(), None

        def put(data):
            nonlocal window
            h = http.client.HTTPConnection("127.0.0.1", front.port, timeout=30)
            try:
                h.request("PUT", url, body=data, headers={"X-Forwarded-For": me})
                r = h.getresponse()
                out = r.status, r.headers, r.read()
            finally:
                h.close()
            window = window or out[1]["X-RateLimit-Reset"]
            if out[1]["X-RateLimit-Reset"] != window:
                raise WindowChanged()
            return out

        status, headers, body = put(b"abc")
        assert status == 200 and headers["X-RateLimit-Remaining"] == str(limit - 1), (status, body)
        for _ in range(limit - 1):
            status, headers, body = put(b"abcd")
            assert status == 409, body  # already used: checked before the size
        return put(b"abcd")

    status, headers, body = in_one_window(run)
    assert status == 429 and b"Rate limit exceeded" in body, (status, body)
    assert headers["X-RateLimit-Limit"] == str(limit) and headers["X-RateLimit-Remaining"] == "0"
    assert int(headers["Retry-After"]) >= 1
