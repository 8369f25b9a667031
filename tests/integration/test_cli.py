"""The agenthost command-line client (lib/cli), run as built against the real
stack: login and its config file, init -> deploy -> invoke -> sessions -> usage,
secrets that never pass through argv or output, --json parsed, errors with the
API's detail and the documented exit statuses (0 ok, 1 API, 2 usage, 3 network),
the 429 wait, and the deploy's status line on a terminal and not in a pipe."""
import json
import os
import pty
import re
import select
import shlex
import signal
import stat
import subprocess
import time
import uuid

import pytest

from agent_code import TOOL_JS, needs_runner
from conftest import BASE_URL, BUILD, create_user, db_query
from test_deploy import runner_pid

CLI = os.path.join(BUILD, "lib", "cli", "agenthost")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

LIST_JS = r"""
const fs = require('fs'), path = require('path');
const walk = d => fs.readdirSync(d).flatMap(n => {
  const p = path.join(d, n);
  return fs.lstatSync(p).isDirectory() ? [p + '/', ...walk(p)] : [p];
});
process.stdin.on('data', () => {}).on('end', () => process.stdout.write(walk('.').sort().join('\n')));
"""


@pytest.fixture
def home(tmp_path):
    """A config home of its own, so no test reads another's login."""
    d = tmp_path / "xdg"
    d.mkdir()
    return d


def cli_env(home, key=None, **extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("AGENTHOST_API_KEY", "NO_COLOR", "AGENTHOST_RATE_WAIT")}
    env.update(XDG_CONFIG_HOME=str(home), AGENTHOST_URL=BASE_URL, HOME=str(home))
    if key:
        env["AGENTHOST_API_KEY"] = key
    env.update(extra)
    return env


def run(env, *args, stdin=None, cwd=None, timeout=300):
    return subprocess.run([CLI, *args], env=env, input=stdin, capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


def on_pty(env, args, answers=()):
    """Runs the CLI on a pseudo-terminal; each (prompt, text) of answers is
    typed once prompt has appeared. Returns (exit status, all it printed)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(CLI, [CLI, *args], env)
    out, pending = b"", list(answers)
    while True:
        if pending and pending[0][0].encode() in out:
            os.write(fd, pending.pop(0)[1].encode() + b"\n")
        ready, _, _ = select.select([fd], [], [], 60)
        if not ready:                      # stuck (waiting for input that never comes)
            os.kill(pid, 9)
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode()


@pytest.fixture
def user(home):
    """(email, key, env) of a fresh user whose key is in the environment."""
    email, key = create_user()
    return email, key, cli_env(home, key)


def project(tmp_path, js, **manifest):
    """A project directory whose agent.json names a fresh slug."""
    d = tmp_path / "proj"
    d.mkdir()
    slug = "cli-" + uuid.uuid4().hex[:10]
    m = {"name": slug, "slug": slug, "version": "1.0.0", "entrypoint": "index.js", "runtime": "node"}
    m.update(manifest)
    (d / "agent.json").write_text(json.dumps(m))
    (d / "index.js").write_text(js)
    return d


def slug_of(d):
    return json.loads((d / "agent.json").read_text())["slug"]


def test_login_stores_the_key_0600_and_logout_forgets_it(home):
    email, key = create_user()
    env = cli_env(home)
    r = run(env, "login", stdin=key + "\n")       # the key on stdin, not in argv
    assert r.returncode == 0, r.stderr
    assert email in r.stdout
    cfg = home / "agenthost" / "config"
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600
    assert key in cfg.read_text() and BASE_URL in cfg.read_text()
    env.pop("AGENTHOST_URL")                        # URL and key now from the file
    r = run(env, "whoami", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["email"] == email
    r = run(env, "logout")
    assert r.returncode == 0 and not cfg.exists()
    r = run(env, "whoami")
    assert r.returncode == 2 and "not logged in" in r.stderr


def test_login_on_a_terminal_asks_and_does_not_echo_the_key(home):
    email, key = create_user()
    env = cli_env(home)
    env.pop("AGENTHOST_URL")
    rc, out = on_pty(env, ["login"], [("API URL [", BASE_URL + "/"), ("API key: ", key)])
    assert rc == 0, out
    assert key not in out and "as " + email in out
    assert f"url = {BASE_URL}\n" in (home / "agenthost" / "config").read_text()


def test_login_with_a_wrong_key_fails_and_stores_nothing(home):
    r = run(cli_env(home), "login", "--key", "ahk_AAAAAAAA_BBBBBBBBBB")
    assert r.returncode == 1, r.stderr
    assert "HTTP 401" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (home / "agenthost" / "config").exists()


def test_environment_overrides_the_config_file(home):
    email, key = create_user()
    assert run(cli_env(home), "login", stdin=key).returncode == 0
    _, other = create_user()
    r = run(cli_env(home, other), "whoami", "--json")      # AGENTHOST_API_KEY wins
    assert r.returncode == 0 and json.loads(r.stdout)["email"] != email
    r = run(cli_env(home), "--url", "http://127.0.0.1:1/api/v1", "whoami")
    assert r.returncode == 3 and "cannot reach" in r.stderr


@needs_runner
def test_init_deploy_invoke_sessions_usage(user, tmp_path):
    _email, _key, env = user
    d = tmp_path / "hello-agent"
    r = run(env, "init", str(d))
    assert r.returncode == 0, r.stderr
    assert {p.name for p in d.iterdir()} == {"agent.json", "index.js", ".gitignore"}
    assert run(env, "deploy", str(d)).returncode == 1          # no agent yet, no --create
    r = run(env, "deploy", str(d), "--create")
    assert r.returncode == 0, r.stderr
    assert "hello-agent is active" in r.stdout
    r = run(env, "invoke", "hello-agent", "hi there")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "You said: hi there\n"
    assert "tokens" in r.stderr and "$" in r.stderr
    # Where its time went (issue 31): the result's timing, phase by phase.
    assert re.search(r"time \(ms\): queue [0-9.]+ · take [0-9.]+ · start [0-9.]+ · run [0-9.]+"
                     r" · collect [0-9.]+ · record [0-9.]+\n", r.stderr), r.stderr
    r = run(env, "invoke", "hello-agent", "-s", "s1", "--json", stdin="from stdin")
    res = json.loads(r.stdout)
    assert res["status"] == "completed" and res["session_id"] == "s1"
    assert res["response_content"] == "You said: from stdin\n"
    sessions = json.loads(run(env, "sessions", "list", "hello-agent", "--json").stdout)
    assert [s["id"] for s in sessions] == ["s1"]
    assert "s1" in run(env, "sessions", "list", "hello-agent").stdout
    invs = json.loads(run(env, "invocations", "hello-agent", "--json").stdout)
    assert len(invs) == 2 and invs[0]["invocation_id"] == res["invocation_id"]
    usage = json.loads(run(env, "usage", "--json").stdout)
    assert usage["total_invocations"] == 2
    assert usage["input_tokens"] == sum(i["input_tokens"] for i in invs)
    assert run(env, "sessions", "delete", "hello-agent", "s1").returncode == 0
    assert json.loads(run(env, "sessions", "list", "hello-agent", "--json").stdout) == []
    r = run(env, "stop", "hello-agent", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "stopped"


@needs_runner
def test_deploy_leaves_out_node_modules_git_and_ignored_files(user, tmp_path):
    _e, _k, env = user
    d = project(tmp_path, LIST_JS)
    for rel in ("node_modules/dep/index.js", ".git/config", "logs/a.log", "secret.txt",
                "src/keep.js", "src/skip.tmp", "notes.md"):
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text("x")
    (d / ".gitignore").write_text("logs/\n*.tmp\n")
    (d / ".agenthostignore").write_text("# not for the server\n/secret.txt\n")
    r = run(env, "deploy", str(d), "--create")
    assert r.returncode == 0, r.stderr
    r = run(env, "invoke", slug_of(d), "ls")
    files = set(r.stdout.split("\n"))
    assert {"agent.json", "index.js", ".gitignore", "notes.md", "src/", "src/keep.js"} <= files
    for gone in ("logs/", "logs/a.log", "secret.txt", "src/skip.tmp", ".git/", "node_modules/dep/index.js"):
        assert gone not in files, (gone, files)


@needs_runner
def test_secret_value_comes_from_stdin_and_is_never_printed(user, tmp_path):
    _e, _k, env = user
    d = project(tmp_path, TOOL_JS)
    assert run(env, "deploy", str(d), "--create").returncode == 0
    slug = slug_of(d)
    value = "cli-secret-" + uuid.uuid4().hex
    r = run(env, "secrets", "set", slug, "MY_TOKEN", stdin=value + "\n")
    assert r.returncode == 0, r.stderr
    assert value not in r.stdout + r.stderr
    for args in (("secrets", "list", slug), ("secrets", "list", slug, "--json")):
        r = run(env, *args)
        assert "MY_TOKEN" in r.stdout and value not in r.stdout + r.stderr
    # Typed at a terminal: asked for, not echoed.
    typed = "typed-" + uuid.uuid4().hex
    rc, out = on_pty(env, ["secrets", "set", slug, "TYPED"], [("Value of TYPED: ", typed)])
    assert rc == 0 and "Set TYPED" in out and typed not in out, out
    # It reached the agent, without its trailing newline.
    res = json.loads(run(env, "invoke", slug, "!env", "--json").stdout)
    agent_env = json.loads(res["response_content"])
    assert agent_env["MY_TOKEN"] == value and agent_env["TYPED"] == typed
    assert run(env, "secrets", "delete", slug, "MY_TOKEN").returncode == 0
    assert [s["key"] for s in json.loads(run(env, "secrets", "list", slug, "--json").stdout)] == ["TYPED"]


@needs_runner
def test_failed_invocation_exits_1_with_the_detail(user, tmp_path):
    _e, _k, env = user
    d = project(tmp_path, TOOL_JS)
    assert run(env, "deploy", str(d), "--create").returncode == 0
    r = run(env, "invoke", slug_of(d), "!crash")
    assert r.returncode == 1
    assert "error: Invocation failed" in r.stderr and "HTTP 500" in r.stderr
    r = run(env, "invoke", slug_of(d), "!crash", "--json")
    body = json.loads(r.stdout)
    assert r.returncode == 1 and body["invocation"]["status"] == "failed"
    r = run(env, "invoke", slug_of(d), "!sleep", "--timeout", "1")
    assert r.returncode == 1 and "HTTP 504" in r.stderr, r.stderr


@needs_runner
def test_deploy_no_wait_returns_while_deploying(user, tmp_path):
    _e, _k, env = user
    d = project(tmp_path, TOOL_JS)
    r = run(env, "deploy", str(d), "--create", "--no-wait", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "deploying"


@needs_runner
def test_failed_deploy_exits_1_with_the_status_message(user, tmp_path):
    _e, _k, env = user
    d = project(tmp_path, "", version="not-semver")
    r = run(env, "deploy", str(d), "--create")
    assert r.returncode == 1
    assert "failed" in r.stderr and "version" in r.stderr


@needs_runner
def test_a_failed_redeploy_exits_1_and_the_previous_deploy_keeps_serving(user, tmp_path):
    _e, _k, env = user
    d = project(tmp_path, "process.stdin.on('data', () => {}).on('end', () => process.stdout.write('v1'));")
    assert run(env, "deploy", str(d), "--create").returncode == 0
    m = json.loads((d / "agent.json").read_text())
    (d / "agent.json").write_text(json.dumps(dict(m, version="not-semver")))
    r = run(env, "deploy", str(d))
    assert r.returncode == 1, r.stdout
    assert "version" in r.stderr and "the previous deploy keeps serving" in r.stderr, r.stderr
    r = run(env, "invoke", slug_of(d), "hi", "--no-stream")
    assert r.returncode == 0 and r.stdout.strip() == "v1", r.stderr



def test_agent_network_allow_list(user):
    """--allow sets an egress allow-list (issue 32), --open-network drops it;
    `agents get` shows it; a bad entry is the API's 422 naming it."""
    _e, _k, env = user
    r = run(env, "agents", "create", "Net One", "--allow", "Example.com:443, 203.0.113.0/24", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["network"] == {"mode": "allow", "allow": ["example.com:443", "203.0.113.0/24"]}
    assert "allow: example.com:443, 203.0.113.0/24" in run(env, "agents", "get", "net-one").stdout
    r = run(env, "agents", "update", "net-one", "--allow", "", "--json")
    assert json.loads(r.stdout)["network"] == {"mode": "allow", "allow": []}, r.stderr
    assert "allow: nothing" in run(env, "agents", "get", "net-one").stdout
    r = run(env, "agents", "update", "net-one", "--allow", "10.0.0.0/8")
    assert r.returncode == 1 and "network" in r.stderr, r.stderr
    r = run(env, "agents", "update", "net-one", "--open-network", "--json")
    assert json.loads(r.stdout)["network"] == {"mode": "open", "allow": []}, r.stderr
    r = run(env, "agents", "update", "net-one", "--open-network", "--allow", "x.com")
    assert r.returncode == 2 and "exclude" in r.stderr, r.stderr

def test_json_on_lists_and_records(user, tmp_path):
    _e, _k, env = user
    r = run(env, "agents", "create", "Json One", "--description", "first", "--json")
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["slug"] == "json-one" and rec["source_type"] == "local" and rec["status"] == "draft"
    r = run(env, "agents", "update", "json-one", "--timeout", "30", "--json")
    assert json.loads(r.stdout)["timeout_seconds"] == 30
    # min_warm: 0 is a value to set, not "unset"; the plan's cap is the API's 422.
    r = run(env, "agents", "update", "json-one", "--min-warm", "1", "--json")
    assert json.loads(r.stdout)["min_warm"] == 1, r.stderr
    r = run(env, "agents", "update", "json-one", "--min-warm", "0", "--json")
    assert json.loads(r.stdout)["min_warm"] == 0, r.stderr
    r = run(env, "agents", "update", "json-one", "--min-warm", "999")
    assert r.returncode == 1 and "min_warm" in r.stderr, r.stderr
    assert "min warm" in run(env, "agents", "get", "json-one").stdout
    agents = json.loads(run(env, "agents", "list", "--json").stdout)
    assert [a["slug"] for a in agents] == ["json-one"]
    table = run(env, "agents", "list").stdout.splitlines()
    assert table[0].split()[:2] == ["slug", "name"] and table[1].startswith("json-one")
    assert json.loads(run(env, "agents", "get", "json-one", "--json").stdout)["id"] == rec["id"]
    assert run(env, "agents", "delete", "json-one").returncode == 2     # not a terminal, no --yes
    assert run(env, "agents", "delete", "json-one", "--yes").returncode == 0
    assert run(env, "agents", "get", "json-one").returncode == 1
    keys = json.loads(run(env, "keys", "list", "--json").stdout)
    assert len(keys) == 1 and keys[0]["prefix"].startswith("ahk_")


def test_keys_create_prints_the_key_and_revoke_ends_it(user, home):
    _e, _k, env = user
    r = run(env, "keys", "create", "ci")
    new = r.stdout.strip()
    assert r.returncode == 0 and new.startswith("ahk_")
    assert run(cli_env(home, new), "whoami").returncode == 0
    kid = next(k["id"] for k in json.loads(run(env, "keys", "list", "--json").stdout) if k["name"] == "ci")
    assert run(env, "keys", "revoke", kid).returncode == 0
    r = run(cli_env(home, new), "whoami")
    assert r.returncode == 1 and "HTTP 401" in r.stderr


def test_errors_are_one_line_with_the_api_detail_and_documented_status(user):
    _e, _k, env = user
    r = run(env, "agents", "get", "no-such-agent")
    assert (r.returncode, r.stderr) == (1, "error: Agent not found (HTTP 404)\n")
    r = run(env, "agents", "create", "x", "--slug", "Not A Slug")
    assert r.returncode == 1 and "body.slug" in r.stderr and "HTTP 422" in r.stderr
    assert len(r.stderr.splitlines()) == 1
    for args in (("bogus",), ("agents",), ("agents", "get"), ("invoke",), ("usage", "--days", "0"),
                 ("agents", "list", "--nope"), ("usage", "--days")):
        r = run(env, *args)
        assert r.returncode == 2, (args, r.stderr)
        assert "error:" in r.stderr
    r = run(env, "usage", "--days", "400")
    assert r.returncode == 2
    r = run(env, "agents", "--help")
    assert r.returncode == 0 and "agents list" in r.stdout and "invoke" not in r.stdout


def test_a_misspelt_option_names_the_one_meant_and_changes_nothing(user):
    _e, _k, env = user
    r = run(env, "agents", "create", "typo-agent", "--descrption", "y")
    assert (r.returncode, r.stderr) == (
        2, "error: agents create: unknown option --descrption (did you mean --description?)\n")
    assert run(env, "agents", "get", "typo-agent").returncode == 1      # not created
    r = run(env, "files", "download", "x", "--forse")
    assert r.returncode == 2 and "unknown option --forse (did you mean --force?)" in r.stderr
    r = run(env, "agents", "list", "--zebra")       # near nothing: where to look instead
    assert r.returncode == 2 and "(see agenthost agents list --help)" in r.stderr


def test_every_command_has_help():
    top = subprocess.run([CLI, "--help"], capture_output=True, text=True)
    assert top.returncode == 0
    cmds = [ln.strip().split("  ")[0] for ln in top.stdout.splitlines() if ln.startswith("  ")]
    words = [" ".join(w for w in c.split() if w.islower() and not w.startswith("[")) for c in cmds]
    assert {"login", "deploy", "invoke", "agents list", "secrets set", "keys revoke", "usage"} <= set(words)
    for w in words:
        r = subprocess.run([CLI, *w.split(), "--help"], capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout.startswith("usage: agenthost " + w), w
        assert "--json" in r.stdout


def test_bash_completion_offers_commands_and_options(tmp_path):
    script = os.path.join(ROOT, "lib", "cli", "agenthost.bash-completion")
    def complete(*words):
        line = " ".join(shlex.quote(w) for w in words)
        cmd = (f"source {shlex.quote(script)}; COMP_WORDS=(agenthost {line}); "
               f"COMP_CWORD={len(words)}; _agenthost; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
        env = dict(os.environ, PATH=os.path.dirname(CLI) + ":" + os.environ["PATH"])
        return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env).stdout.split()
    assert complete("ag") == ["agents"]
    assert set(complete("secrets", "")) == {"list", "set", "delete"}
    assert "--session" in complete("invoke", "x", "--s")


@needs_runner
def test_status_line_on_a_terminal_and_not_in_a_pipe(user, tmp_path):
    _e, _k, env = user
    d = project(tmp_path, TOOL_JS)
    r = run(env, "deploy", str(d), "--create")
    assert r.returncode == 0, r.stderr
    assert "\r" not in r.stderr and "deploying" not in r.stderr and "\x1b" not in r.stdout + r.stderr
    # The same under a pseudo-terminal (script, from bsdutils, essential on Debian): the line is there.
    cmd = shlex.join([CLI, "deploy", str(d)])
    def on_tty(env):
        t = subprocess.run(["script", "-qec", cmd, "/dev/null"], env=env, capture_output=True, timeout=300)
        assert t.returncode == 0, t.stdout
        return t.stdout.decode()      # bytes first: text mode would turn "\r" into "\n"
    out = on_tty(env)
    assert "\r\x1b[K" in out and "deploying " + slug_of(d) in out
    assert "is \x1b[32mactive" in out
    out = on_tty(dict(env, NO_COLOR="1"))
    assert "deploying " in out and "\x1b[32m" not in out
    # invoke --no-stream: the time it has run, on a terminal only; the answer stays
    # clean in a pipe. (Streamed, the default on a terminal, the response shows
    # as it comes instead: test_cli_stream.py.)
    cmd = shlex.join([CLI, "invoke", slug_of(d), "hi", "--no-stream"])
    assert "\r\x1b[Krunning " + slug_of(d) in on_tty(env)
    r = run(env, "invoke", slug_of(d), "hi")
    assert r.stdout == "hi" and "running" not in r.stderr and "\r" not in r.stderr


def test_429_without_a_wait_fails_with_the_detail(user):
    _e, _k, env = user
    # Invocations are limited to 10 a minute per user; an unknown agent costs no sandbox.
    codes = []
    for _ in range(15):
        r = run(dict(env, AGENTHOST_RATE_WAIT="0"), "invoke", "no-such-agent", "x")
        codes.append(r.returncode)
        if "HTTP 429" in r.stderr:
            break
    assert "Rate limit exceeded" in r.stderr and r.returncode == 1, codes


@pytest.mark.slow
def test_429_wait_then_the_call_goes_through(user):
    _e, _k, env = user
    for _ in range(15):
        r = run(dict(env, AGENTHOST_RATE_WAIT="0"), "invoke", "no-such-agent", "x")
        if "HTTP 429" in r.stderr:
            break
    r = run(dict(env, AGENTHOST_RATE_WAIT="120"), "invoke", "no-such-agent", "x")
    assert "rate limit reached; waiting" in r.stderr
    assert r.returncode == 1 and "Agent not found" in r.stderr


def test_usage_sparkline_only_on_a_terminal(user):
    _e, _k, env = user
    r = run(env, "usage", "--days", "7")
    assert r.returncode == 0 and "invocations:" in r.stdout and "per day" not in r.stdout
    t = subprocess.run(["script", "-qec", shlex.join([CLI, "usage", "--days", "7"]), "/dev/null"],
                       env=env, capture_output=True, timeout=60)
    out = t.stdout.decode()
    assert t.returncode == 0 and "per day:" in out and "highest 0" in out
    daily = json.loads(run(env, "usage", "--daily", "--days", "7", "--json").stdout)
    assert daily["period_days"] == 7 and len(daily["items"]) == 7


def test_ctrl_c_at_the_secret_question_gives_the_terminal_its_echo_back(user):
    import termios
    _e, _k, env = user
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(CLI, [CLI, "secrets", "set", "any-agent", "X"], env)
    out = b""
    while b"Value of X: " not in out:
        ready, _, _ = select.select([fd], [], [], 60)
        assert ready, out
        out += os.read(fd, 4096)
    assert not termios.tcgetattr(fd)[3] & termios.ECHO      # echo is off while asking
    os.write(fd, b"\x03")                                    # ^C, as the terminal sends it
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == 2
    assert termios.tcgetattr(fd)[3] & termios.ECHO
    os.close(fd)


# ---- the key over plain http:// (issue #26) ----

WARNING = "warning: the API key goes to"


def local_non_loopback_ip():
    """This host's own address on its default route, or None (no network)."""
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.123", 9))      # UDP: no packet is sent
        ip = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if ip.startswith("127.") else ip


@pytest.fixture
def remote_url():
    """The stack's API at an address of this host that is not loopback: a relay
    listening there passes each connection on to nginx."""
    import socket
    import threading
    import urllib.parse
    ip = local_non_loopback_ip()
    if not ip:
        pytest.skip("no address but loopback on this host")
    target = urllib.parse.urlsplit(BASE_URL)
    lsock = socket.create_server((ip, 0))
    stop = threading.Event()

    def pipe(a, b):
        try:
            while (data := a.recv(65536)):
                b.sendall(data)
        except OSError:
            pass
        finally:
            b.close()

    def accept():
        while not stop.is_set():
            try:
                c, _ = lsock.accept()
            except OSError:
                return
            up = socket.create_connection((target.hostname, target.port))
            threading.Thread(target=pipe, args=(c, up), daemon=True).start()
            threading.Thread(target=pipe, args=(up, c), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://{ip}:{lsock.getsockname()[1]}{target.path}"
    stop.set()
    lsock.close()


def no_proxy(env):
    return {k: v for k, v in env.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}


def test_plain_http_to_another_host_warns_once_before_and_goes_on(user, remote_url):
    _e, _k, env = user
    # On a terminal `usage` makes two calls with the key (totals, then the days).
    rc, out = on_pty(no_proxy(dict(env, AGENTHOST_URL=remote_url)), ["usage", "--days", "7"])
    assert rc == 0, out
    assert out.count(WARNING) == 1, out
    host = remote_url.split("//", 1)[1].split(":", 1)[0]
    assert f"{WARNING} {host} over plain http://" in out
    assert out.index(WARNING) < out.index("invocations") and "highest" in out


@pytest.mark.parametrize("url", [
    BASE_URL, BASE_URL.replace("127.0.0.1", "localhost"), "http://127.8.9.10:1/api/v1",
    "http://[::1]:1/api/v1", "https://agenthost-test.invalid/api/v1",
])
def test_no_warning_for_loopback_or_https(user, url):
    _e, _k, env = user
    r = run(no_proxy(env), "--url", url, "whoami")
    assert WARNING not in r.stderr, (url, r.stderr)


def test_warning_for_a_url_without_a_scheme_and_none_without_a_key(home):
    # libcurl takes a URL without a scheme as http://.
    env = no_proxy(cli_env(home, "ahk_AAAAAAAA_BBBBBBBBBB"))
    r = run(env, "--url", "agenthost-test.invalid/api/v1", "whoami")
    assert r.returncode == 3 and r.stderr.count(WARNING) == 1, r.stderr
    assert r.stderr.index(WARNING) < r.stderr.index("cannot reach")
    r = run(no_proxy(cli_env(home)), "--url", "http://agenthost-test.invalid/api/v1", "whoami")
    assert r.returncode == 2 and WARNING not in r.stderr, r.stderr


def test_login_warns_as_soon_as_a_plain_http_url_is_typed(home, remote_url):
    email, key = create_user()
    env = no_proxy(cli_env(home))
    env.pop("AGENTHOST_URL")
    rc, out = on_pty(env, ["login"], [("API URL [", remote_url), ("API key: ", key)])
    assert rc == 0 and "as " + email in out, out
    assert out.count(WARNING) == 1 and out.index(WARNING) < out.index("API key: "), out


SPARSE_JS = r"""
const fs = require('fs');
process.stdin.resume();
process.stdin.on('end', () => {
  const fd = fs.openSync('/files/session/big.bin', 'w');
  fs.ftruncateSync(fd, 50 << 20);
  fs.closeSync(fd);
  process.stdout.write('ok');
});
"""


@needs_runner
def test_invoke_tells_which_files_were_not_kept(user, tmp_path):
    _e, _k, env = user
    d = project(tmp_path, SPARSE_JS)
    assert run(env, "deploy", str(d), "--create").returncode == 0
    r = run(env, "invoke", slug_of(d), "x")
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stderr
    assert "files: big.bin is a sparse file" in r.stderr, r.stderr


@needs_runner
def test_a_deploy_waiting_for_a_runner_that_is_not_there_says_so(user, tmp_path):
    """Issue 33: with no runner alive the deploy used to wait in silence. The
    runner is frozen and its heartbeat made old, as after it died; once it
    runs again it takes the job and the note is gone."""
    _e, _k, env = user
    d = project(tmp_path, TOOL_JS)
    slug = slug_of(d)
    pid = runner_pid()
    os.kill(pid, signal.SIGSTOP)
    try:
        db_query("UPDATE runners SET heartbeat_at = NOW(3) - INTERVAL 1 HOUR")
        r = run(env, "deploy", str(d), "--create", "--wait", "3")
        assert r.returncode != 0
        assert f"{slug}: Waiting for a runner: none is alive (the last heartbeat was" in r.stderr, r.stderr
        assert "is agenthost-runner running?" in r.stderr and "still deploying" in r.stderr
        a = json.loads(run(env, "agents", "get", slug, "--json").stdout)
        assert a["status"] == "deploying" and a["status_message"].startswith("Waiting for a runner")
    finally:
        os.kill(pid, signal.SIGCONT)
    for _ in range(600):
        a = json.loads(run(env, "agents", "get", slug, "--json").stdout)
        if a["status"] != "deploying":
            break
        time.sleep(0.5)
    assert a["status"] == "active" and a["status_message"] is None, a


def test_deploys_logs_and_rollback(user, tmp_path):
    _e, _k, env = user
    d = project(tmp_path, "process.stdout.write('one')")
    slug = slug_of(d)
    assert run(env, "deploy", str(d), "--create").returncode == 0
    (d / "index.js").write_text("process.stdout.write('two')")
    assert run(env, "deploy", str(d)).returncode == 0
    r = run(env, "deploys", slug)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("succeeded") == 2 and "active" in r.stdout.splitlines()[0]
    listed = json.loads(run(env, "deploys", slug, "--json").stdout)
    newest, older = listed[0]["id"], listed[1]["id"]
    r = run(env, "deploys", "logs", slug, "--follow")
    assert r.returncode == 0, r.stderr
    assert "==> extracting the uploaded code" in r.stdout and "built; making it the agent's" in r.stdout
    assert run(env, "deploys", "logs", slug, older).stdout.count("built; making it") == 1
    r = run(env, "rollback", slug)
    assert r.returncode == 0, r.stderr
    assert older in r.stdout
    assert run(env, "invoke", slug, "x").stdout.strip() == "one"
    r = run(env, "rollback", slug, older)
    assert r.returncode == 1 and "already the agent's active deploy" in r.stderr
    r = run(env, "rollback", slug, newest, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["id"] == newest
