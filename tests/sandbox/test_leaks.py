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

from cgroups import cgroup_dirs

LOCKS = "/run/agenthost-sandbox"


def host_counts():
    with open("/proc/self/mountinfo") as f:
        mounts = len(f.readlines())
    cgroups = sum(len(glob.glob(f"{d}/slot*")) for d in cgroup_dirs("agenthost"))
    veths = len([l for l in os.listdir("/sys/class/net") if l.startswith("ahs")])
    loops = len(glob.glob("/sys/block/loop*/loop/backing_file"))
    return {"mounts": mounts, "cgroups": cgroups, "veth": veths, "loops": loops,
            "procs": len(sandbox_procs())}


def sandbox_procs():
    """Processes a sandbox could leave: anything in a PID namespace other than
    ours (a sandboxed node) and any agenthost-sandbox helper. Counting every
    process on the host instead would count the host's own comings and goings
    (a kworker, a cron job) as our leak."""
    own = os.readlink("/proc/self/ns/pid")
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ns = os.readlink(f"/proc/{pid}/ns/pid")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue  # gone meanwhile, or a kernel thread
        if cmd and (ns != own or b"agenthost-sandbox" in cmd):
            found.append((pid, cmd[:80]))
    return found


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
            left += [f"{d}/slot{n}" for d in cgroup_dirs("agenthost") if os.path.isdir(f"{d}/slot{n}")]
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
        for _ in range(30):  # a reaped child's /proc entry may linger a moment
            after = host_counts()
            if all(after[k] <= before[k] for k in after):
                break
            time.sleep(0.1)
        assert all(after[k] <= before[k] for k in after), (before, after)
        r = subprocess.run(["nft", "list", "table", "inet", "agenthost"], capture_output=True)
        assert r.returncode != 0, "the nft table outlived the last sandbox user"
