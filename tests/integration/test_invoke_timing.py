"""Per-phase timing of every invocation (issue 31): queue, take, start, run,
collect and record, as a standard Server-Timing header on the call's answer,
as "timing" in the invocation's result and its history record, and as the
metrics' histograms. Checked for a cold call, a call served by a warm process
and a call that failed. Nothing here times anything: the assertions are about
presence, shape and what must hold whatever the machine's speed (an agent that
sleeps 300 ms has a run phase of at least that; the phases fit in the call)."""
import re
import time

import pytest
import requests

from agent_code import deployed_agent, needs_runner
from conftest import call_held_at_its_charge, db_query, new_client, wait_until
from test_metrics import METRICS_URL, sample
from test_warm import REPORT_JS, invoke, report, room, wait_warm  # noqa: F401 (room: autouse)

PHASES = ("queue", "take", "start", "run", "collect", "record")
SLEEPY_JS = ("let b=''; process.stdin.on('data', d => b += d);"
             " process.stdin.on('end', () => setTimeout(() => process.stdout.write('ok:' + b), 300));\n")
FAIL_JS = "process.stderr.write('leaving\\n'); process.exit(3);\n"


def server_timing(resp):
    """Server-Timing's entries as {name: milliseconds}, in the header's order."""
    h = resp.headers.get("Server-Timing")
    assert h, f"no Server-Timing header: {dict(resp.headers)}"
    out = {}
    for part in h.split(","):
        m = re.fullmatch(r"\s*([a-z]+);dur=([0-9]+(?:\.[0-9]+)?)\s*", part)
        assert m, f"not a Server-Timing entry: {part!r} in {h!r}"
        out[m.group(1)] = float(m.group(2))
    assert tuple(out) == PHASES, h
    return out


def wall_ms(resp):
    """The call as its client saw it: every phase happened within it."""
    return resp.elapsed.total_seconds() * 1000


def check_timing(timing, header, wall):
    """The record's timing: every phase, none negative, the same as the header's
    (whose record phase also counts the history's write, so is no shorter),
    and the phases all fit in the call as its client saw it."""
    assert sorted(timing) == sorted(p + "_ms" for p in PHASES), timing
    assert all(isinstance(v, (int, float)) and v >= 0 for v in timing.values()), timing
    for p in PHASES[:-1]:
        assert abs(timing[p + "_ms"] - header[p]) < 0.0015, (p, timing, header)
    assert header["record"] >= timing["record_ms"]
    assert sum(header.values()) <= wall + 1, (header, wall)


def history_timing(client, slug, inv_id):
    items = client.get(f"/agents/{slug}/invocations").json()
    return next(i for i in items if i["invocation_id"] == inv_id).get("timing")


@needs_runner
def test_cold_call_has_every_phase_in_header_result_and_history(client):
    a = deployed_agent(client, SLEEPY_JS)
    r = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": "hi"}, timeout=120)
    assert r.status_code == 200, r.text
    body = r.json()
    header = server_timing(r)
    check_timing(body["timing"], header, wall_ms(r))
    assert body["timing"]["run_ms"] >= 300, body["timing"]  # the agent slept 300 ms
    assert history_timing(client, a["slug"], body["invocation_id"]) == body["timing"]


@needs_runner
def test_session_call_has_timing(client):
    a = deployed_agent(client, SLEEPY_JS)
    for _ in range(2):  # the first makes the session's sandbox, the second reuses it
        r = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": "x", "session_id": "s1"},
                        timeout=120)
        assert r.status_code == 200, r.text
        check_timing(r.json()["timing"], server_timing(r), wall_ms(r))


@needs_runner
def test_warm_call_has_timing():
    c = new_client("pro")
    try:
        a = deployed_agent(c, REPORT_JS, min_warm=1)
        report(invoke(c, a["slug"], "first"))
        wait_warm(a["id"], 1)
        sent = time.time() * 1000
        r = invoke(c, a["slug"], "second")
        assert report(r)["t0"] < sent, "the call was not served by a warm process"
        body = r.json()
        check_timing(body["timing"], server_timing(r), wall_ms(r))
        assert history_timing(c, a["slug"], body["invocation_id"]) == body["timing"]
    finally:
        for x in c.get("/agents").json():
            c.delete(f"/agents/{x['slug']}")


@needs_runner
def test_failed_call_has_timing_and_counts_in_metrics(client):
    before = requests.get(METRICS_URL, timeout=10).text
    n0 = sample(before, "agenthost_invocation_phase_seconds_count", phase="run") or 0
    a = deployed_agent(client, FAIL_JS)
    r = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": "hi"}, timeout=120)
    assert r.status_code == 500, r.text
    inv = r.json()["invocation"]
    assert inv["status"] == "failed"
    check_timing(inv["timing"], server_timing(r), wall_ms(r))
    assert history_timing(client, a["slug"], inv["invocation_id"]) == inv["timing"]
    after = requests.get(METRICS_URL, timeout=10).text
    for p in PHASES:
        assert sample(after, "agenthost_invocation_phase_seconds_count", phase=p) >= n0 + 1, p


def test_refused_call_has_no_timing(client, make_agent):
    """A call refused before anything ran (the agent is not deployed) has no
    phases to tell."""
    a = make_agent()
    r = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": "hi"})
    assert r.status_code == 409, r.text
    assert "Server-Timing" not in r.headers


@needs_runner
def test_the_headers_record_counts_the_budgets_charge(client):
    """The answer waits for the budgets' charge, written with the history
    row (one transaction, schema/035): the header's record phase counts it
    (the kept one stops before the history's write). A transaction of the
    test's own holds the user's spend rows while a call runs, so that call's
    charge waits for it."""
    slug = deployed_agent(client, SLEEPY_JS)["slug"]
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "the spend rows"}, timeout=60)
    assert r.status_code == 200, r.text
    held = call_held_at_its_charge(client, slug, "held", lambda: time.sleep(0.5))
    header, timing = server_timing(held), held.json()["timing"]
    assert header["record"] >= 500, header      # the wait for the rows
    assert timing["record_ms"] < 500, timing    # stops before the history's write
    check_timing(timing, header, wall_ms(held))
