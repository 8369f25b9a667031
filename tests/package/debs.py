#!/usr/bin/python3
"""Builds the Debian packages from a copy of the checkout (what a clean clone
holds), for tests/package/test_package.py: its first test calls build(), or
takes what `debs.py OUT` built earlier. scripts/test runs that in the
background (niced) while the integration tests run, into a directory of its
own under var/ (not build/, not anything a running stack uses): the package
stage then checks and installs those .debs instead of waiting a minute for
them.

    tests/package/debs.py OUT   (root not needed; OUT is emptied first)
"""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.environ.get("AGENTHOST_ROOT") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))


def clean_env(**extra):
    """The environment without the test stack's AGENTHOST_* overrides."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AGENTHOST_", "ASAN_", "UBSAN_"))}
    env.update(DEBIAN_FRONTEND="noninteractive", LC_ALL="C.UTF-8", **extra)
    return env


def version():
    return re.match(r"agenthost \(([^)]+)\)", open(os.path.join(ROOT, "debian", "changelog")).readline())[1]


def arch():
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()


def outputs(out):
    """The two .debs and the .changes a build into OUT makes."""
    v, a = version(), arch()
    return ([os.path.join(out, f"{pkg}_{v}_{a}.deb") for pkg in ("agenthost", "agenthost-client")],
            os.path.join(out, f"agenthost_{v}_{a}.changes"))


def built(out):
    """True when OUT holds a finished build of this version (its .debs and .changes)."""
    debs, changes = outputs(out)
    return all(os.path.isfile(f) for f in [*debs, changes])


def build(out):
    """dpkg-buildpackage -us -uc -b on a copy of the checkout in OUT/agenthost-VERSION;
    the .debs land in OUT. Returns (returncode, the build log's path)."""
    shutil.rmtree(out, ignore_errors=True)
    src = os.path.join(out, f"agenthost-{version()}")
    os.makedirs(src)
    files = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, text=True, check=True).stdout
    for f in files.split("\0"):
        if f and not f.startswith("var/") and os.path.isfile(os.path.join(ROOT, f)):
            os.makedirs(os.path.dirname(os.path.join(src, f)), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, f), os.path.join(src, f))
    log = os.path.join(out, "build.log")
    with open(log, "w") as f:
        p = subprocess.run(["nice", "-n", "5", "dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src,
                           stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=900,
                           env=clean_env(DEB_BUILD_OPTIONS="nocheck parallel=2 noddebs"))
    return p.returncode, log


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rc, log = build(os.path.abspath(sys.argv[1]))
    if rc:
        sys.stdout.write(open(log).read()[-4000:])
    sys.exit(rc)
