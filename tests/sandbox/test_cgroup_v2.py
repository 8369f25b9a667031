"""cgroup v2: sandboxes limited through the unified tree.

These machines mount every controller as a cgroup v1 hierarchy beside an empty
cgroup2 mount; most Debian 12 hosts have them all in the unified tree. The
runner uses each controller where the host has it. This test moves the pids
controller into the unified tree (unmounting its v1 hierarchy frees it once no
cgroup is left in it), runs sandboxes whose pids limit then lives there while
memory and cpu stay on v1, and moves it back. It is skipped when the pids
hierarchy is in use (another runner's sandboxes on this host) or the host has a
layout where that move makes no sense, or when the hierarchy cannot be
unmounted because something outside the test holds it (as on the machines this
was written on, whose supervisor does); it never touches a cgroup it did not
make (apart from removing empty agenthost parents that stopped runners left)."""
import glob
import os
import subprocess
import time

import pytest

from test_budget import Budget, remove_scope

SCOPE = "ahv2test"


def cgroup_mounts():
    """(mount point, fs type, super options) of every cgroup mount."""
    out = []
    for line in open("/proc/self/mountinfo"):
        pre, post = line.split(" - ", 1)
        fstype, _src, opts = post.split()[:3]
        if fstype in ("cgroup", "cgroup2"):
            out.append((pre.split()[4], fstype, opts.split(",")))
    return out


def v1_mount(ctl):
    return next((m for m, t, o in cgroup_mounts() if t == "cgroup" and ctl in o), None)


def unified_mount():
    return next((m for m, t, _ in cgroup_mounts() if t == "cgroup2"), None)


def controllers(unified):
    return open(os.path.join(unified, "cgroup.controllers")).read().split()


def wait_for(cond, seconds=10):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def free_hierarchy(root):
    """Removes empty agenthost parents; False if any other cgroup (or a process
    in one) is in the hierarchy, which would keep it alive after the unmount."""
    subdirs = sorted((d for d, _, _ in os.walk(root) if d != root), key=len, reverse=True)
    for d in subdirs:
        top = os.path.relpath(d, root).split(os.sep)[0]
        if not top.startswith(("agenthost", "ah")) or open(os.path.join(d, "cgroup.procs")).read():
            return False
    for d in subdirs:
        try:
            os.rmdir(d)
        except OSError:
            return False
    return True


def mount_pids_v1(mountpoint):
    def attempt():
        # The kernel frees the controller's v2 state asynchronously: EBUSY first.
        return subprocess.run(["mount", "-t", "cgroup", "-o", "pids", "cgroup", mountpoint],
                              capture_output=True).returncode == 0
    return wait_for(attempt, 15)


@pytest.fixture
def pids_on_v2():
    unified, pids = unified_mount(), v1_mount("pids")
    if not unified or not pids:
        pytest.skip("needs pids on a v1 hierarchy beside a cgroup2 mount")
    if any(v1_mount(c) is None for c in ("memory", "cpu")):
        pytest.skip("memory and cpu are not on v1 here")
    if not free_hierarchy(pids):
        pytest.skip("the pids hierarchy is in use (another runner's sandboxes)")
    if subprocess.run(["umount", pids], capture_output=True).returncode != 0:
        # Something outside this test holds the hierarchy (on these machines, the
        # supervisor that runs us): the controller cannot be moved here.
        pytest.skip("the pids hierarchy cannot be unmounted (busy)")
    try:
        if not wait_for(lambda: "pids" in controllers(unified)):
            pytest.skip("the kernel kept the pids hierarchy alive")
        yield unified
    finally:
        remove_scope(SCOPE)
        ctl = os.path.join(unified, "cgroup.subtree_control")
        if "pids" in open(ctl).read():
            with open(ctl, "w") as f:
                f.write("-pids")
        assert mount_pids_v1(pids), "could not give the pids controller back to v1"
        assert v1_mount("pids") == pids


def test_pids_limit_lives_in_the_unified_tree(sandbox, pids_on_v2):
    unified = pids_on_v2
    b = Budget(sandbox, SCOPE, {"AGENTHOST_SANDBOX_PIDS": "77"})
    try:
        r = b.once()
        assert r.returncode == 0 and "cgroup v1+v2" in r.stderr, r.stderr[-2000:]
        holder = b.hold()
        slots = glob.glob(os.path.join(unified, SCOPE, "slot*"))
        assert len(slots) == 1, slots
        # The limit and the accounting are the unified tree's; memory stays on v1.
        assert open(os.path.join(slots[0], "pids.max")).read().strip() == "77"
        assert int(open(os.path.join(slots[0], "pids.current")).read()) >= 1
        name = os.path.basename(slots[0])
        assert os.path.isdir(os.path.join(v1_mount("memory"), SCOPE, name))
        sleeper = b.sleeper(holder)[0]
        assert f"0::/{SCOPE}/{name}\n" in open(f"/proc/{sleeper}/cgroup").read()
        b.stop(holder)
        # Gone with the sandbox, in both trees.
        assert not glob.glob(os.path.join(unified, SCOPE, "slot*"))
        assert not glob.glob(os.path.join(v1_mount("memory"), SCOPE, "slot*"))
    finally:
        b.close()
