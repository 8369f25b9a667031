"""The cluster kit (scripts/cluster) for the tests: a 3-node Galera cluster,
API hosts A and B (each with its runner), started once for the session and
stopped, by PID, at its end. Environment:
  AGENTHOST_ROOT, AGENTHOST_BUILD     the checkout and its build
  AGENTHOST_CLUSTER_VAR               state (default <root>/var/cluster-test)
  AGENTHOST_CLUSTER_PORT              first of the kit's 100 ports (default 19500)
  AGENTHOST_SANDBOX_CGROUP            prefix of the runners' cgroups (-r1, -r2)
"""
import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest
import requests

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("AGENTHOST_ROOT", os.path.abspath(os.path.join(HERE, "..", "..")))
BUILD = os.environ.get("AGENTHOST_BUILD", os.path.join(ROOT, "build"))
CVAR = os.environ.get("AGENTHOST_CLUSTER_VAR", os.path.join(ROOT, "var", "cluster-test"))
BASE = int(os.environ.get("AGENTHOST_CLUSTER_PORT", "19500"))
KIT = os.path.join(ROOT, "scripts", "cluster")

sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import agent_code  # noqa: E402  (the integration tests' agent projects)

# The tests' S3 servers take their ports from the kit's storage_allow_hosts
# (tests/integration/s3server.py storage_port reads this).
os.environ["AGENTHOST_STORAGE_ALLOW_HOSTS"] = f"127.0.0.1:{BASE + 90}-{BASE + 99}"

HOSTS = {"a": f"http://127.0.2.1:{BASE + 40}/api/v1", "b": f"http://127.0.2.2:{BASE + 50}/api/v1"}


def kit(*args, check=True, env=None):
    env = dict(os.environ, AGENTHOST_CLUSTER_VAR=CVAR, AGENTHOST_CLUSTER_PORT=str(BASE),
               AGENTHOST_BUILD=BUILD, **(env or {}))
    r = subprocess.run([KIT, *args], env=env, capture_output=True, text=True, timeout=600)
    if check and r.returncode != 0:
        raise AssertionError(f"scripts/cluster {' '.join(args)}: {r.stdout}{r.stderr}")
    return r


def sql(query, node=None):
    """Rows (lists of strings) of a query, through the first node that answers."""
    nodes = [node] if node else [1, 2, 3]
    last = None
    for n in nodes:
        sock = os.path.join(CVAR, f"db{n}", "run", "mysql.sock")
        r = subprocess.run(["mariadb", "--no-defaults", f"--socket={sock}", "-uroot", "agenthost",
                            "-N", "-B", "-e", query], capture_output=True, text=True, timeout=60)
        if r.returncode == 0:
            return [line.split("\t") for line in r.stdout.splitlines()]
        last = r.stderr
    raise AssertionError(f"query failed on every node: {last}")


def admin(*args):
    env = dict(os.environ, AGENTHOST_CONFIG=os.path.join(CVAR, "a", "agenthost.conf"))
    r = subprocess.run([os.path.join(BUILD, "lib", "admin", "agenthost-admin"), *args], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def pid_of(host, what):
    with open(os.path.join(CVAR, host, "run", f"{what}.pid")) as f:
        return int(f.read())


def log_text(host, what):
    with open(os.path.join(CVAR, host, "log", f"{what}.log"), errors="replace") as f:
        return f.read()


class Client:
    """One user's API key against one host."""

    def __init__(self, key, host):
        self.key, self.base = key, HOSTS[host]
        self.s = requests.Session()
        self.s.headers["Authorization"] = f"Bearer {key}"

    def on(self, host):
        return Client(self.key, host)

    def request(self, method, path, **kw):
        kw.setdefault("timeout", 120)
        return self.s.request(method, self.base + path, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def put(self, path, **kw):
        return self.request("PUT", path, **kw)

    def patch(self, path, **kw):
        return self.request("PATCH", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)


@pytest.fixture(scope="session")
def cluster():
    # A fresh cluster each session: what an earlier run left (logs the tests
    # read, agents, a node's state) must not decide this one.
    kit("stop", check=False)
    shutil.rmtree(CVAR, ignore_errors=True)
    kit("start")
    try:
        yield HOSTS
    finally:
        kit("stop", check=False)


def new_user(plan="enterprise"):
    """A fresh user's client on host A (.on("b") for host B)."""
    key = admin("user", "create", f"c-{uuid.uuid4().hex[:12]}@cluster.test", "--plan", plan)
    return Client(key.strip().splitlines()[-1], "a")


@pytest.fixture
def user(cluster):
    return new_user()


def new_agent(client, js=agent_code.TOOL_JS):
    """Creates a local agent and uploads its code (not deployed); its slug."""
    r = client.post("/agents", json={"name": "cl " + uuid.uuid4().hex[:10], "source_type": "local"})
    assert r.status_code == 201, r.text
    slug = r.json()["slug"]
    r = client.put(f"/agents/{slug}/code", data=agent_code.project(js),
                   headers={"Content-Type": "application/gzip"})
    assert r.status_code == 200, r.text
    return slug


def deployed(client, deploy_via=None):
    slug = new_agent(client)
    return agent_code.deploy(deploy_via or client, slug)


def wait_until(pred, timeout, interval=0.2, what="condition"):
    deadline = time.time() + timeout
    while True:
        v = pred()
        if v:
            return v
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)
