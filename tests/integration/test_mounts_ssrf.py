"""A bucket mount reaches its endpoint and nothing else (issue #26): a tenant's
S3 endpoint that answers a read with a redirect to another address on the
runner (here a "secret" server on another loopback port) gets an error, and
the secret server never sees a connection; endpoint spellings of the metadata
address are refused when the bucket is made. The fake S3 listens on a port
storage_allow_hosts lists, the secret server on one it does not."""
import http.server
import threading
import uuid

import pytest

from agent_code import needs_runner
from s3server import KEY, SECRET, storage_port
from test_mounts_fuse import CREATED, agent_with_mounts, delete_agents, run  # noqa: F401

pytestmark = needs_runner

SECRET_TEXT = "the runner's own secret, never for agents"


class Server:
    """A threaded HTTP server on loopback (port 0: any free one) whose handler
    is answer(handler) -> (status, headers, body); counts its requests."""

    def __init__(self, answer, port=0):
        self.hits = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _go(self):
                outer.hits.append(f"{self.command} {self.path}")
                status, headers, body = answer(self)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _go

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
        self.port = self.server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def redirecting_s3(bucket, objects, redirects):
    """An S3 endpoint a tenant controls: lists objects and answers HEAD like S3,
    but a GET of a key in redirects is a 307 to its URL."""
    def answer(h):
        path, _, query = h.path.partition("?")
        key = path[len(bucket) + 2:]
        if h.command == "GET" and not key:  # a listing, v1 or v2
            items = "".join(f"<Contents><Key>{k}</Key><Size>{len(v)}</Size>"
                            f"<LastModified>2006-01-02T15:04:05.000Z</LastModified></Contents>"
                            for k, v in sorted(objects.items()))
            return 200, {}, (f"<ListBucketResult><Name>{bucket}</Name><IsTruncated>false"
                             f"</IsTruncated>{items}</ListBucketResult>").encode()
        if h.command == "GET" and key in redirects:
            return 307, {"Location": redirects[key]}, b""
        if key in objects:
            return 200, {"Last-Modified": "Mon, 02 Jan 2006 15:04:05 GMT"}, objects[key]
        if not key:
            return 200, {}, b""
        return 404, {}, b"<Error><Code>NoSuchKey</Code></Error>"
    return Server(answer, port=storage_port())


@pytest.fixture
def secret_server():
    s = Server(lambda h: (200, {}, SECRET_TEXT.encode()))
    yield s
    s.stop()


def bucket_at(client, endpoint):
    r = client.post("/buckets", json={"name": "t " + uuid.uuid4().hex[:6], "provider": "s3",
                                      "bucket_name": "tenant-data", "endpoint_url": endpoint})
    assert r.status_code == 201, r.text
    slug = r.json()["slug"]
    r = client.post(f"/buckets/{slug}/credentials", json={"access_key_id": KEY, "secret_access_key": SECRET})
    assert r.status_code == 200, r.text
    return slug


@pytest.mark.slow  # rclone tries the refused connection mount_low_level_retries times (10: about 100 s)
def test_redirect_to_another_loopback_port_reads_nothing(client, secret_server):
    decoy = b"x" * len(SECRET_TEXT)  # what HEAD says, so rclone reads as many bytes
    s3 = redirecting_s3("tenant-data", {"secret.txt": decoy, "plain.txt": b"plain"},
                        {"secret.txt": f"{secret_server.endpoint}/secret.txt"})
    try:
        slug = agent_with_mounts(client, [{"bucket_slug": bucket_at(client, s3.endpoint),
                                           "mount_path": "/mnt/x", "read_only": True}])
        assert run(client, slug, "!cat /mnt/x/plain.txt") == "plain"  # the endpoint itself works
        got = run(client, slug, "!cat /mnt/x/secret.txt")
        assert got != SECRET_TEXT and SECRET_TEXT not in str(got)
        assert got.startswith("ERR"), got
        assert any("secret.txt" in h for h in s3.hits)  # rclone did ask, and was redirected
        assert secret_server.hits == []                  # ... but never connected there
    finally:
        s3.stop()


@pytest.mark.parametrize("host", ["0251.0376.0251.0376", "2852039166", "0xa9fea9fe",
                                  "0xa9.0xfe.0xa9.0xfe", "169.254.43518", "[::ffff:169.254.169.254]",
                                  "[::ffff:a9fe:a9fe]", "169.254.169.254."])
def test_metadata_address_in_any_spelling_is_refused(client, host):
    r = client.post("/buckets", json={"name": "m " + uuid.uuid4().hex[:6], "provider": "s3",
                                      "bucket_name": "tenant-data", "endpoint_url": f"http://{host}/"})
    assert r.status_code == 422, r.text
    d = r.json()["detail"][0]
    assert d["loc"] == ["body", "endpoint_url"] and "metadata" in d["msg"], d
