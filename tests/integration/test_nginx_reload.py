"""nginx reloaded twice under load (fault injection): every request sent while
the old workers hand over to the new ones is answered, and answered 200:
none lost, none a 502. Counted on the client side."""
import os
import subprocess
import threading
import time

import pytest

from conftest import VAR, new_client


def reload_nginx():
    d = os.path.join(VAR, "nginx")
    subprocess.run(["nginx", "-c", os.path.join(d, "nginx.conf"), "-p", d, "-s", "reload"],
                   check=True, capture_output=True)


@pytest.mark.slow
def test_reload_under_load_loses_no_request():
    c = new_client("pro")
    stop = threading.Event()
    results, errors = [], []

    def load():
        s = new_client("pro")  # a connection (and rate budget) of its own
        while not stop.is_set():
            try:
                results.append(s.get("/health").status_code)  # through the workers, not rate limited
            except Exception as e:  # a lost connection is what this test counts
                errors.append(repr(e))

    threads = [threading.Thread(target=load) for _ in range(6)]
    for t in threads:
        t.start()
    time.sleep(1)
    reload_nginx()
    time.sleep(1.5)
    reload_nginx()
    time.sleep(1.5)
    stop.set()
    for t in threads:
        t.join(30)
    assert not errors, errors[:5]
    assert len(results) > 50, len(results)
    assert set(results) == {200}, {s: results.count(s) for s in set(results)}
    assert c.get("/health").status_code == 200
