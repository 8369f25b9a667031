"""Agents that misbehave, through the API: endless output, fork bombs, memory
past the cap, SIGTERM-proof process trees, stdin left unread, binary floods,
concurrent calls that must not see each other, and a leak count over many
sandboxes. Each failure must be clean (the contract's status and error, in
history), bounded in time, contained to its sandbox, and leave nothing behind;
the next call must work. The plain cases (empty and binary output, early exit,
ten parallel echoes, an 11 MB write, timeouts) are in test_invoke.py.

Each test uses a fresh user (the invoke budget is 10 a minute) and small
timeouts, so the whole file stays well under a minute. The leak count comes
first: after a burst the runner's pool keeps more sandboxes ready for a
minute, which would move its baseline."""
import concurrent.futures
import glob
import os
import threading
import time
import uuid

import pytest

from agent_code import VAR, config_get, deployed_agent, needs_runner
from cgroups import own_dirs
from conftest import api_pids, new_client, proc_stat, wait_until

SANDBOX_ROOT = config_get("sandbox_root", os.path.join(VAR, "data", "sandboxes"))
UID_BASE = int(config_get("sandbox_uid_base", "1000000"))
OUTPUT_CAP = 10485760
# A directory per hierarchy: the v1 ones of memory, cpu and pids, plus the
# unified tree if any of them is there (one in all on a pure v2 host).
_V1 = [c for c in ("memory", "cpu", "pids") if os.path.exists(f"/sys/fs/cgroup/{c}/tasks")]
CGROUPS_PER_SANDBOX = len(_V1) + (len(_V1) < 3)
# The stack's runner puts its sandboxes' cgroups under this.
RUNNER_CGROUP = config_get("sandbox_cgroup", "agenthost")

# Writes 1 MiB chunks for ever (gigabytes, if nobody stops it).
ENDLESS_JS = """
const b = Buffer.alloc(1 << 20, 0x78);
const more = () => { while (process.stdout.write(b)); process.stdout.once('drain', more); };
more();
"""

# A shell fork bomb beside a node process that never ends; $0 is the marker.
# Each shell forks in a loop until a fork fails (dash then exits), so the
# bomb burns at the pids cap for the whole call: 'f | f &' forked once and
# exited, and at the cap the whole tree could die out within 0.1 s, before
# the test had seen any of it.
FORK_BOMB_JS = """
const { spawn } = require('child_process');
process.stdin.once('data', m => {
  for (let i = 0; i < 4; i++)
    spawn('/bin/sh', ['-c', 'f() { while :; do f & done; }; f', m.toString()], { stdio: 'ignore', detached: true })
      .on('error', () => {});
  setInterval(() => {}, 1000);
});
"""

# Touches memory in 64 MiB steps until something stops it.
HOG_JS = """
const keep = [];
for (;;) keep.push(Buffer.alloc(64 << 20, 1));
"""

# Ignores SIGTERM and leaves a tree behind: detached node children that
# ignore SIGTERM too, and a double-forked sleeper. argv carries the marker.
STUBBORN_JS = """
const { spawn } = require('child_process');
const ignore = "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000)";
process.on('SIGTERM', () => {});
process.stdin.once('data', m => {
  const mark = m.toString();
  for (let i = 0; i < 3; i++)
    spawn('/usr/bin/node', ['-e', ignore, mark], { stdio: 'ignore', detached: true }).unref();
  spawn('/bin/sh', ['-c', 'sleep 1000 & exit 0', mark], { stdio: 'ignore', detached: true });
  process.stdout.write('started');
  setInterval(() => {}, 1000);
});
"""

# Reads the first chunk of stdin only, then exits.
SIP_JS = """
process.stdin.once('data', c => { process.stdout.write('got ' + (c.length > 0)); process.exit(0); });
"""

# Closes stdin unread, keeps running a while, then answers.
CLOSE_STDIN_JS = """
process.stdin.destroy();
setTimeout(() => process.stdout.write('closed'), 300);
"""

# Every byte value, repeated: 1 MiB of binary, plus 1 MiB of stderr.
BINARY_JS = """
const one = Buffer.alloc(256);
for (let i = 0; i < 256; i++) one[i] = i;
process.stderr.write(Buffer.alloc(1 << 20, 0x65));
process.stdout.write(Buffer.concat(Array(4096).fill(one)));
"""

# Per-call state in /tmp and /app: a concurrent or earlier call must never
# show through. Answers "<what was there before>|<what it reads back>".
STATE_JS = """
const fs = require('fs');
const read = f => { try { return fs.readFileSync(f, 'utf8'); } catch (e) { return 'none'; } };
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', () => {
  const id = Buffer.concat(chunks).toString();
  const before = read('/tmp/mine.txt') + ',' + read('mine.txt');
  fs.writeFileSync('/tmp/mine.txt', id);
  fs.writeFileSync('mine.txt', id);
  setTimeout(() => process.stdout.write(before + '|' + read('/tmp/mine.txt') + ',' + read('mine.txt')), 200);
});
"""


def invoke(client, slug, prompt, **fields):
    body = {"prompt": prompt}
    body.update(fields)
    return client.post(f"/agents/{slug}/invoke", json=body, timeout=120)


def last_status(client, slug):
    r = client.get(f"/agents/{slug}/invocations", params={"limit": 1})
    assert r.status_code == 200, r.text
    return r.json()[0]["status"]


def procs_with(marker):
    """{pid: host uid} of the host's processes whose command line has marker."""
    found = {}
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/cmdline", "rb") as f:
                if marker.encode() not in f.read():
                    continue
            with open(d + "/status") as f:
                uid = next(int(l.split()[1]) for l in f if l.startswith("Uid:"))
            found[int(d[6:])] = uid
        except (OSError, StopIteration, ValueError):
            pass
    return found


def boot_ticks():
    """Now, in /proc/PID/stat's start-time unit (clock ticks since boot)."""
    with open("/proc/uptime") as f:
        return float(f.read().split()[0]) * os.sysconf("SC_CLK_TCK")


def started(pid):
    """When pid started (clock ticks since boot); 0 if it is gone."""
    try:
        return int(proc_stat(pid)[19])
    except (OSError, ValueError, IndexError):
        return 0


class Watch:
    """Records, while a call runs, the processes carrying a marker, and when
    the watch began (boot_ticks)."""

    def __init__(self, marker):
        self.marker, self.seen, self.stop = marker, {}, threading.Event()
        self.most = 0  # the most alive at once
        self.begin = None
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            now = procs_with(self.marker)
            self.seen.update(now)
            self.most = max(self.most, len(now))
            time.sleep(0.05)

    def __enter__(self):
        self.begin = boot_ticks()
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join()


def assert_tree_gone(watch, r):
    """Nothing with the marker, and nothing of the sandbox agent's uid, is
    left after the call that answered r."""
    uids = set(watch.seen.values())
    assert uids and all(u >= UID_BASE for u in uids), watch.seen  # ran as a sandbox uid
    left = wait_until(lambda: not procs_with(watch.marker), timeout=5)
    assert left, f"left behind: {procs_with(watch.marker)}"

    # Of the call's uid and started before its run ended (the watch's start
    # plus the call's phases up to the run's end, so a little early): the
    # slot's next sandbox has the same uids, and its keeper and pre-made
    # agent process (already the agent user) start once the runner has let
    # the sandbox settle after the run (10 ms, a clock tick). A process on
    # its way out may still be listed for a moment.
    tm = r.json()["invocation"]["timing"]
    ms = tm["queue_ms"] + tm["take_ms"] + tm["start_ms"] + tm["run_ms"]
    run_end = watch.begin + ms / 1000 * os.sysconf("SC_CLK_TCK")

    def same_uid():
        return {p: u for p, u in procs_with("").items() if u in uids and started(p) <= run_end}
    assert wait_until(lambda: not same_uid(), timeout=5), \
        f"processes of the sandbox's uid remain: {same_uid()}"


# ---- leaks -------------------------------------------------------------------

def runner_pid():
    with open(os.path.join(VAR, "run", "runner.pid")) as f:
        return int(f.read().strip())


def our_slots():
    """Slots whose keeper is a child of this stack's runner (its live sandboxes)."""
    slots, rp = set(), runner_pid()
    for d in glob.glob("/proc/[0-9]*"):
        try:
            if int(proc_stat(d[6:])[1]) != rp:
                continue
            with open(d + "/cgroup") as f:
                for line in f:
                    part = line.strip().rsplit(f"/{RUNNER_CGROUP}/slot", 1)
                    if len(part) == 2 and part[1].isdigit():
                        slots.add(int(part[1]))
        except (OSError, ValueError, IndexError):
            pass
    return slots


def counts():
    """This stack's sandbox resources: mounts and loop devices that refer to
    its sandbox root, and the cgroups and veths of its runner's slots. Other
    runners share the host, so host-wide numbers would not be ours."""
    with open("/proc/self/mountinfo") as f:
        mounts = sum(SANDBOX_ROOT in l for l in f)
    loops = 0
    for b in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            loops += open(b).read().startswith(SANDBOX_ROOT)
        except OSError:
            pass
    slots = our_slots()
    # Only this runner's parent: other runners' (other stacks', a killed
    # one's leftovers) may hold directories named after the same slot numbers.
    cgroups = sum(len(glob.glob(f"{d}/{RUNNER_CGROUP}/slot{s}")) for d in own_dirs() for s in slots)
    veths = sum(os.path.exists(f"/sys/class/net/ahs{s}") for s in slots)
    return {"mounts": mounts, "loops": loops, "cgroups": cgroups, "veths": veths,
            "sandboxes": len(slots)}


def free_slot_leftovers():
    """Cgroups and veths of slots no process holds: leaks of whoever held them."""
    import fcntl
    left = set()
    for lock in glob.glob("/run/agenthost-sandbox/slot-*.lock"):
        n = lock.rsplit("-", 1)[1].split(".")[0]
        with open(lock) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            left.update(p for d in own_dirs() for p in glob.glob(f"{d}/agenthost*/slot{n}"))
            if os.path.exists(f"/sys/class/net/ahs{n}"):
                left.add(f"ahs{n}")
    return left


def extras(c):
    """What no live sandbox of ours accounts for."""
    n = c["sandboxes"]
    return {"mounts": c["mounts"], "loops": c["loops"] - n, "veths": c["veths"] - n,
            "cgroups": c["cgroups"] - n * CGROUPS_PER_SANDBOX}


# The pool's size at rest (sandbox_pool_size). At the host's sandbox budget
# the pool is not refilled (idle sessions of earlier tests hold it): it may
# be below this before a test and back at it after, which is no leak.
POOL_AT_REST = 2


def not_more(before, after):
    return extras(after) == extras(before) and \
        after["sandboxes"] <= max(before["sandboxes"], POOL_AT_REST)


def settled():
    """Counts once the pool has stopped changing for two seconds: refills,
    teardowns, and the spares the runner builds after ephemeral calls, which
    wait for up to 250 ms with no agent running."""
    prev, same = counts(), 0
    for _ in range(80):
        time.sleep(0.25)
        cur = counts()
        same = same + 1 if cur == prev else 0
        if same >= 8:
            break
        prev = cur
    return cur


@needs_runner
@pytest.mark.slow
def test_no_leaks_after_ephemeral_calls_and_sessions(client):
    a = deployed_agent(client, STATE_JS)
    slug = a["slug"]
    before, stale = settled(), free_slot_leftovers()
    for i in range(6):
        r = invoke(client, slug, f"e{i}")
        assert r.json()["response_content"] == f"none,none|e{i},e{i}"
    # Session create/delete cycles (a second user: the first one's budget is spent).
    other = new_client()
    b = deployed_agent(other, STATE_JS)
    for i in range(3):
        r = invoke(other, b["slug"], f"s{i}", session_id=f"cycle-{i}")
        assert r.status_code == 200, r.text
        assert other.delete(f"/agents/{b['slug']}/sessions/cycle-{i}").status_code == 204
    # The first agent keeps a spare sandbox for its next ephemeral call; it
    # goes with the agent. Then every resource left belongs to a pooled
    # sandbox, as before, and the pool is no bigger than it was (the calls
    # were one at a time).
    assert client.delete(f"/agents/{slug}").status_code == 204
    assert other.delete(f"/agents/{b['slug']}").status_code == 204
    # A loaded machine (the whole suite at once) may take a while to tear down
    # and refill the pool: the bound is generous, the baseline is not.
    after = wait_until(lambda: (lambda c: c if not_more(before, c) else None)(settled()),
                       timeout=60, interval=0.5)
    assert after, f"not back to the baseline: before {before}, after {counts()}"
    assert not free_slot_leftovers() - stale


# ---- output, stdin -----------------------------------------------------------

@needs_runner
@pytest.mark.slow
def test_endless_output_fails_at_the_cap(client):
    a = deployed_agent(client, ENDLESS_JS)
    before = api_pids()
    t0 = time.time()
    r = invoke(client, a["slug"], "go", timeout_seconds=60)
    assert time.time() - t0 < 20, "the output cap did not stop the agent"
    assert r.status_code == 500, r.text[:300]
    body = r.json()
    assert body["detail"] == f"Invocation failed: output exceeded {OUTPUT_CAP} bytes"
    assert body["invocation"]["status"] == "failed"
    assert len(body["invocation"]["response_content"]) <= OUTPUT_CAP
    assert last_status(client, a["slug"]) == "failed"
    assert api_pids() == before, "an API worker died"
    # The agent (and the worker) still answer.
    e = deployed_agent(client, SIP_JS)
    assert invoke(client, e["slug"], "x").json()["response_content"] == "got true"


@needs_runner
def test_stdin_left_unread_never_hangs(client):
    """A 2 MB prompt (the cap) is more than the pipe takes up front."""
    big = "y" * (2 * 1024 * 1024)
    for js, want in ((SIP_JS, "got true"), (CLOSE_STDIN_JS, "closed")):
        a = deployed_agent(client, js)
        t0 = time.time()
        r = invoke(client, a["slug"], big, timeout_seconds=10)
        assert r.status_code == 200, r.text[:300]
        assert r.json()["response_content"] == want
        assert time.time() - t0 < 8


@needs_runner
def test_binary_flood_and_stderr_only(client):
    a = deployed_agent(client, BINARY_JS)
    r = invoke(client, a["slug"], "")
    assert r.status_code == 200, r.text[:300]
    res = r.json()
    # Invalid UTF-8 becomes U+FFFD per maximal invalid subpart, as Python does.
    want = (bytes(range(256)) * 4096).decode("utf-8", "replace")
    assert res["response_content"] == want
    assert res["output_tokens"] > 0
    assert "eeee" not in r.text  # stderr stays in the runner's log
    h = client.get(f"/agents/{a['slug']}/invocations").json()[0]
    assert h["response_content"] == want and h["status"] == "completed"


# ---- containment -------------------------------------------------------------

@needs_runner
@pytest.mark.slow
def test_fork_bomb_is_contained(client):
    a = deployed_agent(client, FORK_BOMB_JS)
    marker = "bomb-" + uuid.uuid4().hex
    with Watch(marker) as w:
        r = invoke(client, a["slug"], marker, timeout_seconds=3)
    assert r.status_code in (500, 504), r.text[:300]
    assert r.json()["invocation"]["status"] == "failed"
    # The pids cap held it: far fewer processes than the host could take.
    assert 0 < w.most <= int(config_get("sandbox_pids", "256"))
    assert_tree_gone(w, r)
    e = deployed_agent(client, SIP_JS)
    r = invoke(client, e["slug"], "after the bomb")
    assert r.status_code == 200 and r.json()["response_content"] == "got true"


@needs_runner
@pytest.mark.slow
def test_memory_past_the_cap_is_an_oom_kill(client):
    a = deployed_agent(client, HOG_JS)
    t0 = time.time()
    r = invoke(client, a["slug"], "eat", timeout_seconds=30)
    assert time.time() - t0 < 25
    assert r.status_code == 500, r.text[:300]
    body = r.json()
    assert "out of memory" in body["detail"]
    assert "out of memory" in body["invocation"]["error"]
    assert body["invocation"]["status"] == "failed"
    h = client.get(f"/agents/{a['slug']}/invocations").json()[0]
    assert h["status"] == "failed" and "out of memory" in h["error"]
    # The host and the runner are fine.
    e = deployed_agent(client, SIP_JS)
    assert invoke(client, e["slug"], "x").json()["response_content"] == "got true"


# Echoes, or with the prompt "eat" takes memory until it is killed.
HOG_ON_ASK_JS = """
process.stdin.once('data', m => {
  if (m.toString() !== 'eat') { process.stdout.write('fine'); return; }
  const keep = [];
  for (;;) keep.push(Buffer.alloc(64 << 20, 1));
});
"""


@needs_runner
@pytest.mark.slow
def test_oom_kill_in_a_session_is_told_from_the_calls_around_it(client):
    # The sandbox's OOM-kill count is read after every call (through a file
    # it keeps open): the kill after a good call is one, and the good call
    # after it, in the same sandbox, is not.
    a = deployed_agent(client, HOG_ON_ASK_JS)
    sid = "oom-" + uuid.uuid4().hex[:8]
    r = invoke(client, a["slug"], "hi", session_id=sid)
    assert r.status_code == 200 and r.json()["response_content"] == "fine", r.text[:300]
    sandbox = r.json()["sandbox_id"]
    r = invoke(client, a["slug"], "eat", session_id=sid, timeout_seconds=30)
    assert r.status_code == 500, r.text[:300]
    assert "out of memory" in r.json()["detail"]
    r = invoke(client, a["slug"], "hi", session_id=sid)
    assert r.status_code == 200 and r.json()["response_content"] == "fine", r.text[:300]
    assert r.json()["sandbox_id"] == sandbox


@needs_runner
@pytest.mark.slow
def test_sigterm_proof_tree_is_killed_at_the_timeout(client):
    a = deployed_agent(client, STUBBORN_JS)
    marker = "stubborn-" + uuid.uuid4().hex
    t0 = time.time()
    with Watch(marker) as w:
        r = invoke(client, a["slug"], marker, timeout_seconds=2)
    assert time.time() - t0 < 10
    assert r.status_code == 504, r.text[:300]
    body = r.json()
    assert body["detail"] == "Invocation timed out after 2 seconds"
    assert body["invocation"]["status"] == "failed"
    assert body["invocation"]["response_content"] == "started"
    assert len(w.seen) >= 3, w.seen  # the children really ran
    assert_tree_gone(w, r)
    assert last_status(client, a["slug"]) == "failed"


# ---- concurrency -------------------------------------------------------------

@needs_runner
@pytest.mark.slow
def test_ten_concurrent_calls_see_only_their_own_state(client):
    a = deployed_agent(client, STATE_JS)
    ids = [uuid.uuid4().hex for _ in range(10)]
    with concurrent.futures.ThreadPoolExecutor(10) as ex:
        results = list(ex.map(lambda i: invoke(client, a["slug"], i, timeout_seconds=20), ids))
    assert [r.status_code for r in results] == [200] * 10, [r.text[:200] for r in results]
    assert [r.json()["response_content"] for r in results] == \
        [f"none,none|{i},{i}" for i in ids]
    assert len({r.json()["sandbox_id"] for r in results}) == 10
    assert {i["status"] for i in client.get(f"/agents/{a['slug']}/invocations").json()} == {"completed"}


