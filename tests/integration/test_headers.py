"""Headers a browser acts on (issue #26): every answer under /api/v1/ says
X-Content-Type-Options: nosniff, whether a worker made it or nginx did (its
error pages, the flood guard's 429: test_nginx_tls.py, the redirect of
/api/v1); a download also carries Content-Security-Policy: sandbox, so a file
uploaded as text/html or image/svg+xml that a browser renders runs no script
in the service's origin. The dashboard keeps its own policy. nginx's own
answers are in the API's JSON error shape, those before any location (a
header too large, an unknown transfer coding, an HTTP version) included."""
import json
import socket
import urllib.parse

import pytest
import requests

from conftest import BASE_URL, Client

ORIGIN = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(BASE_URL))
HTML = b"<!doctype html><script>document.title='ran'</script>"


def nosniff(r):
    # One header, once: a second copy (say from nginx on top of a worker's) would
    # be a sign that two places set it and one of them may stop doing so unnoticed.
    return r.raw.headers.getlist("X-Content-Type-Options") == ["nosniff"]


def test_worker_answers_carry_nosniff(client, make_agent):
    a = make_agent()
    anon = Client()
    answers = {
        "200 record": client.get("/users/me"),
        "200 list": client.get("/agents"),
        "201 create": client.post("/api-keys", json={"name": "k"}),
        "401": anon.get("/agents"),
        "404 route": client.get("/agents/no-such-agent"),
        "405": client.put("/agents"),
        "422": client.post("/agents", json={}),
        "204": client.delete(f"/agents/{a['slug']}"),
        "public": anon.get("/health"),
    }
    for what, r in answers.items():
        assert nosniff(r), (what, r.status_code, r.headers)
        assert "Content-Security-Policy" not in r.headers, what


@pytest.mark.parametrize("what,method,url,kw", [
    ("404 outside the API", "GET", ORIGIN + "/nothing-here", {}),
    ("414", "GET", BASE_URL + "/agents/" + "a" * 20000, {}),
    ("413", "POST", BASE_URL + "/agents", {"data": b"x" * (2 << 20)}),
    ("413 POST /files", "POST", BASE_URL + "/files", {"data": b"x" * (12 << 20)}),
])
def test_nginx_answers_carry_nosniff(client, what, method, url, kw):
    r = client.s.request(method, url, timeout=30, **kw)
    assert r.headers.get("Content-Type", "").startswith("application/json"), (what, r.status_code)
    assert nosniff(r), (what, r.status_code, r.headers)


def raw_answer(request):
    """Status, header lines and body of what nginx answers to raw request bytes."""
    u = urllib.parse.urlsplit(BASE_URL)
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(request)
        out = b""
        while (chunk := s.recv(65536)):
            out += chunk
    head, _, body = out.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    return int(lines[0].split()[1]), lines[1:], body


@pytest.mark.parametrize("what,request_,status", [
    ("header over the buffers (494)", b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000
     + b"\r\nConnection: close\r\n\r\n", 400),
    ("unknown transfer coding", b"POST /api/v1/agents HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: foo\r\n"
     b"Connection: close\r\n\r\n", 501),
    ("HTTP/2.5", b"GET /api/v1/health HTTP/2.5\r\nHost: x\r\nConnection: close\r\n\r\n", 505),
], ids=["494", "501", "505"])
def test_nginx_answers_before_any_location_are_json_and_nosniff(what, request_, status):
    st, headers, body = raw_answer(request_)
    assert st == status, (what, st, body[:200])
    assert "Content-Type: application/json" in headers, (what, headers)
    assert headers.count("X-Content-Type-Options: nosniff") == 1, (what, headers)
    assert isinstance(json.loads(body)["detail"], str)


def test_the_api_roots_redirect_carries_nosniff():
    r = requests.get(BASE_URL, allow_redirects=False, timeout=10)
    assert r.status_code == 301 and r.headers["Location"].endswith("/api/v1/")
    assert nosniff(r), r.headers
    assert "Strict-Transport-Security" not in r.headers  # plain HTTP: none


def test_downloads_are_sandboxed(client):
    f = client.post("/files", files={"file": ("page.html", HTML, "text/html")}).json()
    for headers, status in (({}, 200), ({"Range": "bytes=0-9"}, 206)):
        r = client.get(f"/files/{f['file_id']}/download", headers=headers)
        assert r.status_code == status
        assert r.raw.headers.getlist("Content-Security-Policy") == ["sandbox"], r.headers
        assert nosniff(r), (headers, r.headers)
    # nginx's 416 runs the location's add_header twice ("sandbox, sandbox"):
    # a repeated policy is still that policy, and nosniff twice is nosniff.
    r = client.get(f"/files/{f['file_id']}/download", headers={"Range": "bytes=999999-"})
    assert r.status_code == 416
    assert set(r.raw.headers.getlist("Content-Security-Policy")) == {"sandbox"}, r.headers
    assert set(r.raw.headers.getlist("X-Content-Type-Options")) == {"nosniff"}, r.headers
    r = client.get(f"/files/{f['file_id']}/download")
    assert r.content == HTML and r.headers["Content-Type"] == "text/html"
    assert r.headers["Content-Disposition"].startswith("attachment;")


def test_a_missing_download_is_still_nosniff(client):
    r = client.get("/files/fil_0000000000000000000000/download")
    assert r.status_code == 404 and nosniff(r)


def test_the_dashboard_keeps_its_own_policy():
    r = requests.get(ORIGIN + "/", timeout=10)
    assert r.status_code == 200
    csp = r.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "sandbox" not in csp
    assert nosniff(r) and r.headers["X-Frame-Options"] == "DENY"
