"""Webhooks (issue 28): a call's webhook_url, or its agent's default, gets a
POST of the finished record, signed (Agenthost-Signature: t=…,v1=… over
"t.body", HMAC-SHA256 under the user's secret, checked here with Python's
hmac), from the durable table webhook_deliveries by agenthost-webhooks:
retried with backoff until webhook_give_up_seconds, then failed; at least
once (a receiver killed mid-delivery gets it after its restart, and once
answered 2xx, never again); two daemons never send one attempt twice;
private addresses refused at create and at delivery (a name that resolves
to a loopback address not on webhook_allow_hosts); bad URLs are 422 and
nothing is recorded. The daemon runs here with a short retry base (it is
restarted with settings of the test's and restored after)."""
import hashlib
import hmac
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import uuid

import pytest

from agent_code import ECHO_JS, deployed_agent, needs_runner
from conftest import BASE_URL, VAR, assert_422, db_query, new_client, proc_stat, wait_until
from test_invoke_async import TICKS_JS, api_owner_pids

pytestmark = needs_runner

PORT = urllib.parse.urlparse(BASE_URL).port
HOOK_PORT = PORT + 390   # PORT+390..399: on the test stack's webhook_allow_hosts
UNLISTED_PORT = PORT + 389
RECEIVER = os.path.join(os.path.dirname(__file__), "webhook_receiver.py")
PIDFILE = os.path.join(VAR, "run", "webhooks.pid")
# Receivers: a port each in turn, so a test's leftovers miss the next's. PORT+399
# stays free: deliveries that must stay pending go there (here and in the
# browser tests).
PORTS = itertools.cycle(range(HOOK_PORT, HOOK_PORT + 9))
NOBODY_PORT = HOOK_PORT + 9
FAST = {"AGENTHOST_WEBHOOK_RETRY_BASE_MS": "200", "AGENTHOST_WEBHOOK_RETRY_MAX_MS": "800"}


def daemon_pid():
    try:
        with open(PIDFILE) as f:
            pid = int(f.read().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def start_daemon(env, pidfile=PIDFILE):
    """agenthost-webhooks as the stack starts it (run/webhooks.cmd), with env
    added; its pid into pidfile."""
    with open(os.path.join(VAR, "run", "webhooks.cmd")) as f:
        cmd = f.read().strip()
    extra = " ".join(f"{k}={v}" for k, v in env.items())
    log = open(os.path.join(VAR, "log", "webhooks.log"), "a")
    p = subprocess.Popen(["bash", "-c", f"exec env {extra} {cmd}"], stdin=subprocess.DEVNULL,
                         stdout=log, stderr=log, start_new_session=True)
    with open(pidfile, "w") as f:
        f.write(f"{p.pid}\n")
    return p


def stop_daemon(pid):
    if not pid:
        return
    os.kill(pid, signal.SIGTERM)
    assert wait_until(lambda: not os.path.exists(f"/proc/{pid}") or
                      proc_stat(pid)[0] == "Z", 15)


def restart_daemon(**env):
    stop_daemon(daemon_pid())
    return start_daemon(env)


@pytest.fixture(scope="module", autouse=True)
def fast_daemon():
    restart_daemon(**FAST)
    yield
    restart_daemon()


class Receiver:
    def __init__(self, port, mode, tmp):
        self.port, self.log = port, str(tmp / f"hooks-{port}-{uuid.uuid4().hex[:6]}.jsonl")
        self.url = f"http://127.0.0.1:{port}/hook"
        self.p = None
        self.start(mode)

    def start(self, mode):
        self.p = subprocess.Popen([sys.executable, RECEIVER, str(self.port), self.log, mode],
                                  stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline().strip() == "ready"

    def kill(self):
        if self.p and self.p.poll() is None:
            self.p.kill()
            self.p.wait()

    def events(self, kind=None):
        try:
            with open(self.log) as f:
                ev = [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []
        return [e for e in ev if kind is None or e["event"] == kind]


@pytest.fixture
def receivers(tmp_path):
    made = []

    def make(mode="ok", port=None):
        r = Receiver(port or next(PORTS), mode, tmp_path)
        made.append(r)
        return r
    yield make
    for r in made:
        r.kill()


@pytest.fixture
def user():
    """A fresh user (the invoke rate limit is per user) with a signing
    secret and a deployed echo agent."""
    c = new_client()
    r = c.post("/users/me/webhook-secret")
    assert r.status_code == 201, r.text
    c.secret = r.json()["secret"]
    c.agent = deployed_agent(c, js=ECHO_JS)
    yield c
    forget(c)


def forget(c):
    """Ends a test's deliveries still retrying (its receivers are gone)."""
    db_query("UPDATE webhook_deliveries SET state = 'failed' WHERE state = 'pending'"
             f" AND agent_id = '{c.agent['id']}'")


def verify(secret, event):
    """The receiver's check, as a user would write it."""
    parts = dict(p.split("=", 1) for p in event["signature"].split(","))
    signed = f"{parts['t']}.".encode() + event["body"].encode()
    want = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, parts["v1"]) and abs(time.time() - int(parts["t"])) < 300


def deliveries(c, **params):
    r = c.get(f"/agents/{c.agent['slug']}/webhook-deliveries", params=params)
    assert r.status_code == 200, r.text
    return r


def settled(c, n=1):
    """The agent's deliveries once n of them are no longer pending."""
    def done():
        d = deliveries(c).json()
        return d if len([x for x in d if x["status"] != "pending"]) >= n else None
    d = wait_until(done, 60, 0.5)
    assert d, deliveries(c).json()
    return d


def test_signed_record_is_delivered(user, receivers):
    rcv = receivers()
    r = user.post(f"/agents/{user.agent['slug']}/invoke",
                  json={"prompt": "hello hooks", "webhook_url": rcv.url})
    assert r.status_code == 200, r.text
    record = r.json()
    assert wait_until(lambda: rcv.events("done"), 20, 0.1)
    [ev] = rcv.events("done")
    assert verify(user.secret, ev)
    assert not verify("whsec_" + "x" * 43, ev)
    assert json.loads(ev["body"]) == record  # exactly what the call answered
    assert ev["content_type"] == "application/json"
    assert ev["invocation"] == record["invocation_id"]
    assert ev["delivery"].startswith("whd_")
    [d] = settled(user)
    assert d["id"] == ev["delivery"] and d["status"] == "delivered"
    assert d["invocation_id"] == record["invocation_id"] and d["url"] == rcv.url
    assert d["attempt_count"] == 1 and d["last_status_code"] == 200 and d["last_error"] is None
    assert [a["status_code"] for a in d["attempts"]] == [200]
    assert d["delivered_at"] and d["next_attempt_at"] is None


def test_agent_default_and_call_override(user, receivers):
    default, own = receivers(), receivers()
    slug = user.agent["slug"]
    r = user.patch(f"/agents/{slug}", json={"webhook_url": default.url})
    assert r.status_code == 200 and r.json()["webhook_url"] == default.url, r.text
    assert user.get(f"/agents/{slug}").json()["webhook_url"] == default.url
    a = user.post(f"/agents/{slug}/invoke", json={"prompt": "to the default"}).json()
    b = user.post(f"/agents/{slug}/invoke", json={"prompt": "mine", "webhook_url": own.url}).json()
    assert wait_until(lambda: default.events("done") and own.events("done"), 20, 0.1)
    assert [json.loads(e["body"])["invocation_id"] for e in default.events("done")] == [a["invocation_id"]]
    assert [json.loads(e["body"])["invocation_id"] for e in own.events("done")] == [b["invocation_id"]]
    # Cleared: calls without their own URL send nothing.
    assert user.patch(f"/agents/{slug}", json={"webhook_url": None}).json()["webhook_url"] is None
    user.post(f"/agents/{slug}/invoke", json={"prompt": "quiet"})
    assert len(settled(user, 2)) == 2


def test_streamed_and_asynchronous_calls_deliver_their_record(user, receivers):
    """Every way a call is answered passes the one recording path (invoke.c
    ah_call_run), so a streamed and an asynchronous call deliver too, their
    record as GET …/invocations/{id} shows it."""
    rcv = receivers()
    slug = user.agent["slug"]
    r = user.post(f"/agents/{slug}/invoke", json={"prompt": "later", "async": True, "webhook_url": rcv.url})
    assert r.status_code == 202, r.text
    inv_async = r.json()["invocation_id"]
    r = user.post(f"/agents/{slug}/invoke", json={"prompt": "as it comes", "stream": True,
                                                   "webhook_url": rcv.url}, stream=True)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream"), r.text
    r.content  # the whole stream: the call has ended
    assert wait_until(lambda: len(rcv.events("done")) == 2, 30, 0.1), rcv.events()
    got = {json.loads(e["body"])["invocation_id"]: e for e in rcv.events("done")}
    assert inv_async in got and len(got) == 2
    for inv, ev in got.items():
        assert verify(user.secret, ev)
        body = json.loads(ev["body"])
        assert body["status"] == "completed" and body["response_content"], body
        rec = user.get(f"/agents/{slug}/invocations/{inv}").json()
        assert rec["response_content"] == body["response_content"]


def test_a_call_whose_owner_died_delivers_its_failed_record(user, receivers):
    """An asynchronous call's process is killed (an API restart): the sweep
    that records the call failed delivers that record to its webhook, as
    every finished call's."""
    rcv = receivers()
    a = deployed_agent(user, TICKS_JS)
    before = set(api_owner_pids())
    r = user.post(f"/agents/{a['slug']}/invoke", json={
        "prompt": json.dumps({"n": 100, "ms": 200}), "async": True, "webhook_url": rcv.url})
    assert r.status_code == 202, r.text
    inv = r.json()["invocation_id"]
    owners = set(api_owner_pids()) - before
    assert len(owners) == 1, owners
    os.kill(owners.pop(), signal.SIGKILL)
    assert wait_until(lambda: rcv.events("done"), 30, 0.1), rcv.events()
    [ev] = rcv.events("done")
    assert verify(user.secret, ev)
    body = json.loads(ev["body"])
    assert body["invocation_id"] == inv and body["status"] == "failed" and "lost" in body["error"]
    rec = user.get(f"/agents/{a['slug']}/invocations/{inv}").json()
    assert {k: rec[k] for k in body if k != "files"} == {k: v for k, v in body.items() if k != "files"}
    # Its run went on in the runner without an owner: gone with its agent.
    assert user.delete(f"/agents/{a['slug']}").status_code == 204


def test_rotated_secret_signs_what_follows(user, receivers):
    rcv = receivers()
    r = user.post("/users/me/webhook-secret")
    assert r.status_code == 201
    new = r.json()["secret"]
    assert new != user.secret and new.startswith("whsec_")
    user.post(f"/agents/{user.agent['slug']}/invoke", json={"prompt": "x", "webhook_url": rcv.url})
    assert wait_until(lambda: rcv.events("done"), 20, 0.1)
    ev = rcv.events("done")[0]
    assert verify(new, ev) and not verify(user.secret, ev)


def test_failures_retried_with_the_same_delivery_id(user, receivers):
    rcv = receivers("fail:2")
    user.post(f"/agents/{user.agent['slug']}/invoke", json={"prompt": "x", "webhook_url": rcv.url})
    [d] = settled(user)
    assert d["status"] == "delivered" and d["attempt_count"] == 3
    assert [a["status_code"] for a in d["attempts"]] == [500, 500, 200]
    assert "HTTP 500" in d["attempts"][0]["error"]
    starts = rcv.events("start")
    assert len(starts) == 3 and {e["delivery"] for e in starts} == {d["id"]}
    assert [e["attempt"] for e in starts] == ["1", "2", "3"]
    assert all(verify(user.secret, e) for e in starts)


def test_receiver_killed_mid_delivery(user, receivers):
    rcv = receivers("hang")
    r = user.post(f"/agents/{user.agent['slug']}/invoke", json={"prompt": "x", "webhook_url": rcv.url})
    assert wait_until(lambda: rcv.events("start"), 20, 0.1)
    rcv.kill()  # mid-request: the daemon sees the connection die
    time.sleep(1)
    rcv.start("ok")
    [d] = settled(user)
    assert d["status"] == "delivered" and d["attempt_count"] >= 2
    assert json.loads(rcv.events("done")[0]["body"])["invocation_id"] == r.json()["invocation_id"]
    time.sleep(2)  # several retry periods: nothing more once it answered 2xx
    assert len(rcv.events("done")) == 1
    assert deliveries(user).json()[0]["attempt_count"] == d["attempt_count"]


def test_given_up_after_the_window(user, receivers):
    restart_daemon(**FAST, AGENTHOST_WEBHOOK_GIVE_UP_SECONDS="2")
    try:
        rcv = receivers("status:503")
        user.post(f"/agents/{user.agent['slug']}/invoke", json={"prompt": "x", "webhook_url": rcv.url})
        [d] = settled(user)
    finally:
        restart_daemon(**FAST)
    assert d["status"] == "failed" and d["attempt_count"] >= 2
    assert d["last_status_code"] == 503 and d["next_attempt_at"] is None
    assert len(rcv.events("start")) == d["attempt_count"]


def loopback_name():
    """A name (not localhost, which is refused as written) that resolves to
    a loopback address: the host's own name here."""
    name = socket.gethostname()
    try:
        addrs = {a[4][0] for a in socket.getaddrinfo(name, None, socket.AF_INET)}
    except OSError:
        return None
    return name if addrs and all(a.startswith("127.") for a in addrs) else None


def test_private_address_refused_at_delivery(user, receivers):
    name = loopback_name()
    if not name:
        pytest.skip("the host's name does not resolve to loopback here")
    rcv = receivers(port=UNLISTED_PORT)  # listening, but not on webhook_allow_hosts
    url = f"http://{name}:{UNLISTED_PORT}/hook"
    r = user.post(f"/agents/{user.agent['slug']}/invoke", json={"prompt": "x", "webhook_url": url})
    assert r.status_code == 200, r.text  # a name: checked on the address it reaches
    d = wait_until(lambda: [x for x in deliveries(user).json() if x["attempt_count"] >= 2], 30, 0.2)
    assert d and "refused" in d[0]["last_error"] and d[0]["last_status_code"] is None
    assert rcv.events() == []


BAD_URLS = [
    ("ftp://example.com/hook", "should start with"),
    ("http://127.0.0.2:%d/hook" % HOOK_PORT, "loopback"),   # not on the allow list
    ("http://127.0.0.1:%d/hook" % UNLISTED_PORT, "loopback"),
    ("http://localhost:%d/hook" % UNLISTED_PORT, "loopback"),
    ("http://10.1.2.3/hook", "private"),
    ("http://169.254.169.254/latest", "metadata"),
    ("http://0xa9fea9fe/", "metadata"),
    ("http://user:pw@example.com/", "credentials"),
    ("https://example.com/#frag", "fragment"),
    ("https://example.com:99999/", "port"),
    ("https://" + "a" * 2040 + ".com/", "at most 2048"),
]


def test_bad_urls_are_422_and_nothing_is_recorded(user):
    slug = user.agent["slug"]
    for i, (url, msg) in enumerate(BAD_URLS):
        for r in (user.patch(f"/agents/{slug}", json={"webhook_url": url}),
                  user.post("/agents", json={"name": "x", "source_type": "local", "webhook_url": url})):
            d = assert_422(r, ["body", "webhook_url"])
            assert msg in d[0]["msg"], (url, d)
        if i < 8:  # the invoke rate limit: 10 a minute
            r = user.post(f"/agents/{slug}/invoke", json={"prompt": "x", "webhook_url": url})
            assert msg in assert_422(r, ["body", "webhook_url"])[0]["msg"], url
    assert_422(user.post(f"/agents/{slug}/invoke", json={"prompt": "x", "webhook_url": 5}),
               ["body", "webhook_url"])
    assert user.get(f"/agents/{slug}/invocations").json() == []
    assert deliveries(user).json() == []
    assert user.get(f"/agents/{slug}").json()["webhook_url"] is None
    assert db_query(f"SELECT COUNT(*) FROM webhook_deliveries WHERE agent_id = '{user.agent['id']}'") == [["0"]]


def test_a_url_needs_a_secret_first(receivers):
    c = new_client()
    agent = deployed_agent(c, js=ECHO_JS)
    rcv = receivers()
    r = c.post(f"/agents/{agent['slug']}/invoke", json={"prompt": "x", "webhook_url": rcv.url})
    d = assert_422(r, ["body", "webhook_url"])
    assert "POST /api/v1/users/me/webhook-secret" in d[0]["msg"]
    assert c.get(f"/agents/{agent['slug']}/invocations").json() == []
    assert c.post("/users/me/webhook-secret").status_code == 201
    assert c.post(f"/agents/{agent['slug']}/invoke",
                  json={"prompt": "x", "webhook_url": rcv.url}).status_code == 200


def test_deliveries_page_and_stay_private(user, receivers):
    rcv = receivers()
    for i in range(3):
        user.post(f"/agents/{user.agent['slug']}/invoke", json={"prompt": f"p{i}", "webhook_url": rcv.url})
    all3 = settled(user, 3)
    r = deliveries(user, limit=2)
    assert r.headers["X-Total-Count"] == "3" and len(r.json()) == 2
    assert [d["id"] for d in r.json()] == [d["id"] for d in all3[:2]]
    assert [d["id"] for d in deliveries(user, limit=2, offset=2).json()] == [all3[2]["id"]]
    assert_422(user.get(f"/agents/{user.agent['slug']}/webhook-deliveries?limit=0"), ["query", "limit"])
    other = new_client()
    assert other.get(f"/agents/{user.agent['slug']}/webhook-deliveries").status_code == 404
    # The secret is shown once: never in a listing or the user's record.
    assert user.secret not in json.dumps(all3) and user.secret not in user.get("/users/me").text


def test_two_daemons_never_send_one_attempt_twice(user, receivers, tmp_path):
    rcv = receivers("slow:0.2")
    second = start_daemon(FAST, pidfile=str(tmp_path / "second.pid"))
    try:
        slug, url = user.agent["slug"], rcv.url
        r = user.post(f"/agents/{slug}/invoke", json={"prompt": "x", "webhook_url": url})
        inv = r.json()["invocation_id"]
        # Many due rows at once, copies of the real one, for both daemons to claim.
        db_query("INSERT INTO webhook_deliveries (id, user_id, agent_id, invocation_id, url, payload,"
                 " state, next_attempt_at, created_at, updated_at)"
                 f" SELECT CONCAT('whd_', '{uuid.uuid4().hex[:5]}', LPAD(seq, 17, '0')),"
                 " user_id, agent_id, invocation_id, url, payload, 'pending', NOW(3), NOW(3), NOW(3)"
                 f" FROM webhook_deliveries JOIN seq_1_to_200 WHERE invocation_id = '{inv}'")
        agent = user.agent["id"]
        assert wait_until(lambda: db_query("SELECT COUNT(*) FROM webhook_deliveries WHERE agent_id ="
                                           f" '{agent}' AND state = 'delivered'") == [["201"]], 120, 0.5)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(15)
    done = [e["delivery"] for e in rcv.events("done") if e["invocation"] == inv]
    dup = [d for d in set(done) if done.count(d) > 1]
    assert len(set(done)) == 201 and not dup, (len(set(done)), dup)


def test_cli(receivers, tmp_path):
    from test_cli import cli_env, run
    c = new_client()
    env = cli_env(tmp_path, c.key)
    p = run(env, "webhooks", "secret", "rotate")
    assert p.returncode == 0, p.stderr
    secret = p.stdout.strip()
    assert secret.startswith("whsec_") and "shown only this once" in p.stderr
    c.agent = deployed_agent(c, js=ECHO_JS)
    slug, rcv = c.agent["slug"], receivers()
    p = run(env, "agents", "update", slug, "--webhook-url", rcv.url)
    assert p.returncode == 0 and rcv.url in p.stdout, p.stderr
    p = run(env, "invoke", slug, "from the cli", "--webhook", rcv.url)
    assert p.returncode == 0 and p.stdout == "from the cli", p.stderr
    assert wait_until(lambda: rcv.events("done"), 20, 0.1)
    assert verify(secret, rcv.events("done")[0])
    settled(c)
    p = run(env, "webhooks", "deliveries", slug)
    assert p.returncode == 0 and "delivered" in p.stdout and "200" in p.stdout, p.stdout + p.stderr
    assert run(env, "agents", "update", slug, "--webhook-url", "").returncode == 0
    assert c.get(f"/agents/{slug}").json()["webhook_url"] is None
    p = run(env, "invoke", slug, "x", "--webhook", "ftp://example.com/")
    assert p.returncode != 0 and "webhook_url" in p.stderr


def test_old_finished_deliveries_go_with_the_history(user, receivers):
    rcv = receivers()
    user.post(f"/agents/{user.agent['slug']}/invoke", json={"prompt": "x", "webhook_url": rcv.url})
    [d] = settled(user)
    # Older than history_retention_days (90 here): purged when the daemon starts;
    # a pending one of the same age is still owed to its receiver and stays.
    db_query("UPDATE webhook_deliveries SET created_at = NOW(3) - INTERVAL 91 DAY"
             f" WHERE id = '{d['id']}'")
    old_pending = "whd_" + uuid.uuid4().hex[:22]
    db_query("INSERT INTO webhook_deliveries (id, user_id, agent_id, invocation_id, url, payload, state,"
             " next_attempt_at, created_at, updated_at) SELECT"
             f" '{old_pending}', user_id, agent_id, invocation_id, url, payload, 'pending',"
             " NOW(3) + INTERVAL 1 DAY, NOW(3) - INTERVAL 91 DAY, NOW(3)"
             f" FROM webhook_deliveries WHERE id = '{d['id']}'")
    restart_daemon(**FAST)
    assert wait_until(lambda: deliveries(user).json()[0]["id"] == old_pending
                      and len(deliveries(user).json()) == 1, 20, 0.5)


def test_backlog_is_a_runner_metric(user):
    import requests
    from test_metrics import promtool_check, runner_metrics_url, sample
    nobody = f"http://127.0.0.1:{NOBODY_PORT}/hook"  # allowed, nothing listens: it stays pending
    r = user.post(f"/agents/{user.agent['slug']}/invoke", json={"prompt": "x", "webhook_url": nobody})
    assert r.status_code == 200

    def backlog():
        text = requests.get(runner_metrics_url(), timeout=10).text
        n = sample(text, "agenthost_webhook_backlog_deliveries")
        return text if n is not None and n >= 1 else None
    text = wait_until(backlog, 40, 1)  # read on each runner heartbeat
    assert text, "no backlog gauge"
    assert sample(text, "agenthost_webhook_backlog_late_seconds") is not None
    promtool_check(text)


def test_daemon_stopped_mid_delivery_hands_it_back(user, receivers):
    """SIGTERM while a receiver holds the request: after the grace the claim
    goes back to the queue, and the next daemon delivers it (the table is
    what survives, not the process)."""
    rcv = receivers("hang")
    user.post(f"/agents/{user.agent['slug']}/invoke", json={"prompt": "x", "webhook_url": rcv.url})
    assert wait_until(lambda: rcv.events("start"), 20, 0.1)
    stop_daemon(daemon_pid())
    [d] = deliveries(user).json()
    assert d["status"] == "pending" and d["attempt_count"] == 0  # handed back, not failed
    rcv.kill()
    rcv.start("ok")
    start_daemon(FAST)
    [d] = settled(user)
    assert d["status"] == "delivered" and d["attempt_count"] == 1
    assert len(rcv.events("done")) == 1
