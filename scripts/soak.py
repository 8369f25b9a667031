"""The load and the sampling of scripts/soak (see there); run by it."""
import concurrent.futures
import glob
import http.client
import json
import os
import subprocess
import sys
import threading
import time

PORT, KEY = int(os.environ["SOAK_PORT"]), os.environ["SOAK_KEY"]
MINUTES, VAR = float(os.environ["SOAK_MINUTES"]), os.environ["SOAK_VAR"]
TGZ, CG = os.environ["SOAK_TGZ"], os.environ["SOAK_CG"]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from cgroups import cgroup_dirs  # noqa: E402  (the runner's sandboxes' cgroups)
HDR = {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"}
stop = threading.Event()
counts = {"invoke": 0, "deploy": 0, "upload": 0, "errors": 0}
first_errors = []
lock = threading.Lock()


def call(method, path, body=None, headers=HDR, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    try:
        c.request(method, "/api/v1" + path, body, headers)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def count(kind, ok, what=""):
    with lock:
        counts[kind if ok else "errors"] += 1
        if not ok and len(first_errors) < 5:
            first_errors.append(f"{kind}: {what}"[:300])


def make_agent(name):
    st, body = call("POST", "/agents", json.dumps({"name": name, "source_type": "local"}))
    slug = json.loads(body)["slug"]
    upload(slug)
    call("POST", f"/agents/{slug}/deploy")
    for _ in range(240):
        if json.loads(call("GET", f"/agents/{slug}")[1])["status"] == "active":
            return slug
        time.sleep(0.5)
    sys.exit(f"soak: agent {slug} did not deploy")


def upload(slug):
    with open(TGZ, "rb") as f:
        data = f.read()
    st, _ = call("PUT", f"/agents/{slug}/code", data, dict(HDR, **{"Content-Type": "application/gzip"}))
    return st == 200


def invoker(slug, n):
    i = 0
    while not stop.is_set():
        body = {"prompt": f"p{i}"}
        if n % 2:
            body["session_id"] = f"soak-{n}-{i % 5}"
        st, out = call("POST", f"/agents/{slug}/invoke", json.dumps(body))
        count("invoke", st == 200 and json.loads(out)["response_content"] == f"p{i}", f"{st} {out[:200]!r}")
        i += 1


def deployer(slug):
    while not stop.wait(20):
        st, _ = call("POST", f"/agents/{slug}/deploy")
        count("deploy", st == 202)


def uploader(slug):
    while not stop.wait(10):
        count("upload", upload(slug))


def pids(name):
    try:
        with open(os.path.join(VAR, "run", name)) as f:
            return [int(f.read().strip())]
    except (OSError, ValueError):
        return []


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def parts():
    """Each part of the stack and its processes (the runner alone: its keepers
    are sandboxes, which come and go)."""
    api = pids("api.pid")
    ngx = pids("nginx.pid")
    return {"api": api + [c for p in api for c in children(p)], "runner": pids("runner.pid"),
            "mariadb": pids("mysql.pid"), "nginx": ngx + [c for p in ngx for c in children(p)]}


def pool_mb():
    """MariaDB's InnoDB buffer pool in use: a cache bounded by
    innodb_buffer_pool_size that fills as the tables grow, not a leak."""
    out = subprocess.run(["mariadb", "--no-defaults", f"--socket={VAR}/run/mysql.sock", "-uroot", "-N",
                          "-e", "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_bytes_data'"],
                         capture_output=True, text=True).stdout.split()
    return int(out[1]) // (1 << 20) if len(out) == 2 and out[1].isdigit() else 0


def sample():
    out = {}
    for part, ps in parts().items():
        rss = fds = 0
        for p in ps:
            try:
                with open(f"/proc/{p}/status") as f:
                    rss += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
                fds += len(os.listdir(f"/proc/{p}/fd"))
            except (OSError, StopIteration):
                pass
        out[part] = (rss // 1024, fds)
    out["pool"] = (pool_mb(), 0)
    return out


def leftovers():
    """Sandbox resources nobody holds: cgroups and veths of free slots."""
    import fcntl
    left = []
    for lockf in glob.glob("/run/agenthost-sandbox/slot-*.lock"):
        n = lockf.rsplit("-", 1)[1].split(".")[0]
        with open(lockf) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            left += [f"{d}/slot{n}" for d in cgroup_dirs(CG) if os.path.isdir(f"{d}/slot{n}")]
            if os.path.exists(f"/sys/class/net/ahs{n}"):
                left.append(f"ahs{n}")
    root = os.path.join(VAR, "data", "sandboxes")
    with open("/proc/self/mountinfo") as f:
        left += [l.split()[4] for l in f if root in l]
    return left


def settle():
    """Waits (up to 2 minutes) until no part's descriptors change for 15 s:
    the runner's pool shrinks back to its size at rest after the bursts."""
    prev, same = sample(), 0
    prev.pop("pool")
    for _ in range(24):
        time.sleep(5)
        cur = sample()
        cur.pop("pool")
        same = same + 1 if cur == prev else 0
        if same >= 3:
            return
        prev = cur


def main():
    # Two agents take the calls; a third is redeployed and re-uploaded (an
    # agent being deployed answers 409 to calls, as the contract says).
    slugs = [make_agent(f"soak {i}") for i in range(3)]
    wrk = subprocess.Popen(["wrk", "-t1", "-c4", f"-d{int(MINUTES * 60)}s", "-H",
                            f"Authorization: Bearer {KEY}", f"http://127.0.0.1:{PORT}/api/v1/agents"],
                           stdout=subprocess.PIPE, text=True)
    workers = [threading.Thread(target=invoker, args=(slugs[n % 2], n)) for n in range(4)]
    workers += [threading.Thread(target=deployer, args=(slugs[2],)),
                threading.Thread(target=uploader, args=(slugs[2],))]
    for t in workers:
        t.start()
    samples, t0 = [], time.time()
    print(f"{'min':>4} " + " ".join(f"{p + ' MB':>10} {p + ' fd':>10}" for p in parts())
          + f" {'pool MB':>10}")
    while True:
        elapsed = time.time() - t0
        s = sample()
        samples.append(s)
        print(f"{elapsed / 60:4.0f} " + " ".join(f"{v[0]:>10} {v[1]:>10}" for k, v in s.items() if k != "pool")
              + f" {s['pool'][0]:>10}", flush=True)
        if elapsed >= MINUTES * 60:
            break
        time.sleep(min(60, MINUTES * 60 - elapsed))
    stop.set()
    for t in workers:
        t.join(180)
    wrk_out = wrk.communicate(timeout=120)[0]
    reqs = next((l for l in wrk_out.splitlines() if "requests in" in l), "").strip()
    for s in slugs:  # their sessions and spares go with them
        call("DELETE", f"/agents/{s}")
    settle()
    failures = []
    # Memory: from the sample at a sixth of the run to the last one under load.
    # (After it the agents are deleted, tens of thousands of invocations in one
    # cascade: MariaDB keeps what that transaction took, which is not growth
    # under the load.) Descriptors: once everything has settled after the load.
    base = samples[max(1, len(samples) // 6)] if len(samples) > 2 else samples[0]
    end, last = samples[-1], sample()
    for part in (p for p in last if p != "pool"):
        (rss0, fds0), (rss, _), fds = base[part], end[part], last[part][1]
        if part == "mariadb":  # judged without its buffer pool's data (a bounded cache)
            rss, rss0 = rss - end["pool"][0], rss0 - base["pool"][0]
        if rss > rss0 * 1.10 + 2:
            failures.append(f"{part}: RSS {rss0} -> {rss} MB (> 10 %)")
        if fds > fds0:
            failures.append(f"{part}: descriptors {fds0} -> {fds}")
    left = leftovers()
    if left:
        failures.append(f"sandbox resources outlived the load: {left[:10]}")
    if counts["errors"]:
        failures.append(f"{counts['errors']} requests failed, the first: {first_errors}")
    print(f"\nwrk (CRUD reads): {reqs}")
    print("calls: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    print("after the load: " + ", ".join(f"{p} {v[0]} MB / {v[1]} fds" for p, v in last.items() if p != "pool")
          + f"; InnoDB buffer pool data {last['pool'][0]} MB")
    if failures:
        print("SOAK FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("soak passed: no part grew past its sample at a sixth of the run; nothing left behind")


main()
