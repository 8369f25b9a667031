"""Bad input of every kind against every endpoint that takes a body, plus unknown
routes, wrong methods and odd path parameters. Each case must get the
contract's error shape, change nothing, and leave the API master and the very
same workers running (a crash would show up as a respawned worker)."""
import http.client
import json
import urllib.parse

import pytest

from conftest import BASE_URL, Client, api_pids, assert_422

REPO = "https://example.com/acme/agent.git"

# Endpoints with a JSON body: the smallest valid body, each field with its
# kind, maximum length and whether null is allowed.
TARGETS = {
    "create_agent": {
        "method": "POST", "path": "/agents",
        "valid": {"name": "x", "git_repo_url": REPO},
        "fields": {"name": ("str", 255, False), "slug": ("str", 63, True),
                   "description": ("str", 10000, True), "source_type": ("str", 16, False),
                   "git_repo_url": ("str", 2048, None), "git_branch": ("str", 255, True),
                   "timeout_seconds": ("int", None, False)},
    },
    "patch_agent": {
        "method": "PATCH", "path": "/agents/{slug}",
        "valid": {},
        "fields": {"name": ("str", 255, False), "slug": ("str", 63, False),
                   "description": ("str", 10000, True), "source_type": ("str", 16, False),
                   "git_repo_url": ("str", 2048, None), "git_branch": ("str", 255, True),
                   "timeout_seconds": ("int", None, False)},
    },
    "set_secret": {
        "method": "POST", "path": "/agents/{slug}/secrets",
        "valid": {"key": "NEW_KEY", "value": "v"},
        "fields": {"key": ("str", 128, False), "value": ("str", 65536, False)},
    },
    "create_key": {
        "method": "POST", "path": "/api-keys",
        "valid": {"name": "n"},
        "fields": {"name": ("str", 255, True)},
    },
}
TARGET_IDS = sorted(TARGETS)


class Guard:
    """The state a bad request must not change, and the processes it must not kill."""

    def __init__(self, client, agent):
        self.client = client
        self.agent = agent
        self.pids = api_pids()
        self.before = self.snapshot()

    def snapshot(self):
        c = self.client
        agents = c.get("/agents", params={"limit": 100})
        secrets = c.get(f"/agents/{self.agent['slug']}/secrets")
        keys = c.get("/api-keys", params={"limit": 100})
        for r in (agents, secrets, keys):
            assert r.status_code == 200, r.text
        return agents.json(), secrets.json(), sorted(k["id"] for k in keys.json())

    def check(self):
        assert self.snapshot() == self.before, "a refused request changed something"
        assert api_pids() == self.pids, "the API master or a worker died"

    def send(self, target, body=None, raw=None, headers=None):
        t = TARGETS[target]
        path = t["path"].format(slug=self.agent["slug"])
        if raw is not None:
            h = {"Content-Type": "application/json"}
            h.update(headers or {})
            return self.client.request(t["method"], path, data=raw, headers=h)
        return self.client.request(t["method"], path, json=body)


@pytest.fixture
def guard(client, make_agent):
    agent = make_agent(description="original", git_branch="main")
    assert client.post(f"/agents/{agent['slug']}/secrets", json={"key": "EXISTING", "value": "v"}).status_code == 201
    return Guard(client, agent)


def assert_json_error(r, status):
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
    assert "detail" in r.json()
    return r.json()["detail"]


def body_invalid(r):
    detail = assert_422(r, ("body",))
    assert detail[0]["loc"] == ["body"], detail
    return detail


# ---- malformed JSON ----

MALFORMED = [
    b"{", b"}", b"{\"name\":", b"{\"name\": \"x\"", b"{'name': 'x'}", b"{\"name\": \"x\",}",
    b"{name: \"x\"}", b"{\"a\" 1}", b"nul", b"tru", b"{\"name\": \"x\"} trailing", b"{}{}",
    b"{\"name\": \"unterminated}", b"{\"name\": \"bad \\q escape\"}", b"{\"n\": 01}",
    b"\xef\xbb\xbf{}", b"/* c */ {}", b"\x00", b"{\"a\": \"x\" // c\n}", b"{\"a\": .5}",
    b"{\"a\": -}", b"{\"a\": 0x10}", b"{\"a\": [1,]}", b"{,}", b"{}\x00", b"{\"a\": 1}\x00\x00",
]
# Not JSON either (RFC 8259), but json-c's strict mode lets them through; the field
# checks then refuse them, so they must at least be a 422 that changes nothing.
LENIENT = [b"{\"a\": 1.}", b"{\"n\": NaN}", b"{\"n\": Infinity}", b"{\"n\": -Infinity}", b"{\"a\":\"\x01\"}",
           b"{\"a\":\"tab\there\"}"]


@pytest.mark.parametrize("target", TARGET_IDS)
def test_malformed_json_is_422_json_invalid(guard, target):
    for raw in MALFORMED:
        detail = body_invalid(guard.send(target, raw=raw))
        assert detail[0]["type"] == "json_invalid", (raw, detail)
        assert len(detail) == 1
    for raw in LENIENT:
        assert_422(guard.send(target, raw=raw))
    guard.check()


@pytest.mark.parametrize("target", TARGET_IDS)
def test_non_object_body_is_422_at_body(guard, target):
    for raw in (b"[]", b"[{\"name\": \"x\"}]", b"\"x\"", b"123", b"null", b"true", b"1.5"):
        body_invalid(guard.send(target, raw=raw))
    guard.check()


@pytest.mark.parametrize("target", TARGET_IDS)
def test_deep_nesting_is_422(guard, target):
    first = next(iter(TARGETS[target]["fields"]))
    for raw in (b"[" * 10000, b"{\"a\":" * 10000, b"[" * 10000 + b"]" * 10000,
                ("{\"%s\": " % first).encode() + b"[" * 10000 + b"]" * 10000 + b"}",
                b"{\"x\": " + b"{\"y\": " * 5000 + b"1" + b"}" * 5001):
        detail = body_invalid(guard.send(target, raw=raw))
        assert detail[0]["type"] == "json_invalid"
    guard.check()


@pytest.mark.parametrize("target", TARGET_IDS)
def test_moderate_nesting_in_a_field_is_a_field_error(guard, target):
    first = next(iter(TARGETS[target]["fields"]))
    body = dict(TARGETS[target]["valid"])
    nested = 1
    for _ in range(20):
        nested = [nested]
    body[first] = nested
    assert_422(guard.send(target, body), ("body", first))
    guard.check()


# ---- invalid UTF-8 and NUL ----

BAD_UTF8 = [b"\xff", b"\xfe\xff", b"\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80",
            b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xe2\x82", b"a\xc3"]


@pytest.mark.parametrize("target", TARGET_IDS)
def test_invalid_utf8_is_422(guard, target):
    t = TARGETS[target]
    for field, (kind, _max, _null) in t["fields"].items():
        if kind != "str":
            continue
        for bad in BAD_UTF8:
            body = dict(t["valid"])
            body[field] = "@@"
            raw = json.dumps(body).encode().replace(b"@@", b"ok" + bad)
            detail = body_invalid(guard.send(target, raw=raw))
            assert detail[0]["type"] == "json_invalid", (field, bad, detail)
    # an invalid key name is as bad as an invalid value
    body_invalid(guard.send(target, raw=b"{\"\xff\": 1}"))
    guard.check()


@pytest.mark.parametrize("target", TARGET_IDS)
def test_nul_in_strings_is_422(guard, target):
    t = TARGETS[target]
    for field, (kind, _max, _null) in t["fields"].items():
        if kind != "str":
            continue
        for s in ("a\u0000b", "\u0000", "abc\u0000"):
            body = dict(t["valid"], **{field: s})
            assert_422(guard.send(target, body), ("body", field))
    guard.check()


def test_escaped_unicode_is_accepted(client):
    """Escapes, astral characters and a lone surrogate escape (replaced by U+FFFD,
    never stored as invalid UTF-8) all come back as valid UTF-8."""
    for name, stored in (("caf\u00e9", "caf\u00e9"), ("\U0001F600 smile", "\U0001F600 smile"),
                         ("\ud800 lone", "\ufffd lone")):
        raw = json.dumps({"name": name, "git_repo_url": REPO}).encode()
        r = client.post("/agents", data=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 201, r.text
        r.content.decode("utf-8")  # strict: raises on invalid UTF-8
        assert r.json()["name"] == stored
        g = client.get(f"/agents/{r.json()['slug']}")
        g.content.decode("utf-8")
        assert g.json()["name"] == stored


# ---- wrong types, missing, unknown, oversized ----

def wrong_values(kind, nullable):
    vals = [[], ["x"], {}, {"a": 1}, True, False]
    vals += [12345, 1.5, -1] if kind == "str" else ["5", "abc", 1.5, 1e300, 2 ** 64, -(2 ** 63) - 1]
    if nullable is False:
        vals.append(None)
    return vals


@pytest.mark.parametrize("target", TARGET_IDS)
def test_wrong_types_are_422_per_field(guard, target):
    t = TARGETS[target]
    for field, (kind, _max, nullable) in t["fields"].items():
        for bad in wrong_values(kind, nullable):
            body = dict(t["valid"], **{field: bad})
            detail = assert_422(guard.send(target, body), ("body", field))
            assert all(e["loc"] == ["body", field] for e in detail), (field, bad, detail)
    guard.check()


def test_every_offending_field_is_reported(guard):
    r = guard.send("create_agent", {"name": 1, "slug": 2, "description": 3, "source_type": 4,
                                    "git_repo_url": 5, "git_branch": 6, "timeout_seconds": "7"})
    detail = assert_422(r, *[("body", f) for f in TARGETS["create_agent"]["fields"]])
    assert len(detail) == 7
    r = guard.send("set_secret", {"key": [], "value": {}})
    assert len(assert_422(r, ("body", "key"), ("body", "value"))) == 2
    guard.check()


@pytest.mark.parametrize("target,body,locs", [
    ("create_agent", {}, ["name"]),
    ("create_agent", {"git_repo_url": REPO}, ["name"]),
    ("create_agent", {"name": "x"}, ["git_repo_url"]),
    ("set_secret", {}, ["key", "value"]),
    ("set_secret", {"key": "A"}, ["value"]),
    ("set_secret", {"value": "A"}, ["key"]),
])
def test_missing_fields_are_422(guard, target, body, locs):
    detail = assert_422(guard.send(target, body), *[("body", l) for l in locs])
    assert {e["type"] for e in detail} == {"missing"}
    guard.check()


@pytest.mark.parametrize("target", ["create_agent", "patch_agent", "set_secret"])
def test_empty_body_is_422(guard, target):
    for raw in (b"", b"   ", b"\n"):
        body_invalid(guard.send(target, raw=raw))
    guard.check()


@pytest.mark.parametrize("target", TARGET_IDS)
def test_unknown_and_read_only_fields_are_extra_forbidden(guard, target):
    t = TARGETS[target]
    for extra in ({"bogus": 1}, {"id": "x"}, {"created_at": "2026-01-01T00:00:00.000Z"},
                  {"updated_at": None}, {"status": "active"}, {"user_id": "usr_x"},
                  {"Name": "x"}, {"": 1}, {"name ": "x"}, {"prefix": "ahk_x"}):
        detail = assert_422(guard.send(target, dict(t["valid"], **extra)))
        (k,) = extra
        assert {"loc": ["body", k], "msg": detail[0]["msg"], "type": "extra_forbidden"} in detail, detail
    detail = assert_422(guard.send(target, dict(t["valid"], one=1, two=2, three=3)),
                        ("body", "one"), ("body", "two"), ("body", "three"))
    assert all(e["type"] == "extra_forbidden" for e in detail)
    guard.check()


def test_unknown_and_invalid_fields_are_reported_together(guard):
    """One 422 lists every offending field: unknown ones and invalid known ones."""
    detail = assert_422(guard.send("create_agent", {"bogus": 1, "timeout_seconds": 0}),
                        ("body", "bogus"), ("body", "name"), ("body", "timeout_seconds"))
    assert {e["type"] for e in detail} >= {"extra_forbidden", "missing", "greater_than_equal"}
    guard.check()


@pytest.mark.parametrize("target", TARGET_IDS)
def test_oversized_strings_are_422(guard, target):
    t = TARGETS[target]
    for field, (kind, maxlen, _null) in t["fields"].items():
        if kind != "str":
            continue
        for n in (maxlen + 1, maxlen * 3 + 7, 900 * 1024):
            body = dict(t["valid"], **{field: "a" * n})
            detail = assert_422(guard.send(target, body), ("body", field))
            assert detail[0]["type"] == "string_too_long", detail
    guard.check()


def test_many_fields_and_huge_key_names(guard):
    body = {f"k{i}": i for i in range(20000)}
    assert len(assert_422(guard.send("create_agent", body))) >= 1
    body = {"x" * 500000: 1}
    assert_422(guard.send("create_agent", body), ("body", "x" * 500000))
    guard.check()


# ---- bodies over the limit ----

def declared_length_request(client, method, path, length, ctype="application/json"):
    """Sends the headers of a request declaring `length` body bytes and reads the
    answer nginx gives on the headers alone."""
    u = urllib.parse.urlsplit(BASE_URL)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.putrequest(method, u.path + path)
        for k, v in client.s.headers.items():
            conn.putheader(k, v)
        conn.putheader("Content-Type", ctype)
        conn.putheader("Content-Length", str(length))
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize("target", TARGET_IDS)
def test_body_over_1mib_is_413_json(guard, target):
    t = TARGETS[target]
    big = json.dumps(dict(t["valid"], description="d" * (1024 * 1024 + 10))).encode()
    assert_json_error(guard.send(target, raw=big), 413)
    path = t["path"].format(slug=guard.agent["slug"])
    status, headers, body = declared_length_request(guard.client, t["method"], path, 5 * 1024 * 1024)
    assert status == 413 and headers["Content-Type"].startswith("application/json")
    assert isinstance(json.loads(body)["detail"], str)
    guard.check()


def test_invoke_body_over_16mib_is_413_json(guard):
    status, headers, body = declared_length_request(
        guard.client, "POST", f"/agents/{guard.agent['slug']}/invoke", 16 * 1024 * 1024 + 1)
    assert status == 413 and headers["Content-Type"].startswith("application/json")
    assert isinstance(json.loads(body)["detail"], str)
    guard.check()


def test_bad_bodies_on_invoke_do_not_hurt(guard):
    path = f"/agents/{guard.agent['slug']}/invoke"
    for raw in (b"{", b"[" * 10000, b"{\"prompt\": \"\xff\"}", b"", b"{\"prompt\": 5}"):
        r = guard.client.post(path, data=raw, headers={"Content-Type": "application/json"})
        assert_json_error(r, r.status_code)
        assert r.status_code in (409, 422), r.text
    guard.check()


# ---- unknown routes, wrong methods ----

@pytest.mark.parametrize("path", [
    "/nope", "/agents/x/nope", "/agents/x/secrets/K/extra", "/", "/users", "/users/you",
    "/agents/x/deploy/now", "/api-keys/x/y", "/AGENTS", "/agents//secrets", "/health/x",
    "/openapi.yaml", "/v2/agents", "/agents/x/code/x",
])
def test_unknown_routes_are_404_json(guard, path):
    r = guard.client.get(path)
    assert assert_json_error(r, 404) == "Not Found"
    guard.check()


@pytest.mark.parametrize("url", ["/nothing-here", "/api/v2/agents", "/api/v1x/agents", "/index.html"])
def test_paths_outside_the_api_are_404_json(guard, url):
    u = urllib.parse.urlsplit(BASE_URL)
    r = guard.client.s.get(f"{u.scheme}://{u.netloc}{url}", timeout=10)
    assert_json_error(r, 404)
    guard.check()


@pytest.mark.parametrize("method,path,allow", [
    ("PUT", "/agents", {"GET", "POST"}),
    ("DELETE", "/agents", {"GET", "POST"}),
    ("PATCH", "/agents", {"GET", "POST"}),
    ("POST", "/agents/{slug}", {"GET", "PATCH", "DELETE"}),
    ("PUT", "/agents/{slug}", {"GET", "PATCH", "DELETE"}),
    ("GET", "/agents/{slug}/deploy", {"POST"}),
    ("GET", "/agents/{slug}/invoke", {"POST"}),
    ("GET", "/agents/{slug}/sandbox", {"DELETE"}),
    ("GET", "/agents/{slug}/code", {"PUT"}),
    ("POST", "/agents/{slug}/code", {"PUT"}),
    ("PUT", "/agents/{slug}/secrets", {"GET", "POST"}),
    ("GET", "/agents/{slug}/secrets/EXISTING", {"DELETE"}),
    ("GET", "/api-keys/key_x", {"DELETE", "PATCH"}),
    ("PATCH", "/api-keys", {"GET", "POST"}),
    ("POST", "/health", {"GET"}),
    ("DELETE", "/users/me", {"GET", "PATCH"}),
    ("POST", "/openapi.json", {"GET"}),
])
def test_wrong_methods_are_405_json_with_allow(guard, method, path, allow):
    r = guard.client.request(method, path.format(slug=guard.agent["slug"]), json={"name": "x"})
    assert_json_error(r, 405)
    assert {m.strip() for m in r.headers["Allow"].split(",")} == allow
    guard.check()


@pytest.mark.parametrize("method", ["TRACE", "FOO", "OPTIONS"])
def test_odd_methods_are_json(guard, method):
    r = guard.client.request(method, "/agents")
    assert r.status_code in (400, 405, 501), r.text
    assert r.headers.get("Content-Type", "").startswith("application/json"), r.text[:200]
    guard.check()


# ---- path parameters ----

@pytest.mark.parametrize("seg", [
    "a%2Fb", "%2F", "%2e%2e", "%252F", "%ff", "%c3%28", "%zz", "%", "a%2", "%20", "+", "%0A",
    "%0D%0AX-Injected:%201", "%E2%80%AE", "a" * 5000, "%41" * 2000, "\u00fc",
], ids=lambda s: s if len(s) <= 24 else f"{s[:6]}...x{len(s)}")
def test_odd_path_params_are_404_json(guard, seg):
    for method, suffix in (("GET", ""), ("PATCH", ""), ("DELETE", ""), ("POST", "/deploy"),
                           ("GET", "/secrets"), ("DELETE", "/secrets/EXISTING")):
        r = guard.client.request(method, f"/agents/{seg}{suffix}", json={} if method == "PATCH" else None)
        assert assert_json_error(r, 404) == "Agent not found", (method, seg, r.text)
        assert "X-Injected" not in r.headers
    r = guard.client.delete(f"/agents/{guard.agent['slug']}/secrets/{seg}")
    assert assert_json_error(r, 404) == "Secret not found"
    r = guard.client.delete(f"/api-keys/{seg}")
    assert_json_error(r, 404)
    guard.check()


def test_encoded_slash_never_splits_a_segment(guard):
    slug = guard.agent["slug"]
    r = guard.client.get(f"/agents/{slug}%2Fsecrets")
    assert assert_json_error(r, 404) == "Agent not found"
    r = guard.client.delete(f"/agents/{slug}%2Fsecrets%2FEXISTING")
    assert_json_error(r, 404)
    guard.check()


@pytest.mark.parametrize("seg", ["%00", "a%00b", "%00" * 10])
def test_nul_in_path_is_a_json_error(guard, seg):
    for method, path in (("GET", f"/agents/{seg}"), ("DELETE", f"/agents/{seg}"),
                         ("DELETE", f"/agents/{guard.agent['slug']}/secrets/{seg}"),
                         ("DELETE", f"/api-keys/{seg}")):
        r = guard.client.request(method, path)
        assert r.status_code in (400, 404), (path, r.status_code, r.text[:200])
        assert r.headers.get("Content-Type", "").startswith("application/json"), (path, r.text[:200])
        assert isinstance(r.json()["detail"], str)
    guard.check()


def test_very_long_url_is_414_json(guard):
    r = guard.client.get("/agents/" + "a" * 20000)
    assert r.status_code == 414, r.status_code
    assert r.headers.get("Content-Type", "").startswith("application/json"), r.text[:200]
    assert isinstance(r.json()["detail"], str)
    guard.check()


def test_long_query_strings(guard):
    r = guard.client.get("/agents?limit=5&" + "x=" + "y" * 8000)
    assert r.status_code == 200, r.text
    r = guard.client.get("/agents?limit=" + "9" * 5000)
    assert_422(r, ("query", "limit"))
    r = guard.client.get("/agents?" + "&".join(["limit=1"] * 500))
    assert r.status_code in (200, 422)
    guard.check()


def test_refused_bodies_leave_nothing_on_kept_connections(client):
    """nginx keeps its FastCGI connections to the workers. Requests refused
    before their body is read (a bad key, 20 KB of body, which nginx sends in
    full) must not spoil the requests that follow on those connections. nginx
    never retries a POST, so a spoiled connection would show as a 502."""
    stranger = Client("ahk_AAAAAAAA_AAAAAAAAAA")
    junk = {"name": "x" * 20_000, "git_repo_url": REPO}
    for i in range(20):
        r = stranger.post("/agents", json=junk)
        assert r.status_code == 401, r.text[:200]
        r = client.post("/agents", json={"name": f"kept {i}", "git_repo_url": REPO})
        assert r.status_code == 201, r.text[:200]
        assert r.json()["name"] == f"kept {i}"
