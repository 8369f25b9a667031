"""Fixtures for the sandbox isolation tests.

The tests drive the agenthost-sandbox CLI (lib/sandbox/cli.c) from the meson
build dir in $AGENTHOST_BUILD (default: build). They need root, as the runner
does. Each test gets its own sandbox_root under a temporary directory; the
image is a throw-away directory holding the test's agent and a probe binary.
"""
import json
import os
import shutil
import subprocess
import tempfile

import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))  # cgroups.py
BUILD = os.environ.get("AGENTHOST_BUILD", os.path.join(REPO, "build"))
if not os.path.isabs(BUILD):
    BUILD = os.path.join(REPO, BUILD)
CLI = os.path.join(BUILD, "lib", "sandbox", "agenthost-sandbox")
NODE = "/usr/bin/node"


def pytest_collection_modifyitems(config, items):
    reason = None
    if os.geteuid() != 0:
        reason = "sandbox tests need root"
    elif not os.path.exists(CLI):
        reason = f"{CLI} not built (set AGENTHOST_BUILD)"
    if reason:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def probe_bin(tmp_path_factory):
    out = tmp_path_factory.mktemp("probe") / "probe"
    src = os.path.join(os.path.dirname(__file__), "probe.c")
    subprocess.run(["cc", "-O1", "-o", str(out), src], check=True)
    return str(out)


class Sandbox:
    """Runs agents through the CLI with a private state dir and config."""

    def __init__(self, root, probe):
        self.root = root
        self.image = os.path.join(root, "image")
        os.makedirs(self.image)
        shutil.copy(probe, os.path.join(self.image, "probe"))
        conf = os.path.join(root, "agenthost.conf")
        open(conf, "w").close()
        self.env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "AGENTHOST_CONFIG": conf,
            "AGENTHOST_SANDBOX_ROOT": os.path.join(root, "state"),
            "AGENTHOST_SANDBOX_POOL_SIZE": "1",
            # Not the 10 GiB default: every live disk is promised in full
            # against the host's free space (budget.c), and a CI host with
            # 32 GB free and a 5 % reserve of 12.9 GB then admitted one
            # sandbox, not the two a test with a pool has alive at once.
            "AGENTHOST_SANDBOX_DISK_MB": "1024",
        }

    def write(self, name, text):
        path = os.path.join(self.image, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def cli(self, args, cmd, env=None, timeout=120, stdin_text=None):
        e = dict(self.env, **(env or {}))
        argv = [CLI] + args + ["--"] + cmd
        p = subprocess.run(argv, env=e, capture_output=True, timeout=timeout,
                           input=stdin_text.encode() if stdin_text else None)
        return p

    def run(self, js=None, cmd=None, args=(), env=None, stdin="", timeout=120):
        """One run of `node agent.js` (or cmd) in a fresh sandbox; the result dict."""
        if js is not None:
            self.write("agent.js", js)
            cmd = [NODE, "agent.js"]
        p = self.cli(["--image", self.image, "--stdin", stdin] + list(args), cmd,
                     env=env, timeout=timeout)
        assert p.returncode == 0, p.stderr.decode(errors="replace")
        lines = [l for l in p.stdout.decode().splitlines() if l.startswith("{")]
        results = [json.loads(l) for l in lines]
        return results[0] if len(results) == 1 else results


@pytest.fixture
def sandbox(probe_bin):
    root = tempfile.mkdtemp(prefix="ahsbx-test-")
    try:
        yield Sandbox(root, probe_bin)
    finally:
        shutil.rmtree(root, ignore_errors=True)
