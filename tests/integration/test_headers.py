"""Headers a browser acts on (issue #26): every answer under /api/v1/ says
X-Content-Type-Options: nosniff, whether a worker made it or nginx did (its
error pages, the flood guard's 429: test_nginx_tls.py, the redirect of
/api/v1); a download also carries Content-Security-Policy: sandbox, so a file
uploaded as text/html or image/svg+xml that a browser renders runs no script
in the service's origin. The dashboard keeps its own policy."""
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
