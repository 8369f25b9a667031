"""The DNS-rebinding scenario of test_rclone_guard.py, run by it inside a new
network and mount namespace (unshare -nm): a resolver on 127.0.0.1:53 (this
namespace's own /etc/resolv.conf names it) answers the first lookup of
bucket.rebind.test with 127.0.0.2, where a fake S3 listens, and every later
one with 127.0.0.1, where a "secret" server listens on the same port. Runs
`rclone cat` of an object under the guard (rclone_guard, storage_allow_hosts
= 127.0.0.2:PORT), then without it, and prints what each read and what the
secret server saw, as JSON.

    rclone_rebind.py RCLONE_GUARD RCLONE"""
import http.server
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading

GUARD, RCLONE = sys.argv[1], sys.argv[2]
NAME = "bucket.rebind.test"
SECRET = "the host's own secret, never for tenants"
PORT = 9000

subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
conf = tempfile.NamedTemporaryFile("w", prefix="ah-resolv-", delete=False)
conf.write("nameserver 127.0.0.1\noptions attempts:1 timeout:1\n")
conf.close()
subprocess.run(["mount", "--bind", conf.name, "/etc/resolv.conf"], check=True)
# No /etc/hosts entry can answer for the name; nothing else to isolate.

answers = {"a": 0}


def dns_answer(q):
    """A DNS answer to query q: A of NAME (127.0.0.2 the first time, then
    127.0.0.1); no records for anything else."""
    tid, _flags, qd = struct.unpack(">HHH", q[:6])
    i, labels = 12, []
    while q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode())
        i += 1 + q[i]
    qtype, _ = struct.unpack(">HH", q[i + 1:i + 5])
    question = q[12:i + 5]
    name = ".".join(labels).lower()
    rr = b""
    if name == NAME and qtype == 1:
        ip = "127.0.0.2" if answers["a"] == 0 else "127.0.0.1"
        answers["a"] += 1
        rr = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 0, 4) + socket.inet_aton(ip)
    rcode = 0 if name == NAME else 3
    return struct.pack(">HHHHHH", tid, 0x8180 | rcode, 1, 1 if rr else 0, 0, 0) + question + rr


def serve_dns():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 53))
    while True:
        q, peer = s.recvfrom(512)
        s.sendto(dns_answer(q), peer)


def http_server(addr, answer, hits):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _go(self):
            hits.append(f"{self.command} {self.path}")
            status, body = answer(self.path)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_HEAD = _go
    srv = http.server.ThreadingHTTPServer((addr, PORT), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


DECOY = "x" * len(SECRET)
s3_hits, secret_hits = [], []
http_server("127.0.0.2", lambda p: (200, DECOY.encode()) if "secret.txt" in p else (404, b""), s3_hits)
http_server("127.0.0.1", lambda p: (200, SECRET.encode()), secret_hits)
threading.Thread(target=serve_dns, daemon=True).start()

env = {"PATH": "/usr/bin:/bin", "HOME": tempfile.mkdtemp(), "RCLONE_CONFIG_BKT_TYPE": "s3",
       "RCLONE_CONFIG_BKT_PROVIDER": "Other", "RCLONE_CONFIG_BKT_ACCESS_KEY_ID": "K",
       "RCLONE_CONFIG_BKT_SECRET_ACCESS_KEY": "S", "RCLONE_CONFIG_BKT_REGION": "us-east-1",
       "RCLONE_CONFIG_BKT_ENDPOINT": f"http://{NAME}:{PORT}",
       "RCLONE_CONFIG_BKT_FORCE_PATH_STYLE": "true", "RCLONE_CONFIG_BKT_NO_CHECK_BUCKET": "true"}
cat = [RCLONE, "--config", "/dev/null", "--low-level-retries", "1", "--retries", "1",
       "cat", "bkt:tenant-data/secret.txt"]
out = {}
r = subprocess.run([GUARD, f"127.0.0.2:{PORT}", f"http://{NAME}:{PORT}"] + cat, env=env,
                   capture_output=True, text=True, timeout=120)
out["guarded"] = {"status": r.returncode, "stdout": r.stdout, "stderr": r.stderr[-2000:],
                  "secret_hits": list(secret_hits), "s3_hits": list(s3_hits)}
r = subprocess.run(cat, env=env, capture_output=True, text=True, timeout=120)
out["unguarded"] = {"status": r.returncode, "stdout": r.stdout, "secret_hits": list(secret_hits)}
out["secret"] = SECRET
out["lookups"] = answers["a"]
print(json.dumps(out))
