"""lib/s3 (through its driver build/tests/unit/s3_tool) against s3rver on loopback,
and every request kind against a strict SigV4 checker (see s3server.py)."""
import hashlib
import os
import subprocess
import urllib.parse

import pytest
import requests

from conftest import BUILD
from s3server import KEY, SECRET, S3rver, StrictS3

TOOL = os.path.join(BUILD, "tests", "unit", "s3_tool")


def tool(endpoint, *args, bucket="bkt", secret=SECRET):
    env = dict(os.environ, AH_S3_ENDPOINT=endpoint, AH_S3_BUCKET=bucket, AH_S3_REGION="us-east-1",
               AH_S3_KEY=KEY, AH_S3_SECRET=secret)
    return subprocess.run([TOOL, *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def s3rver():
    s = S3rver("bkt")
    yield s
    s.stop()


@pytest.fixture
def strict():
    s = StrictS3("bkt")
    yield s
    s.stop()


def test_put_get_head_list_delete_round_trip(s3rver, tmp_path):
    blob = os.urandom(3 * 1024 * 1024 + 7)
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(blob)
    key = "dir/a b+c ü.bin"
    assert tool(s3rver.endpoint, "put", key, str(src), "application/octet-stream").returncode == 0
    assert key in s3rver.keys()
    r = tool(s3rver.endpoint, "head", key)
    assert r.returncode == 0 and r.stdout.strip() == str(len(blob))
    assert tool(s3rver.endpoint, "get", key, str(dst)).returncode == 0
    assert dst.read_bytes() == blob
    r = tool(s3rver.endpoint, "list", "dir/", "1000")
    assert r.stdout.splitlines() == [f"{key} {len(blob)}"]
    assert tool(s3rver.endpoint, "delete", key).returncode == 0
    assert key not in s3rver.keys()
    assert tool(s3rver.endpoint, "head", key).returncode == 2


def test_list_follows_continuation_pages(s3rver, tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x")
    names = [f"page/{i:02d}" for i in range(5)]
    for n in names:
        assert tool(s3rver.endpoint, "put", n, str(f)).returncode == 0
    r = tool(s3rver.endpoint, "list", "page/", "2")
    assert r.returncode == 0, r.stderr
    assert [l.split()[0] for l in r.stdout.splitlines()] == names
    for n in names:
        tool(s3rver.endpoint, "delete", n)


def test_missing_object_get_leaves_no_file(s3rver, tmp_path):
    dst = tmp_path / "none"
    assert tool(s3rver.endpoint, "get", "no/such", str(dst)).returncode == 2
    assert not dst.exists()


def test_presigned_put_then_get_without_credentials(s3rver):
    url = tool(s3rver.endpoint, "presign", "PUT", "pre/x.txt", "60").stdout.strip()
    assert requests.put(url, data=b"hello").status_code == 200
    url = tool(s3rver.endpoint, "presign", "GET", "pre/x.txt", "60").stdout.strip()
    r = requests.get(url)
    assert r.status_code == 200 and r.content == b"hello"
    tool(s3rver.endpoint, "delete", "pre/x.txt")


def test_every_request_signature_checks_out(strict, tmp_path):
    src = tmp_path / "src"
    src.write_bytes(b"payload" * 1000)
    key = "k/ü space+plus"
    assert tool(strict.endpoint, "put", key, str(src), "text/plain").returncode == 0
    assert tool(strict.endpoint, "head", key).returncode == 0
    assert tool(strict.endpoint, "get", key, str(tmp_path / "d")).returncode == 0
    assert tool(strict.endpoint, "list", "k/", "10").stdout.rsplit(" ", 1)[0] == key
    assert tool(strict.endpoint, "delete", key).returncode == 0
    url = tool(strict.endpoint, "presign", "PUT", key, "60").stdout.strip()
    assert requests.put(url, data=b"z").status_code == 200
    url = tool(strict.endpoint, "presign-get", key, "60", "text/plain",
               "attachment; filename*=UTF-8''%E2%82%AC.txt").stdout.strip()
    assert "response-content-disposition=" in url
    assert requests.get(url).status_code == 200
    assert strict.failures == []


def test_wrong_secret_and_tampered_url_are_refused(strict, tmp_path):
    src = tmp_path / "src"
    src.write_bytes(b"x")
    assert tool(strict.endpoint, "put", "k", str(src), secret="wrong").returncode == 1
    url = tool(strict.endpoint, "presign", "PUT", "k", "60").stdout.strip()
    assert requests.put(url.replace("/bkt/k?", "/bkt/other?"), data=b"z").status_code == 403
    assert len(strict.failures) == 2
