"""A session's next call runs on the process its sandbox made ready after the
call before (issue 31, lib/sandbox/premade.c). What the caller sees must be
what a cold start gives: the call's own secrets (changed between calls), its
prompt on stdin, the working directory, the limits, its output and status."""
import json
import os
import time

import pytest

from agent_code import VAR, deployed_agent, needs_runner

REPORT_JS = r"""
const fs = require('fs');
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', () => {
  const limits = {};
  for (const l of fs.readFileSync('/proc/self/limits', 'utf8').split('\n')) {
    const m = l.match(/^(Max open files|Max file size|Max core file size)\s+(\S+)\s+(\S+)/);
    if (m) limits[m[1]] = [m[2], m[3]];
  }
  process.stderr.write('to the runner log');
  process.stdout.write(JSON.stringify({prompt: Buffer.concat(chunks).toString(), cwd: process.cwd(),
                                       token: process.env.MY_TOKEN || null, limits}));
});
"""


def invoke(client, slug, prompt, **fields):
    return client.post(f"/agents/{slug}/invoke", json=dict(prompt=prompt, **fields), timeout=120)


def runner_log_line(inv_id, timeout=10):
    """The runner's line on the end of invocation inv_id."""
    path = os.path.join(VAR, "log", "runner.log")
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        with open(path, errors="replace") as f:
            for line in f:
                if f"inv={inv_id} " in line and " exit=" in line:
                    return line
        time.sleep(0.2)
    pytest.fail(f"no runner log line for {inv_id}")


@needs_runner
def test_session_calls_on_the_premade_process_get_their_own_request(client):
    a = deployed_agent(client, REPORT_JS)
    slug = a["slug"]
    seen = []
    for n, token in enumerate(["one", "two", "three"]):
        assert client.post(f"/agents/{slug}/secrets",
                           json={"key": "MY_TOKEN", "value": token}).status_code == 201
        r = invoke(client, slug, f"prompt {n}", session_id="pre-1")
        assert r.status_code == 200, r.text
        res = r.json()
        got = json.loads(res["response_content"])
        assert got["prompt"] == f"prompt {n}" and got["token"] == token, got
        assert got["cwd"] == "/app", got
        assert got["limits"]["Max core file size"] == ["0", "0"], got
        assert got["limits"]["Max open files"][0] == got["limits"]["Max open files"][1] != "unlimited"
        assert got["limits"]["Max file size"][0] != "unlimited", got
        seen.append((res["sandbox_id"], got["limits"], runner_log_line(res["invocation_id"])))
    assert len({s[0] for s in seen}) == 1  # one session sandbox
    assert seen[0][1] == seen[1][1] == seen[2][1]  # the same limits on every call
    # The session's later calls ran on the process made after the call before
    # (unless warm: a warm session's next process started instead).
    for _, _, line in seen[1:]:
        assert "(pre-made)" in line or "(warm)" in line, line


@needs_runner
def test_a_premade_call_that_times_out_leaves_nothing_and_the_session_goes_on(client):
    js = r"""
const cp = require('child_process');
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', () => {
  const p = Buffer.concat(chunks).toString();
  if (p.startsWith('hang ')) {
    cp.spawn('/usr/bin/sleep', ['1000', p.slice(5)], {detached: true, stdio: 'ignore'}).unref();
    process.on('SIGTERM', () => {});
    setInterval(() => {}, 1000);
  } else {
    const ps = require('fs').readdirSync('/proc').filter(x => /^\d+$/.test(x)).length;
    process.stdout.write('procs ' + ps);
  }
});
"""
    a = deployed_agent(client, js)
    slug = a["slug"]
    r = invoke(client, slug, "count", session_id="pre-2")
    assert r.status_code == 200 and r.json()["response_content"] == "procs 1", r.text
    marker = os.urandom(6).hex()
    r = invoke(client, slug, f"hang {marker}", session_id="pre-2", timeout_seconds=2)
    assert r.status_code in (500, 504), r.text[:300]
    line = runner_log_line(r.json()["invocation"]["invocation_id"])
    assert "timed_out=1" in line and ("(pre-made)" in line or "(warm)" in line), line

    def left():
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(pid)
            except OSError:
                pass
        return found
    until = time.monotonic() + 5
    while left() and time.monotonic() < until:
        time.sleep(0.1)
    assert left() == []
    r = invoke(client, slug, "count", session_id="pre-2")
    assert r.status_code == 200 and r.json()["response_content"] == "procs 1", r.text
