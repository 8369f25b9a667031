"""Streamed invocations (issue 28): "stream": true (or Accept:
text/event-stream) answers text/event-stream: `start` with the invocation id,
`output` events carrying the agent's stdout as it is written, in order and
never splitting a UTF-8 character, a comment after 15 s of silence, `done`
with exactly the record a plain call returns (and the history holds), and
`error` with the API's error shape for a failure. The rate-limit headers are
on the first bytes. The call is capped, recorded and billed as a plain one; a
client that disconnects does not stop it; it works in sessions, for warm
agents and behind the TLS site; a runner killed mid-stream ends it with an
error event and a failed record; a streaming call can be read and cancelled
by the id of its start event; one whose worker dies is recorded failed by
the API's sweep."""
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.parse

import pytest

from agent_code import VAR, config_get, deployed_agent, needs_runner
from conftest import BASE_URL, proc_stat, wait_until
from test_deploy import restart_runner, runner_pid
from test_invoke_async import TICKS_JS, finished, get, listed
from test_nginx_tls import free_port, tls_nginx  # noqa: F401 (fixture)
from test_warm import pro, wait_warm  # noqa: F401 (fixture)

# Writes the bytes of q.parts (lists of byte values), q.ms apart, then exits q.exit.
PARTS_JS = r"""
let d = '';
process.stdin.on('data', c => d += c).on('end', () => {
  const q = JSON.parse(d);
  let i = 0;
  const next = () => {
    if (i >= q.parts.length) { process.exitCode = q.exit || 0; return; }
    process.stdout.write(Buffer.from(q.parts[i++]), () => setTimeout(next, q.ms || 0));
  };
  next();
});
"""


def parse_sse(lines):
    """(events, comments): events as (name, data-dict) in order."""
    events, comments, name, data = [], [], None, []
    for raw in lines:
        line = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        if line == "":
            if name or data:
                events.append((name, json.loads("\n".join(data))))
            name, data = None, []
        elif line.startswith(":"):
            comments.append(line)
        elif line.startswith("event: "):
            name = line[len("event: "):]
        elif line.startswith("data: "):
            data.append(line[len("data: "):])
    return events, comments


def stream(client, slug, body, headers=None, timeout=120):
    body = dict(body)
    if headers is None:
        body["stream"] = True
    r = client.post(f"/agents/{slug}/invoke", json=body, headers=headers or {}, stream=True,
                    timeout=timeout)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/event-stream")
    events, comments = parse_sse(r.iter_lines(decode_unicode=False))
    return r, events, comments


def text_of(events):
    return "".join(d["text"] for n, d in events if n == "output")


def parts(*chunks, ms=200, code=0):
    return json.dumps({"parts": [list(c) for c in chunks], "ms": ms, "exit": code})


@needs_runner
def test_stream_events_in_order_and_done_is_the_plain_record(client):
    a = deployed_agent(client, TICKS_JS)
    slug = a["slug"]
    r, events, _ = stream(client, slug, {"prompt": json.dumps({"n": 4, "ms": 300})})
    # The rate-limit headers are on the first bytes (the head).
    assert int(r.headers["X-RateLimit-Remaining"]) < int(r.headers["X-RateLimit-Limit"])
    assert r.headers.get("Cache-Control") == "no-cache"
    names = [n for n, _ in events]
    assert names[0] == "start" and names[-1] == "done" and set(names[1:-1]) == {"output"}
    start, done = events[0][1], events[-1][1]
    assert start["invocation_id"] == done["invocation_id"]
    # Written 300 ms apart: each line its own event, in order.
    assert [d["text"] for n, d in events if n == "output"][:3] == ["tick0\n", "tick1\n", "tick2\n"]
    assert text_of(events) == "tick0\ntick1\ntick2\ntick3\ndone" == done["response_content"]
    # The keys of a plain call's 200 answer, and the history's record.
    plain = client.post(f"/agents/{slug}/invoke", json={"prompt": json.dumps({"n": 1})}, timeout=60)
    assert plain.status_code == 200
    assert set(done) == set(plain.json())
    assert done["status"] == "completed" and done["total_cost_usd"] > 0
    rec = get(client, slug, done["invocation_id"])
    assert {k: v for k, v in rec.items() if k != "prompt"} == {k: v for k, v in done.items() if k != "files"}


@needs_runner
def test_accept_header_streams_too(client):
    a = deployed_agent(client, TICKS_JS)
    _, events, _ = stream(client, a["slug"], {"prompt": json.dumps({"n": 2})},
                          headers={"Accept": "text/event-stream"})
    assert events[-1][0] == "done" and text_of(events) == "tick0\ntick1\ndone"
    # A plain Accept keeps the plain answer.
    r = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": json.dumps({"n": 1})},
                    headers={"Accept": "application/json"}, timeout=60)
    assert r.headers["Content-Type"].startswith("application/json")


@needs_runner
def test_a_character_written_in_two_pieces_is_never_split(client):
    a = deployed_agent(client, PARTS_JS)
    euro = "€".encode()           # 3 bytes
    grin = "😀".encode()          # 4 bytes
    prompt = parts(b"a" + euro[:2], euro[2:] + b"b" + grin[:1], grin[1:3], grin[3:] + b"c")
    _, events, _ = stream(client, a["slug"], {"prompt": prompt})
    outs = [d["text"] for n, d in events if n == "output"]
    assert "".join(outs) == "a€b😀c"
    assert all("\ufffd" not in t for t in outs), outs
    assert len(outs) >= 2, outs  # it did stream in pieces
    assert events[-1][1]["response_content"] == "a€b😀c"


@needs_runner
def test_a_failure_is_an_error_event_in_the_error_shape(client):
    a = deployed_agent(client, PARTS_JS)
    _, events, _ = stream(client, a["slug"], {"prompt": parts(b"partial", code=3)})
    assert text_of(events) == "partial"
    name, body = events[-1]
    assert name == "error"
    assert body["detail"] == "Invocation failed: agent exited with status 3"
    assert body["invocation"]["status"] == "failed" and body["invocation"]["response_content"] == "partial"
    # The same as the plain call's error body.
    plain = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": parts(b"partial", code=3)}, timeout=60)
    assert plain.status_code == 500 and set(plain.json()) == set(body)
    assert set(plain.json()["invocation"]) == set(body["invocation"])


@needs_runner
def test_the_timeout_applies(client):
    a = deployed_agent(client, TICKS_JS)
    _, events, _ = stream(client, a["slug"], {"prompt": json.dumps({"n": 100, "ms": 300}),
                                              "timeout_seconds": 1})
    name, body = events[-1]
    assert name == "error" and body["detail"] == "Invocation timed out after 1 seconds"
    assert body["invocation"]["status"] == "failed"
    assert text_of(events).startswith("tick0\n")


BIG_JS = r"""
process.stdin.resume();
process.stdin.on('end', () => {
  const mb = Buffer.alloc(1 << 20, 'x');
  let i = 0;
  const next = () => { if (i++ < 11) process.stdout.write(mb, next); };
  next();
});
"""


@needs_runner
def test_the_output_cap_applies(client):
    """10 MiB (max_output_bytes) at most reach the client; then the error."""
    a = deployed_agent(client, BIG_JS)
    _, events, _ = stream(client, a["slug"], {"prompt": "go"})
    name, body = events[-1]
    assert name == "error" and body["detail"] == "Invocation failed: output exceeded 10485760 bytes", body
    assert len(text_of(events)) == 10 << 20
    assert len(body["invocation"]["response_content"]) == 64 * 1024  # what a failure returns
    # A prompt over the cap is refused before anything streams.
    r = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": "x" * (2 << 20 + 1), "stream": True})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "prompt"], r.text[:300]


@needs_runner
def test_a_client_that_disconnects_does_not_stop_the_call(client):
    a = deployed_agent(client, TICKS_JS)
    slug = a["slug"]
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": json.dumps({"n": 8, "ms": 400}),
                                                    "stream": True}, stream=True, timeout=60)
    lines = r.iter_lines()
    head = [next(lines) for _ in range(2)]
    inv = json.loads(head[1].decode()[len("data: "):])["invocation_id"]
    r.close()  # gone, long before the agent's 3.2 s
    rec = finished(client, slug, inv)
    assert rec["status"] == "completed", rec
    assert rec["response_content"] == "".join(f"tick{i}\n" for i in range(8)) + "done"


@needs_runner
def test_a_streaming_call_can_be_cancelled(client):
    a = deployed_agent(client, TICKS_JS)
    slug = a["slug"]
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": json.dumps({"n": 1000, "ms": 200}),
                                                    "stream": True}, stream=True, timeout=60)
    lines = r.iter_lines()
    head = [next(lines) for _ in range(2)]
    inv = json.loads(head[1].decode()[len("data: "):])["invocation_id"]
    assert get(client, slug, inv)["status"] == "running"
    time.sleep(1)
    c = client.post(f"/agents/{slug}/invocations/{inv}/cancel")
    assert c.status_code == 200, c.text
    events, _ = parse_sse(lines)
    name, body = events[-1]
    assert name == "error" and body["invocation"]["status"] == "cancelled", events[-1]
    assert body["invocation"] == {**c.json(), "files": []} or body["invocation"]["invocation_id"] == inv


@needs_runner
def test_streams_in_a_session(client):
    js = r"""
const fs = require('fs');
let d = '';
process.stdin.on('data', c => d += c).on('end', () => {
  let n = 0;
  try { n = +fs.readFileSync('/tmp/count'); } catch (e) {}
  fs.writeFileSync('/tmp/count', String(n + 1));
  process.stdout.write('call ' + (n + 1));
});
"""
    a = deployed_agent(client, js)
    for want in ("call 1", "call 2"):
        _, events, _ = stream(client, a["slug"], {"prompt": "x", "session_id": "s-stream"})
        assert text_of(events) == want and events[-1][1]["session_id"] == "s-stream"


WARM_JS = r"""
process.stdout.write('early ' + Date.now() + ';');
let d = '';
process.stdin.on('data', c => d += c).on('end', () => {
  process.stdout.write('got ' + d, () => setTimeout(() => process.stdout.write(';late'), 300));
});
"""


@needs_runner
def test_a_warm_agent_streams_what_it_wrote_before_and_after(pro):
    a = deployed_agent(pro, WARM_JS, min_warm=1)
    r = pro.post(f"/agents/{a['slug']}/invoke", json={"prompt": "first"}, timeout=60)
    assert r.status_code == 200, r.text  # gives the runner the call's environment
    wait_warm(a["id"], 1)
    sent = time.time() * 1000
    _, events, _ = stream(pro, a["slug"], {"prompt": "hi"})
    text = text_of(events)
    early, rest = text.split(";", 1)
    assert int(early.split()[1]) < sent, "not served by a warm process"
    assert rest == "got hi;late" and events[-1][0] == "done"
    assert events[-1][1]["response_content"] == text


@needs_runner
@pytest.mark.slow
def test_a_silent_agent_gets_keepalive_comments(client):
    """A comment after stream_keepalive_seconds without an event (15 by
    default, less in the test configuration): the agent is silent longer."""
    keepalive = int(config_get("stream_keepalive_seconds", "15"))
    a = deployed_agent(client, PARTS_JS)
    _, events, comments = stream(client, a["slug"],
                                 {"prompt": parts(b"x", b"y", ms=keepalive * 1000 + 1500)})
    assert comments and all(c.startswith(":") for c in comments), comments
    assert text_of(events) == "xy" and events[-1][0] == "done"


@needs_runner
@pytest.mark.slow
def test_runner_killed_mid_stream_ends_with_an_error_event(client):
    a = deployed_agent(client, TICKS_JS)
    slug = a["slug"]
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": json.dumps({"n": 1000, "ms": 200}),
                                                    "stream": True}, stream=True, timeout=60)
    lines = r.iter_lines()
    got = []
    for line in lines:  # until some output came
        got.append(line)
        if line.startswith(b"data: {\"text\""):
            break
    old = runner_pid()
    os.kill(old, signal.SIGKILL)
    try:
        events, _ = parse_sse(got + [b""] + list(lines))
        name, body = events[-1]
        assert name == "error", events[-3:]
        assert "runner" in body["detail"], body
        inv = body["invocation"]
        assert inv["status"] == "failed"
        assert get(client, slug, inv["invocation_id"])["status"] == "failed"
    finally:
        restart_runner(old)


@pytest.fixture
def proxy_nginx():
    """A reverse proxy in front of the stack's site, as an operator's load
    balancer would be: an nginx of its own with proxy_buffering at its
    default (on). Yields its base URL."""
    d = tempfile.mkdtemp(prefix="ah-proxy-")
    port = free_port()
    upstream = urllib.parse.urlsplit(BASE_URL).netloc
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {d}/body; fastcgi_temp_path {d}/fcgi;
    proxy_temp_path {d}/proxy; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{ proxy_pass http://{upstream}; proxy_http_version 1.1; }}
    }}
}}
""")
    subprocess.run(["nginx", "-c", conf, "-p", d], check=True)
    try:
        assert wait_until(lambda: os.path.exists(os.path.join(d, "nginx.pid")), timeout=5)
        yield f"http://127.0.0.1:{port}" + urllib.parse.urlsplit(BASE_URL).path
    finally:
        pid = int(open(os.path.join(d, "nginx.pid")).read())
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not os.path.exists(os.path.join(d, "nginx.pid")), timeout=10)
        shutil.rmtree(d, ignore_errors=True)


@needs_runner
def test_a_chunk_passes_a_reverse_proxy_before_the_agent_writes_again(client, proxy_nginx):
    """The agent writes, then is silent for 6 s: the chunk reaches a client
    behind a reverse proxy (an nginx with proxy_buffering on, its default)
    while the call still runs, not with its end."""
    a = deployed_agent(client, PARTS_JS)
    slug = a["slug"]
    r = client.s.post(f"{proxy_nginx}/agents/{slug}/invoke", json={"prompt": parts(b"first", b"second", ms=6000),
                                                 "stream": True}, stream=True, timeout=60)
    assert r.status_code == 200, r.text
    got, lines = [], r.iter_lines()
    for line in lines:
        got.append(line)
        if line.startswith(b"data: {\"text\""):
            break
    events, _ = parse_sse(got + [b""])
    inv = events[0][1]["invocation_id"]
    assert text_of(events) == "first"
    # Still running: the chunk came before the agent's next write, not with
    # the end of the call.
    assert get(client, slug, inv)["status"] == "running"
    rest, _ = parse_sse(list(lines))
    assert text_of(rest) == "second" and rest[-1][0] == "done"


def api_workers():
    """This stack's API master's children: its workers and its background
    process (the scheduler and the sweep)."""
    with open(os.path.join(VAR, "run", "api.pid")) as f:
        master = int(f.read().strip())
    out = []
    for d in os.listdir("/proc"):
        try:
            if int(proc_stat(d)[1]) == master:
                out.append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    return out


@needs_runner
def test_a_stream_whose_worker_dies_ends_failed_without_being_read(client):
    """The worker streaming a call is killed (an API restart or crash): the
    API's periodic sweep records the call failed with the reason, though
    nobody reads it by id, and the listing and GET agree."""
    a = deployed_agent(client, TICKS_JS)
    slug = a["slug"]
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": json.dumps({"n": 1000, "ms": 200}),
                                                    "stream": True}, stream=True, timeout=60)
    lines = r.iter_lines()
    head = [next(lines) for _ in range(2)]
    inv = json.loads(head[1].decode()[len("data: "):])["invocation_id"]
    for pid in api_workers():  # the master starts them again
        os.kill(pid, signal.SIGKILL)
    r.close()
    rec = listed(client, slug, inv)
    assert rec["status"] == "failed" and "lost" in rec["error"], rec
    assert get(client, slug, inv) == rec
    # Its run went on in the runner without an owner: gone with its agent.
    assert client.delete(f"/agents/{slug}").status_code == 204


@needs_runner
def test_streams_behind_the_tls_site(client, tls_nginx):  # noqa: F811
    https, _ = tls_nginx
    a = deployed_agent(client, TICKS_JS)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection("127.0.0.1", https, context=ctx, timeout=60)
    body = json.dumps({"prompt": json.dumps({"n": 3, "ms": 500}), "stream": True})
    conn.request("POST", f"/api/v1/agents/{a['slug']}/invoke", body=body,
                 headers={"Authorization": client.s.headers["Authorization"],
                          "Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream")
    assert resp.getheader("X-RateLimit-Limit")
    # Unbuffered: the first output arrives while the agent still runs (its
    # last line is 1 s later), not all at the end.
    seen = []
    while True:
        line = resp.readline()
        if not line:
            break
        seen.append((time.time(), line.rstrip(b"\r\n")))
    events, _ = parse_sse([l for _, l in seen])
    assert text_of(events) == "tick0\ntick1\ntick2\ndone" and events[-1][0] == "done"
    t_first = next(t for t, l in seen if l.startswith(b"data: {\"text\""))
    t_done = next(t for t, l in seen if l == b"event: done")
    assert t_done - t_first > 0.5, "the stream was buffered"
