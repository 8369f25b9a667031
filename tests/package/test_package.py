"""The Debian package (issue 20), built and installed on this machine.

dpkg-buildpackage builds agenthost and agenthost-client from a copy of the
checkout; lintian finds no error; dpkg -i installs them (the agenthost user,
the modes of its state, the configuration and the master key, units that
`systemd-analyze verify` accepts). The installed programs then run from their
installed paths with the installed configuration layout: migrations against a
throw-away MariaDB (on a private socket under var/), the API as the agenthost
user, behind an nginx made of Debian's stock nginx.conf plus the package's two
includes in an operator's own site, answering a user's key, storing and
serving files; the runner as root building and running an agent that the
installed client deploys and invokes. Removing keeps the configuration and the state, a reinstall
overwrites neither, and dpkg --purge leaves only the agenthost user. Whatever
fails, the fixture stops what it started (by PID) and purges the packages.

Slow (the package build dominates). Run as root; scripts/test runs it as a
stage of its own. AGENTHOST_PKG_PORT: nginx's port (default 18290).
"""
import hashlib
import os
import pwd
import grp
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time

import pytest
import requests

import debs   # tests/package/debs.py: the build, shared with scripts/test's background job

ROOT = os.environ.get("AGENTHOST_ROOT") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
WORK = os.path.join(ROOT, "var", "package-test")
MARKER = os.path.join(WORK, "installed")   # the packages on this machine are this test's
PORT = int(os.environ.get("AGENTHOST_PKG_PORT", "18290"))
URL = f"http://127.0.0.1:{PORT}"
SHARE = "/usr/share/agenthost"
CONF = "/etc/agenthost/agenthost.conf"
STATE = "/var/lib/agenthost"
UNITS = ["agenthost-api.service", "agenthost-runner.service", "agenthost-migrate.service",
         "agenthost-webhooks.service"]
# What building, checking and installing need beyond scripts/lib.sh's packages
# (systemd for systemd-analyze, adduser for the postinst).
NEEDS = ["debhelper", "lintian", "fakeroot", "dpkg-dev", "python3-yaml", "systemd", "adduser"]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="installs packages: run as root")


clean_env = debs.clean_env     # the installed programs find everything through the installed layout


def run(argv, check=True, timeout=600, **kw):
    p = subprocess.run(argv, env=kw.pop("env", clean_env()), capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL, **kw)
    if check:
        assert p.returncode == 0, f"{argv}: {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


def dpkg(*args):
    """dpkg, waiting while apt or dpkg elsewhere holds the lock."""
    for _ in range(60):
        p = run(["dpkg", *args], check=False)
        if p.returncode == 0 or "lock" not in p.stderr:
            break
        time.sleep(2)
    assert p.returncode == 0, f"dpkg {args}: {p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    return p


def installed(pkg):
    p = run(["dpkg-query", "-W", "-f=${Status}", pkg], check=False)
    return p.returncode == 0 and "installed" in p.stdout and "not-installed" not in p.stdout


def as_agenthost(argv):
    return ["setpriv", "--reuid=agenthost", "--regid=agenthost", "--init-groups", *argv]


def stop(pid, seconds=30):
    """Stops one process we started, by its PID."""
    if not pid:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(seconds * 10):
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:   # not our child (nginx's daemonised master)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def purge():
    for pkg in ("agenthost", "agenthost-client"):
        if installed(pkg) or run(["dpkg-query", "-W", pkg], check=False).returncode == 0:
            dpkg("--purge", pkg)


def mode(path):
    st = os.stat(path)
    return (stat.S_IMODE(st.st_mode), pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name)


class Host:
    """What the test started, for the next step and for the clean-up."""
    def __init__(self):
        self.pids = {}
        self.debs = []
        self.src = None
        self.key = None
        self.api = None
        self.shared = None


def ancestors(path):
    out = [path]
    while path != "/":
        path = os.path.dirname(path)
        out.append(path)
    return out


def stop_nginx():
    pidfile = os.path.join(WORK, "nginx", "nginx.pid")
    pid = open(pidfile).read().strip() if os.path.exists(pidfile) else ""
    if pid.isdigit():
        stop(int(pid))


def purge_ours():
    if os.path.exists(MARKER):
        purge()
        os.unlink(MARKER)


@pytest.fixture(scope="module")
def host():
    if os.path.exists(MARKER):       # a run that was killed: its packages are ours
        purge()
        os.unlink(MARKER)
    for pkg in ("agenthost", "agenthost-client"):
        if installed(pkg):
            pytest.fail(f"{pkg} is installed on this machine and not by this test; "
                        "it would be replaced and purged")
    for path in ("/etc/agenthost", STATE):
        if os.path.exists(path):
            pytest.fail(f"{path} exists and is not this test's; it would be purged")
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(os.path.join(WORK, "shared"))
    h = Host()
    # MariaDB's socket and the operator's pages, which the agenthost user and
    # nginx's workers must reach: under var/ when every directory above lets
    # others through, else (a checkout in root's home) in a directory of the
    # test's own under /run.
    for d in (os.path.join(ROOT, "var"), WORK, os.path.join(WORK, "shared")):
        os.chmod(d, 0o755)
    h.shared = os.path.join(WORK, "shared")
    if not all(os.stat(d).st_mode & stat.S_IXOTH for d in ancestors(h.shared)):
        h.shared = tempfile.mkdtemp(prefix="agenthost-pkgtest-", dir="/run")
        os.chmod(h.shared, 0o755)
    try:
        yield h
    finally:
        # Each step whatever the one before did: nothing may be left running
        # or installed.
        steps = [stop_nginx, lambda: stop(h.pids.pop("runner", None), 90),
                 lambda: stop(h.pids.pop("api", None), 60),
                 lambda: stop(h.pids.pop("mariadb", None), 60), purge_ours,
                 lambda: shutil.rmtree("/run/agenthost", ignore_errors=True),
                 lambda: shutil.rmtree("/run/agenthost-runner", ignore_errors=True),
                 lambda: h.shared.startswith("/run/") and shutil.rmtree(h.shared, ignore_errors=True),
                 lambda: keep_debs(h.debs),
                 lambda: [shutil.rmtree(os.path.join(WORK, d), ignore_errors=True) for d in ("src", "mysql")]]
        errors = []
        for step in steps:
            try:
                step()
            except Exception as e:   # noqa: BLE001 -- reported below, after every step ran
                errors.append(repr(e))
        assert not errors, errors


def keep_debs(host_debs):
    """The built .debs for scripts/test's next stage (tests/install/run)."""
    kept = os.path.join(WORK, "debs")
    os.makedirs(kept, exist_ok=True)
    for f in host_debs:
        if os.path.isfile(f):
            shutil.copy2(f, os.path.join(kept, os.path.basename(f)))


def test_build(host):
    """dpkg-buildpackage -us -uc -b on a copy of the checkout (what a clean clone holds),
    or, with AGENTHOST_PKG_BUILT, the finished build that tests/package/debs.py made
    there (scripts/test builds in the background while the integration tests run)."""
    missing = [p for p in NEEDS if not installed(p)]
    if missing:
        run(["apt-get", "update", "-qq"], check=False)
        run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing])
    out = os.environ.get("AGENTHOST_PKG_BUILT", "")
    if not (out and debs.built(out)):
        out = os.path.join(WORK, "src")
        rc, log = debs.build(out)
        assert rc == 0, open(log).read()[-4000:]
    host.src = os.path.join(out, f"agenthost-{debs.version()}")
    host.debs, host.changes = debs.outputs(out)
    for deb in host.debs:
        assert os.path.isfile(deb), f"{deb} was not built"
    # An upgrade (not exercised here: systemd is not PID 1) try-restarts the
    # three units in one transaction, so migrations run first (Before=) and
    # units not started stay stopped; a remove stops them.
    ctl = os.path.join(WORK, "control")
    run(["dpkg-deb", "-e", host.debs[0], ctl])
    m = re.search(r"deb-systemd-invoke try-restart ([^>]+)>", open(os.path.join(ctl, "postinst")).read())
    assert m and sorted(u.strip("'") for u in m[1].split()) == sorted(UNITS), m
    prerm = open(os.path.join(ctl, "prerm")).read()
    assert re.search(r'"\$1" = remove .*\n\s*deb-systemd-invoke stop agenthost-api.service', prerm), prerm
    client = run(["dpkg-deb", "-c", host.debs[1]]).stdout
    assert "./usr/bin/agenthost\n" in client and "agenthost.1.gz" in client
    assert "usr/sbin/agenthost-api" not in client


def test_lintian(host):
    p = run(["lintian", "--pedantic", "-I", "--no-tag-display-limit", host.changes], check=False)
    lines = [line for line in p.stdout.splitlines() if re.match(r"[EW]: ", line)]
    assert not [line for line in lines if line.startswith("E: ")], p.stdout
    # Warnings are fixed or overridden with a reason (debian/*.lintian-overrides).
    assert not lines, p.stdout


def test_install(host):
    open(MARKER, "w").close()
    dpkg("-i", *host.debs)
    for prog in ("/usr/sbin/agenthost-api", "/usr/sbin/agenthost-runner", "/usr/sbin/agenthost-admin",
                 "/usr/sbin/agenthost-webhooks", "/usr/libexec/agenthost/agenthost-keeper", "/usr/bin/agenthost"):
        assert os.access(prog, os.X_OK), prog
        # The build's tree is gone once installed: nothing may point into it.
        assert host.src.encode() not in open(prog, "rb").read(), f"{prog} names the build tree"
    for f in ("schema/001_core.sql", "openapi.json", "tokenizer/cl100k_base.tiktoken",
              "nginx/agenthost-http.conf", "nginx/agenthost-locations.conf", "nginx/upload-body.conf"):
        assert os.path.isfile(os.path.join(SHARE, f)), f
    assert os.path.isfile("/usr/share/man/man8/agenthost-api.8.gz")
    assert os.path.isfile("/usr/share/bash-completion/completions/agenthost")

    user = pwd.getpwnam("agenthost")
    assert user.pw_shell == "/usr/sbin/nologin" and user.pw_uid < 1000
    assert "agenthost" in grp.getgrnam("www-data").gr_mem
    assert mode(STATE) == (0o750, "agenthost", "www-data")
    assert mode(os.path.join(STATE, "data")) == (0o700, "agenthost", "agenthost")
    assert mode(os.path.join(STATE, "files")) == (0o750, "agenthost", "www-data")
    key = os.path.join(STATE, "master.key")
    assert mode(key) == (0o600, "agenthost", "agenthost") and os.path.getsize(key) == 32
    # It will hold the database password.
    assert mode(CONF) == (0o640, "root", "agenthost")

    units = [os.path.join("/lib/systemd/system", u) for u in UNITS]
    p = run(["systemd-analyze", "verify", *units], check=False)
    assert p.returncode == 0 and "agenthost" not in p.stdout + p.stderr, p.stdout + p.stderr
    p = run(["systemd-analyze", "security", "--offline=yes", units[0]], check=False)
    m = re.search(r"Overall exposure level for agenthost-api.service: ([0-9.]+)", p.stdout)
    assert m and float(m[1]) <= 2.5, p.stdout[-2000:]


def test_migrate(host):
    """The installed agenthost-admin, as the agenthost user, against a throw-away MariaDB."""
    mysql, sock = os.path.join(WORK, "mysql"), os.path.join(host.shared, "mysql.sock")
    run(["mariadb-install-db", "--no-defaults", f"--datadir={mysql}", f"--tmpdir={WORK}", "--user=root",
         "--auth-root-authentication-method=socket"])
    proc = subprocess.Popen(["mariadbd", "--no-defaults", f"--datadir={mysql}", f"--socket={sock}",
                             f"--tmpdir={WORK}", f"--pid-file={WORK}/mysql.pid", "--skip-networking",
                             "--user=root", f"--log-error={WORK}/mysql.log", "--innodb-buffer-pool-size=32M",
                             "--performance-schema=OFF", "--character-set-server=utf8mb4",
                             "--collation-server=utf8mb4_bin"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env=clean_env())
    host.pids["mariadb"] = proc.pid

    def sql(q):
        return run(["mariadb", "--no-defaults", f"--socket={sock}", "-uroot", "-N", "-e", q], check=False)

    for _ in range(300):
        if sql("SELECT 1").returncode == 0:
            break
        assert proc.poll() is None, open(f"{WORK}/mysql.log").read()[-2000:]
        time.sleep(0.1)
    pw = hashlib.sha256(os.urandom(16)).hexdigest()[:24]
    assert sql(f"CREATE DATABASE agenthost CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;"
               f"CREATE USER 'agenthost'@'localhost' IDENTIFIED BY '{pw}';"
               f"GRANT ALL ON agenthost.* TO 'agenthost'@'localhost';").returncode == 0
    # The operator's edit of the installed configuration (docs/install.md).
    with open(CONF, "a") as f:
        f.write(f"\n# package test\ndb_socket = {sock}\ndb_password = {pw}\n")

    migrate = as_agenthost(["/usr/sbin/agenthost-admin", "migrate"])
    run(migrate)
    n = len([f for f in os.listdir(os.path.join(SHARE, "schema")) if f.endswith(".sql")])
    count = "SELECT COUNT(*) FROM agenthost.schema_migrations"
    assert sql(count).stdout.strip() == str(n)
    run(migrate)      # again: nothing to do
    assert sql(count).stdout.strip() == str(n)
    out = run(["/usr/sbin/agenthost-admin", "user", "create", "pkg@example.org", "--plan", "pro"]).stdout
    host.key = out.strip().splitlines()[-1]
    assert host.key.startswith("ahk_")


def stock_nginx_conf(shared):
    """Debian's nginx.conf with the operator's sites replaced by one site that
    serves its own pages and includes agenthost's locations; the PID and logs
    moved under var/ so it runs beside the system's nginx."""
    text = open("/etc/nginx/nginx.conf").read()
    d, www = os.path.join(WORK, "nginx"), os.path.join(shared, "www")
    os.makedirs(d)
    os.makedirs(www)
    with open(os.path.join(www, "index.html"), "w") as f:
        f.write("the operator's own site\n")
    os.chmod(www, 0o755)
    with open(os.path.join(d, "site.conf"), "w") as f:
        f.write(f"""server {{
    listen 127.0.0.1:{PORT};
    server_name _;
    root {www};
    index index.html;
    location / {{ try_files $uri $uri/ =404; }}
    location ~ \\.php$ {{ return 418; }}
    include {SHARE}/nginx/agenthost-locations.conf;
}}
""")
    assert re.search(r"include /etc/nginx/sites-enabled/\*;", text), "not Debian's nginx.conf"
    text = re.sub(r"(?m)^\s*pid\s+[^;]+;", f"pid {d}/nginx.pid;", text)
    text = re.sub(r"(?m)^(\s*)access_log\s+[^;]+;", rf"\1access_log {d}/access.log;", text)
    text = re.sub(r"(?m)^(\s*)error_log\s+[^;]+;", rf"\1error_log {d}/error.log;", text)
    if not re.search(r"(?m)^\s*error_log", text):
        text = f"error_log {d}/error.log;\n" + text
    text = text.replace("include /etc/nginx/sites-enabled/*;",
                        f"include {SHARE}/nginx/agenthost-http.conf;\n\tinclude {d}/site.conf;")
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(text)
    return conf


def test_api_behind_stock_nginx(host):
    os.makedirs("/run/agenthost", exist_ok=True)   # systemd's RuntimeDirectory=
    a = pwd.getpwnam("agenthost")
    os.chown("/run/agenthost", a.pw_uid, a.pw_gid)
    os.chmod("/run/agenthost", 0o755)
    log = open(os.path.join(WORK, "api.log"), "w")
    api = subprocess.Popen(as_agenthost(["/usr/sbin/agenthost-api"]), stdin=subprocess.DEVNULL,
                           stdout=log, stderr=log, start_new_session=True, env=clean_env())
    host.pids["api"] = api.pid
    for _ in range(300):
        if os.path.exists("/run/agenthost/api.sock") and os.path.exists("/run/agenthost/api-invoke.sock"):
            break
        assert api.poll() is None, open(os.path.join(WORK, "api.log")).read()[-3000:]
        time.sleep(0.1)
    assert mode("/run/agenthost/api.sock") == (0o660, "agenthost", "www-data")

    conf = stock_nginx_conf(host.shared)
    run(["nginx", "-t", "-q", "-c", conf])
    run(["nginx", "-c", conf])
    for _ in range(100):
        try:
            requests.get(URL + "/", timeout=2)
            break
        except requests.ConnectionError:
            time.sleep(0.1)

    auth = {"Authorization": f"Bearer {host.key}"}
    me = requests.get(URL + "/api/v1/users/me", headers=auth, timeout=10)
    assert me.status_code == 200, me.text
    assert me.json()["email"] == "pkg@example.org"
    noauth = requests.get(URL + "/api/v1/users/me", timeout=10)
    assert noauth.status_code == 401 and "detail" in noauth.json()
    # The include leaves the operator's site alone: its pages, its own 404s...
    site = requests.get(URL + "/", timeout=10)
    assert site.status_code == 200 and "operator's own site" in site.text
    other = requests.get(URL + "/no-such-page.html", timeout=10)
    assert other.status_code == 404 and "application/json" not in other.headers.get("Content-Type", "")
    # ...and its regex locations never take the API's requests (^~).
    php = requests.get(URL + "/api/v1/agents/x.php", headers=auth, timeout=10)
    assert php.status_code == 404 and "detail" in php.json()
    assert requests.get(URL + "/index.php", timeout=10).status_code == 418

    # Managed files, stored by the API as agenthost and served by nginx as www-data.
    data = os.urandom(300_000)
    up = requests.post(URL + "/api/v1/files", headers=auth, timeout=30,
                       files={"file": ("a.bin", data, "application/octet-stream")})
    assert up.status_code == 201, up.text
    down = requests.get(URL + f"/api/v1/files/{up.json()['file_id']}/download", headers=auth, timeout=30)
    assert down.status_code == 200 and down.content == data
    # A presigned upload, streamed to the worker by the installed upload-body.conf.
    big = os.urandom(3 * 1024 * 1024 + 7)
    p = requests.post(URL + "/api/v1/files/presigned-upload", headers=auth, timeout=30,
                      json={"filename": "big.bin", "size_bytes": len(big),
                            "content_type": "application/octet-stream"})
    assert p.status_code == 201, p.text
    put = requests.put(p.json()["upload_url"], data=big, timeout=60)
    assert put.status_code == 200, put.text
    fid = p.json()["file_id"]
    c = requests.post(URL + f"/api/v1/files/{fid}/confirm", headers=auth, timeout=30,
                      json={"sha256_hash": hashlib.sha256(big).hexdigest()})
    assert c.status_code == 200, c.text
    assert requests.get(URL + f"/api/v1/files/{fid}/download", headers=auth, timeout=30).content == big

    host.api = api


def test_runner_deploys_and_invokes_for_the_installed_client(host):
    """The installed runner (root, its socket for the agenthost group, the
    keeper from libexec) builds and runs an agent the installed client deploys
    through nginx and the API (as agenthost, writing the code the runner reads)."""
    os.makedirs("/run/agenthost-runner", exist_ok=True)   # systemd's RuntimeDirectory=
    log = open(os.path.join(WORK, "runner.log"), "w")
    # Small sandboxes and no pool: a good neighbour on a machine that runs other stacks.
    env = clean_env(AGENTHOST_SANDBOX_POOL_SIZE="0", AGENTHOST_SANDBOX_MEMORY_MB="256",
                    AGENTHOST_SANDBOX_DISK_MB="256", AGENTHOST_BUILD_DISK_MB="256")
    runner = subprocess.Popen(["/usr/sbin/agenthost-runner"], stdin=subprocess.DEVNULL, stdout=log,
                              stderr=log, start_new_session=True, env=env)
    host.pids["runner"] = runner.pid
    sock = "/run/agenthost-runner/runner.sock"
    for _ in range(300):   # born root's, then given the configured group
        if os.path.exists(sock) and mode(sock) == (0o660, "root", "agenthost"):
            break
        assert runner.poll() is None, open(os.path.join(WORK, "runner.log")).read()[-3000:]
        time.sleep(0.1)
    assert mode(sock) == (0o660, "root", "agenthost")

    home = os.path.join(WORK, "home")
    os.makedirs(home)
    cli = clean_env(HOME=home, AGENTHOST_URL=URL + "/api/v1", AGENTHOST_API_KEY=host.key)
    run(["/usr/bin/agenthost", "init", "pkg-agent"], cwd=home, env=cli)
    run(["/usr/bin/agenthost", "deploy", "pkg-agent", "--create", "--wait", "240"], cwd=home, env=cli,
        timeout=300)
    out = run(["/usr/bin/agenthost", "invoke", "pkg-agent", "hello from the package"], cwd=home,
              env=cli, timeout=120).stdout
    assert "You said: hello from the package" in out, out

    runner.send_signal(signal.SIGTERM)   # ends its sandboxes, then exits
    assert runner.wait(timeout=90) == 0, open(os.path.join(WORK, "runner.log")).read()[-3000:]
    host.pids.pop("runner")
    stop_nginx()
    # SIGTERM, as systemd stops it: the master drains its workers and exits.
    host.api.send_signal(signal.SIGTERM)
    assert host.api.wait(timeout=60) == 0, open(os.path.join(WORK, "api.log")).read()[-3000:]
    host.pids.pop("api")


def test_remove_keeps_state_and_reinstall_keeps_configuration(host):
    key = open(os.path.join(STATE, "master.key"), "rb").read()
    dpkg("--remove", "agenthost")
    assert not os.path.exists("/usr/sbin/agenthost-api")
    assert open(os.path.join(STATE, "master.key"), "rb").read() == key
    assert "# package test" in open(CONF).read()
    dpkg("-i", host.debs[0])
    assert "# package test" in open(CONF).read(), "the configuration was overwritten"
    assert open(os.path.join(STATE, "master.key"), "rb").read() == key, "the master key was replaced"
    assert mode(CONF) == (0o640, "root", "agenthost")


def test_purge(host):
    stop(host.pids.pop("mariadb", None), 60)
    dpkg("--purge", "agenthost", "agenthost-client")
    os.unlink(MARKER)
    for path in ("/etc/agenthost", STATE, SHARE, "/usr/sbin/agenthost-api", "/usr/sbin/agenthost-runner",
                 "/usr/sbin/agenthost-admin", "/usr/libexec/agenthost", "/usr/bin/agenthost",
                 "/usr/share/doc/agenthost", "/usr/share/man/man8/agenthost-api.8.gz",
                 *[os.path.join("/lib/systemd/system", u) for u in UNITS],
                 *[os.path.join("/etc/systemd/system/multi-user.target.wants", u) for u in UNITS]):
        assert not os.path.lexists(path), f"{path} is left after purge"
    assert not installed("agenthost") and not installed("agenthost-client")
    # What purge keeps: the system user (Debian's practice; docs/install.md).
    assert pwd.getpwnam("agenthost")
