"""The git clone's isolated network (lib/deploy/git.c with a sandbox slot's
network namespace, lib/sandbox ah_sandbox_net_borrow): a clone that the URL
policy let through (here it is skipped on purpose, as if a name had resolved to
a public address when checked and to the host later) still cannot reach the
host's own services, on loopback or on the host's addresses. The same clones
from the host's network (what git_allow_hosts entries get) succeed, so the
server is really there.

Drives tests/sandbox/git_clone.c (built as tests/unit/git_clone). Every server
is a `git daemon` this module starts on this machine and stops by its PID."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import BUILD
from test_network import host_addresses

PROBE = os.path.join(BUILD, "tests", "unit", "git_clone")


def sh(*cmd):
    subprocess.run(list(cmd), check=True, capture_output=True)


@pytest.fixture(scope="module")
def daemon():
    """A git daemon on 127.0.0.1 and one of the host's own addresses, serving
    one repository; yields (port, host_address or None)."""
    if not os.path.exists(PROBE):
        pytest.skip(f"{PROBE} not built")
    root = tempfile.mkdtemp(prefix="ahgit-test-")
    repo = os.path.join(root, "repo")
    os.makedirs(repo)
    with open(os.path.join(repo, "agent.json"), "w") as f:
        f.write("{}\n")
    g = ["git", "-C", repo, "-c", "user.email=t@test.example", "-c", "user.name=test"]
    sh(*g, "init", "-q")
    sh(*g, "add", "-A")
    sh(*g, "commit", "-qm", "initial")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    addrs = [a for a in host_addresses() if not a.startswith("127.")]
    host = addrs[0] if addrs else None
    listen = ["--listen=127.0.0.1"] + ([f"--listen={host}"] if host else [])
    proc = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={root}",
                             f"--port={port}", *listen, root],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    try:
        yield port, host
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


def clone(net, url):
    """(exit code, status message) of one clone into a fresh directory."""
    root = tempfile.mkdtemp(prefix="ahgit-clone-")
    try:
        env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "AGENTHOST_CONFIG": os.path.join(root, "empty.conf"),
            "AGENTHOST_SANDBOX_ROOT": os.path.join(root, "state"),
            "AGENTHOST_SANDBOX_POOL_SIZE": "0",
            "AGENTHOST_GIT_TIMEOUT_SECONDS": "3",
            # The probe is no runner: it does not live where the keeper is looked for.
            "AGENTHOST_SANDBOX_KEEPER": os.path.join(BUILD, "lib", "sandbox", "agenthost-keeper"),
        }
        open(env["AGENTHOST_CONFIG"], "w").close()
        p = subprocess.run([PROBE, net, url, os.path.join(root, "src")], env=env,
                           capture_output=True, text=True, timeout=60)
        cloned = os.path.exists(os.path.join(root, "src", "agent.json"))
        assert (p.returncode == 0) == cloned, (p.returncode, p.stdout, p.stderr)
        return p.returncode, p.stdout.strip()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_loopback_server_is_out_of_reach_of_an_isolated_clone(daemon):
    port, _host = daemon
    url = f"git://127.0.0.1:{port}/repo"
    assert clone("host", url) == (0, "")
    rc, msg = clone("isolated", url)
    assert rc == 1
    assert msg.startswith("Repository clone failed: could not connect to 127.0.0.1 "
                          f"port {port}"), msg


def test_host_address_is_out_of_reach_of_an_isolated_clone(daemon):
    port, host = daemon
    if host is None:
        pytest.skip("the host has no address but loopback")
    url = f"git://{host}:{port}/repo"
    assert clone("host", url) == (0, "")
    rc, msg = clone("isolated", url)
    assert rc == 1
    # The sandbox policy drops what goes to the host: the connect never completes.
    assert msg in (f"Repository clone failed: could not connect to {host} port {port} (timed out)",
                   "Repository clone timed out after 3 s"), msg
