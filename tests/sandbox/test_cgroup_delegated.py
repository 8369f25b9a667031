"""Sandboxes' cgroups go inside the runner's own cgroup (issue 33).

A systemd service with Delegate=yes may make cgroups only below its own; in a
container (systemd-nspawn on a v1 host) the rest of each hierarchy is
read-only, and the runner, which made them at a fixed place at the root,
failed at every start ("mkdir /sys/fs/cgroup/memory/agenthost: Read-only file
system"). These tests give the sandbox CLI (the runner's library) a cgroup of
its own, as systemd would, and check that its sandboxes' cgroups are made
there: once with the hierarchies writable, once with everything but that
cgroup read-only, as in the container. On a v2 host the first also covers
the move of the runner into a leaf (a v2 cgroup with processes cannot hand
its controllers down)."""
import glob
import os
import signal
import subprocess
import time

import pytest

from cgroups import cgroup_mounts, own_dirs
from conftest import CLI

CONTROLLERS = {"memory", "cpu", "pids"}


def hierarchies():
    """(mount point, own dir) of the hierarchies the runner uses: v1 ones with
    one of its controllers, and the unified tree."""
    mounts = [m for m in cgroup_mounts() if m[2] == "cgroup2" or CONTROLLERS & set(m[3])]
    mine = own_dirs()
    out = []
    for _root, mnt, _t, _o in mounts:
        d = next((o for o in mine if o == mnt or o.startswith(mnt + "/")), None)
        if d and not any(d == o for _, o in out):
            out.append((mnt, d))
    return out


def rmdir_tree(d):
    for sub in sorted((x for x, _, _ in os.walk(d)), key=len, reverse=True):
        for _ in range(100):
            try:
                os.rmdir(sub)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)


@pytest.fixture
def delegated():
    """A cgroup for the CLI in every hierarchy, as systemd makes a service's."""
    name = f"ahdeleg{os.getpid()}"
    made = []
    for mnt, own in hierarchies():
        d = os.path.join(own, name)
        os.mkdir(d)
        made.append((mnt, d))
    yield made
    for _, d in made:
        rmdir_tree(d)


def join(dirs):
    """preexec: the child moves itself into the delegated cgroups."""
    def run():
        for _, d in dirs:
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write("0")
    return run


def holder(sandbox, scope, dirs, wrap=()):
    env = dict(sandbox.env, AGENTHOST_SANDBOX_CGROUP=scope, AGENTHOST_SANDBOX_POOL_SIZE="0",
               AGENTHOST_SANDBOX_POOL_MAX="0", AGENTHOST_SANDBOX_DISK_MB="0")
    argv = list(wrap) + [CLI, "--image", sandbox.image, "--timeout", "600000", "--",
                         "/usr/bin/sleep", "3600"]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=join(dirs))


def slot_procs(dirs, scope):
    return [f for _, d in dirs for f in glob.glob(os.path.join(d, scope, "slot*", "cgroup.procs"))
            if open(f).read().strip()]


def sleepers(dirs, scope):
    """The agent's `sleep` among the slots' processes. A slot has processes
    before the sandbox's init has exec'd the command, so wait for this, not
    for any process (CI once looked in between)."""
    out = []
    for f in slot_procs(dirs, scope):
        for x in open(f).read().split():
            try:
                if open(f"/proc/{x}/comm").read().strip() == "sleep":
                    out.append(int(x))
            except OSError:
                pass
    return out


def run_and_check(sandbox, dirs, wrap=()):
    scope = f"ahdg{os.getpid()}"
    p = holder(sandbox, scope, dirs, wrap)
    try:
        for _ in range(600):
            if sleepers(dirs, scope) or p.poll() is not None:
                break
            time.sleep(0.1)
        assert p.poll() is None, p.stderr.read().decode()
        # Each hierarchy the sandbox is limited in has its slot inside the
        # delegated cgroup, and nothing was made beside it.
        used = {d for _, d in dirs if glob.glob(os.path.join(d, scope, "slot*"))}
        assert used, "no slot cgroup inside the delegated cgroup"
        for mnt, d in dirs:
            assert not os.path.exists(os.path.join(os.path.dirname(d), scope)), mnt
        sleeper = sleepers(dirs, scope)
        assert sleeper, "the agent's process is not in a slot cgroup"
        os.kill(sleeper[0], signal.SIGTERM)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
        # Destroyed: the slots are gone, the parent stays for the next one.
        assert not [s for _, d in dirs for s in glob.glob(os.path.join(d, scope, "slot*"))]
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()


def test_sandbox_cgroups_inside_the_runners_own(sandbox, delegated):
    run_and_check(sandbox, delegated)


def test_only_the_runners_own_cgroup_writable(sandbox, delegated):
    """As in a container: each hierarchy read-only but the delegated cgroup."""
    script = "".join(f"mount --bind {d} {d} && mount -o remount,bind,ro {mnt} && "
                     for mnt, d in delegated)
    wrap = ["unshare", "-m", "--propagation", "private", "sh", "-c", script + 'exec "$@"', "sh"]
    run_and_check(sandbox, delegated, wrap)
