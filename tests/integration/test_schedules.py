"""Schedules (issue 32): POST /agents/{slug}/schedules with a cron expression in
a time zone; runs are ordinary invocations marked trigger "schedule".

A tick is made due now by moving the schedule's next_run_at into the past in
the database (what the clock would do), so most tests need not wait for a
minute to turn; one test does wait for a real `* * * * *` tick. Schedules
that are made due by hand use a yearly expression, so no real tick comes in
between."""
import os
import subprocess
import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from agent_code import config_get, deployed_agent, runner_available
from conftest import BUILD, CONFIG, assert_422, db_query, wait_until

YEARLY = "0 0 1 1 *"
API = os.path.join(BUILD, "handlers", "agenthost-api")


def parse_time(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def wait(pred, timeout):
    """wait_until at a pace that stays inside the user's rate limit (100 a minute)."""
    return wait_until(pred, timeout=timeout, interval=0.7)


def make_due(sid, ago="1 SECOND"):
    db_query(f"UPDATE schedules SET next_run_at = NOW(3) - INTERVAL {ago} WHERE id = '{sid}'")


def scheduled_runs(client, slug, sid):
    r = client.get(f"/agents/{slug}/invocations", params={"limit": 100})
    assert r.status_code == 200, r.text
    return [i for i in r.json() if i.get("schedule_id") == sid]


def run_counts(client, slug, scheds):
    """Invocations of each schedule, from one read of the history."""
    r = client.get(f"/agents/{slug}/invocations", params={"limit": 100})
    assert r.status_code == 200, r.text
    return [sum(1 for i in r.json() if i.get("schedule_id") == s["id"]) for s in scheds]


def create(client, slug, **fields):
    body = {"cron": YEARLY, "timezone": "UTC", "prompt": "scheduled hello"}
    body.update(fields)
    r = client.post(f"/agents/{slug}/schedules", json=body)
    assert r.status_code == 201, r.text
    return r.json()


@pytest.fixture
def agent(client):
    if not runner_available():
        pytest.skip("no runner")
    return deployed_agent(client)


# ---- records ----

def test_create_returns_the_next_five_runs_in_the_zone(client, make_agent):
    slug = make_agent()["slug"]
    # A webhook_url follows a call's rules (webhooks.c): the user signs with a secret first.
    assert client.post("/users/me/webhook-secret").status_code == 201
    s = create(client, slug, cron="30 9 * * 1-5", timezone="America/New_York",
               prompt="standup notes", session_id="daily-1", webhook_url="https://hooks.example.com/x")
    assert s["id"].startswith("sch_") and s["paused"] is False
    assert (s["cron"], s["timezone"], s["prompt"], s["session_id"], s["webhook_url"]) == (
        "30 9 * * 1-5", "America/New_York", "standup notes", "daily-1", "https://hooks.example.com/x")
    # The next five weekdays at 09:30 New York time after the moment of creation.
    ny = ZoneInfo("America/New_York")
    now = parse_time(s["created_at"]).astimezone(ny)
    want, day = [], now.date()
    while len(want) < 5:
        t = datetime(day.year, day.month, day.day, 9, 30, tzinfo=ny)
        if t.weekday() < 5 and t > now:
            want.append(t.astimezone(timezone.utc))
        day += timedelta(days=1)
    assert [parse_time(t) for t in s["next_runs"]] == want
    assert s["next_run_at"] == s["next_runs"][0]
    assert s["run_count"] == 0 and s["last_run_at"] is None
    # read back, listed
    assert client.get(f"/agents/{slug}/schedules/{s['id']}").json()["next_runs"] == s["next_runs"]
    r = client.get(f"/agents/{slug}/schedules")
    assert r.status_code == 200 and [x["id"] for x in r.json()] == [s["id"]]
    assert r.headers["X-Total-Count"] == "1"


@pytest.mark.parametrize("field,value", [
    ("cron", "0 0 * * * *"),          # six fields
    ("cron", "0 0 31 2 *"),           # a date that never occurs
    ("cron", "61 * * * *"),           # out of range
    ("cron", "* 24 * * *"),
    ("cron", "* * * 13 *"),
    ("cron", "*/0 * * * *"),
    ("cron", "@reboot"),
    ("cron", ""),
    ("timezone", "Mars/Olympus_Mons"),  # unknown time zone
    ("timezone", "../../etc/passwd"),
    ("session_id", "has space"),
    ("webhook_url", "ftp://example.com/x"),
    ("webhook_url", "https://"),
    ("paused", "yes"),
])
def test_bad_input_is_422_naming_the_field_and_creates_nothing(client, make_agent, field, value):
    slug = make_agent()["slug"]
    body = {"cron": "* * * * *", "timezone": "UTC", "prompt": "x", field: value}
    assert_422(client.post(f"/agents/{slug}/schedules", json=body), ("body", field))
    assert client.get(f"/agents/{slug}/schedules").json() == []


def test_a_prompt_over_the_cap_is_422(client, make_agent):
    slug = make_agent()["slug"]
    cap = min(64 * 1024, int(config_get("max_prompt_bytes", "2097152")))
    for prompt in ("x" * (cap + 1), "é" * (cap // 2 + 1)):  # the second: under the cap in characters
        body = {"cron": "* * * * *", "prompt": prompt}
        assert_422(client.post(f"/agents/{slug}/schedules", json=body), ("body", "prompt"))
    assert create(client, slug, prompt="x" * cap)["prompt"] == "x" * cap
    assert_422(client.post(f"/agents/{slug}/schedules", json={"cron": "* * * * *"}), ("body", "prompt"))
    assert_422(client.post(f"/agents/{slug}/schedules", json={"prompt": "x"}), ("body", "cron"))


def test_patch_changes_and_pauses(client, make_agent):
    slug = make_agent()["slug"]
    s = create(client, slug)
    r = client.patch(f"/agents/{slug}/schedules/{s['id']}", json={"paused": True})
    assert r.status_code == 200, r.text
    assert r.json()["paused"] is True and r.json()["next_run_at"] is None and r.json()["next_runs"] == []
    r = client.patch(f"/agents/{slug}/schedules/{s['id']}",
                     json={"paused": False, "cron": "0 12 * * *", "timezone": "Asia/Kathmandu", "prompt": "p2"})
    assert r.status_code == 200, r.text
    got = r.json()
    assert (got["paused"], got["cron"], got["prompt"]) == (False, "0 12 * * *", "p2")
    assert len(got["next_runs"]) == 5
    assert all(parse_time(t).astimezone(ZoneInfo("Asia/Kathmandu")).strftime("%H:%M") == "12:00"
               for t in got["next_runs"])
    assert_422(client.patch(f"/agents/{slug}/schedules/{s['id']}", json={"cron": "0 0 30 2 *"}),
               ("body", "cron"))
    assert_422(client.patch(f"/agents/{slug}/schedules/{s['id']}", json={"id": "x"}), ("body", "id"))
    assert client.get(f"/agents/{slug}/schedules/{s['id']}").json()["cron"] == "0 12 * * *"


def test_other_users_and_unknown_schedules_are_404(client, other_client, make_agent):
    slug = make_agent()["slug"]
    s = create(client, slug)
    assert other_client.get(f"/agents/{slug}/schedules/{s['id']}").status_code == 404
    assert other_client.delete(f"/agents/{slug}/schedules/{s['id']}").status_code == 404
    assert client.get(f"/agents/{slug}/schedules/sch_nope").status_code == 404
    assert client.patch(f"/agents/{slug}/schedules/sch_nope", json={"paused": True}).status_code == 404
    assert client.delete(f"/agents/{slug}/schedules/{s['id']}").status_code == 204
    assert client.get(f"/agents/{slug}/schedules/{s['id']}").status_code == 404


def test_deleted_with_the_agent(client, make_agent):
    slug = make_agent()["slug"]
    s = create(client, slug)
    assert client.delete(f"/agents/{slug}").status_code == 204
    assert db_query(f"SELECT COUNT(*) FROM schedules WHERE id = '{s['id']}'") == [["0"]]


# ---- runs ----

def test_a_due_tick_runs_once_as_a_recorded_invocation(client, agent):
    slug = agent["slug"]
    s = create(client, slug, prompt="tick tock")
    make_due(s["id"])
    runs = wait(lambda: scheduled_runs(client, slug, s["id"]), timeout=30)
    assert runs and len(runs) == 1, runs
    inv = runs[0]
    assert inv["trigger"] == "schedule" and inv["status"] == "completed"
    assert inv["prompt"] == "tick tock" and inv["response_content"] == "tick tock"
    assert float(inv["total_cost_usd"]) > 0 and inv["input_tokens"] > 0  # billed
    done = wait(lambda: (lambda x: x if x["last_status"] == "completed" else None)(
        client.get(f"/agents/{slug}/schedules/{s['id']}").json()), timeout=10)
    assert done and done["last_invocation_id"] == inv["invocation_id"] and done["run_count"] == 1
    assert parse_time(done["next_run_at"]) > datetime.now(timezone.utc)
    # a client's call is marked as such
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": "by hand"})
    assert r.status_code == 200 and r.json()["trigger"] == "api"


def test_missed_ticks_run_once(client, agent):
    """Three hours of an every-minute schedule missed (every scheduler was down):
    one run, and the next tick is the first one after now."""
    slug = agent["slug"]
    s = create(client, slug, cron="* * * * *")
    make_due(s["id"], "3 HOUR")
    assert wait(lambda: scheduled_runs(client, slug, s["id"]), timeout=30)
    time.sleep(3)  # three polls more
    runs = scheduled_runs(client, slug, s["id"])
    got = client.get(f"/agents/{slug}/schedules/{s['id']}").json()
    # at most one more: a real minute tick may come while we wait
    assert len(runs) <= 2 and got["run_count"] == len(runs)
    assert parse_time(got["next_run_at"]) > datetime.now(timezone.utc) - timedelta(seconds=5)


def test_paused_does_not_run_and_resumed_does(client, agent):
    slug = agent["slug"]
    s = create(client, slug)
    assert client.patch(f"/agents/{slug}/schedules/{s['id']}", json={"paused": True}).status_code == 200
    make_due(s["id"])  # a tick that would be due, were it not paused
    time.sleep(3)
    assert scheduled_runs(client, slug, s["id"]) == []
    r = client.patch(f"/agents/{slug}/schedules/{s['id']}", json={"paused": False})
    assert r.status_code == 200 and r.json()["paused"] is False
    # resumed: the next tick is after now (the one missed while paused does not run)
    assert parse_time(r.json()["next_run_at"]) > datetime.now(timezone.utc)
    make_due(s["id"])
    runs = wait(lambda: scheduled_runs(client, slug, s["id"]), timeout=30)
    assert runs and len(runs) == 1


@pytest.mark.slow
def test_a_real_every_minute_tick_runs(client, agent):
    """No help from the test: the tick at the next whole minute runs."""
    slug = agent["slug"]
    s = create(client, slug, cron="* * * * *", prompt="every minute")
    first = parse_time(s["next_run_at"])
    assert first.second == 0 and first > datetime.now(timezone.utc) - timedelta(seconds=1)
    runs = wait(lambda: scheduled_runs(client, slug, s["id"]), timeout=75)
    assert runs and runs[0]["response_content"] == "every minute"
    assert parse_time(runs[0]["created_at"]) >= first


def test_a_refused_run_is_recorded_on_the_schedule(client, make_agent):
    """An agent that is not deployed: nothing runs, the schedule says why."""
    slug = make_agent()["slug"]
    s = create(client, slug)
    make_due(s["id"])
    got = wait(lambda: (lambda x: x if x["last_status"] not in (None, "running") else None)(
        client.get(f"/agents/{slug}/schedules/{s['id']}").json()), timeout=30)
    assert got and got["last_status"] == "refused" and "not active" in got["last_error"]
    assert got["last_invocation_id"] is None and got["run_count"] == 1


def test_schedulers_racing_run_each_tick_once(client, agent):
    """Two more schedulers against the same database (as on other API hosts):
    every tick of every schedule runs exactly once."""
    slug = agent["slug"]
    env = dict(os.environ, AGENTHOST_CONFIG=CONFIG, AGENTHOST_SCHEDULE_POLL_MS="50")
    extra = [subprocess.Popen([API, "--scheduler", CONFIG], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(2)]
    try:
        scheds = [create(client, slug, prompt=f"race {i}") for i in range(4)]
        time.sleep(0.5)
        for rnd in range(1, 4):
            for s in scheds:
                make_due(s["id"])
            assert wait(lambda: all(n >= rnd for n in run_counts(client, slug, scheds)), timeout=60)
            time.sleep(1.5)  # time for a duplicate to show
            assert run_counts(client, slug, scheds) == [rnd] * len(scheds), rnd
        assert all(p.poll() is None for p in extra)  # none crashed
    finally:
        for p in extra:
            p.terminate()
            p.wait(timeout=30)


def test_cli_create_list_pause_resume_delete(client, make_agent, tmp_path):
    slug = make_agent()["slug"]
    cli = os.path.join(BUILD, "lib", "cli", "agenthost")
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTHOST_API_KEY", "NO_COLOR")}
    env.update(XDG_CONFIG_HOME=str(tmp_path), HOME=str(tmp_path), AGENTHOST_API_KEY=client.key)

    def run(*args):
        return subprocess.run([cli, *args], env=env, capture_output=True, text=True, timeout=60)

    r = run("schedules", "create", slug, "0 9 * * 1-5", "--prompt", "hi", "--timezone", "Europe/Berlin")
    assert r.returncode == 0, r.stderr
    assert "next runs:" in r.stdout and r.stdout.count("T08:00:00.000Z") == 5  # 09:00 CET
    sid = client.get(f"/agents/{slug}/schedules").json()[0]["id"]
    assert sid in run("schedules", "list", slug).stdout
    r = run("--json", "schedules", "pause", slug, sid)
    assert r.returncode == 0 and '"paused":true' in r.stdout.replace(" ", "")
    assert client.get(f"/agents/{slug}/schedules/{sid}").json()["paused"] is True
    assert run("schedules", "resume", slug, sid).returncode == 0
    assert client.get(f"/agents/{slug}/schedules/{sid}").json()["paused"] is False
    r = run("schedules", "create", slug, "0 0 31 2 *", "--prompt", "x")
    assert r.returncode == 1 and "cron" in r.stderr
    assert run("schedules", "delete", slug, sid).returncode == 0
    assert client.get(f"/agents/{slug}/schedules").json() == []


def test_a_failed_run_is_a_failed_invocation_and_says_why(client, agent):
    slug = agent["slug"]
    s = create(client, slug, prompt="!crash")
    make_due(s["id"])
    got = wait(lambda: (lambda x: x if x["last_status"] not in (None, "running") else None)(
        client.get(f"/agents/{slug}/schedules/{s['id']}").json()), timeout=30)
    assert got and got["last_status"] == "failed", got
    [inv] = scheduled_runs(client, slug, s["id"])
    assert inv["status"] == "failed" and got["last_invocation_id"] == inv["invocation_id"]
    assert got["last_error"] == inv["error"] and "status 1" in got["last_error"]


def test_a_run_uses_the_schedules_session_and_counts_in_usage(client, agent):
    slug = agent["slug"]
    before = client.get("/usage", params={"days": 1}).json()["total_invocations"]
    s = create(client, slug, prompt="in a session", session_id="sched-session-1")
    make_due(s["id"])
    runs = wait(lambda: scheduled_runs(client, slug, s["id"]), timeout=30)
    assert runs and runs[0]["session_id"] == "sched-session-1"
    sessions = client.get(f"/agents/{slug}/sessions").json()
    assert "sched-session-1" in [x["id"] for x in sessions]
    assert client.get("/usage", params={"days": 1}).json()["total_invocations"] == before + 1
