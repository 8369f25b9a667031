"""Where a runner (or the sandbox CLI) started by this test process puts its
sandboxes' cgroups: <mount>/<its own cgroup>/<sandbox_cgroup> in every cgroup
hierarchy (lib/sandbox/cgroup_place.c). The runner makes them inside its own
cgroup, which is this process's when this process (or the shell that started
both) started it."""
import os


def own_cgroups(pid="self"):
    """{controllers or "" for v2: path} from /proc/<pid>/cgroup."""
    own = {}
    for line in open(f"/proc/{pid}/cgroup"):
        _, ctls, path = line.rstrip("\n").split(":", 2)
        own[ctls] = path
    return own


def cgroup_mounts():
    """(mount root, mount point, fs type, super options) of every cgroup mount."""
    out = []
    for line in open("/proc/self/mountinfo"):
        pre, post = line.split(" - ", 1)
        fstype, _src, opts = post.split()[:3]
        if fstype in ("cgroup", "cgroup2"):
            f = pre.split()
            out.append((f[3], f[4], fstype, opts.split(",")))
    return out


def own_dirs(pid="self"):
    """The directory of pid's own cgroup in every cgroup mount that shows it."""
    own, dirs = own_cgroups(pid), []
    for root, mnt, fstype, opts in cgroup_mounts():
        if fstype == "cgroup2":
            path = own.get("")
        else:
            path = next((p for c, p in own.items() if c and set(c.split(",")) & set(opts)), None)
        if path is None or not (root == "/" or path == root or path.startswith(root + "/")):
            continue
        rel = path[len(root):] if root != "/" else path
        dirs.append(os.path.join(mnt, rel.lstrip("/")).rstrip("/"))
    return dirs


def cgroup_dirs(name, pid="self"):
    """The existing <own cgroup>/<name> directories, one per hierarchy holding one."""
    return [d for d in (os.path.join(o, name) for o in own_dirs(pid)) if os.path.isdir(d)]
