"""GET /usage and /usage/daily: the user's consumption over the last N UTC days,
from the daily rollup each invocation updates. Exact decimals, zeros for idle
days, and deleting an agent never lowers it."""
import datetime
from decimal import Decimal

import pytest

from agent_code import ECHO_JS, TOOL_JS, cost, deployed_agent, exact, needs_runner
from conftest import assert_422

USAGE_KEYS = {"period_days", "start_date", "end_date", "total_invocations", "input_tokens",
              "output_tokens", "total_cost_usd",
              # what the model gateway measured (issue 27); 0 while it is off
              "model_invocations", "model_input_tokens", "model_output_tokens",
              "budgets"}  # spend limits and what remains (issue 32, test_budgets.py)


def today():
    return datetime.datetime.now(datetime.timezone.utc).date()


def test_fresh_user_has_zero_usage(client):
    r = client.get("/usage")
    assert r.status_code == 200, r.text
    u = exact(r)
    assert set(u) == USAGE_KEYS
    assert u["period_days"] == 30
    assert u["end_date"] == today().isoformat()
    assert u["start_date"] == (today() - datetime.timedelta(days=29)).isoformat()
    assert (u["total_invocations"], u["input_tokens"], u["output_tokens"]) == (0, 0, 0)
    assert (u["model_invocations"], u["model_input_tokens"], u["model_output_tokens"]) == (0, 0, 0)
    assert u["total_cost_usd"] == 0


def test_daily_has_one_item_per_day_oldest_first(client):
    for days in (1, 7, 30, 365):
        r = client.get("/usage/daily", params={"days": days})
        assert r.status_code == 200, r.text
        d = exact(r)
        assert set(d) == {"period_days", "items"} and d["period_days"] == days
        dates = [i["date"] for i in d["items"]]
        want = [(today() - datetime.timedelta(days=days - 1 - k)).isoformat() for k in range(days)]
        assert dates == want
        for i in d["items"]:
            assert set(i) == {"date", "invocations", "input_tokens", "output_tokens", "total_cost_usd",
                              "model_invocations", "model_input_tokens", "model_output_tokens"}
            assert (i["invocations"], i["input_tokens"], i["output_tokens"]) == (0, 0, 0)
            assert (i["model_invocations"], i["model_input_tokens"], i["model_output_tokens"]) == (0, 0, 0)
            assert i["total_cost_usd"] == 0
    assert len(client.get("/usage/daily").json()["items"]) == 30


@pytest.mark.parametrize("days", ["0", "366", "-1", "abc", "1.5", ""])
def test_days_out_of_range_is_422(client, days):
    for path in ("/usage", "/usage/daily"):
        assert_422(client.get(path + "?days=" + days), ("query", "days"))


def test_usage_needs_authentication(anon):
    assert anon.get("/usage").status_code == 401
    assert anon.get("/usage/daily").status_code == 401


@needs_runner
def test_usage_adds_up_and_survives_agent_deletion(client, other_client):
    a = deployed_agent(client, TOOL_JS)
    results = []
    for prompt in ("hello world", "Grüße aus München", "!crash", ""):
        r = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": prompt}, timeout=60)
        assert r.status_code in (200, 500), r.text
        res = exact(r)
        results.append(res.get("invocation", res))
    assert [x["status"] for x in results] == ["completed", "completed", "failed", "completed"]
    tin = sum(x["input_tokens"] for x in results)
    tout = sum(x["output_tokens"] for x in results)
    total = sum((x["total_cost_usd"] for x in results), Decimal(0))
    assert total == cost(tin, tout)

    def check():
        u = exact(client.get("/usage", params={"days": 1}))
        assert u["period_days"] == 1 and u["start_date"] == u["end_date"] == today().isoformat()
        assert (u["total_invocations"], u["input_tokens"], u["output_tokens"]) == (4, tin, tout)
        assert u["total_cost_usd"] == total
        item = exact(client.get("/usage/daily", params={"days": 3}))["items"][-1]
        assert item["date"] == today().isoformat()
        assert (item["invocations"], item["input_tokens"], item["output_tokens"]) == (4, tin, tout)
        assert item["total_cost_usd"] == total

    check()
    # Usage is per user: another user's stays zero.
    assert other_client.get("/usage").json()["total_invocations"] == 0
    # Deleting the agent removes its history, not what the user consumed.
    assert client.delete(f"/agents/{a['slug']}").status_code == 204
    check()


@needs_runner
def test_usage_of_second_agent_accumulates(client):
    a = deployed_agent(client, ECHO_JS)
    b = deployed_agent(client, ECHO_JS)
    for agent in (a, b, a):
        assert client.post(f"/agents/{agent['slug']}/invoke", json={"prompt": "hello world"}).status_code == 200
    u = exact(client.get("/usage"))
    assert (u["total_invocations"], u["input_tokens"], u["output_tokens"]) == (3, 6, 6)
    assert u["total_cost_usd"] == cost(6, 6)
