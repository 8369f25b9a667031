"""Rate limits: 100 CRUD requests a minute per user (per client address before
authentication), 10 invocations a minute, counted in the database so that every
worker shares the count; X-RateLimit-* on every response, 429 with Retry-After.

The windows are fixed minutes, so a run that straddles a minute boundary is
retried once with fresh users (whose budgets are fresh too)."""
import re
import threading
import time

import pytest
import requests

from conftest import VAR, Client, db_query, new_client, wait_until

CRUD_LIMIT = 100
INVOKE_LIMIT = 10
RETRY_MSG = re.compile(r"^Rate limit exceeded\. Try again in (\d+) seconds\.$")


class WindowChanged(Exception):
    pass


def in_one_window(fn, attempts=3):
    """Runs fn(); if it raises WindowChanged (its requests spanned two rate-limit
    windows), runs it again."""
    for i in range(attempts):
        try:
            return fn()
        except WindowChanged:
            if i == attempts - 1:
                raise
            time.sleep(0.2)


def rate_headers(r):
    h = r.headers
    for name in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"):
        assert name in h, (r.status_code, r.url, dict(h))
    return int(h["X-RateLimit-Limit"]), int(h["X-RateLimit-Remaining"]), int(h["X-RateLimit-Reset"])


def exhaust(send, limit):
    """Sends requests with send() until one is 429; returns (responses of the
    window that hit the limit, the 429). Raises WindowChanged if the window
    rolled over before the limit was reached."""
    window, responses = None, []
    for _ in range(limit + 5):
        r = send()
        _lim, _rem, reset = rate_headers(r)
        if window is None:
            window = reset
        if reset != window:
            raise WindowChanged()
        if r.status_code == 429:
            return responses, r
        responses.append(r)
    pytest.fail(f"no 429 after {limit + 5} requests")


def assert_429(r, limit):
    assert r.status_code == 429
    assert r.headers["Content-Type"].startswith("application/json")
    m = RETRY_MSG.match(r.json()["detail"])
    assert m, r.json()
    retry = int(r.headers["Retry-After"])
    assert int(m.group(1)) == retry
    lim, rem, reset = rate_headers(r)
    assert lim == limit and rem == 0
    assert 1 <= retry <= 60
    assert abs(reset - time.time() - retry) <= 2, (reset, retry)


def test_crud_limit_per_user():
    def run():
        c = new_client()
        ok, over = exhaust(lambda: c.get("/users/me"), CRUD_LIMIT)
        assert len(ok) == CRUD_LIMIT, "exactly 100 requests in a minute"
        assert all(r.status_code == 200 for r in ok)
        assert_429(over, CRUD_LIMIT)
        # every kind of request counts, and stays refused
        for method, path in (("GET", "/agents"), ("POST", "/agents"), ("GET", "/api-keys"),
                             ("DELETE", "/agents/x")):
            r = c.request(method, path, json={"name": "x", "git_repo_url": "https://e.com/x"})
            assert r.status_code == 429, (method, path, r.text)
        # nothing was created by the refused POST
        assert db_query("SELECT COUNT(*) FROM agents a JOIN users u ON u.id = a.user_id"
                        f" WHERE u.email = '{c.email}'") == [["0"]]
        return c
    c = in_one_window(run)
    # another user from the same address is unaffected
    other = new_client()
    other.s.headers["X-Forwarded-For"] = c.s.headers["X-Forwarded-For"]
    assert other.get("/users/me").status_code == 200


def test_headers_on_every_response(client, make_agent):
    def run():
        c = new_client()
        a = c.post("/agents", json={"name": "rl", "git_repo_url": "https://e.com/x"})
        responses = [a,
                     c.get("/agents"),                                     # 200 list
                     c.get(f"/agents/{a.json()['slug']}"),                 # 200
                     c.get("/agents/missing"),                             # 404 resource
                     c.post("/agents", json={}),                           # 422
                     c.get("/agents?limit=0"),                             # 422 query
                     c.post("/agents", json={"name": "rl", "slug": a.json()["slug"],
                                             "git_repo_url": "https://e.com/x"}),  # 409
                     c.post(f"/agents/{a.json()['slug']}/secrets", json={"key": "K", "value": "v"}),
                     c.delete(f"/agents/{a.json()['slug']}/secrets/K"),    # 204
                     c.put("/agents"),                                     # 405
                     c.get("/no/such/route"),                              # 404 route
                     ]
        statuses = [r.status_code for r in responses]
        assert statuses == [201, 200, 200, 404, 422, 422, 409, 201, 204, 405, 404], statuses
        resets = set()
        user_rem = []
        for r in responses:
            lim, rem, reset = rate_headers(r)
            assert lim == CRUD_LIMIT
            assert reset % 60 == 0 and 0 < reset - time.time() <= 61
            resets.add(reset)
            if r.status_code not in (404, 405) or "missing" in r.url:
                user_rem.append(rem)
        if len(resets) > 1:
            raise WindowChanged()
        # one count per request, in order (requests that match no route are never
        # authenticated, so they count against the address instead)
        assert user_rem == list(range(CRUD_LIMIT - 1, CRUD_LIMIT - 1 - len(user_rem), -1)), user_rem
    in_one_window(run)


def test_headers_on_401(anon):
    r = anon.get("/agents")
    assert r.status_code == 401
    lim, rem, _ = rate_headers(r)
    assert lim == CRUD_LIMIT and rem < CRUD_LIMIT
    r = anon.get("/agents", headers={"Authorization": "Bearer ahk_AAAAAAAA_BBBBBBBBBB"})
    assert r.status_code == 401
    assert rate_headers(r)[1] in (rem - 1, CRUD_LIMIT - 1)  # same address, one more (or new window)


def test_per_address_limit_before_auth():
    def run():
        anon = Client()
        ok, over = exhaust(lambda: anon.get("/users/me"), CRUD_LIMIT)
        assert len(ok) == CRUD_LIMIT and all(r.status_code == 401 for r in ok)
        assert_429(over, CRUD_LIMIT)
        # a broken key from that address is refused the same way
        r = anon.get("/agents", headers={"Authorization": "Bearer ahk_AAAAAAAA_BBBBBBBBBB"})
        assert r.status_code == 429
        return anon
    anon = in_one_window(run)
    # a valid key from the same address is counted per user, not per address
    user = new_client()
    user.s.headers["X-Forwarded-For"] = anon.s.headers["X-Forwarded-For"]
    r = user.get("/users/me")
    assert r.status_code == 200
    assert rate_headers(r)[1] == CRUD_LIMIT - 1
    # and another address is not affected
    assert Client().get("/users/me").status_code == 401


def test_public_openapi_is_counted_per_address(anon):
    r = anon.get("/openapi.json")
    assert r.status_code == 200
    lim, rem, _ = rate_headers(r)
    assert lim == CRUD_LIMIT and rem == CRUD_LIMIT - 1


def test_health_is_never_limited(anon):
    for _ in range(CRUD_LIMIT + 5):
        r = anon.get("/health")
        assert r.status_code == 200, r.text
    # it still says where the caller stands, and took nothing from it
    lim, rem, reset = rate_headers(r)
    assert lim == CRUD_LIMIT and 0 <= rem <= CRUD_LIMIT and reset > time.time()


def test_health_reports_the_budget_without_spending_it():
    def run():
        c = Client()  # an address of its own: /health answers before authentication
        first = c.get("/openapi.json")
        h = c.get("/health")
        again = c.get("/openapi.json")
        if len({rate_headers(x)[2] for x in (first, h, again)}) > 1:
            raise WindowChanged()
        assert h.status_code == 200
        assert rate_headers(h)[:2] == (CRUD_LIMIT, CRUD_LIMIT - 1)
        assert rate_headers(again)[1] == CRUD_LIMIT - 2  # /health took nothing
    in_one_window(run)


def test_an_unknown_path_is_a_counted_404(anon):
    r = anon.get("/no-such-resource/%zz")
    assert r.status_code == 404, r.text
    assert rate_headers(r)[1] == CRUD_LIMIT - 1


def served_by(request_ids):
    """Worker PIDs that logged the given request ids."""
    pids = set()
    with open(f"{VAR}/log/api.log", errors="replace") as f:
        for line in f:
            m = re.search(r"\[(\d+)\] req=(\S+)", line)
            if m and m.group(2) in request_ids:
                pids.add(int(m.group(1)))
    return pids


def test_count_is_shared_across_workers():
    def run():
        c = new_client()
        results, lock = [], threading.Lock()

        def worker(n):
            s = requests.Session()
            s.headers.update(c.s.headers)
            for _ in range(n):
                r = s.get(c.url("/agents"), timeout=30)
                with lock:
                    results.append(r)
        threads = [threading.Thread(target=worker, args=(CRUD_LIMIT // 10,)) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if len({rate_headers(r)[2] for r in results}) > 1:
            raise WindowChanged()
        assert [r.status_code for r in results] == [200] * CRUD_LIMIT
        # (Remaining may be approximate under concurrency; the limit itself may not.)
        assert all(0 <= rate_headers(r)[1] < CRUD_LIMIT for r in results)
        over = c.get("/agents")
        if rate_headers(over)[2] != rate_headers(results[0])[2]:
            raise WindowChanged()
        assert_429(over, CRUD_LIMIT)
        return {r.headers["X-Request-Id"] for r in results}
    ids = in_one_window(run)
    pids = wait_until(lambda: served_by(ids) if len(served_by(ids)) > 1 else None, timeout=3)
    assert pids and len(pids) > 1, "the requests should have been spread over several workers"


def test_invoke_limit_is_separate():
    def run():
        c = new_client()
        a = c.post("/agents", json={"name": "inv", "git_repo_url": "https://e.com/x"}).json()
        ok, over = exhaust(lambda: c.post(f"/agents/{a['slug']}/invoke", json={"prompt": "hi"}),
                           INVOKE_LIMIT)
        assert len(ok) == INVOKE_LIMIT
        assert all(r.status_code == 409 for r in ok)  # a draft agent: counted all the same
        assert all(rate_headers(r)[0] == INVOKE_LIMIT for r in ok)
        assert_429(over, INVOKE_LIMIT)
        # CRUD requests still have their own budget (only the create was counted)
        r = c.get("/agents")
        if rate_headers(r)[2] != rate_headers(over)[2]:
            raise WindowChanged()
        assert r.status_code == 200
        assert rate_headers(r)[:2] == (CRUD_LIMIT, CRUD_LIMIT - 2)
    in_one_window(run)
