"""Fixtures for integration tests against the real stack (nginx → FastCGI workers →
MariaDB, plus the runner) that scripts/test starts. Nothing here is mocked.

Environment (set by scripts/test):
  AGENTHOST_URL     base URL of the API, e.g. http://127.0.0.1:18080/api/v1
  AGENTHOST_ROOT    repository root
  AGENTHOST_BUILD   meson build directory of the binaries under test
  AGENTHOST_VAR     the stack's state directory (logs, sockets, pid files)
  AGENTHOST_CONFIG  the stack's agenthost.conf
"""
import os
import random
import subprocess
import threading
import uuid

import pytest
import requests

ROOT = os.environ.get("AGENTHOST_ROOT", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD = os.environ.get("AGENTHOST_BUILD", os.path.join(ROOT, "build"))
VAR = os.environ.get("AGENTHOST_VAR", os.path.join(ROOT, "var", "test"))
CONFIG = os.environ.get("AGENTHOST_CONFIG", os.path.join(VAR, "agenthost.conf"))
BASE_URL = os.environ.get("AGENTHOST_URL", "http://127.0.0.1:18080/api/v1")
ADMIN = os.path.join(BUILD, "lib", "admin", "agenthost-admin")


def admin(*args, check=True):
    """Runs agenthost-admin against the test stack; returns the CompletedProcess."""
    env = dict(os.environ, AGENTHOST_CONFIG=CONFIG)
    return subprocess.run([ADMIN, *args], env=env, capture_output=True, text=True, check=check)


def create_user(plan="free"):
    """A fresh user; returns (email, api_key)."""
    email = f"u{uuid.uuid4().hex[:12]}@test.example"
    out = admin("user", "create", email, "--plan", plan)
    return email, out.stdout.strip().splitlines()[-1]


class Client:
    """requests.Session bound to the API base URL, optionally with a bearer key.
    Every client presents its own client address (X-Forwarded-For, trusted from
    loopback by the test nginx) so per-address rate limits don't leak between tests."""

    def __init__(self, key=None, email=None):
        self.key = key
        self.email = email
        self.s = requests.Session()
        self.s.headers["X-Forwarded-For"] = f"10.{random.randint(0,255)}.{random.randint(0,255)}.{random.randint(1,254)}"
        if key:
            self.s.headers["Authorization"] = f"Bearer {key}"

    def url(self, path):
        return BASE_URL + path

    def request(self, method, path, **kw):
        kw.setdefault("timeout", 30)
        return self.s.request(method, self.url(path), **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def patch(self, path, **kw):
        return self.request("PATCH", path, **kw)

    def put(self, path, **kw):
        return self.request("PUT", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)


@pytest.fixture
def client():
    """An authenticated client of a brand-new user (own rate-limit budget)."""
    email, key = create_user()
    return Client(key, email)


@pytest.fixture
def other_client():
    """A second, unrelated user, for tenant-isolation checks."""
    email, key = create_user()
    return Client(key, email)


@pytest.fixture
def anon():
    """A client without credentials, from its own client address."""
    return Client()


@pytest.fixture
def make_agent(client):
    """Factory: creates an agent for `client` and returns its record."""
    def make(**fields):
        body = {"name": "agent " + uuid.uuid4().hex[:8], "git_repo_url": "https://example.com/repo.git"}
        body.update(fields)
        r = client.post("/agents", json=body)
        assert r.status_code == 201, r.text
        return r.json()
    return make


def assert_422(resp, *locs):
    """The contract's 422 shape, with an entry for each expected loc."""
    assert resp.status_code == 422, resp.text
    detail = resp.json()["detail"]
    assert isinstance(detail, list) and detail
    for e in detail:
        assert set(e) >= {"loc", "msg", "type"}
        assert e["loc"][0] in ("body", "query", "path")
    got = [tuple(e["loc"]) for e in detail]
    for loc in locs:
        assert tuple(loc) in got, f"{loc} not in {got}"
    return detail


def proc_stat(pid):
    """/proc/PID/stat's fields after the command name, which may hold spaces
    and parentheses: [0] state, [1] ppid, ... [19] start time in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def api_pids():
    """PIDs of the API master and its workers (to check nothing crashed)."""
    with open(os.path.join(VAR, "run", "api.pid")) as f:
        master = int(f.read().strip())
    out = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True).stdout.split()
    return master, sorted(int(p) for p in out)


# ---- Helpers for the test_api_* files (appended; nothing above changed) ----

def new_client(plan="free"):
    """A Client of a brand-new user, for tests that need more than the fixtures give."""
    email, key = create_user(plan)
    return Client(key, email)


def db_session():
    """A mariadb client on the stack's database as root, kept open: write
    statements to its stdin (a transaction stays open between them), read
    each result row as a line of its stdout (no column names)."""
    return subprocess.Popen(
        ["mariadb", "--no-defaults", f"--socket={os.path.join(VAR, 'run', 'mysql.sock')}",
         "-uroot", "agenthost", "--batch", "--unbuffered", "--skip-column-names"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def call_held_at_its_charge(client, slug, prompt, while_held):
    """Invokes slug with prompt while a transaction of the test's own holds
    the user's spend rows (FOR UPDATE): the call's end, which writes its
    history row and charges its budgets in one transaction (schema/035),
    waits for them. while_held() runs once the call is seen waiting (in the
    server's processlist: information_schema.innodb_trx missed a worker's
    waiting statement in most tries); then the rows are let go. Returns the
    call's response."""
    uid = client.get("/users/me").json()["id"]
    sql = db_session()
    out = []
    try:
        sql.stdin.write("START TRANSACTION;\nSELECT spent FROM budget_spend WHERE scope = 'user'"
                        f" AND scope_id = '{uid}' FOR UPDATE;\nSELECT 'held';\n")
        sql.stdin.flush()
        rows = [sql.stdout.readline().strip() for _ in range(3)]
        assert rows[2] == "held", rows  # its day and month rows (a call made them), then the marker
        t = threading.Thread(target=lambda: out.append(client.post(
            f"/agents/{slug}/invoke", json={"prompt": prompt}, timeout=60)))
        t.start()
        assert wait_until(lambda: int(db_query(
            "SELECT COUNT(*) FROM information_schema.processlist WHERE command = 'Execute'"
            " AND info LIKE '%INSERT INTO budget_spend%'")[0][0]) == 1, timeout=20), \
            "the call's charge never waited for the spend rows"
        while_held()
        sql.stdin.write("COMMIT;\n")
        sql.stdin.flush()
        t.join(60)
    finally:
        sql.stdin.close()
        sql.wait(10)
    assert out and out[0].status_code == 200, out and out[0].text
    return out[0]


def db_query(sql):
    """Runs SQL as root against the stack's own MariaDB (its private socket);
    returns the rows as lists of strings (NULL as the string "NULL")."""
    out = subprocess.run(
        ["mariadb", "--no-defaults", f"--socket={os.path.join(VAR, 'run', 'mysql.sock')}",
         "-uroot", "agenthost", "--batch", "--skip-column-names", "-e", sql],
        capture_output=True, text=True, check=True)
    return [line.split("\t") for line in out.stdout.splitlines()]


def db_dump():
    """The whole agenthost database as mariadb-dump writes it (bytes, binary
    columns verbatim), to check that something is not stored in clear."""
    return subprocess.run(
        ["mariadb-dump", "--no-defaults", f"--socket={os.path.join(VAR, 'run', 'mysql.sock')}",
         "-uroot", "--skip-extended-insert", "agenthost"],
        capture_output=True, check=True).stdout


def log_files():
    """Every log file of the stack: $AGENTHOST_VAR/log and nginx's logs."""
    found = []
    for d in (os.path.join(VAR, "log"), os.path.join(VAR, "nginx", "logs")):
        for base, _dirs, files in os.walk(d):
            found.extend(os.path.join(base, f) for f in files)
    return found


def wait_until(pred, timeout=5.0, interval=0.05):
    """Polls pred() until it returns something truthy; returns that or None."""
    import time
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)
