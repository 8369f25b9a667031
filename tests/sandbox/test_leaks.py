"""Create and destroy leave nothing behind: mounts, cgroups, veth interfaces,
loop devices, processes, disk files, the nft table.

Other runner processes may use sandboxes on the same host while this runs, so
the checks are per slot: a slot whose lock file is free (no process owns it)
must have no cgroup and no veth; and nothing may refer to this test's own
state dir (loop devices, mounts). When nobody else is using sandboxes, the
host-wide counts must also be back where they started."""
import fcntl
import glob
import os
import subprocess
import time

LOCKS = "/run/agenthost-sandbox"


def host_counts():
    with open("/proc/self/mountinfo") as f:
        mounts = len(f.readlines())
    cgroups = len(glob.glob("/sys/fs/cgroup/*/agenthost/slot*") +
                  glob.glob("/sys/fs/cgroup/agenthost/slot*"))
    veths = len([l for l in os.listdir("/sys/class/net") if l.startswith("ahs")])
    loops = len(glob.glob("/sys/block/loop*/loop/backing_file"))
    procs = len([p for p in os.listdir("/proc") if p.isdigit()])
    return {"mounts": mounts, "cgroups": cgroups, "veth": veths, "loops": loops, "procs": procs}


def free_slot_leftovers():
    """Resources of slots nobody holds: there must be none."""
    left = []
    for lock in glob.glob(os.path.join(LOCKS, "slot-*.lock")):
        n = lock.rsplit("-", 1)[1].split(".")[0]
        with open(lock) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # in use by a live process
            left += glob.glob(f"/sys/fs/cgroup/*/agenthost/slot{n}")
            left += glob.glob(f"/sys/fs/cgroup/agenthost/slot{n}")
            if os.path.exists(f"/sys/class/net/ahs{n}"):
                left.append(f"veth ahs{n}")
    return left


def refs_to(root):
    refs = []
    for b in glob.glob("/sys/block/loop*/loop/backing_file"):
        if open(b).read().startswith(root):
            refs.append(b)
    refs += [l for l in open("/proc/self/mountinfo") if root in l]
    return refs


def others_running():
    out = subprocess.run(["pgrep", "-f", "agenthost-(runner|sandbox)"],
                         capture_output=True, text=True).stdout.split()
    return bool(out)


def test_nothing_left_after_50_cycles(sandbox):
    alone = not others_running()
    before = host_counts()
    # A runner killed elsewhere on the host leaves its slots' cgroups until
    # the next init sweeps them (ours will): those are not ours to count.
    stale = set(free_slot_leftovers())
    sandbox.write("agent.js", "process.stdin.pipe(process.stdout);")
    p = sandbox.cli(["--image", sandbox.image, "--stdin", "x", "--repeat", "50", "--quiet"],
                    ["/usr/bin/node", "agent.js"], timeout=170)
    assert p.returncode == 0, p.stderr
    state = os.path.join(sandbox.root, "state")
    # Some things (veth of a dead netns, loop autoclear) go asynchronously.
    for _ in range(50):
        left = sorted(set(free_slot_leftovers()) - stale) + refs_to(sandbox.root)
        if not left:
            break
        time.sleep(0.1)
    assert left == []
    assert [f for f in os.listdir(state) if f != "root"] == []
    if alone and not others_running():
        after = host_counts()
        assert all(after[k] <= before[k] for k in after), (before, after)
        r = subprocess.run(["nft", "list", "table", "inet", "agenthost"], capture_output=True)
        assert r.returncode != 0, "the nft table outlived the last sandbox user"
