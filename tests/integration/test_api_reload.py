"""The API reloaded under load (issue 33): SIGHUP to the master, what
`systemctl reload agenthost-api` sends, re-reads the configuration and
replaces the workers on the same sockets while wrk keeps requests coming
through nginx: not one request fails, and the new workers run with the new
file. A file that no longer loads is refused in the log with its key, its
line and the nearest key, and the workers that were serving go on serving."""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BASE_URL, CONFIG, VAR, api_pids, new_client, wait_until

LUA = """
-- Each request from an address of its own: nginx's flood guard (per client
-- address, trusted from loopback in the test stack) is not what this counts.
local n = 0
request = function()
  n = n + 1
  local xff = "10." .. (n % 250) .. "." .. math.random(0, 255) .. "." .. math.random(1, 254)
  return wrk.format("GET", nil, {["X-Forwarded-For"] = xff})
end
"""


def master():
    return api_pids()[0]


def workers():
    return api_pids()[1]


def log_size():
    return os.path.getsize(os.path.join(VAR, "log", "api.log"))


def log_text(since=0):
    with open(os.path.join(VAR, "log", "api.log"), errors="replace") as f:
        f.seek(since)
        return f.read()


def hup():
    os.kill(master(), signal.SIGHUP)


def settle(expect=None, timeout=30):
    """Waits until the old generation has gone: as many workers as expected
    (or the same count twice in a row, a second apart)."""
    if expect is not None:
        assert wait_until(lambda: len(workers()) == expect, timeout), (len(workers()), expect)
        return workers()
    last = None
    for _ in range(timeout):
        now = workers()
        if last is not None and len(now) == len(last):
            return now
        last = now
        time.sleep(1)
    return last


class Config:
    """The stack's configuration with lines added for one test, put back after."""

    def __init__(self):
        self.saved = CONFIG + ".reload-test"

    def __enter__(self):
        shutil.copyfile(CONFIG, self.saved)
        return self

    def append(self, text):
        shutil.copyfile(self.saved, CONFIG)
        with open(CONFIG, "a") as f:
            f.write(text)
        with open(CONFIG) as f:
            return sum(1 for _ in f)   # the last line's number

    def __exit__(self, *exc):
        shutil.copyfile(self.saved, CONFIG)
        os.unlink(self.saved)
        hup()
        settle()


def wrk(seconds):
    script = os.path.join(VAR, "reload-test.lua")
    with open(script, "w") as f:
        f.write(LUA)
    return subprocess.Popen(["wrk", "-t2", "-c16", f"-d{seconds}s", "--timeout", "30s", "-s", script,
                             BASE_URL + "/health"], stdout=subprocess.PIPE, text=True)


def wrk_result(p):
    out = p.communicate(timeout=120)[0]
    total = int(re.search(r"(\d+) requests in", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sockerr = re.search(r"Socket errors: (.*)", out)
    return out, total, int(non2xx.group(1)) if non2xx else 0, sockerr.group(1) if sockerr else None


@pytest.mark.skipif(not shutil.which("wrk"), reason="wrk not installed")
def test_reload_under_load_fails_no_request_and_applies_the_file():
    c = new_client()
    assert c.get("/health").status_code == 200
    with Config() as cfg:
        cfg.append("\ncrud_workers = 3\n")
        start = log_size()
        hup()
        three = settle()
        load = wrk(8)
        time.sleep(1.5)
        cfg.append("\ncrud_workers = 5\n")
        hup()                                   # new file, new generation
        time.sleep(2)
        hup()                                   # and again, the same file
        out, total, non2xx, sockerr = wrk_result(load)
        five = settle(len(three) + 2)           # the new file's count, the old ones gone
        assert not set(five) & set(three)
    assert total > 100, out
    assert non2xx == 0 and sockerr is None, out
    assert log_text(start).count("reload: configuration") >= 3


def test_reload_with_a_broken_file_keeps_the_workers_serving():
    c = new_client()
    before = settle()
    with Config() as cfg:
        line = cfg.append("\ncrud_workerz = 4\n")
        start = log_size()
        hup()
        msg = wait_until(lambda: re.search(r"reload refused.*", log_text(start)), 10)
        assert msg, "no 'reload refused' in the API's log"
        assert f"{CONFIG}:{line}: unknown configuration key crud_workerz" in msg.group(0)
        assert "did you mean crud_workers?" in msg.group(0)
        assert workers() == before              # not one replaced
        assert c.get("/health").status_code == 200
        assert c.get("/users/me").status_code == 200
