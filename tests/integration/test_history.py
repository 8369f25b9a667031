"""Issue 14: history, counts and lists that stay flat as the data grows.

Keyset pages (?cursor, Link rel="next", X-Next-Cursor) against concurrent
inserts, X-Total-Count from the list_counts counters (exact after inserts,
deletes and agent deletion), 422s for bad cursors. Invocation rows are seeded
straight into the stack's MariaDB (the runner is not what is under test here):
the same INSERT the API makes, so the same triggers run.
"""
import base64
import re
import threading
import uuid

import pytest

from conftest import assert_422, db_query, new_client, BASE_URL

LINK_RE = re.compile(r'^<(/api/v1/[^>]*)>; rel="next"$')


def agent_of(c):
    r = c.post("/agents", json={"name": "h " + uuid.uuid4().hex[:8], "source_type": "local"})
    assert r.status_code == 201, r.text
    return r.json()


def agent_id(c, slug):
    uid = c.get("/users/me").json()["id"]
    return db_query(f"SELECT id FROM agents WHERE user_id = '{uid}' AND slug = '{slug}'")[0][0], uid


def seed_invocations(aid, uid, n, when="NOW(3)", prefix=None):
    """n invocation rows in one INSERT; `when` is an SQL time expression (i the
    row number is in scope as @i through the literal below)."""
    prefix = prefix or "inv_" + uuid.uuid4().hex[:10]
    ids = [f"{prefix}{i:05d}" for i in range(n)]
    for start in range(0, n, 250):  # one argv of mariadb each: stay far below ARG_MAX
        values = ",".join(
            f"('{x}','{aid}','{uid}','ses_{x}',x'7b7d','completed',{when.replace('@i', str(i))},"
            f"3,4,0.000001)" for i, x in enumerate(ids) if start <= i < start + 250)
        db_query("INSERT INTO invocations (id, agent_id, user_id, session_id, prompt, status,"
                 " created_at, input_tokens, output_tokens, total_cost_usd) VALUES " + values)
    return ids


def walk(c, path, limit, between=None):
    """Every page of a list by following Link: rel="next"; returns the pages.
    between() runs after each page: writes that land between two requests."""
    pages = []
    r = c.get(f"{path}?limit={limit}")
    while True:
        assert r.status_code == 200, r.text
        pages.append(r.json())
        link = r.headers.get("Link")
        if not link:
            assert "X-Next-Cursor" not in r.headers
            return pages, r
        if between:
            between()
        m = LINK_RE.match(link)
        assert m, link
        assert f"cursor={r.headers['X-Next-Cursor']}" in m.group(1)
        assert f"limit={limit}" in m.group(1)
        url = BASE_URL.rsplit("/api/v1", 1)[0] + m.group(1)
        r = c.s.get(url, timeout=30)


def test_cursor_pages_are_stable_under_concurrent_inserts():
    c = new_client("pro")
    a = agent_of(c)
    aid, uid = agent_id(c, a["slug"])
    # 30 rows in one millisecond (the id breaks the tie) and 45 spread over time.
    # (Within history_retention_days: the runner's purge must leave them be.)
    same = seed_invocations(aid, uid, 30, when="TIMESTAMP(CURDATE() - INTERVAL 2 DAY, '03:04:05.678')")
    spread = seed_invocations(aid, uid, 45, when="TIMESTAMPADD(SECOND, -@i, CURDATE() - INTERVAL 1 DAY)")
    seeded = set(same) | set(spread)
    newer, older, racing = [], [], []

    def between():
        # Between pages: rows above the first page (which offset paging
        # would shift everything by) and rows older than all before them,
        # which the walk must reach.
        newer.extend(seed_invocations(aid, uid, 3))
        older.extend(seed_invocations(
            aid, uid, 2, when=f"TIMESTAMPADD(SECOND, -{len(older)}, CURDATE() - INTERVAL 30 DAY)"))

    stop = threading.Event()

    def writer():
        # And a writer of its own, racing the requests themselves.
        while not stop.is_set():
            racing.extend(seed_invocations(aid, uid, 2))

    t = threading.Thread(target=writer)
    t.start()
    try:
        pages, _ = walk(c, f"/agents/{a['slug']}/invocations", 7, between)
    finally:
        stop.set()
        t.join()
    ids = [x["invocation_id"] for p in pages for x in p]
    assert len(ids) == len(set(ids)), "a row was repeated across cursor pages"
    assert seeded | set(older) <= set(ids), "cursor pages skipped rows"
    # Rows newer than the first page's top show up only if they were there
    # before the first page was read: the racing writer's earliest ones.
    extra = set(ids) - seeded - set(older)
    assert extra <= set(racing) and extra <= {x["invocation_id"] for x in pages[0]}
    times = [(x["created_at"], x["invocation_id"]) for p in pages for x in p]
    assert times == sorted(times, reverse=True)
    assert all(len(p) == 7 for p in pages[:-1])
    # The counter saw every row, the concurrent ones too.
    r = c.get(f"/agents/{a['slug']}/invocations?limit=1")
    total = len(seeded) + len(newer) + len(older) + len(racing)
    assert int(r.headers["X-Total-Count"]) == total


def test_offset_pages_unchanged_and_link_keeps_filters():
    c = new_client("pro")
    a = agent_of(c)
    aid, uid = agent_id(c, a["slug"])
    seed_invocations(aid, uid, 25, when="TIMESTAMPADD(SECOND, -@i, CURDATE() - INTERVAL 1 DAY)")
    path = f"/agents/{a['slug']}/invocations"
    full = [x["invocation_id"] for x in c.get(path + "?limit=100").json()]
    assert len(full) == 25
    r = c.get(path + "?limit=10&offset=10")
    assert [x["invocation_id"] for x in r.json()] == full[10:20]
    assert r.headers["X-Total-Count"] == "25"
    # The next page after an offset page is a cursor page that continues it.
    nxt = c.get(path, params={"cursor": r.headers["X-Next-Cursor"], "limit": 10})
    assert [x["invocation_id"] for x in nxt.json()] == full[20:]
    assert "Link" not in nxt.headers and "X-Next-Cursor" not in nxt.headers
    # Every offset, those past half the list (read from its other end) too,
    # is the same slice of the list, with a next link exactly when rows follow.
    for off in range(0, 27, 2):
        r = c.get(path + f"?limit=6&offset={off}")
        assert [x["invocation_id"] for x in r.json()] == full[off:off + 6], off
        assert ("Link" in r.headers) == (off + 6 < 25), off
        if off + 6 < 25:
            nxt = c.get(path, params={"cursor": r.headers["X-Next-Cursor"], "limit": 6}).json()
            assert [x["invocation_id"] for x in nxt] == full[off + 6:off + 12], off
    # Every history row is the contract's invocation with its prompt.
    row = c.get(path + "?limit=1").json()[0]
    assert row["prompt"] == "{}" and row["status"] == "completed" and row["input_tokens"] == 3
    # /files keeps its filters in the Link; paging parameters are replaced.
    for i in range(3):
        up = c.post("/files", files={"file": (f"f{i}.txt", b"x%d" % i, "text/plain")},
                    data={"tags": "keep"})
        assert up.status_code == 201, up.text
    r = c.get("/files?tags=keep&scope=user&limit=2&offset=0")
    link = LINK_RE.match(r.headers["Link"]).group(1)
    assert link.startswith("/api/v1/files?") and "tags=keep" in link and "scope=user" in link
    assert "offset" not in link and link.count("limit=") == 1
    assert r.headers["X-Total-Count"] == "3"


@pytest.mark.parametrize("cursor", [
    "!!!", "a", base64.urlsafe_b64encode(b"2026-01-01 00:00:00.000").decode().rstrip("="),
    base64.urlsafe_b64encode(b"2026-01-01 00:00:00|agt_x").decode().rstrip("="),
    base64.urlsafe_b64encode(b"2026-01-01 00:00:00.000|a b").decode().rstrip("="),
    base64.urlsafe_b64encode(b"2026-01-01 00:00:00.000|x' OR 1=1 -- ").decode().rstrip("="),
    "x" * 5000,
])
def test_bad_cursor_is_422(cursor):
    c = new_client()
    r = c.get("/agents", params={"cursor": cursor})
    assert_422(r, ("query", "cursor"))


def test_cursor_with_offset_is_422_on_every_keyset_list():
    c = new_client()
    a = agent_of(c)
    good = c.get("/agents?limit=1")  # one agent: no next page, make a cursor by hand
    assert "Link" not in good.headers
    cur = base64.urlsafe_b64encode(b"2026-01-01 00:00:00.000|agt_x").decode().rstrip("=")
    for path in ["/agents", "/api-keys", "/files", f"/agents/{a['slug']}/invocations",
                 f"/agents/{a['slug']}/sessions", f"/agents/{a['slug']}/files"]:
        r = c.get(path, params={"cursor": cur, "offset": 0})
        assert_422(r, ("query", "cursor"))
        r = c.get(path, params={"cursor": cur})
        assert r.status_code == 200 and r.json() == [], (path, r.text)


def counts_drift():
    """list_counts rows that differ from a count of the rows themselves."""
    return db_query("""
        SELECT k.kind, k.owner_id, k.n, k.actual FROM (
          SELECT 'inv' kind, agent_id owner_id, COUNT(*) actual FROM invocations GROUP BY agent_id
          UNION ALL SELECT 'ses', agent_id, COUNT(*) FROM sessions GROUP BY agent_id
          UNION ALL SELECT 'att', agent_id, COUNT(*) FROM agent_files GROUP BY agent_id
          UNION ALL SELECT 'agt', user_id, COUNT(*) FROM agents GROUP BY user_id
          UNION ALL SELECT 'key', user_id, COUNT(*) FROM api_keys GROUP BY user_id
          UNION ALL SELECT 'file', user_id, COUNT(*) FROM files GROUP BY user_id
          UNION ALL SELECT CONCAT('file:', scope), user_id, COUNT(*) FROM files GROUP BY user_id, scope
        ) a RIGHT JOIN (SELECT kind, owner_id, n, NULL actual FROM list_counts) k
          ON k.kind = a.kind AND k.owner_id = a.owner_id
        WHERE k.n <> COALESCE(a.actual, 0)
        UNION ALL
        SELECT a.kind, a.owner_id, NULL, a.actual FROM (
          SELECT 'inv' kind, agent_id owner_id, COUNT(*) actual FROM invocations GROUP BY agent_id
          UNION ALL SELECT 'agt', user_id, COUNT(*) FROM agents GROUP BY user_id
          UNION ALL SELECT 'key', user_id, COUNT(*) FROM api_keys GROUP BY user_id
          UNION ALL SELECT 'file', user_id, COUNT(*) FROM files GROUP BY user_id
        ) a LEFT JOIN list_counts k ON k.kind = a.kind AND k.owner_id = a.owner_id
        WHERE k.n IS NULL""")


def test_counts_exact_after_inserts_deletes_and_agent_deletion():
    c = new_client("pro")
    a1, a2 = agent_of(c), agent_of(c)
    aid1, uid = agent_id(c, a1["slug"])
    aid2, _ = agent_id(c, a2["slug"])
    assert c.get("/agents").headers["X-Total-Count"] == "2"
    seed_invocations(aid1, uid, 12)
    seed_invocations(aid2, uid, 5)
    db_query(f"INSERT INTO sessions (agent_id, id, created_at) VALUES ('{aid1}', 's1', NOW(3)),"
             f" ('{aid1}', 's2', NOW(3)), ('{aid2}', 's3', NOW(3))")
    assert c.get(f"/agents/{a1['slug']}/invocations").headers["X-Total-Count"] == "12"
    assert c.get(f"/agents/{a1['slug']}/sessions").headers["X-Total-Count"] == "2"
    db_query(f"DELETE FROM invocations WHERE agent_id = '{aid1}' ORDER BY created_at LIMIT 4")
    assert c.get(f"/agents/{a1['slug']}/invocations").headers["X-Total-Count"] == "8"
    # Keys: the user's first key plus two, one deleted.
    k1 = c.post("/api-keys", json={"name": "k1"}).json()["api_key"]
    c.post("/api-keys", json={"name": "k2"})
    assert c.get("/api-keys").headers["X-Total-Count"] == "3"
    assert c.delete(f"/api-keys/{k1['id']}").status_code == 204
    assert c.get("/api-keys").headers["X-Total-Count"] == "2"
    # Files: per scope and in all; an attachment counted, and uncounted when its file goes.
    f1 = c.post("/files", files={"file": ("a.txt", b"aa", "text/plain")}).json()
    f2 = c.post("/files", files={"file": ("b.txt", b"bb", "text/plain")},
                data={"agent_slug": a2["slug"]}).json()
    assert f2["scope"] == "agent"
    assert c.get("/files").headers["X-Total-Count"] == "2"
    assert c.get("/files?scope=user").headers["X-Total-Count"] == "1"
    assert c.get("/files?scope=agent").headers["X-Total-Count"] == "1"
    assert c.get("/files?search=a.t").headers["X-Total-Count"] == "1"  # filtered: counted
    r = c.post(f"/agents/{a1['slug']}/files", json={"file_id": f1["file_id"]})
    assert r.status_code in (200, 201), r.text
    assert c.get(f"/agents/{a1['slug']}/files").headers["X-Total-Count"] == "1"
    assert c.delete(f"/files/{f1['file_id']}").status_code == 204
    assert c.get(f"/agents/{a1['slug']}/files").headers["X-Total-Count"] == "0"
    assert c.get("/files?scope=user").headers["X-Total-Count"] == "0"
    # Deleting an agent: its history, sessions and agent files go, counts with them.
    assert c.delete(f"/agents/{a2['slug']}").status_code == 204
    assert c.get("/agents").headers["X-Total-Count"] == "1"
    assert c.get("/files").headers["X-Total-Count"] == "0"
    assert db_query(f"SELECT COUNT(*) FROM list_counts WHERE owner_id = '{aid2}'") == [["0"]]
    assert counts_drift() == []
    # Deleting the user (by cascade) leaves no counts behind.
    db_query(f"DELETE FROM users WHERE id = '{uid}'")
    assert db_query(f"SELECT COUNT(*) FROM list_counts WHERE owner_id IN ('{uid}', '{aid1}')") == [["0"]]


def test_deep_offset_reads_only_the_page():
    """The offset page is a deferred join: the inner query walks the index."""
    plan = db_query("EXPLAIN SELECT id FROM invocations WHERE agent_id = 'agt_x'"
                    " ORDER BY created_at DESC, id DESC LIMIT 21 OFFSET 1000")
    assert plan[0][5] == "invocations_agent", plan  # key
    assert "Using index" in plan[0][-1] and "filesort" not in plan[0][-1], plan


def test_openapi_documents_cursor_and_link_on_every_keyset_list(anon):
    r = anon.get("/openapi.json")
    assert r.status_code == 200
    spec = r.json()
    for path in ["/agents", "/api-keys", "/files", "/agents/{slug}/files",
                 "/agents/{slug}/sessions", "/agents/{slug}/invocations"]:
        op = spec["paths"][path]["get"]
        assert {"$ref": "#/components/parameters/Cursor"} in op["parameters"], path
        headers = op["responses"]["200"]["headers"]
        assert {"Link", "X-Next-Cursor", "X-Total-Count"} <= set(headers), path


def usage_of(uid):
    return db_query(f"SELECT COALESCE(SUM(invocations), 0), COALESCE(SUM(input_tokens), 0),"
                    f" COALESCE(SUM(total_cost_usd), 0) FROM usage_daily WHERE user_id = '{uid}'")[0]


def test_purge_history_keeps_usage_and_never_blocks_recording():
    from conftest import admin, VAR
    import os
    import subprocess
    c = new_client("pro")
    a = agent_of(c)
    aid, uid = agent_id(c, a["slug"])
    # 2,600 rows past the retention (six batches), 7 within it.
    for k in range(2):
        seed_invocations(aid, uid, 1300, when=f"TIMESTAMPADD(MINUTE, -@i, NOW(3) - INTERVAL {200 + k * 5} DAY)")
    recent = set(seed_invocations(aid, uid, 7, when="NOW(3) - INTERVAL 10 DAY"))
    before = usage_of(uid)
    assert before[0] == "2607"
    # Recording goes on during the purge, on the same agent (its count row is
    # the one the purge's triggers update) in a session that gives up on any
    # lock wait over a second: a wait that long is an error, not a slow call.
    prefix = "inv_rec" + uuid.uuid4().hex[:8]
    inserts = "".join(
        f"INSERT INTO invocations (id, agent_id, user_id, session_id, prompt, status, created_at,"
        f" input_tokens) VALUES ('{prefix}{i:04d}', '{aid}', '{uid}', 'ses_r', x'00', 'completed',"
        f" NOW(3), 1);\n" for i in range(300))
    recorder = subprocess.Popen(
        ["mariadb", "--no-defaults", f"--socket={os.path.join(VAR, 'run', 'mysql.sock')}", "-uroot",
         "agenthost"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    recorder.stdin.write("SET SESSION innodb_lock_wait_timeout = 1;\n" + inserts)
    recorder.stdin.flush()
    out = admin("purge-history", "--days", "90")
    reads = [c.get(f"/agents/{a['slug']}/invocations?limit=5").status_code for _ in range(5)]
    _, err = recorder.communicate(timeout=120)  # closes its stdin: it ends after the last
    assert recorder.returncode == 0, err  # no lock wait over a second
    assert reads == [200] * 5
    assert re.match(r"purged \d+ invocations older than 90 days", out.stdout), out.stdout
    rows = {r[0] for r in db_query(f"SELECT id FROM invocations WHERE agent_id = '{aid}'")}
    assert rows == recent | {f"{prefix}{i:04d}" for i in range(300)}
    # usage keeps what was consumed, the purged rows' share included.
    after = usage_of(uid)
    assert int(after[0]) == 2607 + 300 and int(after[1]) == int(before[1]) + 300
    assert after[2] == before[2]
    r = c.get(f"/agents/{a['slug']}/invocations?limit=1")
    assert r.headers["X-Total-Count"] == str(7 + 300)
    assert counts_drift() == []
    # 0 keeps everything.
    assert "kept forever" in admin("purge-history", "--days", "0").stdout
    assert admin("purge-history", "--days", "-1", check=False).returncode == 2


def test_large_prompts_and_responses_live_in_the_file_store():
    import os
    from agent_code import ECHO_JS, deployed_agent, runner_available, config_get
    from conftest import VAR, admin
    if not runner_available():
        pytest.skip("no runner")
    c = new_client("pro")
    a = deployed_agent(c, js=ECHO_JS)
    aid, _ = agent_id(c, a["slug"])
    big = "é" + "x" * 100_000  # over 64 KB; the echo answers the same bytes
    r = c.post(f"/agents/{a['slug']}/invoke", json={"prompt": big}, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["response_content"] == big
    small = c.post(f"/agents/{a['slug']}/invoke", json={"prompt": "small"}, timeout=120)
    assert small.status_code == 200, small.text
    rows = db_query(f"SELECT id, LENGTH(prompt), LENGTH(response_content), prompt_sha256,"
                    f" response_sha256 FROM invocations WHERE agent_id = '{aid}' ORDER BY created_at")
    assert len(rows) == 2
    inv, plen, rlen, psha, rsha = rows[0]
    assert (plen, rlen) == ("0", "0") and psha == rsha and len(psha) == 64  # one blob, not in the row
    assert rows[1][3:] == ["NULL", "NULL"] and rows[1][1] == "5"         # small: in the row
    assert db_query(f"SELECT COUNT(*) FROM history_blobs WHERE agent_id = '{aid}'") == [["1"]]
    files_dir = config_get("files_dir", os.path.join(VAR, "files"))
    blob = os.path.join(files_dir, "blobs", psha[:2], psha)
    assert os.path.getsize(blob) == len(big.encode())
    # The history returns it exactly as it returns a small one.
    hist = c.get(f"/agents/{a['slug']}/invocations").json()
    assert [h["prompt"] for h in hist] == ["small", big]
    assert [h["response_content"] for h in hist] == ["small", big]
    # Retention releases them: an old call's blob goes with its row.
    old = "y" * 70_000
    assert c.post(f"/agents/{a['slug']}/invoke", json={"prompt": old}, timeout=120).status_code == 200
    osha = db_query(f"SELECT prompt_sha256 FROM invocations WHERE agent_id = '{aid}'"
                    f" AND prompt_sha256 <> '{psha}'")[0][0]
    db_query(f"UPDATE invocations SET created_at = NOW(3) - INTERVAL 200 DAY WHERE prompt_sha256 = '{osha}'")
    db_query(f"UPDATE history_blobs SET created_at = NOW(3) - INTERVAL 20 MINUTE WHERE sha256 = '{osha}'")
    out = admin("purge-history", "--days", "90").stdout
    assert re.search(r"released [1-9]\d* prompts and responses", out), out
    assert db_query(f"SELECT COUNT(*) FROM file_blobs WHERE sha256 = '{osha}'") == [["0"]]
    assert not os.path.exists(os.path.join(files_dir, "blobs", osha[:2], osha))
    assert os.path.exists(blob)
    # Deleting the agent removes them (unless a managed file shares the bytes).
    assert c.delete(f"/agents/{a['slug']}").status_code == 204
    assert db_query(f"SELECT COUNT(*) FROM history_blobs WHERE agent_id = '{aid}'") == [["0"]]
    assert db_query(f"SELECT COUNT(*) FROM file_blobs WHERE sha256 = '{psha}'") == [["0"]]
    assert not os.path.exists(blob)


def rows_read():
    """The server's rows read through handlers so far (all connections)."""
    got = dict(db_query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Handler_read_next',"
                        " 'Handler_read_prev', 'Handler_read_rnd_next', 'Handler_read_first',"
                        " 'Handler_read_last', 'Handler_read_key')"))
    return sum(int(v) for v in got.values())


def test_deep_pages_read_only_near_their_rows():
    """A cursor page is an index range from the cursor, and an offset near the
    end of the history is walked from that end: neither reads the rows above
    it (without FORCE INDEX, MariaDB walked every row above the cursor)."""
    c = new_client("pro")
    a = agent_of(c)
    aid, uid = agent_id(c, a["slug"])
    p = "inv_" + uuid.uuid4().hex[:6]
    # One time for every batch: NOW() per INSERT moved later batches' rows up
    # among the earlier ones' on a slow machine (an INSERT of 5,000 rows can
    # take over a second), and the expected order no longer held.
    base = db_query("SELECT NOW(3)")[0][0]
    for k in range(0, 30000, 5000):
        db_query("INSERT INTO invocations (id, agent_id, user_id, session_id, prompt, status, created_at)"
                 f" SELECT CONCAT('{p}{k:05d}', LPAD(seq, 8, '0')), '{aid}', '{uid}', 's', x'00',"
                 f" 'completed', TIMESTAMP('{base}') - INTERVAL ({k} + seq) SECOND FROM seq_1_to_5000")
    path = f"/agents/{a['slug']}/invocations"
    deep = c.get(path + "?limit=20&offset=25000")
    assert deep.headers["X-Total-Count"] == "30000"
    before = rows_read()
    r = c.get(path, params={"cursor": deep.headers["X-Next-Cursor"], "limit": 20})
    cursor_reads = rows_read() - before
    assert [x["invocation_id"] for x in r.json()][0] == f"{p}25000{21:08d}"
    before = rows_read()
    r = c.get(path + "?limit=20&offset=29970")
    end_reads = rows_read() - before
    assert len(r.json()) == 20 and r.json()[-1]["invocation_id"] == f"{p}25000{4990:08d}"
    # (Some slack for the stack's own background queries meanwhile.)
    assert cursor_reads < 10000, cursor_reads
    assert end_reads < 10000, end_reads
    # The middle, far from both ends: located by the hour counts
    # (schema/017), then a walk within one hour, not 15,000 index entries.
    before = rows_read()
    r = c.get(path + "?limit=20&offset=15000")
    middle_reads = rows_read() - before
    assert [x["invocation_id"] for x in r.json()][:2] == [f"{p}15000{1:08d}", f"{p}15000{2:08d}"]
    assert middle_reads < 6000, middle_reads


def test_deep_offsets_agree_with_the_history_order():
    """Offsets located by the hour counts (1,000 or more from both ends) give
    exactly the rows of the full order: ties within a millisecond, a row on
    each side of an hour's edge (offsets 1,437–1,441), an invocation recorded
    late (after newer ones), and the oldest hours emptied by retention; and
    so do the offsets nearer an end, which are walked from it."""
    c = new_client("pro")
    a = agent_of(c)
    aid, uid = agent_id(c, a["slug"])
    edge = "TIMESTAMP(CURDATE() - INTERVAL 1 DAY, '10:00:00')"
    seed_invocations(aid, uid, 4000, when=f"{edge} - INTERVAL (@i * 5) SECOND")
    seed_invocations(aid, uid, 25, when="TIMESTAMP(CURDATE() - INTERVAL 1 DAY, '07:59:59.999')")
    seed_invocations(aid, uid, 25, when="TIMESTAMP(CURDATE() - INTERVAL 1 DAY, '08:00:00.000')")
    seed_invocations(aid, uid, 1, when=f"{edge} - INTERVAL 3601 SECOND")  # recorded late
    # Retention's kind of delete: the oldest rows, through the triggers.
    db_query(f"DELETE FROM invocations WHERE agent_id = '{aid}' ORDER BY created_at, id LIMIT 130")
    order = [r[0] for r in db_query(f"SELECT id FROM invocations WHERE agent_id = '{aid}'"
                                    " ORDER BY created_at DESC, id DESC")]
    assert db_query(f"SELECT SUM(n) FROM history_hours WHERE agent_id = '{aid}'") == [[str(len(order))]]
    path = f"/agents/{a['slug']}/invocations"
    for off in (999, 1000, 1001, 1437, 1439, 1440, 1441, len(order) - 20, len(order) - 1,
                len(order), len(order) + 3):
        r = c.get(f"{path}?limit=20&offset={off}")
        assert r.status_code == 200, r.text
        assert [x["invocation_id"] for x in r.json()] == order[off:off + 20], off
        assert r.headers["X-Total-Count"] == str(len(order))


def test_first_page_kept_by_workers_is_never_older_than_the_history():
    """Each API worker answers a history's first page from its own copy while
    the history's change counter (schema/019) stands: after every kind of
    write (an insert, a delete, an update of a row) every answer, whichever
    worker gives it, is what a fresh read gives, byte for byte."""
    import concurrent.futures
    c = new_client("pro")
    a = agent_of(c)
    aid, uid = agent_id(c, a["slug"])
    path = f"/agents/{a['slug']}/invocations"
    ids = seed_invocations(aid, uid, 8, when="TIMESTAMPADD(SECOND, -@i, NOW(3))")

    def answers():
        # Concurrent requests reach every worker; each keeps its copy. (Five
        # rounds of 15 stay under the default 100 requests a minute.)
        with concurrent.futures.ThreadPoolExecutor(7) as ex:
            rs = list(ex.map(lambda _: c.get(f"{path}?limit=5"), range(14)))
        fresh = c.get(f"{path}?limit=5&fresh={uuid.uuid4().hex}")  # a key no worker keeps
        assert fresh.status_code == 200, fresh.text
        for r in rs:
            assert r.status_code == 200, r.text
            assert r.content == fresh.content
            assert r.headers["X-Total-Count"] == fresh.headers["X-Total-Count"]
            assert r.headers["X-Next-Cursor"] == fresh.headers["X-Next-Cursor"]
            assert r.headers["Link"] == fresh.headers["Link"].replace(f"fresh={fresh.url[-32:]}&", "")
        return fresh.json(), int(fresh.headers["X-Total-Count"])

    page, total = answers()
    assert [x["invocation_id"] for x in page] == ids[:5] and total == 8
    newest = seed_invocations(aid, uid, 1)
    page, total = answers()
    assert page[0]["invocation_id"] == newest[0] and total == 9
    db_query(f"DELETE FROM invocations WHERE id = '{ids[1]}'")
    page, total = answers()
    assert ids[1] not in [x["invocation_id"] for x in page] and total == 8
    # An update changes neither the count nor the top row.
    db_query(f"UPDATE invocations SET status = 'failed', error = 'edited' WHERE id = '{ids[2]}'")
    page, total = answers()
    assert [x["status"] for x in page if x["invocation_id"] == ids[2]] == ["failed"] and total == 8
    # One row in, one out in the same moment leaves the count as it was.
    db_query(f"DELETE FROM invocations WHERE id = '{ids[0]}'")
    later = seed_invocations(aid, uid, 1)
    page, total = answers()
    assert page[0]["invocation_id"] == later[0] and ids[0] not in [x["invocation_id"] for x in page]
    assert total == 8


def test_unreadable_history_blob_is_answered_empty_and_not_kept():
    """A prompt kept in the file store that cannot be read is answered as ""
    (and logged), and such an answer is not kept by the workers (which keep a
    history's first page while it stands): once the blob is back, every
    answer has it again, though the history did not change."""
    import concurrent.futures
    import hashlib
    import os
    from agent_code import config_get
    from conftest import VAR
    if config_get("storage_backend", "local") != "local":
        pytest.skip("the file store is not on this host's disk")
    c = new_client("pro")
    a = agent_of(c)
    aid, uid = agent_id(c, a["slug"])
    text = "kept in the store " + uuid.uuid4().hex
    sha = hashlib.sha256(text.encode()).hexdigest()
    blob = os.path.join(config_get("files_dir", os.path.join(VAR, "files")), "blobs", sha[:2], sha)
    os.makedirs(os.path.dirname(blob), exist_ok=True)
    with open(blob, "w") as f:
        f.write(text)
    os.chmod(blob, 0o644)
    ids = seed_invocations(aid, uid, 2)
    db_query(f"UPDATE invocations SET prompt = '', prompt_sha256 = '{sha}' WHERE id = '{ids[0]}'")

    def prompts():
        with concurrent.futures.ThreadPoolExecutor(7) as ex:
            rs = list(ex.map(lambda _: c.get(f"/agents/{a['slug']}/invocations"), range(28)))
        assert all(r.status_code == 200 for r in rs), [r.text for r in rs if r.status_code != 200]
        return {x["prompt"] for r in rs for x in r.json() if x["invocation_id"] == ids[0]}
    os.rename(blob, blob + ".away")
    try:
        assert prompts() == {""}
    finally:
        os.rename(blob + ".away", blob)
    try:
        assert prompts() == {text}
    finally:
        os.unlink(blob)
