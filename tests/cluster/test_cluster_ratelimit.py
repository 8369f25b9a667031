"""The per-user rate limit across two API hosts on two database nodes: each
host leases tokens from the one count in the database (small limits one token
at a time), so a user spread over both hosts gets exactly the limit."""
import concurrent.futures
import time

import pytest

from conftest import kit, new_user

LIMIT = 100


@pytest.fixture
def low_limit(cluster):
    """Both hosts' APIs restarted with a CRUD limit of LIMIT a minute, then
    back (the setting is the API's: runners, webhooks and nginx stay up)."""
    try:
        for h in "ab":
            kit("restart-api", h, env={"AGENTHOST_RATE_LIMIT_CRUD": str(LIMIT)})
        yield
    finally:
        for h in "ab":
            kit("restart-api", h, check=False)


def test_crud_limit_is_exact_across_hosts(low_limit):
    c = new_user()
    hosts = [c, c.on("b")]
    # One counting window (a minute) for all of it.
    while time.time() % 60 > 40:
        time.sleep(1)
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        codes = list(ex.map(lambda i: hosts[i % 2].get("/users/me").status_code,
                            range(LIMIT + 60)))
    assert codes.count(200) == LIMIT and codes.count(429) == 60, sorted(set(codes))
