"""scripts/bench-peers' FastAPI peer: GET /api/v1/agents/{slug} doing agenthost's
authenticated lookup (lib/auth/auth.c, handlers/agent.c) the way a FastAPI
service is usually written: a dependency authenticates the bearer key, the
route loads the agent. Debian's FastAPI, served by uvicorn (--workers 2, no
access log, uvloop and httptools), with an aiomysql pool. Settings from the
environment (bench-peers sets them): PEER_DB_SOCKET, PEER_DB_USER,
PEER_DB_PASSWORD, PEER_DB_NAME, PEER_MASTER_KEY."""
import datetime
import hashlib
import hmac
import json
import os
import re
import struct

import aiomysql
from fastapi import Depends, FastAPI, Header, HTTPException
from fastapi.responses import JSONResponse

ENV = os.environ


def hash_key():
    """agenthost's key-hash key (lib/crypto/crypto.c): libsodium's
    crypto_kdf_derive_from_key(32, subkey 2, "agenthst", master), which is
    BLAKE2b keyed by the master key with the subkey id as salt and the context
    as personalisation, so the same keys work."""
    with open(ENV["PEER_MASTER_KEY"], "rb") as f:
        master = f.read(32)
    return hashlib.blake2b(b"", digest_size=32, key=master,
                           salt=struct.pack("<Q", 2) + bytes(8),
                           person=b"agenthst" + bytes(8)).digest()


HASH_KEY = hash_key()
KEY_SHAPE = re.compile(r"ahk_([0-9A-Za-z]{8})_[0-9A-Za-z]{10}")
SQL_KEY = ("SELECT k.id, k.key_hash, k.last_used_at, k.expires_at, u.id, u.email,"
           " u.plan, u.quota_bytes, u.disabled, u.created_at"
           " FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_id = %s")
SQL_TOUCH = "UPDATE api_keys SET last_used_at = NOW(3) WHERE id = %s"
SQL_AGENT = ("SELECT a.id, a.name, a.slug, a.description, a.source_type, a.git_repo_url,"
             " a.git_branch, a.timeout_seconds, a.status, a.status_message, a.sandbox_id,"
             " a.needs_redeploy, a.created_at, a.updated_at, a.deployed_at, a.image_path,"
             " a.entrypoint, a.runner_id, a.code_sha256, a.min_warm, a.image_sha256,"
             " a.max_cost_usd_per_day, a.max_cost_usd_per_month, a.network, a.webhook_url"
             " FROM agents a WHERE a.user_id = %s AND a.slug = %s")

app = FastAPI()
pool = None


@app.on_event("startup")
async def connect():
    global pool
    # agenthost's connections read and write UTC (schema/001_core.sql).
    pool = await aiomysql.create_pool(
        unix_socket=ENV["PEER_DB_SOCKET"], user=ENV["PEER_DB_USER"],
        password=ENV["PEER_DB_PASSWORD"], db=ENV["PEER_DB_NAME"], autocommit=True,
        init_command="SET time_zone = '+00:00'")


@app.on_event("shutdown")
async def disconnect():
    pool.close()
    await pool.wait_closed()


async def query(sql, args):
    async with pool.acquire() as conn:
        async with conn.cursor() as cur:
            await cur.execute(sql, args)
            return await cur.fetchall()


def deny(why):
    return HTTPException(401, why, headers={"WWW-Authenticate": "Bearer"})


async def current_user(authorization: str = Header(None)):
    if not authorization or authorization[:7].lower() != "bearer ":
        raise deny("Not authenticated")
    tok = authorization[7:].lstrip(" ")
    m = KEY_SHAPE.fullmatch(tok)
    if not m:
        raise deny("Invalid API key")
    rows = await query(SQL_KEY, (m.group(1),))
    want = hashlib.blake2b(tok.encode(), digest_size=32, key=HASH_KEY).digest()
    if len(rows) != 1 or not hmac.compare_digest(want, bytes(rows[0][1])):
        raise deny("Invalid API key")
    k = rows[0]
    now = datetime.datetime.utcnow()
    if k[3] is not None and k[3] < now:
        raise deny("API key expired")
    if k[2] is None or k[2] < now - datetime.timedelta(seconds=60):
        try:
            await query(SQL_TOUCH, (k[0],))  # best effort, as agenthost's
        except aiomysql.Error:
            pass
    if k[8]:
        raise HTTPException(403, "User account is disabled")
    return {"id": k[4], "email": k[5], "plan": k[6]}


def rfc3339(t):
    """A DATETIME(3) as ah_db_time_to_rfc3339 writes it."""
    if t is None:
        return None
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def network(stored):
    try:
        v = json.loads(stored) if stored else None
    except ValueError:
        v = None
    return v if isinstance(v, dict) else {"mode": "open", "allow": []}


def money(d):
    return None if d is None else float(d)


@app.get("/api/v1/agents/{slug}")
async def get_agent(slug: str, user: dict = Depends(current_user)):
    rows = await query(SQL_AGENT, (user["id"], slug))
    if not rows:
        return JSONResponse({"detail": "Agent not found"}, status_code=404)
    a = rows[0]
    return {
        "id": a[0], "name": a[1], "slug": a[2], "description": a[3], "source_type": a[4],
        "git_repo_url": a[5], "git_branch": a[6], "timeout_seconds": a[7],
        "min_warm": a[19], "network": network(a[23]), "webhook_url": a[24],
        "status": a[8], "status_message": a[9], "sandbox_id": a[10],
        "needs_redeploy": bool(a[11]), "created_at": rfc3339(a[12]),
        "updated_at": rfc3339(a[13]), "deployed_at": rfc3339(a[14]),
        "max_cost_usd_per_day": money(a[21]), "max_cost_usd_per_month": money(a[22]),
    }
