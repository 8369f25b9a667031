"""/buckets: create, list, read, change and delete buckets; credentials sealed
and never returned or logged; every bad input of issue 11 a 4xx in the
contract's shape that stores nothing; another user's bucket a 404.
/buckets/{slug}/test against real servers on loopback is test_bucket_test.py."""
import json
import re
import uuid

import pytest

from conftest import assert_422, db_dump, db_query, log_files
from s3server import storage_ports

RFC3339_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
RECORD = {"id", "name", "slug", "provider", "bucket_name", "region", "endpoint_url",
          "has_credentials", "created_at", "updated_at"}


def s3_body(**kw):
    body = {"name": "Data " + uuid.uuid4().hex[:6], "provider": "s3", "bucket_name": "my-data"}
    body.update(kw)
    return body


def make(client, **kw):
    r = client.post("/buckets", json=s3_body(**kw))
    assert r.status_code == 201, r.text
    return r.json()


def bucket_count(client):
    r = client.get("/buckets")
    assert r.status_code == 200, r.text
    return int(r.headers["X-Total-Count"])


def test_create_returns_the_record(client):
    r = client.post("/buckets", json=s3_body(name="Training Data", region="eu-west-1"))
    assert r.status_code == 201, r.text
    b = r.json()
    assert set(b) == RECORD
    assert re.fullmatch(r"bkt_[A-Za-z0-9]{22}", b["id"])
    assert b["slug"] == "training-data"
    assert (b["provider"], b["bucket_name"], b["region"]) == ("s3", "my-data", "eu-west-1")
    assert b["endpoint_url"] is None and b["has_credentials"] is False
    assert RFC3339_MS.match(b["created_at"]) and RFC3339_MS.match(b["updated_at"])
    assert client.get(f"/buckets/{b['slug']}").json() == b


def test_derived_slug_gets_a_suffix_and_explicit_taken_is_409(client):
    a = make(client, name="Shared")
    b = make(client, name="Shared")
    assert (a["slug"], b["slug"]) == ("shared", "shared-2")
    r = client.post("/buckets", json=s3_body(slug="shared"))
    assert r.status_code == 409, r.text
    assert "shared" in r.json()["detail"]


def test_list_is_a_bare_array_with_total(client):
    for _ in range(3):
        make(client)
    r = client.get("/buckets", params={"limit": 2})
    assert r.status_code == 200
    assert isinstance(r.json(), list) and len(r.json()) == 2
    assert r.headers["X-Total-Count"] == "3"
    assert_422(client.get("/buckets", params={"limit": 0}), ("query", "limit"))


def test_only_a_gcs_endpoint_names_a_path(client):
    assert_422(client.post("/buckets", json=s3_body(endpoint_url="https://s3.example.com/data")),
               ("body", "endpoint_url"))
    b = make(client, provider="gcs", endpoint_url="https://gcs.example.com/storage/v1")
    assert b["endpoint_url"] == "https://gcs.example.com/storage/v1"
    assert_422(client.patch(f"/buckets/{b['slug']}", json={"provider": "s3"}), ("body", "endpoint_url"))


def test_r2_needs_an_endpoint_and_s3_takes_one(client):
    assert_422(client.post("/buckets", json=s3_body(provider="r2")), ("body", "endpoint_url"))
    b = make(client, provider="r2", endpoint_url="https://acct.r2.cloudflarestorage.com")
    assert b["endpoint_url"] == "https://acct.r2.cloudflarestorage.com"
    lo, hi = storage_ports()  # the loopback ports the test config's storage_allow_hosts lists
    b = make(client, endpoint_url=f"http://127.0.0.1:{lo}")
    assert b["endpoint_url"] == f"http://127.0.0.1:{lo}"
    b = make(client, endpoint_url=f"http://0x7f000001:{hi}")  # the same address, spelt in hex
    assert b["endpoint_url"] == f"http://0x7f000001:{hi}"
    # Another port of the same address is not listed.
    assert_422(client.post("/buckets", json=s3_body(endpoint_url=f"http://127.0.0.1:{hi + 1}")),
               ("body", "endpoint_url"))
    assert_422(client.post("/buckets", json=s3_body(endpoint_url=f"http://2130706433:{hi + 1}")),
               ("body", "endpoint_url"))


@pytest.mark.parametrize("body,loc", [
    ({"provider": "ftp"}, "provider"),
    ({"provider": "azure"}, "provider"),
    ({"provider": "r2"}, "endpoint_url"),
    ({"endpoint_url": "https://key:secret@s3.example.com"}, "endpoint_url"),
    ({"endpoint_url": "https://key@s3.example.com"}, "endpoint_url"),
    ({"endpoint_url": "file:///etc/passwd"}, "endpoint_url"),
    ({"endpoint_url": "gopher://s3.example.com:70/_x"}, "endpoint_url"),
    ({"endpoint_url": "s3.example.com"}, "endpoint_url"),
    ({"endpoint_url": "http://169.254.169.254/latest"}, "endpoint_url"),
    ({"endpoint_url": "http://[fe80::1]:9000"}, "endpoint_url"),
    ({"endpoint_url": "https://s3.example.com/?x=1"}, "endpoint_url"),
    ({"bucket_name": "Not_A Bucket"}, "bucket_name"),
    ({"bucket_name": "ab"}, "bucket_name"),
    ({"region": "EU West"}, "region"),
    ({"slug": "Bad Slug"}, "slug"),
    ({"unknown": 1}, "unknown"),
])
def test_bad_input_is_422_and_stores_nothing(client, body, loc):
    before = bucket_count(client)
    assert_422(client.post("/buckets", json=s3_body(**body)), ("body", loc))
    assert bucket_count(client) == before


def test_missing_fields_are_422(client):
    assert_422(client.post("/buckets", json={}), ("body", "name"), ("body", "provider"),
               ("body", "bucket_name"))
    r = client.post("/buckets", data="{not json", headers={"Content-Type": "application/json"})
    assert_422(r, ("body",))


def test_patch_changes_and_validates(client):
    b = make(client, name="Before")
    r = client.patch(f"/buckets/{b['slug']}", json={"name": "After", "region": "us-west-2"})
    assert r.status_code == 200, r.text
    assert (r.json()["name"], r.json()["region"], r.json()["slug"]) == ("After", "us-west-2", b["slug"])
    assert_422(client.patch(f"/buckets/{b['slug']}", json={"provider": "r2"}), ("body", "endpoint_url"))
    assert_422(client.patch(f"/buckets/{b['slug']}", json={"endpoint_url": "file:///x"}),
               ("body", "endpoint_url"))
    assert_422(client.patch(f"/buckets/{b['slug']}", json={"id": "bkt_x"}), ("body", "id"))
    other = make(client)
    r = client.patch(f"/buckets/{b['slug']}", json={"slug": other["slug"]})
    assert r.status_code == 409
    assert client.get(f"/buckets/{b['slug']}").json()["name"] == "After"


def test_delete_is_204_then_404(client):
    b = make(client)
    r = client.delete(f"/buckets/{b['slug']}")
    assert r.status_code == 204 and r.content == b""
    assert client.get(f"/buckets/{b['slug']}").status_code == 404
    assert client.delete(f"/buckets/{b['slug']}").status_code == 404


def test_another_users_bucket_is_404(client, other_client):
    b = make(client)
    p = f"/buckets/{b['slug']}"
    for r in (other_client.get(p), other_client.patch(p, json={"name": "x"}),
              other_client.delete(p), other_client.post(p + "/test"),
              other_client.post(p + "/credentials", json={"access_key_id": "A", "secret_access_key": "B"})):
        assert r.status_code == 404, r.text
        assert r.json() == {"detail": "Bucket not found"}
    assert client.get(p).json()["has_credentials"] is False
    assert bucket_count(other_client) == 0


def test_s3_credentials_are_sealed_never_returned_never_logged(client):
    b = make(client)
    secret = "SECRET" + uuid.uuid4().hex
    r = client.post(f"/buckets/{b['slug']}/credentials",
                    json={"access_key_id": "AKIA" + uuid.uuid4().hex[:12].upper(), "secret_access_key": secret})
    assert r.status_code == 200, r.text
    assert r.json() == {"has_credentials": True}
    got = client.get(f"/buckets/{b['slug']}")
    assert got.json()["has_credentials"] is True and secret not in got.text
    assert secret not in client.get("/buckets").text
    assert secret.encode() not in db_dump()
    for name in log_files():
        with open(name, "rb") as f:
            assert secret.encode() not in f.read(), name


@pytest.mark.parametrize("body,loc", [
    ({"access_key_id": "AKIA"}, "secret_access_key"),
    ({"secret_access_key": "x"}, "access_key_id"),
    ({"access_key_id": "has space", "secret_access_key": "x"}, "access_key_id"),
    ({"access_key_id": "A", "secret_access_key": "B", "service_account_json": "{}"},
     "service_account_json"),
])
def test_bad_s3_credentials_are_422_and_store_nothing(client, body, loc):
    b = make(client)
    assert_422(client.post(f"/buckets/{b['slug']}/credentials", json=body), ("body", loc))
    assert client.get(f"/buckets/{b['slug']}").json()["has_credentials"] is False


def service_account(**drop):
    key = {"type": "service_account", "project_id": "p", "client_email": "sa@p.iam.gserviceaccount.com",
           "private_key": "-----BEGIN PRIVATE KEY-----\nMII\n-----END PRIVATE KEY-----\n",
           "token_uri": "https://oauth2.googleapis.com/token"}
    for k in drop:
        key.pop(k)
    return json.dumps(key)


@pytest.mark.parametrize("value", [
    "not json at all",
    "[1, 2]",
    service_account(client_email=1),
    service_account(private_key=1),
    service_account(token_uri=1),
    json.dumps({"type": "authorized_user", "client_email": "a@b", "private_key": "-----BEGIN x",
                "token_uri": "https://oauth2.googleapis.com/token"}),
    service_account().replace("https://oauth2.googleapis.com/token", "file:///etc/passwd"),
])
def test_bad_service_account_json_is_422_and_stores_nothing(client, value):
    b = make(client, provider="gcs")
    r = client.post(f"/buckets/{b['slug']}/credentials", json={"service_account_json": value})
    assert_422(r, ("body", "service_account_json"))
    assert client.get(f"/buckets/{b['slug']}").json()["has_credentials"] is False


def test_gcs_takes_a_service_account_and_not_keys(client):
    b = make(client, provider="gcs")
    p = f"/buckets/{b['slug']}/credentials"
    assert_422(client.post(p, json={"access_key_id": "A", "secret_access_key": "B"}),
               ("body", "access_key_id"))
    r = client.post(p, json={"service_account_json": service_account()})
    assert r.status_code == 200, r.text
    assert "BEGIN PRIVATE KEY" not in client.get(f"/buckets/{b['slug']}").text


def test_test_without_credentials_says_so(client):
    b = make(client)
    r = client.post(f"/buckets/{b['slug']}/test")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["ok"] is False and "credentials" in body["message"].lower()


def test_credentials_may_come_with_the_creation(client):
    secret = "SECRET" + uuid.uuid4().hex
    b = make(client, access_key_id="AKIAEXAMPLE", secret_access_key=secret)
    assert b["has_credentials"] is True and secret not in json.dumps(b)
    g = make(client, provider="gcs", service_account_json=service_account())
    assert g["has_credentials"] is True


@pytest.mark.parametrize("body,loc", [
    ({"access_key_id": "AKIA"}, "secret_access_key"),
    ({"secret_access_key": "x"}, "access_key_id"),
    ({"service_account_json": "{}"}, "service_account_json"),
    ({"provider": "gcs", "access_key_id": "A", "secret_access_key": "B"}, "access_key_id"),
    ({"provider": "gcs", "service_account_json": "not json"}, "service_account_json"),
])
def test_bad_credentials_at_creation_are_422_and_store_nothing(client, body, loc):
    before = bucket_count(client)
    assert_422(client.post("/buckets", json=s3_body(**body)), ("body", loc))
    assert bucket_count(client) == before
