"""The model gateway fails closed (issue 26, part 2), against the real stack.

The runner runs with the gateway on, as in test_model_gateway.py, in front of
the same stand-in provider (its Provider: Messages, Message Batches, and
answer headers an agent must not see). An agent makes the calls its prompt
lists, through the gateway as an SDK would (fetch with the token as
x-api-key) or as raw bytes on a socket (what fetch refuses to send), and
prints what it got. Asserted, each as the attack it stops:
  - Message Batches (create, then results) are refused and never reach the
    provider, so no model work goes unbilled;
  - an answer whose usage cannot be read ends the invocation's model access
    (the next call is refused) and the invocation fails saying so, in its
    result and in its history, instead of being recorded as free;
  - prompt-cache writes and reads are priced by their own settings;
  - request header names that are not tokens (and values with a line break)
    are refused before anything is forwarded;
  - the provider's cookies, organisation and other headers are not passed
    back; content-type and request-id are.
"""
import json

import pytest

from agent_code import deployed_agent, exact, model_cost, needs_runner
from conftest import new_client
from test_model_gateway import (CACHE_USAGE, JSON_USAGE, Provider, gateway_runner,  # noqa: F401
                                provider)

pytestmark = needs_runner

# Makes the calls of its prompt ({"calls": [...]}) and prints their outcomes.
# A call is {"method", "path", "body"} through fetch, or {"raw": text} sent as
# bytes, TOKEN standing for the invocation's token.
AGENT_JS = r"""
const net = require('net');
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', async () => {
  const cmd = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const base = process.env.ANTHROPIC_BASE_URL, token = process.env.ANTHROPIC_API_KEY;
  const out = [];
  for (const c of cmd.calls) {
    if (c.raw) { out.push(await raw(base, c.raw.replace('TOKEN', token))); continue; }
    const r = await fetch(base + c.path, {
      method: c.method,
      headers: {'x-api-key': token, 'anthropic-version': '2023-06-01',
                'content-type': 'application/json'},
      body: c.body ? JSON.stringify(c.body) : undefined,
    });
    out.push({status: r.status, headers: Object.fromEntries(r.headers), body: await r.text()});
  }
  process.stdout.write(JSON.stringify(out));
});
function raw(base, text) {
  return new Promise(resolve => {
    const u = new URL(base);
    let data = '';
    const s = net.connect(+u.port || 80, u.hostname, () => s.write(text));
    s.on('data', d => data += d);
    s.on('end', () => resolve({status: +data.split(' ')[1], body: data}));
    s.on('error', e => resolve({status: -1, body: String(e)}));
  });
}
"""


def message(model="test-model", text="hi"):
    return {"method": "POST", "path": "/v1/messages",
            "body": {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": text}]}}


@pytest.fixture(scope="module")
def owner():
    """One user for the module's agent (its invocations stay under the
    per-minute limit)."""
    return new_client()


@pytest.fixture(scope="module")
def agent(gateway_runner, owner):  # noqa: F811
    a = deployed_agent(owner, AGENT_JS)
    yield a["slug"]
    owner.delete(f"/agents/{a['slug']}")


def run(client, slug, *calls):
    """The invocation (status, result) and what each call got."""
    Provider.paths.clear()
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": json.dumps({"calls": list(calls)})})
    assert r.status_code in (200, 500), r.text
    inv = exact(r) if r.status_code == 200 else exact(r)["invocation"]
    return r, inv, json.loads(inv["response_content"])


def test_message_batches_are_refused(owner, agent):
    """The issue's attack: a batch created and its results read through the
    gateway would give the agent model work the invocation never pays for."""
    create = {"method": "POST", "path": "/v1/messages/batches",
              "body": {"requests": [{"custom_id": "r1", "params": message()["body"]}]}}
    results = {"method": "GET", "path": "/v1/messages/batches/msgbatch_1/results"}
    r, inv, got = run(owner, agent, create, results)
    assert [g["status"] for g in got] == [403, 403], got
    assert all(json.loads(g["body"])["error"]["type"] == "permission_error" for g in got)
    assert "batched" not in got[1]["body"]
    assert not any("batches" in p for _, p in Provider.paths), Provider.paths
    assert r.status_code == 200
    assert (inv["model_input_tokens"], inv["model_output_tokens"]) == (0, 0)


@pytest.mark.parametrize("model,why", [("no-usage", "no usage in the answer"),
                                       ("plain-text", "neither JSON nor server-sent events")])
def test_unreadable_usage_ends_model_access(owner, agent, model, why):
    """An answer whose usage cannot be read is not free: the agent's model
    access ends at once, and the invocation fails naming the cause, in history
    too."""
    r, inv, got = run(owner, agent, message(model), message())
    assert got[0]["status"] == 200
    assert got[1]["status"] == 403, got
    assert "model access for this invocation has ended" in got[1]["body"]
    assert Provider.paths == [("POST", "/v1/messages")], "the second call never left the sandbox"
    assert r.status_code == 500
    assert inv["status"] == "failed"
    assert inv["error"] == ("model access ended: the answer to POST /v1/messages carried no "
                            f"usage the gateway could read ({why})"), inv
    assert r.json()["detail"] == "Invocation failed: " + inv["error"]
    hist = owner.get(f"/agents/{agent}/invocations").json()
    row = next(i for i in hist if i["invocation_id"] == inv["invocation_id"])
    assert (row["status"], row["error"]) == ("failed", inv["error"])


def test_cache_tokens_priced_by_their_settings(owner, agent):
    """A prompt-cache read costs a tenth of input, a write a quarter more and
    a write kept for an hour twice input (the defaults, as Anthropic prices
    them): none is full-price input."""
    r, inv, got = run(owner, agent, message("cache"))
    assert got[0]["status"] == 200 and r.status_code == 200
    cw, cr = CACHE_USAGE["cache_creation_input_tokens"], CACHE_USAGE["cache_read_input_tokens"]
    total_in = CACHE_USAGE["input_tokens"] + cw + cr
    cw1h = CACHE_USAGE["cache_creation"]["ephemeral_1h_input_tokens"]
    assert (inv["model_input_tokens"], inv["model_output_tokens"]) == (total_in, 300)
    # with the defaults: 100 x 3 + 1500 x 3.75 + 500 x 6 + 50000 x 0.30 + 300 x 15 per million
    assert inv["total_cost_usd"] == model_cost(total_in, 300, cw, cr, cw1h)
    assert model_cost(total_in, 300, cw, cr, cw1h) not in (model_cost(total_in, 300),
                                                           model_cost(total_in, 300, cw, cr))


@pytest.mark.parametrize("line", [
    "anthropic-beta : x",        # space before the colon
    "x(y): 1",                   # a separator in the name
    "x-a: 1\nHost: elsewhere",   # a lone LF: a header of the agent's making upstream
    " folded: 1",                # an obsolete folded line
])
def test_bad_header_names_refused(owner, agent, line):
    raw = ("POST /v1/messages HTTP/1.1\r\nHost: gw\r\nx-api-key: TOKEN\r\n" + line +
           "\r\ncontent-type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
    _, _, got = run(owner, agent, {"raw": raw})
    assert got[0]["status"] == 400, got
    assert Provider.paths == [], "nothing was forwarded"


def test_answer_headers_from_the_allow_list(owner, agent):
    _, _, got = run(owner, agent, message())
    h = got[0]["headers"]
    assert got[0]["status"] == 200
    assert h["content-type"] == "application/json" and h["request-id"] == "req_test"
    for name in ("set-cookie", "anthropic-organization-id", "x-internal-route"):
        assert name not in h, h
    assert json.loads(got[0]["body"])["usage"] == JSON_USAGE
