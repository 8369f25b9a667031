"""The measuring half of scripts/bench-sdk (which sets up the stack, the
stand-in Messages API and the environment this reads). Not a test."""
import io
import json
import os
import statistics
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.request

API, KEY = os.environ["BENCH_API"], os.environ["BENCH_KEY"]
DATA, STANDIN = os.environ["BENCH_DATA"], os.environ["BENCH_STANDIN"]
CLI, AGENT_DIR = os.environ["BENCH_CLI"], os.environ["BENCH_AGENT_DIR"]
ROUNDS, AGENTS = int(os.environ["BENCH_ROUNDS"]), int(os.environ["BENCH_AGENTS"])
PROMPT = "RUN: echo bench"


def call(method, path, body=None, ctype="application/json", timeout=900):
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(API + path, data=data, method=method,
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def tarball(extra=None):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in sorted(os.listdir(AGENT_DIR)):
            if name not in (extra or {}):
                tar.add(os.path.join(AGENT_DIR, name), arcname=name)
        for name, text in (extra or {}).items():
            raw = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(raw), 0o644
            tar.addfile(info, io.BytesIO(raw))
    return buf.getvalue()


def deploy(slug, extra=None, create=True):
    """Seconds from the code upload to an active agent."""
    if create:
        st, a = call("POST", "/agents", {"name": slug, "slug": slug, "source_type": "local",
                                         "timeout_seconds": 300})
        assert st == 201, a
    t0 = time.monotonic()
    st, _ = call("PUT", f"/agents/{slug}/code", tarball(extra), "application/gzip")
    assert st == 200
    assert call("POST", f"/agents/{slug}/deploy")[0] == 202
    while True:
        a = call("GET", f"/agents/{slug}")[1]
        if a["status"] in ("active", "error"):
            assert a["status"] == "active", a["status_message"]
            return time.monotonic() - t0
        time.sleep(0.25)


def invoke(slug, prompt=PROMPT):
    t0 = time.monotonic()
    st, r = call("POST", f"/agents/{slug}/invoke", {"prompt": prompt}, timeout=330)
    assert st == 200, r
    return (time.monotonic() - t0) * 1000


def image_of(slug):
    agent_id = call("GET", f"/agents/{slug}")[1]["id"]
    d = os.path.join(DATA, "images", agent_id)
    return os.path.join(d, max((x for x in os.listdir(d) if "." not in x), key=int))


def bare_run(image):
    """`node index.mjs` outside any sandbox, the agent's own tree, same stand-in."""
    with tempfile.TemporaryDirectory() as work:
        os.symlink(os.path.join(image, "node_modules"), os.path.join(work, "node_modules"))
        for f in ("index.mjs", "package.json"):
            os.symlink(os.path.join(image, f), os.path.join(work, f))
        os.mkdir(os.path.join(work, "home"))
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.path.join(work, "home"),
               "LANG": "C.UTF-8", "ANTHROPIC_BASE_URL": STANDIN, "ANTHROPIC_API_KEY": "bare"}
        t0 = time.monotonic()
        subprocess.run(["node", "index.mjs"], input=PROMPT.encode(), cwd=work, env=env,
                       check=True, capture_output=True)
        return (time.monotonic() - t0) * 1000


def disk_bytes(paths):
    """Bytes on disk of paths together, each hard-linked inode once (du -scb)."""
    out = subprocess.run(["du", "-scb", *paths], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1].split()[0])


def med(xs):
    return statistics.median(xs)


def main():
    first = deploy("sdk-a")
    print(f"first deploy: {first:.1f} s", flush=True)
    second = deploy("sdk-b")
    print(f"(d) a second agent with the same dependencies: {second:.1f} s, "
          f"{second / first:.2f}x the first (target 0.3x)", flush=True)
    redeploy = deploy("sdk-a", {"CHANGES": "again\n"}, create=False)
    print(f"(c) a redeploy with unchanged dependencies: {redeploy:.1f} s (target 5 s)", flush=True)

    image = image_of("sdk-b")
    cold, bare = [], []
    for _ in range(ROUNDS):
        cold.append(invoke("sdk-b"))
        bare.append(bare_run(image))
    print(f"(a) cold call {med(cold):.0f} ms vs bare node {med(bare):.0f} ms: "
          f"{med(cold) / med(bare):.2f}x (target 1.10x; runs {[round(x) for x in cold]} / "
          f"{[round(x) for x in bare]})", flush=True)

    with tempfile.TemporaryDirectory() as t:
        subprocess.run([CLI, "init", os.path.join(t, "w"), "--template", "claude-agent-sdk"],
                       check=True, capture_output=True)
        template = open(os.path.join(t, "w", "index.mjs")).read()
    deploy("sdk-a", {"index.mjs": template}, create=False)
    assert call("PATCH", "/agents/sdk-a", {"min_warm": 1})[0] == 200
    invoke("sdk-a")  # warm processes start after a first call
    warm, cold2 = [], []
    for _ in range(ROUNDS):
        time.sleep(8)  # a replacement starts after each call: let it get ready
        warm.append(invoke("sdk-a"))
        cold2.append(invoke("sdk-b"))
    print(f"(b) warm call of the template agent {med(warm):.0f} ms vs cold {med(cold2):.0f} ms: "
          f"{med(warm) / med(cold2):.2f}x (target 0.4x; runs {[round(x) for x in warm]})",
          flush=True)

    one = disk_bytes([image_of("sdk-b")])
    slugs = ["sdk-b"]
    for i in range(2, AGENTS):
        deploy(f"sdk-{i}")
        slugs.append(f"sdk-{i}")
    slugs.append("sdk-a")
    many = disk_bytes([image_of(s) for s in slugs] + [os.path.join(DATA, "store")])
    print(f"(e) {len(slugs)} agents' images {many >> 20} MB on disk vs one agent's {one >> 20} MB: "
          f"{many / one:.2f}x (target 1.5x)", flush=True)
    cache = os.path.join(DATA, "npm-cache")
    if os.path.isdir(cache):
        print(f"    besides: the host's npm download cache, {disk_bytes([cache]) >> 20} MB "
              "(the tarballs, once for the host)", flush=True)


if __name__ == "__main__":
    main()
