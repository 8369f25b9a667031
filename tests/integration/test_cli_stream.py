"""The CLI and issue 28: on a terminal `agenthost invoke` prints the response
as the agent writes it (--no-stream waits for the whole of it; a pipe gets the
plain answer), a streamed failure exits non-zero with the API's detail,
--async prints the invocation id, and `invocations get` / `invocations cancel`
show and stop a call."""
import json
import os
import pty
import select
import time

from agent_code import deployed_agent, needs_runner
from conftest import Client, create_user
from test_cli import CLI, cli_env, run
from test_invoke_async import TICKS_JS


def pty_until(env, args, marker, timeout=60, settle=0.0):
    """Runs the CLI on a pseudo-terminal; returns (what it printed by `settle`
    seconds after marker first appeared, exit status, everything). A terminal
    may hand what the CLI wrote at once over in several reads (one a line, on
    a loaded machine): settle lets the rest of it arrive."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(CLI, [CLI, *args], env)
    out, at_marker, seen = b"", None, None
    deadline = time.time() + timeout
    while time.time() < deadline:
        if at_marker is None and seen is not None and time.time() >= seen + settle:
            at_marker = out.decode()
        ready, _, _ = select.select([fd], [], [], 0.1 if seen is not None else 1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
        if seen is None and marker.encode() in out:
            seen = time.time()
            if settle == 0:
                at_marker = out.decode()
    if at_marker is None and seen is not None:
        at_marker = out.decode()
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return at_marker, os.waitstatus_to_exitcode(status), out.decode()


def user_and_agent(home):
    email, key = create_user()
    c = Client(key, email)
    a = deployed_agent(c, TICKS_JS)
    return c, a["slug"], cli_env(home, key)


@needs_runner
def test_invoke_streams_on_a_terminal(tmp_path):
    c, slug, env = user_and_agent(tmp_path)
    prompt = json.dumps({"n": 4, "ms": 1000})
    at_first, rc, out = pty_until(env, ["invoke", slug, prompt], "tick0")
    assert rc == 0, out
    assert at_first is not None and "done" not in at_first, at_first  # printed while it ran
    assert "tick0\r\ntick1\r\ntick2\r\ntick3\r\ndone" in out
    assert "tokens" in out and "session ses_" in out  # the result line at the end
    # --no-stream: the whole answer at the end (streamed, "done" would come
    # three seconds after tick0, not within the one second allowed here).
    at_first, rc, out = pty_until(env, ["invoke", slug, prompt, "--no-stream"], "tick0", settle=1.0)
    assert rc == 0 and "done" in at_first, at_first
    # A pipe: the plain answer, exactly as written.
    r = run(env, "invoke", slug, json.dumps({"n": 2, "ms": 10}))
    assert r.returncode == 0 and r.stdout == "tick0\ntick1\ndone", r


@needs_runner
def test_a_streamed_failure_exits_nonzero_with_the_detail(tmp_path):
    c, slug, env = user_and_agent(tmp_path)
    _, rc, out = pty_until(env, ["invoke", slug, json.dumps({"n": 100, "ms": 200}),
                                 "--timeout", "1"], "tick0")
    assert rc != 0, out
    assert "tick0" in out and "Invocation timed out after 1 seconds" in out, out


@needs_runner
def test_async_get_and_cancel(tmp_path):
    c, slug, env = user_and_agent(tmp_path)
    r = run(env, "invoke", slug, json.dumps({"n": 1000, "ms": 200}), "--async")
    assert r.returncode == 0, r.stderr
    inv = r.stdout.strip()
    assert inv.startswith("inv_") and f"invocations cancel {slug} {inv}" in r.stderr
    r = run(env, "invocations", "get", slug, inv, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "running", r
    time.sleep(1)
    r = run(env, "invocations", "cancel", slug, inv)
    assert r.returncode == 0, r.stderr
    assert "cancelled" in r.stdout, r.stdout
    r = run(env, "invocations", "cancel", slug, inv)
    assert r.returncode != 0 and "already finished (status: cancelled)" in r.stderr, r
    r = run(env, "invocations", "get", slug, inv, "--json")
    assert json.loads(r.stdout)["status"] == "cancelled"
    r = run(env, "invoke", slug, "x", "--async", "--stream")
    assert r.returncode != 0 and "--async and --stream" in r.stderr
