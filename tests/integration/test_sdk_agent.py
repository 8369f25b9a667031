"""A real Claude Agent SDK agent (issue 27), deployed and run as a user would.

tests/integration/sdk_agent/ is a ten-line agent depending on a pinned
@anthropic-ai/claude-agent-sdk from npm (its lockfile pins every package and
its integrity): query() starts the bundled Claude Code binary, which calls the
Messages API at ANTHROPIC_BASE_URL and runs the Bash tool in /app. The runner
is restarted for this module with the model gateway on, in front of the
stand-in Messages API (messages_standin.py) on loopback; every other setting is
the stack's own, so the deploy proves the defaults hold what Claude Code needs.
The agent is deployed once for the module (npm fetches about 450 MB).
"""
import io
import json
import os
import secrets
import subprocess
import tarfile
import time
import uuid

import pytest

from conftest import VAR, new_client
from agent_code import exact, model_cost, needs_runner
from messages_standin import USAGE_IN, USAGE_OUT, StandIn
from test_deploy import DATA
from test_deploy_faults import runner_with

pytestmark = [needs_runner, pytest.mark.slow]

HERE = os.path.dirname(os.path.abspath(__file__))
AGENT_DIR = os.path.join(HERE, "sdk_agent")
OPERATOR_KEY = "sk-ant-sdk-" + secrets.token_hex(16)


def agent_tarball(extra=None):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in sorted(os.listdir(AGENT_DIR)):
            tar.add(os.path.join(AGENT_DIR, name), arcname=name)
        for name, text in (extra or {}).items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture(scope="module")
def standin():
    srv = StandIn(key=OPERATOR_KEY).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def sdk(standin):
    """The deployed SDK agent's slug, on a runner with the gateway on."""
    client = new_client()
    with runner_with(model_gateway="on", model_key_value=OPERATOR_KEY,
                     model_gateway_upstream=standin.url):
        r = client.post("/agents", json={"name": "sdk " + uuid.uuid4().hex[:8],
                                         "source_type": "local", "timeout_seconds": 300})
        assert r.status_code == 201, r.text
        slug = r.json()["slug"]
        r = client.put(f"/agents/{slug}/code", data=agent_tarball(),
                       headers={"Content-Type": "application/gzip"})
        assert r.status_code == 200, r.text
        assert client.post(f"/agents/{slug}/deploy").status_code == 202
        a = wait_deployed(client, slug)
        assert a["status"] == "active", a["status_message"]
        yield client, slug


def wait_deployed(client, slug, timeout=900):
    """The agent's record once its deploy ended, polled every 2 s (a deploy
    that downloads the SDK takes a minute or more: faster polling would meet
    the API's rate limit)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = client.get(f"/agents/{slug}")
        if r.status_code == 200 and r.json()["status"] in ("active", "error"):
            return r.json()
        time.sleep(2)
    pytest.fail(f"the deploy of {slug} did not end within {timeout} s")


def invoke(client, slug, prompt, **body):
    """POST …/invoke, waiting out the API's own rate limit (10 calls a minute)."""
    while True:
        r = client.post(f"/agents/{slug}/invoke", json=dict(body, prompt=prompt), timeout=330)
        if r.status_code != 429 or "Rate limit" not in r.text:
            return r
        time.sleep(int(r.headers.get("Retry-After", "5")))


def test_sdk_agent_runs_bash_in_the_sandbox(sdk, standin):
    client, sdk = sdk
    """Deployed with the stack's default limits; the model's tool_use turn runs
    Bash inside the sandbox (as uid 1000, in /app, which it can write, with
    HOME=/tmp),
    and the invocation is priced from the provider's usage of every request."""
    before = len(standin.messages())
    r = invoke(client, sdk, "RUN: echo from-bash > made.txt; cat made.txt; id -u; pwd; echo $HOME")
    assert r.status_code == 200, r.text
    inv = exact(r)
    out = inv["response_content"]
    assert out.startswith("ran: from-bash"), out
    assert out.split("\n")[1:4] == ["1000", "/app", "/tmp"], out
    calls = len(standin.messages()) - before
    assert calls >= 2  # the tool_use turn and the answer to its result
    # The provider saw the operator key only, never the agent's token.
    assert inv["model_input_tokens"] == calls * USAGE_IN
    assert inv["model_output_tokens"] == calls * USAGE_OUT
    # (10 of each answer's input tokens are cache reads, priced as such)
    assert inv["total_cost_usd"] == model_cost(calls * USAGE_IN, calls * USAGE_OUT, cache_read=calls * 10)
    # The prompt's own BPE counts stay what the contract says.
    assert 0 < inv["input_tokens"] < 40


def test_claude_codes_bash_reads_the_agents_attachments(sdk):
    """The real workload and its files (issue 31's one-tar placing): an
    attachment is where Claude Code's Bash looks for it, byte for byte and
    read-only, nested under its mount path."""
    client, slug = sdk
    f = client.post("/files", files={"file": ("notes.txt", b"attached for claude", "text/plain")})
    assert f.status_code == 201, f.text
    fid = f.json()["file_id"]
    r = client.post(f"/agents/{slug}/files", json={"file_id": fid, "mount_path": "/files/agent/kb/notes.txt"})
    assert r.status_code == 201, r.text
    try:
        r = invoke(client, slug, "RUN: cat /files/agent/kb/notes.txt; echo; stat -c %a /files/agent/kb/notes.txt")
        assert r.status_code == 200, r.text
        out = r.json()["response_content"]
        assert out.split("\n")[:2] == ["ran: attached for claude", "444"], out
    finally:
        assert client.delete(f"/agents/{slug}/files/{fid}").status_code == 204


def test_session_keeps_claude_codes_state(sdk):
    client, sdk = sdk
    """Within a session the next call sees the files Claude Code's Bash wrote
    and Claude Code's own state under HOME/.claude."""
    sid, tok = "sdk-" + uuid.uuid4().hex[:10], uuid.uuid4().hex
    r = invoke(client, sdk, f"RUN: echo kept > /app/note.txt; : tok-{tok}", session_id=sid)
    assert r.status_code == 200, r.text
    # The first call's transcript, found by the token its prompt held: the
    # pattern is written in two quoted halves, so that this call's own
    # transcript (which Claude Code may or may not have written yet when its
    # Bash runs) never matches it.
    r = invoke(client, sdk, f'RUN: cat /app/note.txt; grep -l "tok-""{tok}" $HOME/.claude/projects/*/*.jsonl | wc -l',
               session_id=sid)
    assert r.status_code == 200, r.text
    out = r.json()["response_content"]
    assert out.startswith("ran: kept\n"), out
    # The first call's Claude Code state survived into the second.
    assert out.split("\n")[-1].strip() == "1", out
    # A call outside the session starts from a fresh sandbox.
    r = invoke(client, sdk, "RUN: cat /app/note.txt 2>&1; true")
    assert "No such file" in r.json()["response_content"], r.text


@pytest.mark.parametrize("kind,status_text", [
    ("429", "rate limit"), ("500", "Internal server error"), ("overloaded", "Overloaded")])
def test_provider_error_is_the_invocations_error(sdk, kind, status_text):
    client, sdk = sdk
    r = invoke(client, sdk, f"ERROR: {kind}")
    assert r.status_code == 500, r.text
    inv = r.json()["invocation"]
    assert inv["status"] == "failed"
    assert status_text in inv["error"], inv["error"]
    # Nothing was lost: the call is in the history as it was answered.
    hist = client.get(f"/agents/{sdk}/invocations").json()
    assert any(h["invocation_id"] == inv["invocation_id"] and h["status"] == "failed" for h in hist)


def test_hanging_provider_meets_the_timeout(sdk):
    client, sdk = sdk
    r = invoke(client, sdk, "SLOW: 120", timeout_seconds=8)
    assert r.status_code == 504, r.text
    assert r.json()["invocation"]["status"] == "failed"
    # The agent still answers the next call.
    r = invoke(client, sdk, "SAY: hello again")
    assert r.status_code == 200 and r.json()["response_content"] == "said: hello again", r.text


def test_redeploy_with_unchanged_dependencies_reuses_the_tree(sdk):
    """Same lockfile, same node, same machine: the redeploy links the previous
    image's node_modules (the same inodes: no second copy of the 400 MB
    binary) instead of running npm, and the agent still runs. The old image
    is removed after the switch; the new one keeps every file."""
    client, slug = sdk
    agent_id = client.get(f"/agents/{slug}").json()["id"]
    images = os.path.join(DATA, "images", agent_id)
    [old] = [d for d in os.listdir(images) if "." not in d]
    binary = "node_modules/@anthropic-ai/claude-agent-sdk-linux-x64/claude"
    inode = os.stat(os.path.join(images, old, binary)).st_ino
    with open(os.path.join(VAR, "log", "runner.log"), "rb") as f:
        log_from = f.seek(0, 2)

    r = client.put(f"/agents/{slug}/code", data=agent_tarball({"CHANGES": "a new release\n"}),
                   headers={"Content-Type": "application/gzip"})
    assert r.status_code == 200, r.text
    assert client.post(f"/agents/{slug}/deploy").status_code == 202
    a = wait_deployed(client, slug)
    assert a["status"] == "active", a["status_message"]

    with open(os.path.join(VAR, "log", "runner.log"), "rb") as f:
        f.seek(log_from)
        log = f.read().decode(errors="replace")
    assert "dependencies unchanged" in log and "npm ci" not in log, log[-2000:]
    new = max((d for d in os.listdir(images) if "." not in d), key=int)
    assert new != old
    st = os.stat(os.path.join(images, new, binary))
    assert st.st_ino == inode and st.st_size > 100 << 20
    assert os.path.isfile(os.path.join(images, new, "CHANGES"))
    r = invoke(client, slug, "RUN: cat CHANGES")
    assert r.status_code == 200 and r.json()["response_content"] == "ran: a new release", r.text


def test_a_second_agent_of_the_same_user_takes_the_installed_tree(sdk):
    """Issue 27 (d): the same user's second agent with the same lockfile
    links the first one's node_modules (no npm, no second copy of the
    binary) and runs. Another user's agent would run npm: test_deps_reuse."""
    client, slug = sdk
    first_id = client.get(f"/agents/{slug}").json()["id"]
    r = client.post("/agents", json={"name": "sdk two " + uuid.uuid4().hex[:8],
                                     "source_type": "local", "timeout_seconds": 300})
    assert r.status_code == 201, r.text
    two = r.json()
    r = client.put(f"/agents/{two['slug']}/code", data=agent_tarball(),
                   headers={"Content-Type": "application/gzip"})
    assert r.status_code == 200, r.text
    assert client.post(f"/agents/{two['slug']}/deploy").status_code == 202
    a = wait_deployed(client, two["slug"])
    assert a["status"] == "active", a["status_message"]
    newest = client.get(f"/agents/{two['slug']}/deploys").json()[0]
    log = client.get(f"/agents/{two['slug']}/deploys/{newest['id']}/logs").json()["log"]
    assert "another of your agents" in log and "npm ci" not in log, log[-2000:]

    def binary(agent_id):
        images = os.path.join(DATA, "images", agent_id)
        job = max((d for d in os.listdir(images) if "." not in d), key=int)
        return os.stat(os.path.join(images, job, "node_modules/@anthropic-ai/"
                                    "claude-agent-sdk-linux-x64/claude"))
    assert binary(two["id"]).st_ino == binary(first_id).st_ino
    r = invoke(client, two["slug"], "SAY: second")
    assert r.status_code == 200 and r.json()["response_content"] == "said: second", r.text
    client.delete(f"/agents/{two['slug']}")


def test_deploy_records_logs_and_rollback_of_an_sdk_agent(sdk, standin):
    """Issue 29 with the real workload: the SDK agent's deploys are records
    with their build output (npm's, then the redeploy that reused its tree),
    a rollback to the first image answers at once without the redeploy's
    file, and a call's stderr is kept without the gateway's token. Runs after
    the redeploy test above (two deploys)."""
    client, slug = sdk
    first, *_ = reversed(client.get(f"/agents/{slug}/deploys").json())
    newest = client.get(f"/agents/{slug}/deploys").json()[0]
    assert newest["status"] == "succeeded" and newest["active"] is True, newest
    assert first["status"] == "succeeded" and first["id"] != newest["id"], first
    log = client.get(f"/agents/{slug}/deploys/{first['id']}/logs").json()["log"]
    assert "npm" in log, log[-2000:]
    log = client.get(f"/agents/{slug}/deploys/{newest['id']}/logs").json()["log"]
    assert "dependencies unchanged" in log, log[-2000:]

    r = client.post(f"/agents/{slug}/rollback", json={"deploy_id": first["id"]})
    assert r.status_code == 200, r.text
    r = invoke(client, slug, "RUN: test -e CHANGES && echo yes || echo no")
    assert r.status_code == 200 and r.json()["response_content"] == "ran: no", r.text
    inv = r.json()["invocation_id"]
    logs = client.get(f"/agents/{slug}/invocations/{inv}/logs")
    assert logs.status_code == 200, logs.text
    assert "ahg_" not in logs.json()["logs"] and OPERATOR_KEY not in logs.json()["logs"]
    r = client.post(f"/agents/{slug}/rollback", json={"deploy_id": newest["id"]})
    assert r.status_code == 200, r.text


def test_template_agent_has_claude_code_running_before_its_prompt(sdk, tmp_path):
    """`agenthost init --template claude-agent-sdk` writes an agent whose
    Claude Code starts before the prompt is read (the SDK's startup()), so a
    warm process (min_warm) holds a running Claude Code: the Bash tool of a
    warm call finds its Claude Code older than the call. Deployed with the
    test's lockfile: the same dependencies, so the redeploy runs no npm."""
    from test_cli import CLI
    from test_warm import wait_warm
    client, slug = sdk
    r = subprocess.run([CLI, "init", str(tmp_path / "t"), "--template", "claude-agent-sdk"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    template = (tmp_path / "t" / "index.mjs").read_text()
    assert "startup(" in template
    r = client.put(f"/agents/{slug}/code", data=agent_tarball({"index.mjs": template}),
                   headers={"Content-Type": "application/gzip"})
    assert r.status_code == 200, r.text
    assert client.post(f"/agents/{slug}/deploy").status_code == 202
    a = wait_deployed(client, slug)
    assert a["status"] == "active", a["status_message"]
    r = client.patch(f"/agents/{slug}", json={"min_warm": 1})
    assert r.status_code == 200, r.text

    r = invoke(client, slug, "SAY: cold")  # warm processes start after a first call
    assert r.status_code == 200 and r.json()["response_content"] == "said: cold", r.text
    wait_warm(a["id"], 1, timeout=120)
    time.sleep(12)
    # Claude Code's age in seconds, from /proc (no ps in the sandbox's /proc).
    r = invoke(client, slug, "RUN: for d in /proc/[0-9]*; do [ \"$(cat $d/comm)\" = claude ] && "
                             "echo $(( $(cut -d. -f1 /proc/uptime) - $(cut -d' ' -f22 $d/stat) / 100 ));"
                             " done 2>/dev/null; true")
    assert r.status_code == 200, r.text
    inv = r.json()
    age_s = int(inv["response_content"].split()[1])
    assert age_s * 1000 > inv["duration_ms"] + 5000, (age_s, inv)
    client.patch(f"/agents/{slug}", json={"min_warm": 0})


# The sandbox's needs, checked from an agent that takes query()'s options from
# its prompt's first line ("OPTS {json}"): HOME, permissionMode, allowedTools,
# extraArgs.
PROBE_JS = r"""
import { query } from '@anthropic-ai/claude-agent-sdk';
const chunks = [];
for await (const c of process.stdin) chunks.push(c);
let [head, ...rest] = Buffer.concat(chunks).toString('utf8').split('\n');
const o = JSON.parse(head.replace(/^OPTS /, ''));
const env = { ...process.env, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
              CLAUDE_CODE_MAX_RETRIES: '0', ...(o.home ? { HOME: o.home } : {}) };
const options = { allowedTools: o.allowedTools ?? ['Bash'], maxTurns: 4, env };
if (o.permissionMode) options.permissionMode = o.permissionMode;
if (o.extraArgs) options.extraArgs = o.extraArgs; // flags for Claude Code's command line
try {
  let result;
  for await (const m of query({ prompt: rest.join('\n'), options }))
    if (m.type === 'result') result = m;
  process.stdout.write(result?.subtype === 'success' ? result.result : `failed: ${result?.subtype}`);
} catch (e) {
  process.stderr.write(`agent failed: ${e.message}\n`);
  process.stdout.write(`agent failed: ${e.message}`);
  process.exit(3);
}
"""


def same_user_agent(client, files):
    """Another agent of the sdk fixture's user with the test agent's lockfile
    (so its deploy takes the installed tree: test above) and files changed."""
    r = client.post("/agents", json={"name": "sdk probe " + uuid.uuid4().hex[:8],
                                     "source_type": "local", "timeout_seconds": 300})
    assert r.status_code == 201, r.text
    slug = r.json()["slug"]
    r = client.put(f"/agents/{slug}/code", data=agent_tarball(files),
                   headers={"Content-Type": "application/gzip"})
    assert r.status_code == 200, r.text
    assert client.post(f"/agents/{slug}/deploy").status_code == 202
    return slug, wait_deployed(client, slug)


@pytest.fixture(scope="module")
def probe(sdk):
    client, _ = sdk
    slug, a = same_user_agent(client, {"index.mjs": PROBE_JS})
    assert a["status"] == "active", a["status_message"]
    yield client, slug
    client.delete(f"/agents/{slug}")


def probe_call(probe, opts, prompt, **body):
    client, slug = probe
    return invoke(client, slug, "OPTS " + json.dumps(opts) + "\n" + prompt, **body)


def test_bypass_permissions_works_as_the_sandbox_runs_agents_not_as_root(probe):
    """Claude Code refuses bypassPermissions as uid 0 unless IS_SANDBOX=1;
    agents run as uid 1000, so it needs neither."""
    r = probe_call(probe, {"permissionMode": "bypassPermissions", "allowedTools": []},
                   "RUN: id -u; echo ${IS_SANDBOX:-unset}")
    assert r.status_code == 200, r.text
    assert r.json()["response_content"] == "ran: 1000\nunset", r.text


def test_claude_codes_threads_fit_the_default_pids_limit(probe):
    """Every thread counts against sandbox_pids (256 by default): Claude
    Code, the agent's node and the tool's bash use a small part of it."""
    r = probe_call(probe, {}, "RUN: t=0; for s in /proc/[0-9]*/status; do "
                              "t=$((t + $(awk '/^Threads/ {print $2}' $s))); done; echo $t")
    assert r.status_code == 200, r.text
    threads = int(r.json()["response_content"].split()[1])
    assert 10 < threads < 256 // 4, threads


def test_a_home_claude_code_cannot_write_still_answers(probe):
    """The issue saw a read-only HOME hang Claude Code; 0.3.332 in this
    sandbox answers with a HOME it cannot write (uid 1000 under /usr/share),
    keeping no state there. The sandbox's own HOME (/tmp) is writable."""
    r = probe_call(probe, {"home": "/usr/share"}, "SAY: hi", timeout_seconds=120)
    assert r.status_code == 200 and r.json()["response_content"] == "said: hi", r.text
    r = probe_call(probe, {}, "RUN: test -w $HOME && ls -d $HOME/.claude")
    assert r.status_code == 200 and r.json()["response_content"] == "ran: /tmp/.claude", r.text


def test_omit_optional_in_npmrc_does_not_drop_claude_code(sdk):
    """npm's omit=optional drops the SDK's native binary; the build passes
    --omit=dev on npm's command line, which replaces the list an .npmrc
    sets, so the binary stays. The .npmrc is in the dependencies'
    fingerprint: npm runs (no reuse of a tree built without it)."""
    client, _ = sdk
    slug, a = same_user_agent(client, {".npmrc": "omit=optional\n"})
    try:
        assert a["status"] == "active", a["status_message"]
        newest = client.get(f"/agents/{slug}/deploys").json()[0]
        log = client.get(f"/agents/{slug}/deploys/{newest['id']}/logs").json()["log"]
        assert "npm ci" in log and "reused" not in log, log[-2000:]
        images = os.path.join(DATA, "images", a["id"])
        job = max((d for d in os.listdir(images) if "." not in d), key=int)
        assert os.path.getsize(os.path.join(images, job, "node_modules/@anthropic-ai/"
                                            "claude-agent-sdk-linux-x64/claude")) > 100 << 20
        r = invoke(client, slug, "SAY: hi")
        assert r.status_code == 200 and r.json()["response_content"] == "said: hi", r.text
    finally:
        client.delete(f"/agents/{slug}")


def test_claude_code_exiting_non_zero_is_a_failed_call_naming_the_exit(probe):
    """A flag Claude Code does not know makes it exit 1 at once; query()
    throws, the agent exits 3: a failed invocation whose error names the
    agent's exit, with the SDK's message (Claude Code's exit) in its logs."""
    client, slug = probe
    r = probe_call(probe, {"extraArgs": {"no-such-flag-" + uuid.uuid4().hex[:6]: None}}, "SAY: hi")
    assert r.status_code == 500, r.text
    inv = r.json()["invocation"]
    assert inv["status"] == "failed" and "exited with status 3" in inv["error"], inv
    logs = client.get(f"/agents/{slug}/invocations/{inv['invocation_id']}/logs").json()["logs"]
    assert "agent failed:" in logs and "exited with code 1" in logs, logs[-2000:]
    r = probe_call(probe, {}, "SAY: after")
    assert r.status_code == 200 and r.json()["response_content"] == "said: after", r.text
