"""The host's sandbox budget (issues 21 and 17): sandboxes are admitted only
while their memory caps fit the budget (the limit of their cgroup parent) and
the free space of sandbox_root's filesystem, minus what live disks may still
write, stays above the reserve. A refusal is clean and says why; once a
sandbox is gone the next one is admitted; nothing else on the host is touched.

Each test uses a cgroup parent of its own (sandbox_cgroup), so that the other
sandboxes on this host (other stacks) neither count nor are limited, and no
pool (sandbox_pool_size and _max 0): each CLI process holds exactly the
sandbox it runs (a pool's sandboxes count too, and another process cannot
make this one give them up).
Holders run `sleep` in a sandbox; a holder ends when the test kills its sleep,
and its CLI then destroys the sandbox as usual."""
import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from cgroups import cgroup_dirs
from conftest import CLI

MIB = 1 << 20


def slot_dirs(scope):
    """Slot cgroups under scope, one per live sandbox (counted in one hierarchy)."""
    dirs = sorted(cgroup_dirs(scope))
    return glob.glob(os.path.join(dirs[0], "slot*")) if dirs else []


def procs_in(scope):
    pids = set()
    for f in (f for d in cgroup_dirs(scope) for f in glob.glob(f"{d}/slot*/cgroup.procs")):
        try:
            pids |= {int(p) for p in open(f).read().split()}
        except OSError:
            pass
    return pids


def comm(pid):
    try:
        return open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return ""


def descends_from(pid, ancestor):
    for _ in range(20):
        try:
            status = open(f"/proc/{pid}/status").read()
        except OSError:
            return False
        pid = int(status.split("PPid:")[1].split()[0])
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
    return False


def remove_scope(scope):
    for d in cgroup_dirs(scope):
        for s in glob.glob(os.path.join(d, "slot*")):
            for _ in range(100):
                try:
                    os.rmdir(s)
                    break
                except OSError:
                    time.sleep(0.05)
        os.rmdir(d)


class Budget:
    """CLI runs under a private cgroup parent and config."""

    def __init__(self, sandbox, scope, env):
        self.sandbox = sandbox
        self.scope = scope
        self.env = dict(sandbox.env, AGENTHOST_SANDBOX_CGROUP=scope,
                        AGENTHOST_SANDBOX_POOL_SIZE="0", AGENTHOST_SANDBOX_POOL_MAX="0", **env)
        self.holders = []

    def argv(self, cmd):
        return [CLI, "--image", self.sandbox.image, "--timeout", "600000", "--"] + cmd

    def hold(self, cmd=("/usr/bin/sleep", "3600")):
        """A sandbox that stays until stop(); returns once its program runs."""
        p = subprocess.Popen(self.argv(list(cmd)), env=self.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        self.holders.append(p)
        for _ in range(600):
            if self.sleeper(p):
                return p
            assert p.poll() is None, p.stderr.read().decode()
            time.sleep(0.1)
        raise AssertionError("the holder's sandbox never ran")

    def sleeper(self, p):
        return [pid for pid in procs_in(self.scope)
                if comm(pid) == "sleep" and descends_from(pid, p.pid)]

    def stop(self, p):
        """Ends the holder's program; its CLI destroys the sandbox and exits."""
        for pid in self.sleeper(p):
            os.kill(pid, signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err.decode()
        return json.loads(out.decode().splitlines()[0])

    def once(self, cmd=("/usr/bin/true",)):
        return subprocess.run(self.argv(list(cmd)), env=self.env, capture_output=True,
                              text=True, timeout=120)

    def close(self):
        for p in self.holders:
            if p.poll() is None:
                for pid in self.sleeper(p):
                    os.kill(pid, signal.SIGKILL)
                try:
                    p.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.communicate()


@pytest.fixture
def budget_for(sandbox):
    made = []

    def make(**env):
        scope = f"ahbt{os.getpid()}-{len(made)}"
        b = Budget(sandbox, scope, {"AGENTHOST_" + k.upper(): str(v) for k, v in env.items()})
        made.append(b)
        return b
    yield make
    for b in made:
        b.close()
        remove_scope(b.scope)


def parent_memory_limit(scope):
    for d in cgroup_dirs(scope):
        for f in ("memory.limit_in_bytes", "memory.max"):
            if os.path.exists(os.path.join(d, f)):
                return int(open(os.path.join(d, f)).read())
    return None


def test_memory_budget_refuses_the_next_sandbox_cleanly(budget_for):
    b = budget_for(sandbox_memory_mb=64, sandbox_memory_budget_mb=192, sandbox_disk_mb=0)
    sentinel = subprocess.Popen(["sleep", "600"])  # something else on the host
    try:
        held = [b.hold() for _ in range(3)]
        assert parent_memory_limit(b.scope) == 192 * MIB
        r = b.once()
        assert r.returncode == 1, r.stdout
        assert "the host is at its sandbox memory budget" in r.stderr, r.stderr
        # Clean: the refused sandbox left no cgroup; the others still run,
        # and so does everything else.
        assert len(slot_dirs(b.scope)) == 3
        assert all(p.poll() is None for p in held)
        assert sentinel.poll() is None
        # One ends: the next one is admitted and runs.
        assert b.stop(held[0])["signal"] == signal.SIGTERM
        r = b.once()
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout.splitlines()[0])["exit_code"] == 0
    finally:
        sentinel.kill()
        sentinel.wait()


def test_a_bigger_memory_cap_counts_in_full(budget_for):
    """A sandbox asking for more than the default cap is admitted for what it
    asks, not for the default it was built with."""
    b = budget_for(sandbox_memory_mb=64, sandbox_memory_budget_mb=192, sandbox_disk_mb=0)
    b.hold()

    def run_with_cap(mb):
        return subprocess.run([CLI, "--image", b.sandbox.image, "--memory-mb", str(mb), "--",
                               "/usr/bin/true"], env=b.env, capture_output=True, text=True,
                              timeout=120)
    r = run_with_cap(160)
    assert r.returncode == 1 and "sandbox memory budget (160 MiB asked" in r.stderr, r.stderr
    assert len(slot_dirs(b.scope)) == 1
    r = run_with_cap(128)  # fits, and the cap is raised (v1: memsw with it)
    assert r.returncode == 0, r.stderr


def test_sandbox_programs_are_the_oom_killers_first_choice(sandbox):
    """And cannot make themselves its last (where the host lets root set a
    floor, not even its default: 1000 is their floor)."""
    r = sandbox.run(cmd=["/bin/sh", "-c", "cat /proc/self/oom_score_adj; "
                         "echo -1000 > /proc/self/oom_score_adj && echo lowered"])
    assert r["stdout"].split("\n")[0] == "1000", r
    assert "lowered" not in r["stdout"]


@pytest.fixture
def small_fs():
    """A 300 MB ext4 of its own, mounted under a temporary directory."""
    d = tempfile.mkdtemp(prefix="ahbt-fs-")
    img, mnt = os.path.join(d, "fs.img"), os.path.join(d, "mnt")
    os.mkdir(mnt)
    with open(img, "wb") as f:
        f.truncate(300 * MIB)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", img], check=True)
    subprocess.run(["mount", "-o", "loop", img, mnt], check=True)
    try:
        yield mnt
    finally:
        # Unmounted last (the fixture comes first): the sandboxes on it are gone.
        if subprocess.run(["umount", mnt]).returncode != 0:
            subprocess.run(["umount", "-l", mnt])
        shutil.rmtree(d, ignore_errors=True)


def loops_on(path):
    return [b for b in glob.glob("/sys/block/loop*/loop/backing_file")
            if open(b).read().startswith(path + "/")]


def reserve_for_two_disks(fs):
    """A disk_reserve_mb leaving room for two 64 MB disks on fs, with 32 MB to spare."""
    st = os.statvfs(fs)
    return st.f_bavail * st.f_frsize // MIB - 2 * 64 - 32


def test_disk_reserve_refuses_and_counts_what_disks_may_still_write(small_fs, budget_for):
    reserve = reserve_for_two_disks(small_fs)
    b = budget_for(sandbox_root=os.path.join(small_fs, "state"), sandbox_disk_mb=64,
                   disk_reserve_mb=reserve, sandbox_memory_mb=64,
                   sandbox_memory_budget_mb=4096)
    # The first writes 40 MB of its 64: the free space falls by as much as
    # it may still write, so the second still fits (counting its disk in full
    # on top of the space it used would not).
    first = b.hold(["/bin/sh", "-c", "dd if=/dev/zero of=/tmp/fill bs=1M count=40 conv=fsync "
                    "2>/dev/null; exec /usr/bin/sleep 3600"])
    b.hold()
    r = b.once()
    assert r.returncode == 1, r.stdout
    assert "the host's disk is at its free-space reserve" in r.stderr, r.stderr
    assert len(loops_on(small_fs)) == 2  # the refused one made no disk
    assert len(slot_dirs(b.scope)) == 2
    b.stop(first)
    r = b.once()
    assert r.returncode == 0, r.stderr


def test_the_start_says_when_the_disk_runs_fewer_sandboxes_than_the_memory(small_fs, budget_for):
    # An operator whose disk, not memory, caps the calls at once reads so in
    # the runner's first lines, with the setting that lifts it.
    conf = dict(sandbox_root=os.path.join(small_fs, "state"), sandbox_disk_mb=64,
                disk_reserve_mb=reserve_for_two_disks(small_fs), sandbox_memory_mb=64)
    r = budget_for(sandbox_memory_budget_mb=4096, **conf).once()
    assert r.returncode == 0, r.stderr
    assert ("the disk has room for 2 sandbox(es) at once, the memory budget for 64"
            in r.stderr), r.stderr
    assert "lower sandbox_disk_mb" in r.stderr
    # Where memory is what limits, nothing to say.
    r = budget_for(sandbox_memory_budget_mb=128, **conf).once()
    assert r.returncode == 0, r.stderr
    assert "the disk has room" not in r.stderr, r.stderr
