"""JWT bearer authentication against the real stack: HS256 with the stack's shared
secret, RS256 and EdDSA with keys from a JWKS this module serves itself on the
loopback port that scripts/test names in AGENTHOST_JWT_JWKS_URL (the configuration
scripts/run writes has no JWKS URL). First login creates the user, later logins
find it, and every broken token is a 401. A new identity with the email of an
existing user is refused unless jwt_link_by_email is on and the token says
email_verified: true; those tests start an API master of their own with the
configuration they need (fcgi.PrivateApi).

Against a stack of your own, start it with AGENTHOST_JWT_JWKS_URL and
AGENTHOST_JWT_JWKS_ALLOW_LOCAL=1 set as scripts/test does (test_jwks: the API
refuses a loopback JWKS without the allowance), and run pytest with them set too."""
import base64
import concurrent.futures
import http.server
import json
import os
import re
import threading
import time
import urllib.parse
import uuid

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from jwt.algorithms import OKPAlgorithm, RSAAlgorithm

from conftest import CONFIG, VAR, Client, admin, create_user, db_query, log_files, wait_until
from fcgi import PrivateApi


def read_config():
    conf = {}
    with open(CONFIG) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                conf[k.strip()] = v.strip()
    return conf


CONF = read_config()
ISSUER = CONF.get("jwt_issuer")
AUDIENCE = CONF.get("jwt_audience")
JWKS_ENV = "AGENTHOST_JWT_JWKS_URL"
JWKS_URL = urllib.parse.urlparse(os.environ.get(JWKS_ENV, ""))
# An unknown kid has the keys fetched again at most this often (a minute by
# default, less in the test configuration).
REFETCH = int(os.environ.get("AGENTHOST_JWT_JWKS_REFETCH_SECONDS") or CONF.get("jwt_jwks_refetch_seconds", "60"))

pytestmark = pytest.mark.skipif("jwt_hs256_secret_file" not in CONF or not JWKS_URL.port,
                                reason=f"the stack has no HS256 secret or {JWKS_ENV} is not set")
NOT_LINKED = "An account with this email exists and is not linked to this identity"


def secret():
    with open(CONF["jwt_hs256_secret_file"], "rb") as f:
        return f.read().strip()


class Jwks:
    """Keys of the fake identity provider and the JWKS document it serves."""

    def __init__(self):
        self.keys = {}      # kid -> (alg, private key)
        self.served = []    # kids published in the JWKS
        self.fetches = 0
        self.proxied = 0    # fetches that came as a proxy's (absolute-form) requests

    def add(self, kid, alg, keep=False):
        """A new key; with keep, the same key in every run. Workers cache the JWKS
        across test runs (and refetch at most every 10 s), and a provider never
        reuses a kid for another key, so the standing keys are kept on disk."""
        path = os.path.join(VAR, "jwt-test-idp", kid + ".pem")
        if keep and os.path.exists(path):
            with open(path, "rb") as f:
                key = serialization.load_pem_private_key(f.read(), None)
        else:
            key = rsa.generate_private_key(65537, 2048) if alg == "RS256" else ed25519.Ed25519PrivateKey.generate()
        if keep and not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
        self.keys[kid] = (alg, key)
        self.served.append(kid)

    def document(self):
        out = []
        for kid in self.served:
            alg, key = self.keys[kid]
            algo = RSAAlgorithm if alg == "RS256" else OKPAlgorithm
            jwk = json.loads(algo.to_jwk(key.public_key()))
            jwk.update(kid=kid, alg=alg, use="sig")
            out.append(jwk)
        return json.dumps({"keys": out}).encode()


@pytest.fixture(scope="module")
def idp():
    """Serves the JWKS on the configured loopback port for this module's tests."""
    keys = Jwks()
    keys.add("rsa-1", "RS256", keep=True)
    keys.add("ed-1", "EdDSA", keep=True)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if urllib.parse.urlparse(self.path).path != JWKS_URL.path:
                self.send_error(404)
                return
            keys.fetches += 1
            keys.proxied += self.path.startswith("http")
            body = keys.document()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    http.server.ThreadingHTTPServer.allow_reuse_address = True
    server = http.server.ThreadingHTTPServer((JWKS_URL.hostname, JWKS_URL.port), Handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    # The stack's refresher fetches the keys, never a request: it may have
    # tried before this server was up. The first token with a kid it lacks
    # asks for them (answered 401 meanwhile); a kid's refresh may have to wait
    # out the jwt_jwks_refetch_seconds of one that an earlier run asked for.
    token = signed(keys, "rsa-1", claims())
    assert wait_until(lambda: me(token).status_code == 200, timeout=REFETCH + 15, interval=0.5), \
        "the stack never fetched the identity provider's keys"
    yield keys
    server.shutdown()
    server.server_close()


def claims(sub=None, email=None, **over):
    now = int(time.time())
    c = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub or "sub-" + uuid.uuid4().hex,
         "iat": now, "exp": now + 300, "jti": uuid.uuid4().hex}
    if email is not False:
        c["email"] = email or f"j{uuid.uuid4().hex[:12]}@jwt.example"
    c.update(over)
    return {k: v for k, v in c.items() if v is not None}


def hs256(c):
    return jwt.encode(c, secret(), algorithm="HS256")


def signed(idp, kid, c):
    alg, key = idp.keys[kid]
    return jwt.encode(c, key, algorithm=alg, headers={"kid": kid})


def me(token):
    return Client(token).get("/users/me")


def assert_401(r, detail=None):
    assert r.status_code == 401, r.text
    assert r.headers.get("WWW-Authenticate") == "Bearer"
    if detail:
        assert r.json()["detail"] == detail


def identities(email):
    """(issuer, subject) of each identity `agenthost-admin user identities` lists."""
    out = admin("user", "identities", email).stdout
    return [tuple(line.split("\t")[:2]) for line in out.splitlines()]


def test_first_login_creates_the_user(idp):
    c = claims()
    r = me(hs256(c))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["email"] == c["email"]
    assert body["plan"] == "free"
    assert re.match(r"^usr_[0-9A-Za-z]{22}$", body["id"])
    assert db_query(f"SELECT user_id FROM user_identities WHERE issuer = '{ISSUER}'"
                    f" AND subject = '{c['sub']}'") == [[body["id"]]]


def test_second_login_is_the_same_user(idp):
    c = claims()
    first = me(hs256(c)).json()
    again = me(hs256(dict(c, jti="other", iat=c["iat"] - 1))).json()
    assert again["id"] == first["id"]
    assert db_query(f"SELECT COUNT(*) FROM users WHERE email = '{c['email']}'") == [["1"]]
    # the user can work with the API like any other
    cl = Client(hs256(c))
    assert cl.post("/agents", json={"name": "via jwt", "git_repo_url": "https://example.com/r.git"}).status_code == 201
    assert [a["name"] for a in cl.get("/agents").json()] == ["via jwt"]


def test_hs256_and_jwks_tokens_are_the_same_identity(idp):
    c = claims()
    ids = set()
    for token in (hs256(c), signed(idp, "rsa-1", c), signed(idp, "ed-1", c)):
        r = me(token)
        assert r.status_code == 200, r.text
        ids.add(r.json()["id"])
    assert len(ids) == 1


def test_expired_token_is_401(idp):
    now = int(time.time())
    for token in (hs256(claims(iat=now - 600, exp=now - 300)),
                  signed(idp, "rsa-1", claims(iat=now - 600, exp=now - 300))):
        assert_401(me(token), "Token expired")


def test_tampered_token_is_401(idp):
    for token in (hs256(claims()), signed(idp, "rsa-1", claims()), signed(idp, "ed-1", claims())):
        h, p, s = token.split(".")
        forged = json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
        forged["sub"] = "admin"
        p2 = base64.urlsafe_b64encode(json.dumps(forged).encode()).rstrip(b"=").decode()
        assert_401(me(f"{h}.{p2}.{s}"), "Invalid token")
        s2 = s[:-2] + ("AA" if s[-2:] != "AA" else "BA")
        assert_401(me(f"{h}.{p}.{s2}"), "Invalid token")


def test_refused_tokens(idp):
    c = claims()
    none = jwt.encode(c, None, algorithm="none")
    cases = {
        "alg none": none,
        "wrong audience": hs256(dict(c, aud="someone-else")),
        "wrong issuer": hs256(dict(c, iss="https://evil.example")),
        "no exp": hs256({k: v for k, v in c.items() if k != "exp"}),
        "not yet valid": hs256(dict(c, nbf=int(time.time()) + 3600)),
        "unknown kid": jwt.encode(c, idp.keys["rsa-1"][1], algorithm="RS256", headers={"kid": "nope"}),
        "kid of another key type": jwt.encode(c, idp.keys["rsa-1"][1], algorithm="RS256",
                                              headers={"kid": "ed-1"}),
        "HS256 keyed with a JWKS public key": jwt.encode(
            c, json.dumps(json.loads(idp.document())["keys"][0]).encode(), algorithm="HS256",
            headers={"kid": "rsa-1"}),
        "garbage": "a.b.c",
        "oversize": hs256(dict(c, pad="x" * 9000)),
    }
    for desc, token in cases.items():
        r = me(token)
        assert r.status_code == 401, (desc, r.text)
        assert r.headers.get("WWW-Authenticate") == "Bearer", desc
    # none of them made a user
    assert db_query(f"SELECT COUNT(*) FROM user_identities WHERE subject = '{c['sub']}'") == [["0"]]


def test_no_email_claim_is_401(idp):
    assert_401(me(hs256(claims(email=False))), "Token has no email claim")


def test_default_configuration_refuses_a_key_served_on_loopback(idp):
    """Issue 17: a local user serves their own key on an unprivileged loopback
    port, mints an RS256 token with an existing user's email and asks who they
    are. The configuration scripts/run writes (this stack's file, without the test
    override) names no JWKS, so the token is refused and nothing is fetched."""
    assert "jwt_jwks_url" not in CONF, "the generated configuration names a JWKS URL"
    email, key = create_user()
    token = signed(idp, "rsa-1", claims(email=email, email_verified=True))
    with PrivateApi(unset=[JWKS_ENV]) as api:
        fetches = idp.fetches
        status, body = api.get("/users/me", token)
        assert status == 401, f"the token was taken: {body}"
        assert body["detail"] == "Invalid token"
        assert idp.fetches == fetches, "the API fetched keys from a JWKS it was not given"
        # the same API answers the user's own key
        status, body = api.get("/users/me", key)
        assert (status, body["email"]) == (200, email), body
    assert identities(email) == []


def test_a_fetch_never_connects_to_a_local_address(idp):
    """Issue 26: a jwt_jwks_url that passes the check at start (an outside
    address) but whose connection would end on this host, where any local user
    may listen (here through a proxy on loopback, as a name that resolves there
    later would), is refused at the connection: nothing is fetched, the token
    is refused, and the log says why."""
    email, _ = create_user()
    token = signed(idp, "rsa-1", claims(email=email))
    proxied = idp.proxied
    with PrivateApi(unset=["AGENTHOST_JWT_JWKS_ALLOW_LOCAL", "no_proxy", "NO_PROXY"],
                    AGENTHOST_JWT_JWKS_URL="http://192.0.2.10" + JWKS_URL.path,
                    http_proxy=f"http://127.0.0.1:{JWKS_URL.port}") as api:
        log = lambda: open(api.log.name, "rb").read()
        assert wait_until(lambda: b"refused: it reached a loopback address" in log(), timeout=15), log()
        status, body = api.get("/users/me", token)
        assert status == 401, f"the token was taken: {body}"
    assert idp.proxied == proxied, "the API fetched keys through a loopback address"


def test_new_identity_with_an_existing_users_email_is_refused(idp):
    """Linking is off by default: whoever can sign a token with someone's email
    (a key at the JWKS, or an address claimed at the provider) gets nothing."""
    email, key = create_user()
    for token in (hs256(claims(email=email, email_verified=True)),
                  signed(idp, "rsa-1", claims(email=email, email_verified=True))):
        assert_401(me(token), NOT_LINKED)
    assert identities(email) == []
    assert db_query(f"SELECT COUNT(*) FROM users WHERE email = '{email}'") == [["1"]]
    assert Client(key).get("/users/me").json()["email"] == email


def test_linking_needs_the_setting_and_a_verified_email(idp):
    email, key = create_user()
    uid = Client(key).get("/users/me").json()["id"]
    sub = "sub-" + uuid.uuid4().hex
    with PrivateApi(jwks=True, AGENTHOST_JWT_LINK_BY_EMAIL="true") as api:
        # email_verified must be the JSON boolean true
        for ev in (None, False, "true", 1):
            status, body = api.get("/users/me", signed(idp, "ed-1", claims(sub=sub, email=email, email_verified=ev)))
            assert status == 401, (ev, body)
            assert body["detail"] == "Token email is not verified", ev
        assert identities(email) == []
        status, body = api.get("/users/me", signed(idp, "ed-1", claims(sub=sub, email=email, email_verified=True)))
        assert (status, body["id"]) == (200, uid), body
    assert identities(email) == [(ISSUER, sub)]
    # once linked, the identity is that user everywhere, setting or not
    r = me(hs256(claims(sub=sub, email=email)))
    assert r.status_code == 200, r.text
    assert r.json()["id"] == uid
    assert db_query(f"SELECT COUNT(*) FROM users WHERE email = '{email}'") == [["1"]]


def test_admin_lists_and_unlinks_identities(idp):
    c = claims()
    assert me(hs256(c)).status_code == 200
    out = admin("user", "identities", c["email"]).stdout.splitlines()
    assert len(out) == 1 and out[0].split("\t")[:2] == [ISSUER, c["sub"]], out
    assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", out[0].split("\t")[2]), out
    email, _key = create_user()
    assert admin("user", "identities", email).stdout == ""
    assert admin("user", "identities", "nobody@nowhere.example", check=False).returncode == 1
    # unlinking asks for the exact identity of that user
    for wrong in ((email, ISSUER, c["sub"]), (c["email"], ISSUER, "other"), (c["email"], "", c["sub"])):
        r = admin("user", "unlink", *wrong, check=False)
        assert r.returncode == 1 and "has no identity" in r.stderr, r
    assert identities(c["email"]) == [(ISSUER, c["sub"])]
    admin("user", "unlink", c["email"], ISSUER, c["sub"])
    assert identities(c["email"]) == []
    # the token no longer reaches the account: its email is now someone else's
    assert_401(me(hs256(c)), NOT_LINKED)
    assert identities(c["email"]) == []


def test_disabled_user_is_403(idp):
    c = claims()
    assert me(hs256(c)).status_code == 200
    admin("user", "disable", c["email"])
    r = me(hs256(c))
    assert r.status_code == 403, r.text


def test_racing_first_logins_make_one_user(idp):
    c = claims()
    token = hs256(c)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: me(token), range(8)))
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    assert len({a.json()["id"] for a in answers}) == 1
    assert db_query(f"SELECT COUNT(*) FROM users WHERE email = '{c['email']}'") == [["1"]]


@pytest.mark.slow
def test_jwks_rotation_is_picked_up(idp):
    c = claims()
    assert me(signed(idp, "rsa-1", c)).status_code == 200
    kid = "ed-" + uuid.uuid4().hex[:8]
    idp.add(kid, "EdDSA")
    token = signed(idp, kid, c)
    # The first token with the new kid is refused (no request waits on the
    # provider) and asks the refresher for the keys, at most once a
    # jwt_jwks_refetch_seconds for an unknown kid: test_refused_tokens may have
    # used that time. Once it has them, every worker has them (few requests:
    # 100 a minute per user).
    r = wait_until(lambda: me(token).status_code == 200, timeout=REFETCH + 15, interval=1)
    assert r, "the new key was never picked up"
    answers = [me(token) for _ in range(16)]
    assert [a.status_code for a in answers] == [200] * 16
    assert all(a.json()["email"] == c["email"] for a in answers)


@pytest.mark.slow
def test_unknown_kids_fetch_at_most_once_a_minute(idp):
    """A flood of tokens with made-up kids is not a flood of fetches: the
    refresher serves an unknown kid at most once a jwt_jwks_refetch_seconds (a
    minute by default), and test above just had it do so (or that is otherwise
    recent). A loaded machine may stretch the flood past the setting: one more
    fetch is allowed for each time it does."""
    before, start = idp.fetches, time.monotonic()
    for _ in range(12):
        kid = "made-up-" + uuid.uuid4().hex[:8]
        token = jwt.encode(claims(), idp.keys["rsa-1"][1], algorithm="RS256", headers={"kid": kid})
        assert_401(me(token))
        time.sleep(0.25)  # past the refresher's 200 ms poll, so that it sees each
    time.sleep(1)
    allowed = 1 + int((time.monotonic() - start) // REFETCH)
    assert idp.fetches - before <= allowed, (idp.fetches - before, allowed)


def test_tokens_are_never_logged(idp):
    token = hs256(claims())
    me(token)
    me(token[:-4] + "AAAA")
    time.sleep(0.2)
    sig = token.rsplit(".", 1)[1]
    for path in log_files():
        with open(path, "rb") as f:
            assert sig.encode() not in f.read(), path
