"""Test S3 servers on loopback: s3rver (npm) as a real S3 store, and a strict
SigV4 checker. s3rver stores and lists objects faithfully but does not verify V4
signatures, so the checker recomputes every signature the way S3 does and
answers 403 on a mismatch: together they show our requests would pass real S3."""
import hashlib
import hmac
import http.server
import os
import random
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

ROOT = os.environ.get("AGENTHOST_ROOT", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
NPMDIR = os.path.join(ROOT, "var", "npm-tools")
S3RVER = os.path.join(NPMDIR, "node_modules", ".bin", "s3rver")
KEY = SECRET = "S3RVER"  # s3rver's built-in account


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def storage_ports():
    """The loopback port range the stack's storage_allow_hosts lets bucket
    connections reach (scripts/lib.sh writes 127.0.0.1:PORT+340-PORT+379), or
    None when the stack allows every private address instead."""
    value = os.environ.get("AGENTHOST_STORAGE_ALLOW_HOSTS")
    if value is None:
        try:
            with open(os.environ.get("AGENTHOST_CONFIG") or os.path.join(
                    os.environ.get("AGENTHOST_VAR", os.path.join(ROOT, "var", "t")), "agenthost.conf")) as f:
                for line in f:
                    k, sep, v = line.partition("=")
                    if sep and k.strip() == "storage_allow_hosts":
                        value = v.strip()
        except OSError:
            pass
    for entry in (value or "").replace(",", " ").split():
        host, _, ports = entry.partition(":")
        if host == "127.0.0.1" and ports:
            lo, _, hi = ports.partition("-")
            return int(lo), int(hi or lo)
    return None


def storage_port():
    """A free loopback port for a test's storage server that bucket
    connections may reach: one of storage_ports(), else any free one."""
    span = storage_ports()
    if not span:
        return free_port()
    lo, hi = span
    ports = list(range(lo, hi + 1))
    random.shuffle(ports)
    for p in ports:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
                return p
            except OSError:
                continue
    raise RuntimeError(f"every port of storage_allow_hosts ({lo}-{hi}) is taken")


def ensure_s3rver():
    """scripts/test installs it (install_npm_tools); a bare pytest run does the same."""
    if not os.path.exists(S3RVER):
        subprocess.run(["npm", "install", "--prefix", NPMDIR, "--no-audit", "--no-fund",
                        "--loglevel=error", "s3rver@3.7.1"], check=True, capture_output=True)
    return S3RVER


class S3rver:
    """s3rver on a free loopback port with its own directory; stop() ends it by PID."""

    def __init__(self, bucket):
        self.bucket = bucket
        self.dir = tempfile.mkdtemp(prefix="ah-s3rver-")
        self.port = storage_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [ensure_s3rver(), "-d", self.dir, "-a", "127.0.0.1", "-p", str(self.port),
             "--configure-bucket", bucket, "--silent"],
            # Its continuation tokens use a cipher that OpenSSL 3 keeps in the legacy provider.
            env=dict(os.environ, NODE_OPTIONS="--openssl-legacy-provider"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError("s3rver exited at start")
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("s3rver did not start")

    def put(self, s3_tool, key, text):
        """Puts an object with the S3 API: lib/s3's driver (SigV4) through the
        build's tests/unit/s3_tool."""
        fd, path = tempfile.mkstemp(prefix="ah-s3put-")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        try:
            env = dict(os.environ, AH_S3_ENDPOINT=self.endpoint, AH_S3_BUCKET=self.bucket,
                       AH_S3_REGION="us-east-1", AH_S3_KEY=KEY, AH_S3_SECRET=SECRET)
            r = subprocess.run([s3_tool, "put", key, path], env=env, capture_output=True, text=True,
                               timeout=60)
            assert r.returncode == 0, r.stderr
        finally:
            os.unlink(path)

    def keys(self):
        """Every object key in the bucket, read from s3rver's directory."""
        out = []
        root = os.path.join(self.dir, self.bucket)
        for d, _, files in os.walk(root):
            for f in files:
                if f.endswith("._S3rver_object"):
                    out.append(os.path.relpath(os.path.join(d, f), root)[:-len("._S3rver_object")])
        return sorted(out)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def _hmac(k, m):
    return hmac.new(k, m.encode(), hashlib.sha256).digest()


def signing_key(secret, date, region):
    k = _hmac(("AWS4" + secret).encode(), date)
    for part in (region, "s3", "aws4_request"):
        k = _hmac(k, part)
    return k


def _enc(s):
    return urllib.parse.quote(s, safe="-_.~")


def canonical_query(pairs):
    return "&".join(f"{_enc(k)}={_enc(v)}" for k, v in sorted(pairs))


def check_header_auth(method, path, query, headers, body, secret):
    """'' when the Authorization header's SigV4 signature is right, else why not."""
    auth = headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "no SigV4 Authorization"
    parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    _, date, region, _, _ = parts["Credential"].split("/")
    signed = parts["SignedHeaders"].split(";")
    payload = headers.get("x-amz-content-sha256")
    if payload is None:
        return "no x-amz-content-sha256"
    if payload != "UNSIGNED-PAYLOAD" and payload != hashlib.sha256(body).hexdigest():
        return "x-amz-content-sha256 is not the body's hash"
    hdrs = ""
    for h in signed:
        v = headers.get(h)
        if v is None:
            return f"signed header {h} not sent"
        hdrs += f"{h}:{' '.join(v.split())}\n"
    creq = "\n".join([method, path, canonical_query(query), hdrs, ";".join(signed), payload])
    sts = "\n".join(["AWS4-HMAC-SHA256", headers["x-amz-date"], f"{date}/{region}/s3/aws4_request",
                     hashlib.sha256(creq.encode()).hexdigest()])
    want = hmac.new(signing_key(secret, date, region), sts.encode(), hashlib.sha256).hexdigest()
    return "" if hmac.compare_digest(want, parts["Signature"]) else "signature mismatch"


def check_presigned(method, path, query, host, secret, now=None):
    """'' when a presigned URL's query signature is right and unexpired."""
    q = dict(query)
    sig = q.pop("X-Amz-Signature", None)
    if not sig or q.get("X-Amz-SignedHeaders") != "host":
        return "not presigned"
    _, date, region, _, _ = q["X-Amz-Credential"].split("/")
    start = time.mktime(time.strptime(q["X-Amz-Date"], "%Y%m%dT%H%M%SZ")) - time.timezone
    if (now or time.time()) > start + int(q["X-Amz-Expires"]):
        return "expired"
    creq = "\n".join([method, path, canonical_query(q.items()), f"host:{host}\n", "host",
                      "UNSIGNED-PAYLOAD"])
    sts = "\n".join(["AWS4-HMAC-SHA256", q["X-Amz-Date"], f"{date}/{region}/s3/aws4_request",
                     hashlib.sha256(creq.encode()).hexdigest()])
    want = hmac.new(signing_key(secret, date, region), sts.encode(), hashlib.sha256).hexdigest()
    return "" if hmac.compare_digest(want, sig) else "signature mismatch"


class StrictS3:
    """A minimal in-memory S3 (PUT/GET/HEAD/DELETE of objects, ListObjectsV2) that
    answers 403 unless each request's SigV4 signature checks out. Records every
    failure in .failures."""

    def __init__(self, bucket, secret=SECRET):
        self.objects, self.failures = {}, []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _go(self):
                u = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qsl(u.query, keep_blank_values=True)
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                hdrs = {k.lower(): v for k, v in self.headers.items()}
                hdrs["Authorization"] = self.headers.get("Authorization", "")
                if any(k == "X-Amz-Signature" for k, _ in query):
                    why = check_presigned(self.command, u.path, query, self.headers["Host"], secret)
                else:
                    why = check_header_auth(self.command, u.path, query, hdrs, body, secret)
                if why:
                    outer.failures.append(f"{self.command} {u.path}: {why}")
                    return self._send(403, b"<Error><Code>SignatureDoesNotMatch</Code></Error>")
                key = urllib.parse.unquote(u.path[len(bucket) + 2:])
                if self.command == "PUT":
                    outer.objects[key] = body
                    return self._send(200, b"")
                if self.command == "DELETE":
                    outer.objects.pop(key, None)
                    return self._send(204, b"")
                if self.command == "GET" and dict(query).get("list-type") == "2":
                    pre = dict(query).get("prefix", "")
                    items = "".join(f"<Contents><Key>{k}</Key><Size>{len(v)}</Size></Contents>"
                                    for k, v in sorted(outer.objects.items()) if k.startswith(pre))
                    return self._send(200, f"<ListBucketResult><IsTruncated>false</IsTruncated>{items}</ListBucketResult>".encode())
                if key not in outer.objects:
                    return self._send(404, b"<Error><Code>NoSuchKey</Code></Error>")
                data = outer.objects[key]
                return self._send(200, data, head=self.command == "HEAD")

            def _send(self, status, data, head=False):
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if not head:
                    self.wfile.write(data)

            do_GET = do_PUT = do_DELETE = do_HEAD = _go

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", storage_port()), H)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
