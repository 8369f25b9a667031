"""Operators' metrics (docs/metrics.md): the API's exposition at /metrics through
nginx, from allowed addresses only, and the runner's on runner_metrics_listen,
both checked by Debian's promtool and scraped by a real Prometheus started here
on loopback (its own configuration and data under the test's tmp, a port of
this stack's range, stopped by its PID). scripts/test installs the prometheus
package: without it these tests fail rather than skip."""
import concurrent.futures
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import uuid

import pytest
import requests

from agent_code import ECHO_JS, config_get, deployed_agent, needs_runner
from conftest import BASE_URL, wait_until

API = urllib.parse.urlsplit(BASE_URL)
METRICS_URL = f"{API.scheme}://{API.netloc}/metrics"
# The stack's port base: nginx listens on it (scripts/lib.sh).
PORT = API.port
PROMETHEUS_PORT = PORT + 381


def runner_metrics_url():
    addr = config_get("runner_metrics_listen", "")
    assert addr, "the test stack's configuration sets runner_metrics_listen (scripts/lib.sh)"
    return f"http://{addr}/metrics"


def promtool_check(text):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: scripts/test installs Debian's prometheus package"
    p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr


def sample(text, name, **labels):
    """The value of the series name{labels} in an exposition, or None."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    series = f"{name}{{{want}}}" if labels else name
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


def test_api_exposition_passes_promtool_and_labels_routes_by_pattern(client):
    slug = "nope-" + uuid.uuid4().hex[:8]
    assert client.get(f"/agents/{slug}").status_code == 404
    r = requests.get(METRICS_URL, timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    promtool_check(r.text)
    # The route's pattern, never the path asked for (one series per route, not per agent).
    assert sample(r.text, "agenthost_http_requests_total", route="/agents/{slug}", method="GET",
                  code="404") >= 1
    assert slug not in r.text
    assert sample(r.text, "agenthost_http_request_duration_seconds_count", route="/agents/{slug}",
                  method="GET") >= 1
    for family in ("agenthost_invocations_total", "agenthost_invocation_duration_seconds",
                   "agenthost_invocation_tokens_total", "agenthost_invocation_cost_usd_total",
                   "agenthost_db_errors_total", "agenthost_db_retries_total"):
        assert f"# TYPE {family} " in r.text, family


def test_api_counts_are_summed_over_every_worker():
    """Requests on many connections at once land on many workers; every scrape,
    whichever worker answers it, sees them all."""
    def health_count():
        return sample(requests.get(METRICS_URL, timeout=10).text, "agenthost_http_requests_total",
                      route="/health", method="GET", code="200") or 0

    def burst(_):
        with requests.Session() as s:
            return [s.get(BASE_URL + "/health", timeout=10).status_code for _ in range(10)]
    before = health_count()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        codes = [c for cs in pool.map(burst, range(16)) for c in cs]
        assert codes == [200] * 160
        # At once too, so that they are answered by several workers.
        seen = list(pool.map(lambda _: health_count(), range(16)))
    assert all(n >= before + 160 for n in seen), (before, seen)


def test_runner_exposition_passes_promtool():
    r = requests.get(runner_metrics_url(), timeout=10)
    assert r.status_code == 200, r.text
    promtool_check(r.text)
    for state in ("busy", "warm", "idle", "free"):
        assert sample(r.text, "agenthost_runner_sandboxes", state=state) is not None, state
    assert sample(r.text, "agenthost_runner_heartbeats_total") >= 1
    assert sample(r.text, "agenthost_deploy_queue_jobs", state="queued") is not None
    assert requests.get(runner_metrics_url().replace("/metrics", "/other"), timeout=10).status_code == 404


def test_runner_listener_survives_garbage_and_a_trickling_client():
    """The runner's listener serves one connection at a time: a head that never
    ends, or one sent a byte at a time, is dropped rather than holding it."""
    host, port = urllib.parse.urlsplit(runner_metrics_url()).netloc.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"A" * 5000)
        try:
            assert s.recv(100) == b""  # closed without an answer
        except ConnectionResetError:
            pass  # closed with the bytes it did not read: a reset
    stop = threading.Event()

    def trickle():
        with socket.create_connection((host, int(port)), timeout=10) as s:
            try:
                for b in b"GET /metrics HTTP/1.0\r\nX-" + b"a" * 100:
                    if stop.wait(0.5):
                        return
                    s.send(bytes([b]))
            except OSError:
                pass  # dropped: what is wanted
    t = threading.Thread(target=trickle)
    t.start()
    try:
        time.sleep(0.6)
        r = requests.get(runner_metrics_url(), timeout=6)
        assert r.status_code == 200 and "agenthost_runner_sandboxes" in r.text
    finally:
        stop.set()
        t.join()


def test_metrics_refused_to_other_addresses():
    # The test nginx trusts X-Forwarded-For from loopback: this request is seen from 10.1.2.3.
    r = requests.get(METRICS_URL, headers={"X-Forwarded-For": "10.1.2.3"}, timeout=10)
    assert r.status_code == 403
    assert "agenthost_" not in r.text
    assert requests.get(METRICS_URL, timeout=10).status_code == 200
    # Not under the public API either.
    r = requests.get(BASE_URL + "/metrics", timeout=10)
    assert r.status_code == 404 and "agenthost_" not in r.text


def prometheus_config(tmp_path):
    runner = urllib.parse.urlsplit(runner_metrics_url())
    cfg = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [
            {"job_name": "agenthost-api", "static_configs": [{"targets": [API.netloc]}]},
            {"job_name": "agenthost-runner", "static_configs": [{"targets": [runner.netloc]}]},
        ],
    }
    path = tmp_path / "prometheus.yml"
    path.write_text(json.dumps(cfg))  # YAML is a superset of JSON
    return path


def start_prometheus(tmp_path):
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: scripts/test installs Debian's prometheus package"
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen([binary, f"--config.file={prometheus_config(tmp_path)}",
                             f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    return proc


def query(promql):
    try:
        r = requests.get(f"http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/query",
                         params={"query": promql}, timeout=5)
    except requests.ConnectionError:
        return None
    if r.status_code != 200:
        return None
    return {tuple(sorted(s["metric"].items())): float(s["value"][1]) for s in r.json()["data"]["result"]}


@needs_runner
def test_prometheus_scrapes_both_and_counts_an_invocation(client, tmp_path):
    a = deployed_agent(client, ECHO_JS)
    text = requests.get(METRICS_URL, timeout=10).text
    before = sample(text, "agenthost_invocations_total", status="completed")
    proc = start_prometheus(tmp_path)
    try:
        up = wait_until(lambda: (lambda v: v if v and len(v) == 2 and all(x == 1 for x in v.values())
                                 else None)(query("up")), timeout=60, interval=0.5)
        assert up, (tmp_path / "prometheus.log").read_text()[-2000:]
        r = client.post(f"/agents/{a['slug']}/invoke", json={"prompt": "count me"}, timeout=120)
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "completed"

        def counted():
            v = query('agenthost_invocations_total{job="agenthost-api",status="completed"}')
            return v and list(v.values())[0] >= before + 1
        assert wait_until(counted, timeout=30, interval=0.5), query("agenthost_invocations_total")
        tokens = query('agenthost_invocation_tokens_total{job="agenthost-api",kind="input"}')
        assert tokens and list(tokens.values())[0] >= r.json()["input_tokens"]
        beats = query('agenthost_runner_heartbeats_total{job="agenthost-runner"}')
        assert beats and list(beats.values())[0] >= 1
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_metrics_answer_while_the_database_is_away_and_count_its_errors(client):
    from test_deploy_faults import run_watcher, start_mariadb, stop_mariadb
    watcher = run_watcher()
    if watcher:
        pytest.skip(f"scripts/run (pid {watcher}) watches this stack and would stop it")
    before = sample(requests.get(METRICS_URL, timeout=10).text, "agenthost_db_errors_total")
    stop_mariadb()
    try:
        assert client.get("/agents").status_code == 503
        r = requests.get(METRICS_URL, timeout=10)
        assert r.status_code == 200, r.text
        assert sample(r.text, "agenthost_db_errors_total") > before
        assert sample(r.text, "agenthost_http_requests_total", route="/agents", method="GET",
                      code="503") >= 1
        assert requests.get(runner_metrics_url(), timeout=10).status_code == 200
    finally:
        start_mariadb()
    assert wait_until(lambda: client.get("/agents").status_code == 200, timeout=30)
