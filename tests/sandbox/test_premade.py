"""The spawner's pre-made agent process (issue 31, lib/sandbox/premade.c): a
sandbox keeps one process ready (dropped to the agent user, seccomp loaded)
that takes the next exec request. A run on it must be indistinguishable from
a cold start: the request's working directory, environment, rlimits, stdio and
exit status, and a kill takes its whole tree."""
import json
import os
import subprocess
import time

from conftest import BUILD, CLI

SMALL_DISK = "256"  # MiB: the host's disk budget is shared with other sandboxes
KEEPER = os.path.realpath(os.path.join(BUILD, "lib", "sandbox", "agenthost-keeper"))

REPORT = r"""
read line
echo "in=$line"
echo "cwd=$(pwd)"
echo "run=$RUN secret=$SECRET"
grep -E '^Max (open files|file size|processes|core file size) ' /proc/self/limits | tr -s ' '
echo "to stderr" >&2
exit 7
"""


def results(p):
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return [json.loads(l) for l in p.stdout.decode().splitlines() if l.startswith("{")]


def test_session_runs_on_premade_process_get_their_request(sandbox):
    p = sandbox.cli(["--image", sandbox.image, "--disk-mb", SMALL_DISK, "--session",
                     "--repeat", "3", "--run-env", "RUN", "--env", "SECRET=s3cret",
                     "--stdin", "hello", "--cwd", "/tmp", "--nofile", "77", "--pids", "123"],
                    ["/bin/sh", "-c", REPORT])
    runs = results(p)
    assert len(runs) == 3
    for n, r in enumerate(runs, 1):
        # The first on the process made at the spawner's start, the others
        # on the one made after the run before.
        assert r["premade"] is True, r
        assert r["exit_code"] == 7 and r["signal"] == 0, r
        assert r["stderr_tail"] == "to stderr\n", r
        out = r["stdout"].splitlines()
        assert out[:3] == ["in=hello", "cwd=/tmp", f"run={n} secret=s3cret"], r
        limits = {" ".join(l.split()[:-3]): l.split()[-3:-1] for l in out[3:]}
        assert limits == {
            "Max core file size": ["0", "0"],
            "Max file size": [str(int(SMALL_DISK) << 20)] * 2,
            "Max processes": ["123", "123"],
            "Max open files": ["77", "77"],
        }, out


def next_result(p):
    line = p.stdout.readline()
    if not line:
        p.kill()
        raise AssertionError(p.stderr.read().decode(errors="replace"))
    return json.loads(line)


def host_procs(marker):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


def test_timeout_kills_the_whole_tree_of_a_premade_run(sandbox):
    script = "trap '' TERM; sleep 3117 & sleep 3117 & wait"
    p = subprocess.Popen([CLI, "--image", sandbox.image, "--disk-mb", SMALL_DISK, "--session",
                          "--repeat", "2",
                          "--between-ms", "8000", "--timeout", "1000", "--stdin", "",
                          "--", "/bin/sh", "-c", script],
                         env=sandbox.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = next_result(p)
        assert first["premade"] is True and first["timed_out"] is True, first
        assert first["signal"] == 9, first
        # Before the session's next run: nothing of the first is left.
        until = time.monotonic() + 6
        while host_procs(b"sleep\x003117") and time.monotonic() < until:
            time.sleep(0.1)
        assert host_procs(b"sleep\x003117") == []
        second = next_result(p)
        assert second["premade"] is True and second["timed_out"] is True, second
    finally:
        p.kill()
        p.wait()


def status_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return dict(l.rstrip("\n").split(":\t", 1) for l in f if ":\t" in l)


def waiting_children():
    """Processes of this build's keeper program that run under seccomp: the
    pre-made children (the keeper, the spawner and the reapers never do)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.path.realpath(f"/proc/{pid}/exe") != KEEPER:
                continue
            st = status_of(pid)
        except OSError:
            continue
        if st.get("Seccomp") == "2":
            found.append((pid, st))
    return found


def test_waiting_process_between_session_runs_is_the_agent_user_filtered(sandbox):
    env = dict(sandbox.env, AGENTHOST_SANDBOX_POOL_SIZE="0")
    p = subprocess.Popen([CLI, "--image", sandbox.image, "--disk-mb", SMALL_DISK, "--session",
                          "--repeat", "2",
                          "--between-ms", "8000", "--stdin", "", "--", "/bin/true"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = next_result(p)
        assert first["premade"] is True, first
        until = time.monotonic() + 6
        while not waiting_children() and time.monotonic() < until:
            time.sleep(0.1)
        kids = waiting_children()
        assert kids, "no pre-made process waits between the session's runs"
        for pid, st in kids:
            uids, gids = st["Uid"].split(), st["Gid"].split()
            assert len(set(uids)) == 1 and len(set(gids)) == 1, st
            reaper = status_of(st["PPid"])
            # uid 1000 inside: 1000 above the reaper's, root of the sandbox.
            assert int(uids[0]) == int(reaper["Uid"].split()[0]) + 1000, (st, reaper)
            assert st["NoNewPrivs"] == "1" and st["Seccomp_filters"] == "1", st
            assert int(st["CapEff"], 16) == 0 and int(st["CapPrm"], 16) == 0, st
            assert int(st["CapBnd"], 16) == 0, st
            # Its own pid namespace, under a reaper that is its PID 1.
            assert st["NSpid"].split()[-1] == "2" and reaper["NSpid"].split()[-1] == "1"
            # It holds stdio and its request channel, nothing else (not the
            # runner's socket, not the reaper's status pipe).
            extra = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")
                     if int(fd) > 2]
            assert len(extra) == 1 and extra[0].startswith("socket:"), extra
        second = next_result(p)
        assert second["premade"] is True and second["exit_code"] == 0, second
    finally:
        p.kill()
        p.wait()


def test_a_request_the_premade_process_cannot_take_runs_cold(sandbox):
    # A working directory it cannot enter: the cold path gives its answer,
    # exactly as without a pre-made process, and the session goes on.
    p = sandbox.cli(["--image", sandbox.image, "--disk-mb", SMALL_DISK, "--session",
                     "--repeat", "2", "--stdin", "",
                     "--cwd", "/nonexistent"], ["/bin/true"])
    runs = results(p)
    for r in runs:
        assert r["premade"] is False and r["exit_code"] == 127, r
        assert "chdir" in r["stderr_tail"] and "No such file" in r["stderr_tail"], r
    p = sandbox.cli(["--image", sandbox.image, "--disk-mb", SMALL_DISK, "--session",
                     "--repeat", "2", "--stdin", ""],
                    ["/bin/sh", "-c", "pwd"])
    assert [(r["premade"], r["stdout"]) for r in results(p)] == [(True, "/app\n")] * 2


def test_a_kill_as_the_premade_process_takes_its_request(sandbox):
    # A 1 ms timeout: the runner's KILL reaches the spawner as it hands the
    # request over or just after (on this machine mostly after the child's
    # answer: the branch for a kill before it is not reliably hit). Every run
    # is killed and reported as such, none hangs, and each next run still
    # finds its process made.
    p = sandbox.cli(["--image", sandbox.image, "--disk-mb", SMALL_DISK, "--session",
                     "--repeat", "20", "--timeout", "1", "--stdin", ""], ["/bin/sleep", "5"])
    runs = results(p)
    assert len(runs) == 20
    assert {(r["timed_out"], r["signal"], r["premade"]) for r in runs} == {(True, 9, True)}, runs
