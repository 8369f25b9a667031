"""agenthost logs (issue 29), run as built against the real stack: the latest
invocation's logs by default, --invocation for another, --json, a failed
invoke pointing to the command, a clear error for an agent without
invocations and for an unknown id, and an agent's control characters shown
as \\xNN on a terminal (raw in a pipe)."""
import json

from agent_code import needs_runner
from test_cli import home, on_pty, project, run, slug_of, user  # noqa: F401 (fixtures)

# Writes its prompt to stderr and exits with status 1 when it is "fail".
ERR_JS = r"""
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', () => {
  const p = Buffer.concat(chunks).toString();
  process.stderr.write('stderr: ' + p + '\n', () => { process.stdout.write('ok'); process.exitCode = p === 'fail' ? 1 : 0; });
});
"""


@needs_runner
def test_logs_latest_and_by_id(user, tmp_path):  # noqa: F811
    _e, _k, env = user
    d = project(tmp_path, ERR_JS)
    slug = slug_of(d)
    assert run(env, "deploy", str(d), "--create").returncode == 0
    r = run(env, "logs", slug)
    assert r.returncode == 1 and f"{slug} has no invocations yet" in r.stderr, r.stderr

    r = run(env, "invoke", slug, "fail")
    assert r.returncode == 1
    assert f"agenthost logs {slug} --invocation inv_" in r.stderr, r.stderr
    failed = r.stderr.split("--invocation ")[1].split()[0]
    assert run(env, "invoke", slug, "second").returncode == 0

    r = run(env, "logs", slug)
    assert r.returncode == 0 and r.stdout == "stderr: second\n", r
    r = run(env, "logs", slug, "--invocation", failed)
    assert r.returncode == 0 and r.stdout == "stderr: fail\n" and failed in r.stderr, r
    r = run(env, "logs", slug, "-I", failed, "--json")
    assert json.loads(r.stdout) == {"invocation_id": failed, "logs": "stderr: fail\n", "truncated": False}

    r = run(env, "logs", slug, "--invocation", "inv_" + "0" * 22)
    assert r.returncode == 1 and "Invocation not found" in r.stderr and "HTTP 404" in r.stderr, r.stderr
    r = run(env, "logs", "no-such-agent-here")
    assert r.returncode == 1 and "Agent not found" in r.stderr


@needs_runner
def test_logs_on_a_terminal_escape_control_characters(user, tmp_path):  # noqa: F811
    _e, _k, env = user
    d = project(tmp_path, ERR_JS)
    slug = slug_of(d)
    assert run(env, "deploy", str(d), "--create").returncode == 0
    assert run(env, "invoke", slug, "red \x1b[31m bell \x07").returncode == 0
    status, out = on_pty(env, ["logs", slug])
    assert status == 0 and "red \\x1b[31m bell \\x07" in out and "\x1b[31m" not in out, out
    r = run(env, "logs", slug)
    assert r.stdout == "stderr: red \x1b[31m bell \x07\n"
