"""An agent's stderr in the runner's log ($AGENTHOST_VAR/log/runner.log) cannot
forge or hide anything: every line it causes carries the runner's own header
and the invocation id the API returned, control characters, backslashes and
invalid UTF-8 are escaped as \\xNN, and one run logs at most 64 KiB of it,
then one note. A build's npm output goes through the same path, under the
deploy's tag."""
import json
import os
import re
import uuid

from agent_code import VAR, deployed_agent, needs_runner, tarball, wait_status

LOG = os.path.join(VAR, "log", "runner.log")
LOG_MAX = 64 * 1024
HEADER = rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (INFO|WARN) agenthost-runner\[\d+\] (req=[0-9A-Za-z_-]+ )?"

# Reads the marker from stdin, then writes to stderr: control characters, a
# forged runner line after a newline, a lone CR that would rewind a terminal
# line, invalid UTF-8, a C1 CSI, a bidi override, a typed "\x1b", then 1 MB.
NOISY_JS = r"""
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', () => {
  const m = Buffer.concat(chunks).toString();
  const e = process.stderr;
  e.write(m + ' cr\rINFO rewound \x1b[31mred\x1b[0m \x1b]0;title\x07 nul\x00 del\x7f\n');
  e.write(m + ' next\n[agenthost] 2026-01-01T00:00:00.000Z INFO agenthost-runner[1] forged ' + m + '\n');
  e.write(Buffer.concat([Buffer.from(m + ' bytes '), Buffer.from([0xff, 0xfe, 0xc2, 0x9b]),
                         Buffer.from('2J \u202eevil typed \\x1b unicode \u00e9\n')]));
  e.write(('flood ' + m + ' ' + 'y'.repeat(1000) + '\n').repeat(1000), () => process.stdout.write('done'));
});
"""


def log_lines(marker):
    with open(LOG, "rb") as f:
        return [l.rstrip(b"\n") for l in f if marker in l]


@needs_runner
def test_agent_stderr_is_escaped_tagged_and_capped(client):
    a = deployed_agent(client, NOISY_JS)
    marker = "mark-" + uuid.uuid4().hex
    r = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": marker}, timeout=120)
    assert r.status_code == 200, r.text[:300]
    assert r.json()["response_content"] == "done"
    inv = r.json()["invocation_id"].encode()
    tagged = re.compile(HEADER + rb"\[inv=" + re.escape(inv) + rb"\] ")
    with open(LOG, "rb") as f:
        ours = [l.rstrip(b"\n") for l in f if b"[inv=" + inv + b"]" in l]
    lines = log_lines(marker.encode())
    assert lines, "the agent's stderr is not in the runner log"

    # Every line holding the agent's text starts with the runner's header and
    # the invocation id; no line starts with what the agent wrote.
    for line in lines:
        assert tagged.match(line), line[:200]
    forged = [l for l in lines if b"forged" in l]
    assert len(forged) == 1 and forged[0].index(b"[agenthost] 2026-01-01") > forged[0].index(inv)

    # Nothing raw: no control bytes, all valid UTF-8; the escapes are there.
    text = b"\n".join(ours)
    assert not re.search(rb"[\x00-\x08\x0b-\x1f\x7f]", text)
    text.decode("utf-8")
    assert "\u202e".encode() not in text and b"\xc2\x9b" not in text
    for want in (rb"cr\x0dINFO rewound \x1b[31mred\x1b[0m \x1b]0;title\x07 nul\x00 del\x7f",
                 rb"bytes \xff\xfe\xc2\x9b2J \xe2\x80\xaeevil typed \x5cx1b unicode " + "é".encode()):
        assert any(want in l for l in lines), want

    # Capped: about 64 KiB of the megabyte, then one note.
    notes = [l for l in ours if b"stderr over 65536 bytes" in l]
    assert len(notes) == 1 and tagged.match(notes[0])
    logged = sum(len(tagged.sub(b"", l)) + 1 for l in ours if l is not notes[0] and tagged.match(l))
    assert LOG_MAX - 2000 < logged <= LOG_MAX
    assert sum(b"flood" in l for l in lines) < 70


@needs_runner
def test_build_output_is_escaped_under_the_deploy_tag(client):
    """npm's stderr (here a failing postinstall script's) is logged the same way."""
    marker = "npm-" + uuid.uuid4().hex
    script = "node -e \"process.stderr.write('%s \\\\x1b[31mred\\\\r'); process.exit(1)\"" % marker
    manifest = {"name": "noisy", "version": "1.0.0", "entrypoint": "index.js", "runtime": "node"}
    pkg = {"name": "noisy", "version": "1.0.0", "scripts": {"postinstall": script}}
    r = client.post("/agents", json={"name": "noisy " + uuid.uuid4().hex[:8], "source_type": "local"})
    assert r.status_code == 201, r.text
    agent = r.json()
    code = tarball({"agent.json": json.dumps(manifest), "index.js": "process.stdin.resume();",
                    "package.json": json.dumps(pkg)})
    r = client.put(f"/agents/{agent['slug']}/code", data=code,
                   headers={"Content-Type": "application/gzip"})
    assert r.status_code == 200, r.text
    assert client.post(f"/agents/{agent['slug']}/deploy").status_code == 202
    assert wait_status(client, agent["slug"], timeout=240)["status"] == "error"
    lines = log_lines(marker.encode())
    # npm's own lines, and the runner's note of the failure (its summary of
    # npm's output, control characters already blanked out).
    npm = [l for l in lines if b"deploy failed" not in l]
    assert npm, "npm's output is not in the runner log"
    tag = re.compile(HEADER + rb"\[agent=[^\]]*\(" + re.escape(agent["id"].encode()) + rb"\) job=\d+\] ")
    for line in npm:
        assert tag.match(line), line[:200]
    for line in lines:
        assert not re.search(rb"[\x00-\x1f\x7f]", line), line[:200]
    assert any(rb"\x1b[31mred\x0d" in line for line in npm)
