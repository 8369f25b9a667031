"""DNS rebinding against a bucket mount's rclone (issue #26): the endpoint's
name resolves to an allowed address when the runner checks it and to the
host's loopback when rclone connects. Under the runner's connection check
(lib/runner/fuse_guard.c, through tests/sandbox/rclone_guard.c) rclone's
connection is refused and the loopback server sees nothing; the same rclone
without the check reaches it, so the name really rebinds.

The scenario (rclone_rebind.py) runs in a network and mount namespace of its
own (unshare), with its own resolver on 127.0.0.1:53 and /etc/resolv.conf:
nothing of the host's network or files is touched."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import BUILD

GUARD = os.path.join(BUILD, "tests", "unit", "rclone_guard")
SCENARIO = os.path.join(os.path.dirname(__file__), "rclone_rebind.py")
RCLONE = shutil.which("rclone") or "/usr/bin/rclone"


def test_rebinding_name_reaches_nothing_under_the_guard():
    if not os.path.exists(GUARD):
        pytest.skip(f"{GUARD} not built")
    if not os.path.exists(RCLONE) or not shutil.which("unshare"):
        pytest.skip("rclone or unshare missing")
    r = subprocess.run(["unshare", "--net", "--mount", "--propagation", "private",
                        sys.executable, SCENARIO, GUARD, RCLONE],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    guarded, unguarded = out["guarded"], out["unguarded"]
    # Without the check, rclone follows the second answer to the loopback server.
    assert unguarded["secret_hits"], unguarded
    # With it, that connection is refused (EACCES), and nothing reached the server.
    assert guarded["status"] != 0, guarded
    assert out["secret"] not in guarded["stdout"]
    assert guarded["secret_hits"] == [], guarded
    assert "refused rclone's connection to 127.0.0.1:9000" in guarded["stderr"], guarded
    assert "permission denied" in guarded["stderr"], guarded
