"""The model gateway (model_gateway = on), against the real stack.

The runner is restarted for this module with the gateway on, an operator key,
and model_gateway_upstream pointing at a provider-compatible server this test
starts on 127.0.0.1 (it answers POST /v1/messages, as JSON or as server-sent
events, with a usage block, and only when x-api-key is the operator key); the
runner is put back as it was afterwards. The API's own configuration is not
changed: the runner alone decides whether agents get the key or a token.

An agent calls the gateway the way an SDK does (ANTHROPIC_BASE_URL plus the key
variable as x-api-key) and reports what it saw. Asserted: the call is answered
by the provider through the gateway; the agent's environment holds a token,
never the operator key; the provider receives the operator key, never the
token; a wrong token and the token of an invocation that has ended are refused
with 401; the invocation records the provider's token counts and is priced by
them; neither key nor token reaches the runner's log.
"""
import json
import os
import secrets
import threading
import uuid
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent_code import cost, deployed_agent, exact, model_cost, needs_runner
from conftest import VAR
from test_deploy_faults import runner_with

pytestmark = needs_runner

OPERATOR_KEY = "sk-ant-test-" + secrets.token_hex(16)

# JSON answer: 1234 input (1000 + 200 cache writes + 34 cache reads), 567 output.
JSON_USAGE = {"input_tokens": 1000, "cache_creation_input_tokens": 200,
              "cache_read_input_tokens": 34, "output_tokens": 567}
# The model "cache": mostly prompt-cache reads, priced apart from plain input.
CACHE_USAGE = {"input_tokens": 100, "cache_creation_input_tokens": 2000,
               "cache_creation": {"ephemeral_5m_input_tokens": 1500, "ephemeral_1h_input_tokens": 500},
               "cache_read_input_tokens": 50000, "output_tokens": 300}
# What a Message Batch's results report (the figures).
BATCH_USAGE = {"input_tokens": 15000, "output_tokens": 12000}
# Streamed answer: input in message_start, cumulative output in message_delta.
SSE_IN, SSE_OUT = 100, 40
# The gateway's body cap for this module; bodies stream through it in pieces.
MAX_BODY = 256 * 1024

# Calls the gateway as an SDK would, then prints what it saw as JSON. The prompt
# is JSON: {"text", "stream", "old_token", "big"}.
AGENT_JS = r"""
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', async () => {
  const cmd = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const base = process.env.ANTHROPIC_BASE_URL, token = process.env.ANTHROPIC_API_KEY;
  const call = async (key, stream, text = cmd.text) => {
    const r = await fetch(base + '/v1/messages', {
      method: 'POST',
      headers: {'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json'},
      body: JSON.stringify({model: 'test-model', max_tokens: 64, stream,
                            messages: [{role: 'user', content: text}]}),
    });
    return {status: r.status, type: r.headers.get('content-type'), body: await r.text()};
  };
  const out = {env: process.env, token};
  out.answer = await call(token, !!cmd.stream);
  out.wrong = (await call('ahg_' + 'x'.repeat(43), false)).status;
  if (cmd.old_token) out.old = (await call(cmd.old_token, false)).status;
  if (cmd.big) out.big = (await call(token, false, 'y'.repeat(cmd.big))).status;
  process.stdout.write(JSON.stringify(out));
});
"""


class Provider(BaseHTTPRequestHandler):
    """Anthropic's Messages API, as far as this test needs it: Messages (the
    model "no-usage" answers without usage, "plain-text" as text/plain, "cache"
    with prompt-cache counts),
    and Message Batches, whose results carry usage no single call reports."""
    seen = []   # (x-api-key, authorization) of every request
    paths = []  # (method, path) of every request

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not self.authorised():
            return
        if self.path == "/v1/messages/batches":
            return self.answer(200, "application/json",
                               b'{"id":"msgbatch_1","type":"message_batch","processing_status":"ended"}')
        if self.path.split("?")[0] != "/v1/messages":
            return self.answer(404, "application/json", b'{"type":"error"}')
        req = json.loads(body)
        text = "echo: " + req["messages"][0]["content"]
        if req.get("stream"):
            return self.answer(200, "text/event-stream", sse(text))
        msg = {"id": "msg_1", "type": "message", "role": "assistant", "model": req["model"],
               "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
               "usage": CACHE_USAGE if req["model"] == "cache" else JSON_USAGE}
        if req["model"] == "no-usage":
            del msg["usage"]
        self.answer(200, "text/plain" if req["model"] == "plain-text" else "application/json",
                    json.dumps(msg).encode())

    def do_GET(self):
        if not self.authorised():
            return
        result = {"custom_id": "r1", "result": {"type": "succeeded", "message": {
            "content": [{"type": "text", "text": "batched"}], "usage": BATCH_USAGE}}}
        self.answer(200, "application/binary", json.dumps(result).encode() + b"\n")

    def authorised(self):
        Provider.seen.append((self.headers.get("x-api-key"), self.headers.get("authorization")))
        Provider.paths.append((self.command, self.path))
        if self.headers.get("x-api-key") == OPERATOR_KEY:
            return True
        self.answer(401, "application/json",
                    b'{"type":"error","error":{"type":"authentication_error"}}')
        return False

    def answer(self, status, ctype, data):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_test")
        # not for agents: only model_gateway_response_headers pass
        self.send_header("Set-Cookie", "provider_session=secret; Path=/")
        self.send_header("anthropic-organization-id", "org-operator")
        self.send_header("X-Internal-Route", "edge-7")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def sse(text):
    events = [
        {"type": "message_start", "message": {"id": "msg_2", "type": "message", "content": [],
                                              "usage": {"input_tokens": SSE_IN, "output_tokens": 1}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": SSE_OUT}},
        {"type": "message_stop"},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


@pytest.fixture(scope="module")
def provider():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(scope="module")
def gateway_runner(provider):
    with runner_with(model_gateway="on", model_key_value=OPERATOR_KEY,
                     model_gateway_upstream=provider, model_gateway_max_body_bytes=MAX_BODY):
        yield


def invoke(client, slug, session_id=None, **cmd):
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": json.dumps(cmd), "session_id": session_id})
    assert r.status_code == 200, r.text
    return exact(r), json.loads(r.json()["response_content"])


def test_without_the_gateway_results_are_the_contracts(client):
    """The stack as configured (gateway off): nothing measured, no extra field,
    the key variable untouched and no gateway address. First in
    this file: the module's gateway runner is started after it."""
    slug = deployed_agent(client)["slug"]
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "!env"})
    assert r.status_code == 200, r.text
    assert "model_input_tokens" not in r.json() and "model_output_tokens" not in r.json()
    assert "ANTHROPIC_BASE_URL" not in json.loads(r.json()["response_content"])
    u = client.get("/usage").json()
    assert (u["model_invocations"], u["model_input_tokens"], u["model_output_tokens"]) == (0, 0, 0), u


def test_agent_calls_the_model_through_the_gateway(gateway_runner, client):
    Provider.seen.clear()
    slug = deployed_agent(client, AGENT_JS)["slug"]
    inv, seen = invoke(client, slug, text="hello", big=MAX_BODY + 1)

    # The agent got its answer from the provider, through the gateway.
    assert seen["answer"]["status"] == 200, seen
    assert json.loads(seen["answer"]["body"])["content"][0]["text"] == "echo: hello"
    # It holds a token and the gateway's address, never the operator key.
    assert seen["env"]["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1")
    assert seen["token"].startswith("ahg_") and seen["token"] != OPERATOR_KEY
    assert not any(OPERATOR_KEY in v for v in seen["env"].values())
    # The provider saw the operator key and never the agent's token.
    assert (OPERATOR_KEY, None) in Provider.seen
    assert not any(seen["token"] in (k or "") + (a or "") for k, a in Provider.seen)
    # Another token is refused by the gateway itself (the provider never sees it).
    assert seen["wrong"] == 401
    # So is a body over the cap.
    assert seen["big"] == 413
    assert len(Provider.seen) == 1

    # The provider's counts are recorded and priced.
    model_in = JSON_USAGE["input_tokens"] + JSON_USAGE["cache_creation_input_tokens"] + \
        JSON_USAGE["cache_read_input_tokens"]
    assert inv["model_input_tokens"] == model_in
    assert inv["model_output_tokens"] == JSON_USAGE["output_tokens"]
    assert inv["total_cost_usd"] == model_cost(model_in, JSON_USAGE["output_tokens"],
                                               JSON_USAGE["cache_creation_input_tokens"],
                                               JSON_USAGE["cache_read_input_tokens"])
    hist = client.get(f"/agents/{slug}/invocations").json()
    row = next(i for i in hist if i["invocation_id"] == inv["invocation_id"])
    assert (row["model_input_tokens"], row["model_output_tokens"]) == (model_in, 567)

    # A second invocation: the first one's token is dead, a body near the cap
    # arrives whole, and a streamed answer is metered from its message_start
    # and message_delta events.
    text = "again " + "z" * (MAX_BODY - 1024)
    inv2, seen2 = invoke(client, slug, text=text, stream=True, old_token=seen["token"])
    assert seen2["answer"]["status"] == 200
    assert seen2["answer"]["type"].startswith("text/event-stream")
    assert json.dumps("echo: " + text) in seen2["answer"]["body"]
    assert seen2["old"] == 401 and seen2["token"] != seen["token"]
    assert (inv2["model_input_tokens"], inv2["model_output_tokens"]) == (SSE_IN, SSE_OUT)
    assert inv2["total_cost_usd"] == cost(SSE_IN, SSE_OUT)

    with open(os.path.join(VAR, "log", "runner.log"), errors="replace") as f:
        log = f.read()
    assert OPERATOR_KEY not in log and seen["token"] not in log and seen2["token"] not in log


def test_gateway_in_a_session(gateway_runner, client):
    """A session's sandbox keeps its network namespace between calls: each call
    gets its own gateway there, with its own token, and the previous one's is
    dead."""
    slug = deployed_agent(client, AGENT_JS)["slug"]
    sid = "gw-" + uuid.uuid4().hex[:12]
    _, first = invoke(client, slug, sid, text="one")
    inv, second = invoke(client, slug, sid, text="two", old_token=first["token"])
    assert first["answer"]["status"] == second["answer"]["status"] == 200
    assert json.loads(second["answer"]["body"])["content"][0]["text"] == "echo: two"
    assert second["old"] == 401 and second["token"] != first["token"]
    assert inv["session_id"] == sid and inv["model_output_tokens"] == JSON_USAGE["output_tokens"]


def test_agent_without_model_calls_records_zero(gateway_runner, client):
    """Measured, and nothing used: 0 (present), and priced at nothing."""
    slug = deployed_agent(client)["slug"]
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "plain " + uuid.uuid4().hex})
    assert r.status_code == 200, r.text
    inv = exact(r)
    assert (inv["model_input_tokens"], inv["model_output_tokens"]) == (0, 0)
    assert inv["total_cost_usd"] == Decimal(0)


def test_gateway_for_warm_processes(gateway_runner):
    """Warm agents (issue 15): a warm process's environment holds a token of its
    own, made when it started; the call that takes it serves the gateway with
    that token, and it dies with the call like any other."""
    from conftest import new_client
    from test_warm import wait_warm
    c = new_client("pro")
    a = deployed_agent(c, AGENT_JS, min_warm=2)
    try:
        _, first = invoke(c, a["slug"], text="cold")
        tokens = [first["token"]]
        for text in ("warm one", "warm two"):
            wait_warm(a["id"], 1)
            _, seen = invoke(c, a["slug"], text=text, old_token=tokens[-1])
            assert seen["answer"]["status"] == 200, seen
            assert json.loads(seen["answer"]["body"])["content"][0]["text"] == "echo: " + text
            assert seen["old"] == 401 and seen["token"] not in tokens
            assert not any(OPERATOR_KEY in v for v in seen["env"].values())
            tokens.append(seen["token"])
    finally:
        c.delete(f"/agents/{a['slug']}")


def test_model_tokens_shown_beside_the_prompts(gateway_runner, tmp_path):
    """Issue 27: the cost is priced from the provider's tokens, so the CLI's
    summary line and /usage show them beside the prompt's BPE counts (which
    keep their meaning), and a call made without the gateway counts in neither
    model figure."""
    from conftest import new_client
    from test_cli import CLI, cli_env, run
    c = new_client()
    slug = deployed_agent(c, AGENT_JS)["slug"]
    env = cli_env(tmp_path, c.key)
    r = run(env, "invoke", slug, json.dumps({"text": "hi"}))
    assert r.returncode == 0, r.stderr
    model_in = JSON_USAGE["input_tokens"] + JSON_USAGE["cache_creation_input_tokens"] + \
        JSON_USAGE["cache_read_input_tokens"]
    summary = next(l for l in r.stderr.splitlines() if l.startswith("tokens "))  # then the timing line
    assert f"model {model_in} in, {JSON_USAGE['output_tokens']} out" in summary, summary
    want = model_cost(model_in, JSON_USAGE["output_tokens"], JSON_USAGE["cache_creation_input_tokens"],
                      JSON_USAGE["cache_read_input_tokens"])
    assert "$" + str(want.normalize()) in summary or str(want) in summary, summary

    u = c.get("/usage?days=1").json()
    assert (u["model_invocations"], u["model_input_tokens"], u["model_output_tokens"]) == \
        (1, model_in, JSON_USAGE["output_tokens"]), u
    assert u["input_tokens"] > 0 and u["input_tokens"] != model_in
    day = c.get("/usage/daily?days=1").json()["items"][-1]
    assert (day["model_invocations"], day["model_input_tokens"], day["model_output_tokens"]) == \
        (1, model_in, JSON_USAGE["output_tokens"]), day
    r = run(env, "usage", "--days", "1", "--json")
    assert json.loads(r.stdout)["model_input_tokens"] == model_in, r.stdout


def test_gateway_token_is_redacted_from_invocation_logs(gateway_runner, client):
    """Issue 29: an agent that prints its environment to stderr leaves the
    gateway's token out of its invocation's logs (and the runner's log)."""
    from test_invocation_logs import LOGS_JS
    slug = deployed_agent(client, LOGS_JS)["slug"]
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": json.dumps({"cmd": "env"})})
    assert r.status_code == 200, r.text
    inv = r.json()["invocation_id"]
    logs = client.get(f"/agents/{slug}/invocations/{inv}/logs").json()["logs"]
    env = json.loads(logs)
    assert env["ANTHROPIC_API_KEY"] == "[redacted]"
    assert env["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1")
    assert "ahg_" not in logs and OPERATOR_KEY not in logs
    with open(os.path.join(VAR, "log", "runner.log"), errors="replace") as f:
        assert not [l for l in f if f"[inv={inv}]" in l and "ahg_" in l]
