"""Deploy faults test_deploy.py leaves out, against the real stack:

  * MariaDB restarted while npm runs, and MariaDB down across the moment the
    runner switches the agent (briefly, and past the runner's own retries): the
    deploy still ends `active` (or `error` with a clear message), never stays
    `deploying`, the API says 503 meanwhile and its workers reconnect after.
  * A repository over git_max_bytes, whether in bytes fetched or (a git bomb:
    a tiny pack of zeros) in bytes checked out; an empty repository; a git
    server that accepts and never answers (git_timeout_seconds): `error` with
    the cap, the missing manifest or the time limit.
  * Loopback ports git_allow_hosts does not list, link-local (169.254.169.254)
    and file:// URLs are refused before any connection is made.
  * The runner stopped while a deploy is queued: the job waits and is done once
    the runner is back.

Config values the running runner cannot change are set by restarting it with
AGENTHOST_<KEY> in its environment (every config key can be overridden that
way), from the command line scripts/lib.sh recorded in $AGENTHOST_VAR/run/
runner.cmd; the runner is always put back as it was. MariaDB is stopped by the
PID in $AGENTHOST_VAR/run/mysql.pid and started again by scripts/lib.sh's own
start_mariadb, so its command line is exactly the stack's.

Against a stack run by `scripts/run` in the foreground: its watch loop stops
the whole stack when it sees MariaDB's PID file gone, so the MariaDB tests would
take the stack down with them. scripts/test starts the stack without that loop.

No test traffic leaves this machine: git servers and listeners are on
127.0.0.1, and the link-local URL is refused by policy before any connect (the
runner under test also has a 3 s clone time limit, in case it is not).
"""
import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ROOT, VAR, api_pids, db_query, new_client, proc_stat
from test_deploy import (ECHO_JS, MANIFEST, allowed_port, assert_active,
                         assert_nothing_left_behind, create_agent, deploy, git_allowed_ports,
                         local_agent, project, runner_pid, serve_git, tgz, wait_in_log)
from agent_code import runner_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not runner_available(), reason="agenthost-runner is not running"),
]

RUN = os.path.join(VAR, "run")


# ---- processes: the runner and MariaDB --------------------------------------------

_started = {}  # pid -> Popen of runners this module started (reaped on stop)


def _gone(pid):
    """True once pid has exited (a zombie counts as exited)."""
    proc = _started.get(pid)
    if proc is not None:
        return proc.poll() is not None
    try:
        return proc_stat(pid)[0] == "Z"
    except OSError:
        return True


def _wait_gone(pid, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.1)
    return _gone(pid)


def runner_up():
    try:
        return not _gone(runner_pid()) and runner_available()
    except (OSError, ValueError):
        return False


def stop_runner(timeout=30):
    """SIGTERM by the PID in runner.pid, as scripts/lib.sh's stop_pid does."""
    try:
        pid = runner_pid()
    except (OSError, ValueError):
        return
    if _gone(pid):
        return
    os.kill(pid, signal.SIGTERM)
    if not _wait_gone(pid, timeout):
        os.kill(pid, signal.SIGKILL)
        assert _wait_gone(pid, 10), "the runner did not exit"
        pytest.fail(f"the runner ignored SIGTERM for {timeout} s")
    _started.pop(pid, None)


def start_runner(**env):
    """Starts the runner from runner.cmd with AGENTHOST_<KEY>=value overrides;
    returns once it answers a ping on its socket."""
    with open(os.path.join(RUN, "runner.cmd")) as f:
        cmd = f.read().strip()
    extra = " ".join(f"AGENTHOST_{k.upper()}={v}" for k, v in env.items())
    log = open(os.path.join(VAR, "log", "runner.log"), "ab")
    proc = subprocess.Popen(["bash", "-c", f"exec env {extra} {cmd}"], stdin=subprocess.DEVNULL,
                            stdout=log, stderr=log, start_new_session=True)
    log.close()
    _started[proc.pid] = proc
    with open(os.path.join(RUN, "runner.pid"), "w") as f:
        f.write(f"{proc.pid}\n")
    deadline = time.time() + 30
    while time.time() < deadline:
        assert proc.poll() is None, f"the runner exited at start ({proc.returncode})"
        if runner_available():
            return proc.pid
        time.sleep(0.2)
    pytest.fail("the runner did not come up")


@contextlib.contextmanager
def runner_with(**env):
    """The runner restarted with config overrides, put back as it was after."""
    stop_runner()
    try:
        start_runner(**env)
        yield
    finally:
        stop_runner()
        start_runner()


def mysql_pid():
    with open(os.path.join(RUN, "mysql.pid")) as f:
        return int(f.read().strip())


def mariadb_up():
    sock = os.path.join(RUN, "mysql.sock")
    return subprocess.run(["mariadb", "--no-defaults", f"--socket={sock}", "-uroot",
                           "-e", "SELECT 1"],
                          capture_output=True).returncode == 0


def stop_mariadb():
    pid = mysql_pid()
    os.kill(pid, signal.SIGTERM)
    assert _wait_gone(pid, 60), "MariaDB did not shut down"


def start_mariadb():
    """scripts/lib.sh's start_mariadb: the stack's exact command line; it waits
    until the server answers."""
    script = 'ROOT="$1"; VAR="$2"; . "$ROOT/scripts/lib.sh"; start_mariadb'
    r = subprocess.run(["bash", "-c", script, "start_mariadb", ROOT, VAR], capture_output=True,
                       text=True, stdin=subprocess.DEVNULL, start_new_session=True, timeout=90)
    assert r.returncode == 0, r.stderr
    assert mariadb_up()


def run_watcher():
    """The PID of a `scripts/run` in the foreground for this stack, if any: its
    watch loop stops everything when MariaDB's PID file goes, even briefly."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
        except OSError:
            continue
        if len(args) < 2 or not args[1].endswith(b"scripts/run") or b"stop" in args[2:]:
            continue
        var = env.get(b"AGENTHOST_VAR", os.path.join(ROOT, "var").encode()).decode()
        if os.path.realpath(var) == os.path.realpath(VAR):
            return int(pid)
    return None


@pytest.fixture(autouse=True)
def stack_restored():
    """Whatever a test does, MariaDB and the normal runner are up after it."""
    yield
    if not mariadb_up():
        start_mariadb()
    if not runner_up():
        start_runner()


# ---- helpers -----------------------------------------------------------------------

def status_of(client, slug):
    """The agent's record; None while the API cannot answer (database away)."""
    try:
        r = client.get(f"/agents/{slug}", timeout=10)
    except OSError:
        return None
    return r.json() if r.status_code == 200 else None


def wait_settled(client, slug, timeout):
    """Polls (strictly: every answer must be a 200) until the agent leaves
    `deploying`; returns (record, seconds waited)."""
    start = time.time()
    while True:
        r = client.get(f"/agents/{slug}")
        assert r.status_code == 200, r.text
        rec = r.json()
        if rec["status"] != "deploying":
            return rec, time.time() - start
        if time.time() - start > timeout:
            pytest.fail(f"agent {slug} still deploying after {timeout} s")
        time.sleep(0.5)


def job_states(agent_id):
    return [row[0] for row in db_query(
        f"SELECT state FROM deploy_jobs WHERE agent_id = '{agent_id}' ORDER BY id")]


class Listener:
    """A TCP listener on 127.0.0.1 that accepts, counts and never answers."""

    def __init__(self, port=0):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping:
            try:
                c, _addr = self.sock.accept()
            except OSError:
                continue
            self.conns.append(c)

    def close(self):
        self.stopping = True
        self.thread.join(5)
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.fixture
def listener():
    """On a port git_allow_hosts does not list."""
    lst = Listener()
    assert lst.port not in git_allowed_ports()
    yield lst
    lst.close()


@pytest.fixture
def allowed_listener():
    """On a port git_allow_hosts lists."""
    lst = Listener(allowed_port())
    yield lst
    lst.close()


def api_answers(rounds=4, parallel=16):
    """Concurrent requests of a fresh user, so that many workers (each with its
    own database connection) answer: every one a 200, health included."""
    c = new_client()
    with ThreadPoolExecutor(parallel) as pool:
        for _ in range(rounds):
            codes = list(pool.map(lambda _i: c.get("/agents").status_code, range(parallel)))
            assert codes == [200] * parallel, codes
    r = c.get("/health")
    assert r.status_code == 200, r.text


# ---- MariaDB restarted mid-deploy ------------------------------------------------------

def slow_npm_agent(client, seconds):
    """A local agent whose npm install runs a preinstall script that sleeps."""
    pkg = ('{"name": "slow", "version": "1.0.0", "private": true,'
           ' "scripts": {"preinstall": "sleep %d"}}' % seconds)
    return local_agent(client, tgz(project(extra=[("package.json", "f", pkg)])))


@pytest.mark.parametrize("down_seconds,npm_seconds", [(0, 8), (8, 3), (26, 2)],
                         ids=["restart-during-npm", "down-across-the-switch",
                              "down-past-the-switch-retries"])
def test_mariadb_restarted_mid_deploy(client, down_seconds, npm_seconds):
    """restart-during-npm: MariaDB stops and comes back while npm still runs, so
    the runner's next statements find a dead connection. down-across-the-switch:
    MariaDB stays down past the end of npm, so the switch to `active` meets a
    database that is away and is retried. down-past-the-switch-retries: down
    longer than the runner retries the switch (about 20 s), so the attempt fails
    and must be queued again, once the database is back, and redone."""
    watcher = run_watcher()
    if watcher:
        pytest.skip(f"scripts/run (pid {watcher}) watches this stack and would stop it "
                    "when MariaDB restarts")
    master, _workers = api_pids()
    agent = slow_npm_agent(client, npm_seconds)
    deploy(client, agent["slug"])
    wait_in_log(f"({agent['id']}) job=", "npm install", timeout=60)
    t0 = time.time()
    stop_mariadb()
    if down_seconds:
        # Meanwhile the API answers at once, and says the database is away.
        t1 = time.time()
        r = client.get("/health", timeout=10)
        assert r.status_code == 503, r.text
        assert time.time() - t1 < 5
        time.sleep(max(0.0, down_seconds - (time.time() - t0)))
    start_mariadb()
    if down_seconds == 0:
        # The point of this case: the database came back before npm ended.
        assert time.time() - t0 < npm_seconds, "MariaDB restart outlasted the npm step"
    rec, waited = wait_settled(client, agent["slug"], timeout=90)
    if rec["status"] == "error":  # allowed, with a message that says what happened
        assert rec["status_message"] and "database" in rec["status_message"].lower(), rec
    else:
        assert_active(rec)
        assert job_states(agent["id"]) == ["done"]
    assert_nothing_left_behind()
    # The API master did not die, and its workers answer (they reconnected).
    assert api_pids()[0] == master
    api_answers()
    # So does the runner: a second deploy goes through with the same connections.
    again = local_agent(client, tgz(project()))
    deploy(client, again["slug"])
    assert_active(wait_settled(client, again["slug"], timeout=60)[0])


# ---- the lease of a job that ends -------------------------------------------------

def runner_log_from(offset):
    with open(os.path.join(VAR, "log", "runner.log"), errors="replace") as f:
        f.seek(offset)
        return f.read()


def test_a_job_just_finished_is_not_a_lost_lease(client):
    """The runner's heartbeat renews the lease of the job its job thread holds.
    The job thread marks the job done (or failed, or queued for a retry) a
    moment before it lets go of it, and a renewal in that moment matched no
    running job: it warned "lease lost to another runner" after a good deploy
    (and told the job thread so). The test holds that moment open: while npm
    runs it marks the job done as the job thread would, for a few renewals
    (deploy_lease_seconds 3: one a second), then puts it back. No warning, and
    the deploy ends active. Marked as another runner's, the warning comes (and
    the attempt is given up and redone)."""
    log = os.path.join(VAR, "log", "runner.log")
    with runner_with(deploy_lease_seconds="3"):
        agent = slow_npm_agent(client, 6)
        deploy(client, agent["slug"])
        wait_in_log(f"({agent['id']}) job=", "npm install", timeout=60)
        job = db_query(f"SELECT id FROM deploy_jobs WHERE agent_id = '{agent['id']}' "
                       "AND state = 'running'")[0][0]
        start = os.path.getsize(log)
        db_query(f"UPDATE deploy_jobs SET state = 'done' WHERE id = {job}")
        time.sleep(2.5)  # two renewals
        db_query(f"UPDATE deploy_jobs SET state = 'running' WHERE id = {job}")
        assert "lease lost" not in runner_log_from(start)
        assert_active(wait_settled(client, agent["slug"], timeout=90)[0])
        assert "lease lost" not in runner_log_from(start)

        lost = slow_npm_agent(client, 4)
        deploy(client, lost["slug"])
        wait_in_log(f"({lost['id']}) job=", "npm install", timeout=60)
        job, ours = db_query(f"SELECT id, runner_id FROM deploy_jobs WHERE agent_id = "
                             f"'{lost['id']}' AND state = 'running'")[0]
        db_query(f"UPDATE deploy_jobs SET runner_id = 'another-runner', "
                 f"lease_until = NOW(3) + INTERVAL 1 HOUR WHERE id = {job}")
        try:
            wait_in_log(f"job={job}: lease lost to another runner", timeout=30)
        finally:  # ours again: the job thread gives this attempt up, and the job is redone
            db_query(f"UPDATE deploy_jobs SET runner_id = '{ours}', "
                     f"lease_until = NOW(3) + INTERVAL 3 SECOND WHERE id = {job}")
            wait_settled(client, lost["slug"], timeout=120)


# ---- caps: size and time

@pytest.fixture(scope="module")
def git_daemon(tmp_path_factory):
    """git://127.0.0.1:<port>/<name> for repositories made with .repo(files),
    file contents as str or bytes."""
    root = str(tmp_path_factory.mktemp("git"))

    def git(cwd, *args):
        subprocess.run(["git", "-c", "user.email=t@test.example", "-c", "user.name=test",
                        "-c", "init.defaultBranch=main", *args],
                       cwd=cwd, check=True, capture_output=True)

    class Daemon:
        def repo(self, files):
            name = "r" + uuid.uuid4().hex[:10]
            path = os.path.join(root, name)
            os.makedirs(path)
            git(path, "init", "-q")
            for rel, content in files.items():
                with open(os.path.join(path, rel), "wb") as f:
                    f.write(content.encode() if isinstance(content, str) else content)
            if files:
                git(path, "add", "-A")
                git(path, "commit", "-qm", "initial")
            return f"git://127.0.0.1:{port}/{name}"

    with serve_git(root) as port:
        yield Daemon()


def test_repository_over_size_cap(client, git_daemon):
    # Random bytes: git cannot compress them below the cap.
    url = git_daemon.repo({"agent.json": MANIFEST, "index.js": ECHO_JS,
                           "blob.bin": os.urandom(3 << 20)})
    with runner_with(git_max_bytes=1 << 20):
        agent = create_agent(client, source_type="git", git_repo_url=url)
        deploy(client, agent["slug"])
        rec, waited = wait_settled(client, agent["slug"], timeout=60)
    assert rec["status"] == "error"
    assert rec["status_message"] == "Repository is too large: more than 1 MB"
    assert job_states(agent["id"]) == ["failed"], "a size cap is final: no retry"
    assert_nothing_left_behind()


def test_repository_that_checks_out_over_size_cap(client, git_daemon):
    """A git bomb: 8 MB of zeros is a pack of a few KB, under the cap while it
    travels; what the clone writes to disk must be capped too."""
    url = git_daemon.repo({"agent.json": MANIFEST, "index.js": ECHO_JS,
                           "zeros.bin": bytes(8 << 20)})
    with runner_with(git_max_bytes=1 << 20):
        agent = create_agent(client, source_type="git", git_repo_url=url)
        deploy(client, agent["slug"])
        rec, waited = wait_settled(client, agent["slug"], timeout=60)
    assert rec["status"] == "error", rec
    assert rec["status_message"] == "Repository is too large: more than 1 MB"
    assert job_states(agent["id"]) == ["failed"]
    assert_nothing_left_behind()


def test_empty_repository(client, git_daemon):
    """Nothing to check out (and nothing to measure): a clear error, no crash."""
    agent = create_agent(client, source_type="git", git_repo_url=git_daemon.repo({}))
    deploy(client, agent["slug"])
    rec, _waited = wait_settled(client, agent["slug"], timeout=60)
    assert rec["status"] == "error", rec
    assert rec["status_message"] == "No agent.json or castari.json in the project root"
    assert_nothing_left_behind()


def test_clone_from_a_server_that_never_answers(client, allowed_listener):
    listener = allowed_listener
    url = f"git://127.0.0.1:{listener.port}/stalls"
    with runner_with(git_timeout_seconds=3):
        agent = create_agent(client, source_type="git", git_repo_url=url)
        deploy(client, agent["slug"])
        rec, waited = wait_settled(client, agent["slug"], timeout=60)
    assert rec["status"] == "error"
    assert rec["status_message"] == "Repository clone timed out after 3 s"
    assert waited < 20, f"took {waited:.0f} s for a 3 s limit"
    assert len(listener.conns) == 1, "exactly one attempt: a time limit is final"
    assert job_states(agent["id"]) == ["failed"]
    assert_nothing_left_behind()


# ---- forbidden URLs ---------------------------------------------------------------------

def test_private_hosts_and_local_urls_refused(client, listener):
    urls = [f"git://127.0.0.1:{listener.port}/repo", f"git://localhost:{listener.port}/repo",
            f"https://127.0.0.1:{listener.port}/repo.git", "git://169.254.169.254/repo",
            "https://169.254.169.254/latest/meta-data", "file:///etc"]
    with runner_with(git_timeout_seconds=3):
        agents = []
        for url in urls:
            r = client.post("/agents", json={"name": "refused " + uuid.uuid4().hex[:6],
                                             "source_type": "git", "git_repo_url": url})
            if r.status_code == 422 and url.startswith("file:"):
                continue  # refused at the door is fine too
            assert r.status_code == 201, r.text
            agents.append((url, r.json()))
            deploy(client, r.json()["slug"])
        t0 = time.time()
        for url, agent in agents:
            rec, _waited = wait_settled(client, agent["slug"], timeout=60)
            assert rec["status"] == "error", (url, rec)
            assert rec["status_message"].startswith("Repository URL not allowed: "), (
                url, rec["status_message"])
            assert "attempts" not in rec["status_message"], "a refusal is final: no retry"
        assert time.time() - t0 < 30
    assert listener.conns == [], "a refused URL was connected to"
    msgs = {url: client.get(f"/agents/{a['slug']}").json()["status_message"] for url, a in agents}
    assert msgs[f"git://127.0.0.1:{listener.port}/repo"] == (
        'Repository URL not allowed: host "127.0.0.1" is a loopback, private or reserved '
        "address (an operator can allow it with git_allow_hosts)")
    assert "169.254.169.254" in msgs["git://169.254.169.254/repo"]
    assert_nothing_left_behind()


# ---- the runner stopped while a deploy is queued ----------------------------------------

def test_deploy_queued_while_runner_is_stopped(client):
    agent = local_agent(client, tgz(project()))
    stop_runner()
    try:
        deploy(client, agent["slug"])  # 202 deploying: the queue is in the database
        time.sleep(3)
        rec = client.get(f"/agents/{agent['slug']}").json()
        assert rec["status"] == "deploying", rec
        assert job_states(agent["id"]) == ["queued"]
    finally:
        start_runner()
    rec, waited = wait_settled(client, agent["slug"], timeout=60)
    assert_active(rec)
    assert waited < 30
    assert job_states(agent["id"]) == ["done"]
    assert_nothing_left_behind()
