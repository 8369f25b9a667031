"""The prefork master and its workers: a killed worker is respawned and service
goes on; SIGTERM drains (idle workers leave at once, a busy one finishes its
response first); X-Request-Id on every response and in the log; /health and
/openapi.json without authentication."""
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid

import pytest
import requests

from conftest import VAR, api_pids, db_query, proc_stat, wait_until
from fcgi import PrivateApi, fcgi_begin, fcgi_read_response, fcgi_record

REQ_ID = re.compile(r"^[0-9A-Za-z_]{8,64}$")


def log_lines_for(request_id):
    with open(os.path.join(VAR, "log", "api.log"), errors="replace") as f:
        return [line for line in f if f"req={request_id}" in line]


# ---- health and OpenAPI ----

def test_health_without_auth(anon):
    r = anon.get("/health")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] in ("ok", "degraded")
    assert body["database"] == "ok"
    assert "runner_heartbeat_age_seconds" in body
    assert REQ_ID.match(r.headers["X-Request-Id"])


def test_openapi_without_auth(anon):
    r = anon.get("/openapi.json")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/json")
    doc = r.json()
    assert doc["openapi"].startswith("3.")
    assert isinstance(doc.get("paths"), dict)
    assert isinstance(doc.get("info"), dict)


# ---- X-Request-Id ----

def test_request_id_on_every_response_and_in_the_log(client, make_agent, anon):
    a = make_agent()
    responses = [
        (client.get("/agents"), 200),
        (client.post("/agents", json={"name": "x", "git_repo_url": "https://e.com/x"}), 201),
        (client.delete(f"/agents/{a['slug']}"), 204),
        (client.get("/agents/missing"), 404),
        (client.post("/agents", json={}), 422),
        (client.post("/agents", data=b"{", headers={"Content-Type": "application/json"}), 422),
        (client.put("/agents"), 405),
        (client.get("/nope"), 404),
        (anon.get("/users/me"), 401),
        (anon.get("/health"), 200),
    ]
    ids = []
    for r, status in responses:
        assert r.status_code == status, (r.url, r.status_code, r.text)
        rid = r.headers.get("X-Request-Id")
        assert rid and REQ_ID.match(rid), (r.url, dict(r.headers))
        ids.append((rid, r))
    assert len({rid for rid, _ in ids}) == len(ids), "request ids are unique"
    for rid, r in ids:
        lines = wait_until(lambda: log_lines_for(rid), timeout=3)
        assert lines, f"request id {rid} of {r.request.method} {r.url} is not in api.log"
        assert any(f" {r.status_code} " in line for line in lines), lines


def test_client_cannot_choose_the_request_id(client):
    r = client.get("/users/me", headers={"X-Request-Id": "forged-id-123"})
    assert r.headers["X-Request-Id"] != "forged-id-123"
    assert not log_lines_for("forged-id-123")


def test_log_line_cannot_be_forged_through_the_path(client):
    marker = uuid.uuid4().hex
    r = client.get(f"/agents/x%0A2026-01-01T00:00:00.000Z%20INFO%20forged-{marker}")
    assert r.status_code == 404
    with open(os.path.join(VAR, "log", "api.log"), errors="replace") as f:
        for line in f:
            if marker in line:
                assert not line.startswith("2026-01-01T00:00:00.000Z"), line


# ---- respawn ----

def worker_of(request_id):
    lines = wait_until(lambda: log_lines_for(request_id), timeout=3)
    assert lines, request_id
    return int(re.search(r"\[(\d+)\] req=", lines[0]).group(1))


def test_killed_worker_is_respawned(client):
    master, workers = api_pids()
    r = client.get("/users/me")
    victim = worker_of(r.headers["X-Request-Id"])
    assert victim in workers
    os.kill(victim, signal.SIGKILL)
    # service goes on at once, also on the connection nginx kept to the dead worker
    for _ in range(30):
        r = client.get("/agents")
        assert r.status_code == 200, r.text
    def respawned():
        m, w = api_pids()
        return (m, w) if len(w) == len(workers) and victim not in w else None
    after = wait_until(respawned, timeout=5)
    assert after, f"worker {victim} was not replaced: {api_pids()} vs {workers}"
    assert after[0] == master
    assert set(workers) - {victim} <= set(after[1]), "only the dead worker is replaced"
    lines = open(os.path.join(VAR, "log", "api.log"), errors="replace").read()
    assert f"worker {victim} died of signal 9" in lines


def test_a_crashed_worker_writes_the_log_lines_it_held(client):
    """A worker with more requests waiting holds its answered requests' log
    lines (one write for several, core/log.h) until it would wait: one that
    crashes meanwhile still writes them, and dies of its signal as before.
    One CRUD worker: request A's body arrives only once request B waits behind
    it, so after answering A the worker takes B at once (A's line held) and
    waits for B's body."""
    with PrivateApi(AGENTHOST_CRUD_WORKERS="1") as api:
        def params(rid, length):
            return {"REQUEST_METHOD": "POST", "REQUEST_URI": "/api/v1/agents",
                    "REMOTE_ADDR": "10.0.0.1", "CONTENT_TYPE": "application/json",
                    "CONTENT_LENGTH": str(length), "HTTP_AUTHORIZATION": "Bearer " + client.key,
                    "REQUEST_ID": rid}
        log = lambda: open(api.log.name, "rb").read().decode("utf-8", "replace")
        s = fcgi_begin(api.sock, {"REQUEST_METHOD": "GET", "REQUEST_URI": "/api/v1/health",
                                  "REMOTE_ADDR": "10.0.0.1", "REQUEST_ID": "held-warm"}, body=b"")
        assert fcgi_read_response(s).startswith(b"Status: 200")
        s.close()
        line = wait_until(lambda: re.search(r"\[(\d+)\] req=held-warm ", log()), timeout=5)
        assert line, log()
        worker = int(line.group(1))
        body = b'{"name": 7}'  # a 422: nothing is created
        a = fcgi_begin(api.sock, params("held-a", len(body)))
        a.sendall(fcgi_record(5, body[:4]))
        b = fcgi_begin(api.sock, params("held-b", 100))  # accepted after A
        b.sendall(fcgi_record(5, b"{"))
        a.sendall(fcgi_record(5, body[4:]) + fcgi_record(5, b""))
        assert fcgi_read_response(a).startswith(b"Status: 422")
        a.close()
        # The worker goes on to B and sleeps waiting for its body (polled: on a
        # loaded machine it may not have got there yet).
        asleep = lambda: proc_stat(worker)[0] == "S"
        assert wait_until(asleep, timeout=10)
        os.kill(worker, signal.SIGSEGV)
        died = f"worker {worker} died of signal {int(signal.SIGSEGV)}"
        assert wait_until(lambda: died in log(), timeout=10), log()
        b.close()
        assert re.search(r"req=held-a POST /agents 422 ", log()), log()


def test_concurrent_requests_all_answered(client):
    """More concurrent clients than nginx keeps idle upstream connections: none
    may starve behind a kept-alive connection."""
    results, lock = [], threading.Lock()

    def one():
        s = requests.Session()
        s.headers.update(client.s.headers)
        r = s.get(client.url("/users/me"), timeout=20)
        with lock:
            results.append(r.status_code)
    threads = [threading.Thread(target=one) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [200] * 40, results


# ---- SIGTERM drain, on a private master with its own sockets ----

@pytest.fixture
def private_api():
    """An agenthost-api master of its own (same database, own sockets, 2+1
    workers and the metrics worker, no identity provider: so no JWKS refresher
    beside them), so SIGTERM
    can be tested without touching the shared stack."""
    with PrivateApi(unset=["AGENTHOST_JWT_JWKS_URL"]) as api:
        yield api.proc, api.dir


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return sorted(int(x) for x in out)


def test_sigterm_stops_the_jwks_refresher_with_the_workers():
    """With an identity provider configured, the master also runs the JWKS
    refresher (a sixth child, after 2 + 1 workers, the metrics worker and the scheduler); SIGTERM ends it with the workers, even while it
    waits to retry a provider that does not answer."""
    with PrivateApi(AGENTHOST_JWT_JWKS_URL="http://127.0.0.1:9/jwks.json") as api:
        assert wait_until(lambda: len(children(api.proc.pid)) == 6, timeout=10)
        kids = children(api.proc.pid)
        t0 = time.monotonic()
        api.proc.send_signal(signal.SIGTERM)
        assert api.proc.wait(timeout=10) == 0
        assert time.monotonic() - t0 < 5
        for k in kids:
            assert not os.path.exists(f"/proc/{k}") or proc_stat(k)[0] == "Z"


def test_sigterm_drains_and_busy_worker_finishes(private_api, client):
    proc, d = private_api
    sock_path = os.path.join(d, "api.sock")
    assert wait_until(lambda: len(children(proc.pid)) == 5, timeout=10)  # and the scheduler
    # a plain request works
    s = fcgi_begin(sock_path, {"REQUEST_METHOD": "GET", "REQUEST_URI": "/api/v1/health",
                               "REMOTE_ADDR": "10.0.0.1", "REQUEST_ID": "drain-health"}, body=b"")
    assert fcgi_read_response(s).startswith(b"Status: 200")
    s.close()
    # a request whose body is still on its way when SIGTERM arrives
    slug = "drain-" + uuid.uuid4().hex[:8]
    body = json.dumps({"name": "drain", "slug": slug, "git_repo_url": "https://e.com/x"}).encode()
    s = fcgi_begin(sock_path, {
        "REQUEST_METHOD": "POST", "REQUEST_URI": "/api/v1/agents", "REMOTE_ADDR": "10.0.0.1",
        "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)),
        "HTTP_AUTHORIZATION": "Bearer " + client.key, "REQUEST_ID": "drain-busy"})
    s.sendall(fcgi_record(5, body[:10]))
    # Once the request is counted for the user, a worker is inside it (reading the body).
    uid = db_query(f"SELECT id FROM users WHERE email = '{client.email}'")[0][0]
    assert wait_until(lambda: db_query(f"SELECT hits FROM rate_limits WHERE subject = 'u:{uid}'"),
                      timeout=10)
    proc.send_signal(signal.SIGTERM)
    # the idle workers leave at once; the master waits for the busy one
    assert wait_until(lambda: len(children(proc.pid)) == 1, timeout=5), children(proc.pid)
    assert proc.poll() is None, "the master must wait for the busy worker"
    s.sendall(fcgi_record(5, body[10:]) + fcgi_record(5, b""))
    out = fcgi_read_response(s)
    s.close()
    assert out.startswith(b"Status: 201"), out[:200]
    assert json.loads(out.split(b"\r\n\r\n", 1)[1])["slug"] == slug
    assert proc.wait(timeout=10) == 0
    assert not os.path.exists(sock_path), "the master removes its sockets"
    # what the drained worker did was committed
    assert client.get(f"/agents/{slug}").status_code == 200


def test_sigterm_on_idle_master_exits_quickly(private_api):
    proc, d = private_api
    assert wait_until(lambda: len(children(proc.pid)) == 5, timeout=10)  # and the scheduler
    workers = children(proc.pid)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert time.monotonic() - t0 < 5
    for w in workers:
        assert not os.path.exists(f"/proc/{w}") or proc_stat(w)[0] == "Z"


def test_workers_do_not_read_the_time_zone_file(client):
    """The zone is read once by the master before it forks: no worker opens
    /etc/localtime, not even for its first authenticated request (glibc's
    strftime calls tzset(), which read it in every new worker before)."""
    with PrivateApi(unset=["AGENTHOST_JWT_JWKS_URL"]) as api:
        assert wait_until(lambda: len(children(api.proc.pid)) == 5, timeout=10)
        pids = children(api.proc.pid)
        trace = os.path.join(api.dir, "strace.txt")
        args = ["strace", "-f", "-e", "trace=open,openat", "-e", "signal=none", "-o", trace]
        st = subprocess.Popen(args + [a for p in pids for a in ("-p", str(p))],
                              stderr=subprocess.PIPE, text=True)
        try:
            attached = 0
            while attached < len(pids):
                line = st.stderr.readline()
                assert line, "strace did not attach"
                attached += "attached" in line
            # two connections at once, so that both CRUD workers answer one
            socks = [fcgi_begin(api.sock, {"REQUEST_METHOD": "GET", "REQUEST_URI": "/api/v1/users/me",
                                           "REMOTE_ADDR": "10.0.0.1", "REQUEST_ID": f"tz-{i}",
                                           "HTTP_AUTHORIZATION": "Bearer " + client.key}, body=b"")
                     for i in range(2)]
            for s in socks:
                assert fcgi_read_response(s).startswith(b"Status: 200")
                s.close()
        finally:
            st.terminate()
            st.wait(timeout=10)
        opened = open(trace).read()
        assert "/etc/localtime" not in opened, opened


def test_master_tells_systemd_it_is_ready_once_its_sockets_listen(tmp_path):
    """Under systemd (Type=notify, debian/agenthost-api.service) the master
    sends READY=1 to NOTIFY_SOCKET once its sockets listen, so `systemctl
    start` returns when a request can be made: with Type=simple a script that
    started the service and called it at once got nginx's 502 (seen in the
    install test)."""
    import socket
    path = str(tmp_path / "notify")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind(path)
    srv.settimeout(15)
    try:
        with PrivateApi(NOTIFY_SOCKET=path) as api:
            assert srv.recv(64) == b"READY=1"
            s = fcgi_begin(api.sock, {"REQUEST_METHOD": "GET", "REQUEST_URI": "/api/v1/health",
                                      "REMOTE_ADDR": "10.0.0.1", "REQUEST_ID": "notify-health"},
                           body=b"")
            assert fcgi_read_response(s).startswith(b"Status: 200")
            s.close()
    finally:
        srv.close()
