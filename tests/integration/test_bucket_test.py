"""POST /buckets/{slug}/test: a real request with the stored credentials, against
servers on loopback that the tests start and stop: s3rver (a real S3 store),
a strict SigV4 checker (s3rver does not check signatures), and a GCS token +
bucket server that checks the service account's RS256 JWT."""
import socket
import threading
import uuid

import pytest

from gcsserver import GcsServer, key_file, new_key
from s3server import KEY, SECRET, S3rver, StrictS3, storage_port


@pytest.fixture(scope="module")
def s3():
    s = S3rver("agent-data")
    yield s
    s.stop()


@pytest.fixture
def strict():
    s = StrictS3("agent-data")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def gcs_key():
    return new_key()


@pytest.fixture
def gcs(gcs_key):
    g = GcsServer("gcs-data", gcs_key)
    yield g
    g.stop()


def bucket(client, endpoint, provider="s3", bucket_name="agent-data", creds=None):
    r = client.post("/buckets", json={"name": "b " + uuid.uuid4().hex[:6], "provider": provider,
                                      "bucket_name": bucket_name, "endpoint_url": endpoint})
    assert r.status_code == 201, r.text
    slug = r.json()["slug"]
    if creds is not None:
        r = client.post(f"/buckets/{slug}/credentials", json=creds)
        assert r.status_code == 200, r.text
    return slug


def run_test(client, slug):
    r = client.post(f"/buckets/{slug}/test")
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"ok", "message"} and isinstance(body["message"], str) and body["message"]
    return body


def keys(key=KEY, secret=SECRET):
    return {"access_key_id": key, "secret_access_key": secret}


def test_s3_good_credentials_are_ok(client, s3):
    body = run_test(client, bucket(client, s3.endpoint, creds=keys()))
    assert body["ok"] is True, body


def test_s3_unknown_access_key_is_not_ok(client, s3):
    body = run_test(client, bucket(client, s3.endpoint, creds=keys(key="NOTAKEY")))
    assert body["ok"] is False
    assert "credentials" in body["message"] and "403" in body["message"]


def test_s3_wrong_secret_is_not_ok(client, strict):
    assert run_test(client, bucket(client, strict.endpoint, creds=keys()))["ok"] is True
    body = run_test(client, bucket(client, strict.endpoint, creds=keys(secret="wrong")))
    assert body["ok"] is False and "credentials were rejected" in body["message"]


def test_s3_missing_bucket_is_named(client, s3):
    body = run_test(client, bucket(client, s3.endpoint, bucket_name="no-such-bucket", creds=keys()))
    assert body["ok"] is False
    assert "no-such-bucket" in body["message"] and "does not exist" in body["message"]


def test_unreachable_endpoint_says_so(client):
    with socket.socket() as s:
        s.bind(("127.0.0.1", storage_port()))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        body = run_test(client, bucket(client, f"http://127.0.0.1:{port}", creds=keys()))
    assert body["ok"] is False and "Could not connect" in body["message"]


def test_tls_failure_says_so(client, s3):
    https = s3.endpoint.replace("http://", "https://")
    body = run_test(client, bucket(client, https, creds=keys()))
    assert body["ok"] is False and "TLS" in body["message"]


@pytest.mark.slow
def test_silent_endpoint_times_out(client):
    """A server that accepts and never answers: /test gives up (within its 10 s)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", storage_port()))
    srv.listen(8)
    held = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        body = run_test(client, bucket(client, f"http://127.0.0.1:{srv.getsockname()[1]}", creds=keys()))
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()
    assert body["ok"] is False and "timed out" in body["message"]


def test_gcs_good_service_account_is_ok(client, gcs, gcs_key):
    slug = bucket(client, gcs.endpoint, provider="gcs", bucket_name="gcs-data",
                  creds={"service_account_json": key_file(gcs_key, gcs.token_uri)})
    body = run_test(client, slug)
    assert body["ok"] is True, body
    assert ("POST", "/token") in gcs.requests and ("GET", "/storage/v1/b/gcs-data/o") in gcs.requests


def test_gcs_foreign_key_is_rejected(client, gcs):
    slug = bucket(client, gcs.endpoint, provider="gcs", bucket_name="gcs-data",
                  creds={"service_account_json": key_file(new_key(), gcs.token_uri)})
    body = run_test(client, slug)
    assert body["ok"] is False and "rejected" in body["message"]
    assert not any(m == "GET" for m, _ in gcs.requests)


def test_gcs_missing_bucket_is_named(client, gcs, gcs_key):
    slug = bucket(client, gcs.endpoint, provider="gcs", bucket_name="other-bucket",
                  creds={"service_account_json": key_file(gcs_key, gcs.token_uri)})
    body = run_test(client, slug)
    assert body["ok"] is False and "other-bucket" in body["message"] and "does not exist" in body["message"]


def test_gcs_without_credentials_says_so(client, gcs):
    body = run_test(client, bucket(client, gcs.endpoint, provider="gcs", bucket_name="gcs-data"))
    assert body["ok"] is False and "credentials" in body["message"].lower()


def test_gcs_endpoint_may_name_the_api_path(client, gcs, gcs_key):
    """https://host and https://host/storage/v1 (as Go clients write it) both work."""
    slug = bucket(client, gcs.endpoint + "/storage/v1/", provider="gcs", bucket_name="gcs-data",
                  creds={"service_account_json": key_file(gcs_key, gcs.token_uri)})
    assert run_test(client, slug)["ok"] is True


def test_r2_good_credentials_are_ok(client, s3):
    body = run_test(client, bucket(client, s3.endpoint, provider="r2", creds=keys()))
    assert body["ok"] is True, body
