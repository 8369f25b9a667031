'use strict';
// scripts/bench-peers' Fastify peer: GET /api/v1/agents/:slug doing agenthost's
// authenticated lookup (lib/auth/auth.c, handlers/agent.c) the way a Fastify
// service is usually written: an onRequest hook authenticates the bearer key,
// the route loads the agent. Fastify 5 with its production defaults (no
// logger) and a response schema (fast-json-stringify); the `mariadb` driver's
// pool with prepared statements (execute). One process of this per core,
// behind nginx's upstream. Settings from the environment (bench-peers sets
// them): PEER_SOCKET, PEER_DB_SOCKET, PEER_DB_USER, PEER_DB_PASSWORD,
// PEER_DB_NAME, PEER_MASTER_KEY.
const fs = require('node:fs');
const fastify = require('fastify');
const mariadb = require('mariadb');
const sodium = require('sodium-native');

const env = process.env;

// The key hash is agenthost's (lib/crypto/crypto.c): keyed BLAKE2b-256 under
// the master key's subkey 2 of context "agenthst", so the same keys work.
const master = fs.readFileSync(env.PEER_MASTER_KEY);
const hashKey = Buffer.alloc(sodium.crypto_generichash_KEYBYTES);
sodium.crypto_kdf_derive_from_key(hashKey, 2, Buffer.from('agenthst'), master);

const pool = mariadb.createPool({
  socketPath: env.PEER_DB_SOCKET,
  user: env.PEER_DB_USER,
  password: env.PEER_DB_PASSWORD,
  database: env.PEER_DB_NAME,
  dateStrings: true,
  // agenthost's connections read and write UTC (schema/001_core.sql).
  initSql: "SET time_zone = '+00:00'",
});

const SQL_KEY =
  'SELECT k.id, k.key_hash, k.last_used_at, k.expires_at, u.id AS user_id, u.email,' +
  ' u.plan, u.quota_bytes, u.disabled, u.created_at AS user_created_at' +
  ' FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_id = ?';
const SQL_TOUCH = 'UPDATE api_keys SET last_used_at = NOW(3) WHERE id = ?';
const SQL_AGENT =
  'SELECT a.id, a.name, a.slug, a.description, a.source_type, a.git_repo_url,' +
  ' a.git_branch, a.timeout_seconds, a.status, a.status_message, a.sandbox_id,' +
  ' a.needs_redeploy, a.created_at, a.updated_at, a.deployed_at, a.image_path,' +
  ' a.entrypoint, a.runner_id, a.code_sha256, a.min_warm, a.image_sha256,' +
  ' a.max_cost_usd_per_day, a.max_cost_usd_per_month, a.network, a.webhook_url' +
  ' FROM agents a WHERE a.user_id = ? AND a.slug = ?';

const KEY_SHAPE = /^ahk_([0-9A-Za-z]{8})_[0-9A-Za-z]{10}$/;

// "YYYY-MM-DD HH:MM:SS.fff" (UTC) as RFC 3339, as ah_db_time_to_rfc3339.
function rfc3339(t) {
  if (!t) return null;
  const ms = (t.slice(20, 23) + '000').slice(0, 3);
  return `${t.slice(0, 10)}T${t.slice(11, 19)}.${ms}Z`;
}

// The DB's DATETIME text of a time, which sorts like the time.
function dbTime(ms) {
  return new Date(ms).toISOString().replace('T', ' ').slice(0, 23);
}

// DECIMAL text as a JSON number (ah_money_json), or null.
function money(d) {
  return d === null || d === undefined ? null : Number(d);
}

function network(stored) {
  if (stored) {
    try {
      const v = JSON.parse(stored);
      if (v && typeof v === 'object' && !Array.isArray(v)) return v;
    } catch (_) { /* the default below */ }
  }
  return { mode: 'open', allow: [] };
}

function deny(reply, why) {
  return reply.code(401).header('WWW-Authenticate', 'Bearer').send({ detail: why });
}

async function authenticate(request, reply) {
  const h = request.headers.authorization;
  if (!h || h.slice(0, 7).toLowerCase() !== 'bearer ') return deny(reply, 'Not authenticated');
  const tok = h.slice(7).trimStart();
  const m = KEY_SHAPE.exec(tok);
  if (!m) return deny(reply, 'Invalid API key');
  const rows = await pool.execute(SQL_KEY, [m[1]]);
  const want = Buffer.alloc(32);
  sodium.crypto_generichash(want, Buffer.from(tok), hashKey);
  const k = rows[0];
  if (rows.length !== 1 || k.key_hash.length !== 32 || !sodium.sodium_memcmp(want, k.key_hash))
    return deny(reply, 'Invalid API key');
  const now = Date.now();
  if (k.expires_at && k.expires_at < dbTime(now)) return deny(reply, 'API key expired');
  if (!k.last_used_at || k.last_used_at < dbTime(now - 60000))
    pool.execute(SQL_TOUCH, [k.id]).catch(() => {}); // best effort, as agenthost's
  if (k.disabled) return reply.code(403).send({ detail: 'User account is disabled' });
  request.user = { id: k.user_id, email: k.email, plan: k.plan };
}

const nullable = (type) => ({ type: [type, 'null'] });
const agentSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' }, name: { type: 'string' }, slug: { type: 'string' },
    description: nullable('string'), source_type: { type: 'string' },
    git_repo_url: nullable('string'), git_branch: nullable('string'),
    timeout_seconds: { type: 'integer' }, min_warm: { type: 'integer' },
    network: { type: 'object', additionalProperties: true },
    webhook_url: nullable('string'), status: { type: 'string' },
    status_message: nullable('string'), sandbox_id: nullable('string'),
    needs_redeploy: { type: 'boolean' }, created_at: nullable('string'),
    updated_at: nullable('string'), deployed_at: nullable('string'),
    max_cost_usd_per_day: nullable('number'), max_cost_usd_per_month: nullable('number'),
  },
};

const app = fastify({ logger: false });
app.decorateRequest('user', null);
app.get('/api/v1/agents/:slug', {
  onRequest: authenticate,
  schema: { response: { 200: agentSchema } },
}, async (request, reply) => {
  const rows = await pool.execute(SQL_AGENT, [request.user.id, request.params.slug]);
  if (rows.length === 0) return reply.code(404).send({ detail: 'Agent not found' });
  const a = rows[0];
  return {
    id: a.id, name: a.name, slug: a.slug, description: a.description,
    source_type: a.source_type, git_repo_url: a.git_repo_url, git_branch: a.git_branch,
    timeout_seconds: a.timeout_seconds, min_warm: a.min_warm, network: network(a.network),
    webhook_url: a.webhook_url, status: a.status, status_message: a.status_message,
    sandbox_id: a.sandbox_id, needs_redeploy: Boolean(a.needs_redeploy),
    created_at: rfc3339(a.created_at), updated_at: rfc3339(a.updated_at),
    deployed_at: rfc3339(a.deployed_at),
    max_cost_usd_per_day: money(a.max_cost_usd_per_day),
    max_cost_usd_per_month: money(a.max_cost_usd_per_month),
  };
});

app.listen({ path: env.PEER_SOCKET, readableAll: true, writableAll: true }).catch((e) => {
  console.error(e);
  process.exit(1);
});
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => app.close().then(() => pool.end()).finally(() => process.exit(0)));
}
