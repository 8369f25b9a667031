"""What a failed invocation is charged, for every kind of failure: the prompt's
tokens and the tokens of the response_content the caller received, never more.
A failure returns at most the first 64 KiB of what the agent printed (nothing
when the agent never ran), so an agent stopped at the 10 MiB output cap is
charged for 64 KiB, not 10 MiB. The result, the history entry and the user's
usage agree on it.

Output tokens are checked without a tokenizer in the test: the same agent
echoes a failure's response_content back, and the echo's input_tokens are
that text's token count."""
from decimal import Decimal

import pytest

from agent_code import cost, deployed_agent, exact, needs_runner
from conftest import db_query

FAILED_OUTPUT_MAX = 64 * 1024
BIG = "word " * 20000  # 100 000 bytes: more than a failure returns

# Writes BIG (or floods stdout), then fails as the prompt says; anything else
# is echoed. Each write completes before the failure.
FAILING_JS = r"""
const big = 'word '.repeat(20000);
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', () => {
  const p = Buffer.concat(chunks).toString('utf8');
  const then = f => process.stdout.write(big, f);
  switch (p) {
  case '!exit': then(() => process.exit(3)); break;
  case '!kill': then(() => process.kill(process.pid, 'SIGKILL')); break;
  case '!sleep': then(() => setInterval(() => {}, 1000)); break;
  case '!hog': then(() => { const keep = []; for (;;) keep.push(Buffer.alloc(64 << 20, 1)); }); break;
  case '!exit-utf8': process.stdout.write('a' + '\u00e9'.repeat(40000), () => process.exit(1)); break;
  case '!flood': process.stdout.write(Buffer.alloc(11 * 1024 * 1024, 0x78)); break;
  default: process.stdout.write(p);
  }
});
"""


def invoke(client, slug, prompt, **fields):
    return client.post(f"/agents/{slug}/invoke", json=dict(prompt=prompt, **fields), timeout=180)


def failed(client, slug, prompt, status, error_has, **fields):
    r = invoke(client, slug, prompt, **fields)
    assert r.status_code == status, r.text[:300]
    res = exact(r)["invocation"]
    assert res["status"] == "failed" and error_has in res["error"], res["error"]
    return res


def tokens_of(client, slug, text):
    """The token count of text, as the service counts it: the echo's input."""
    r = invoke(client, slug, text)
    assert r.status_code == 200, r.text[:300]
    res = exact(r)
    assert res["response_content"] == text
    return res


def check_charge(client, slug, res, want_output, echoes):
    """The rule, for one failed result: the response is what the rule returns,
    the charge is its tokens and the prompt's, and the history says the same."""
    assert res["response_content"] == want_output
    if want_output is None:
        assert res["output_tokens"] == 0
    else:
        echo = tokens_of(client, slug, want_output)
        echoes.append(echo)
        assert res["output_tokens"] == echo["input_tokens"] > 0
    assert res["total_cost_usd"] == cost(res["input_tokens"], res["output_tokens"])
    h = [i for i in exact(client.get(f"/agents/{slug}/invocations", params={"limit": 100}))
         if i["invocation_id"] == res["invocation_id"]]
    assert len(h) == 1
    # The result also lists the session files the call produced (none here);
    # the history record does not carry them.
    assert res.get("files", []) == []
    assert {k: v for k, v in h[0].items() if k != "prompt"} == \
        {k: v for k, v in res.items() if k != "files"}


def check_usage(client, results):
    u = exact(client.get("/usage", params={"days": 1}))
    assert u["total_invocations"] == len(results)
    assert u["input_tokens"] == sum(x["input_tokens"] for x in results)
    assert u["output_tokens"] == sum(x["output_tokens"] for x in results)
    assert u["total_cost_usd"] == sum((x["total_cost_usd"] for x in results), Decimal(0))


@needs_runner
def test_exit_kill_and_sandbox_failure_are_charged_what_was_returned(client):
    a = deployed_agent(client, FAILING_JS)
    slug, echoes = a["slug"], []
    cut = BIG[:FAILED_OUTPUT_MAX]
    exited = failed(client, slug, "!exit", 500, "exited with status 3")
    check_charge(client, slug, exited, cut, echoes)
    killed = failed(client, slug, "!kill", 500, "killed by signal 9")
    # The same output, the same charge: the kind of failure does not matter.
    check_charge(client, slug, killed, cut, echoes)
    assert (killed["output_tokens"], killed["total_cost_usd"]) == \
        (exited["output_tokens"], exited["total_cost_usd"])
    # The runner refuses to run it (an image that is not one of its own): the
    # agent never ran, so nothing came back and only the prompt is charged.
    db_query(f"UPDATE agents SET image_path = '/nonexistent' WHERE id = '{a['id']}'")
    refused = failed(client, slug, "!exit", 500, "sandbox runner error")
    check_charge(client, slug, refused, None, echoes)
    assert refused["input_tokens"] > 0 and refused["total_cost_usd"] == cost(refused["input_tokens"], 0)
    check_usage(client, [exited, killed, refused] + echoes)


@needs_runner
@pytest.mark.slow
def test_output_cap_timeout_and_oom_are_charged_what_was_returned(client):
    a = deployed_agent(client, FAILING_JS)
    slug, echoes = a["slug"], []
    capped = failed(client, slug, "!flood", 500, "output exceeded 10485760 bytes")
    check_charge(client, slug, capped, "x" * FAILED_OUTPUT_MAX, echoes)
    # 10 MiB of "x" would be over a million tokens; what was returned is far less.
    assert capped["output_tokens"] < 20000
    timed_out = failed(client, slug, "!sleep", 504, "timed out", timeout_seconds=2)
    check_charge(client, slug, timed_out, BIG[:FAILED_OUTPUT_MAX], echoes)
    # Filling 2 GB takes a while on a busy host: a generous timeout.
    oom = failed(client, slug, "!hog", 500, "out of memory", timeout_seconds=120)
    check_charge(client, slug, oom, BIG[:FAILED_OUTPUT_MAX], echoes)
    check_usage(client, [capped, timed_out, oom] + echoes)


@needs_runner
def test_failed_output_is_cut_between_characters(client):
    """The cut never splits a character: "a" and then two-byte characters put
    byte 65536 in the middle of one, which is left out whole."""
    a = deployed_agent(client, FAILING_JS)
    res = failed(client, a["slug"], "!exit-utf8", 500, "exited with status 1")
    want = "a" + "\u00e9" * ((FAILED_OUTPUT_MAX - 1) // 2)
    assert len(want.encode()) == FAILED_OUTPUT_MAX - 1
    check_charge(client, a["slug"], res, want, [])
