// Shared set-up of the browser tests: the stack's URLs, users made with
// agenthost-admin, a headless Chromium (Debian's, driven by playwright-core
// from var/npm-tools), agent tarballs, and the console/dialog watchers.
import { createRequire } from 'node:module';
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import zlib from 'node:zlib';

export const ROOT = process.env.AGENTHOST_ROOT || path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
export const API = process.env.AGENTHOST_URL || 'http://127.0.0.1:18080/api/v1';
export const ORIGIN = new URL(API).origin;
// A bucket endpoint the stack's storage_allow_hosts lets through (scripts/lib.sh:
// loopback ports PORT+340 to PORT+379); nothing listens there, and nothing here connects.
export const STORAGE_ENDPOINT = `http://127.0.0.1:${Number(new URL(API).port) + 340}`;
const VAR = process.env.AGENTHOST_VAR || path.join(ROOT, 'var', 'test');
const BUILD = process.env.AGENTHOST_BUILD || path.join(ROOT, 'build');
const CONFIG = process.env.AGENTHOST_CONFIG || path.join(VAR, 'agenthost.conf');
export const SHOTS = process.env.AGENTHOST_SHOTS || path.join(VAR, 'browser-shots');
const NPM = process.env.AGENTHOST_NPM_TOOLS || path.join(ROOT, 'var', 'npm-tools');
const CHROMIUM = process.env.AGENTHOST_CHROMIUM || '/usr/bin/chromium';

const { chromium } = createRequire(path.join(NPM, 'package.json'))('playwright-core');

export function launch() {
  mkdirSync(SHOTS, { recursive: true });
  // --no-sandbox: the tests run as root, where Chromium's own sandbox refuses to start.
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}

// A fresh user (its own rate-limit budget) and its first API key.
export function newUser() {
  const email = `b${randomBytes(6).toString('hex')}@browser.test`;
  const out = execFileSync(path.join(BUILD, 'lib', 'admin', 'agenthost-admin'), ['user', 'create', email, '--plan', 'pro'],
    { env: { ...process.env, AGENTHOST_CONFIG: CONFIG }, encoding: 'utf8' });
  return { email, key: out.trim().split('\n').pop() };
}

export async function call(key, method, p, body) {
  const headers = { Authorization: `Bearer ${key}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(API + p, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, data: text ? JSON.parse(text) : null };
}

// Everything the page logs as an error, or throws, and every dialog it opens.
// "Failed to load resource" lines are the browser's network log of a non-2xx
// response or of a lost network that a test provoked on purpose (a wrong key,
// a rate limit, offline), not the app's.
export function watch(page, bag) {
  page.on('console', (m) => {
    const expected = /^Failed to load resource: (the server responded with a status of|net::ERR_INTERNET_DISCONNECTED)/;
    if (m.type() === 'error' && !expected.test(m.text())) bag.errors.push(m.text());
  });
  page.on('pageerror', (e) => bag.errors.push(`uncaught: ${e.message}`));
  page.on('dialog', (d) => { bag.dialogs.push(d.message()); d.dismiss().catch(() => {}); });
}

// A page already signed in with key (as the sign-in form leaves the tab).
export async function signedIn(browser, bag, key, viewport) {
  const ctx = await browser.newContext({ viewport: viewport || { width: 1280, height: 900 } });
  await ctx.addInitScript((k) => { if (!sessionStorage.getItem('agenthost.init')) { sessionStorage.setItem('agenthost.key', k); sessionStorage.setItem('agenthost.init', '1'); } }, key);
  const page = await ctx.newPage();
  watch(page, bag);
  return page;
}

export const shot = (page, name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

// A .tar.gz (ustar) of {name: text}, as PUT /agents/{slug}/code takes.
export function tarball(files) {
  const blocks = [];
  for (const [name, text] of Object.entries(files)) {
    const data = Buffer.from(text);
    const hdr = Buffer.alloc(512);
    const put = (s, off, len) => hdr.write(s, off, len, 'ascii');
    put(name, 0, 100);
    put('0000644\0', 100, 8);
    put('0000000\0', 108, 8);
    put('0000000\0', 116, 8);
    put(`${data.length.toString(8).padStart(11, '0')}\0`, 124, 12);
    put(`${Math.floor(Date.now() / 1000).toString(8).padStart(11, '0')}\0`, 136, 12);
    put('        ', 148, 8);
    put('0', 156, 1);
    put('ustar\0', 257, 6);
    put('00', 263, 2);
    let sum = 0;
    for (const b of hdr) sum += b;
    put(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
    blocks.push(hdr, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return zlib.gzipSync(Buffer.concat(blocks));
}

export const ECHO_PROJECT = () => tarball({
  'agent.json': JSON.stringify({ name: 'echo', version: '1.0.0', entrypoint: 'index.js', runtime: 'node' }),
  'index.js': "const c=[];process.stdin.on('data',d=>c.push(d));process.stdin.on('end',()=>process.stdout.write('echo: '+Buffer.concat(c)));\n",
});

// The stack's runner restarted with AGENTHOST_<KEY> overrides (none: as the
// stack started it), from the command line scripts/lib.sh kept in
// run/runner.cmd, as tests/integration's runner_with does; resolves once it
// answers a ping on its socket. A test that changes the runner puts it back.
export async function restartRunner(env = {}) {
  const run = path.join(VAR, 'run');
  const pidFile = path.join(run, 'runner.pid');
  const old = Number(readFileSync(pidFile, 'utf8'));
  if (alive(old)) {
    process.kill(old, 'SIGTERM');
    for (let i = 0; i < 300 && alive(old); i++) await sleep(100);
    if (alive(old)) throw new Error('the runner ignored SIGTERM for 30 s');
  }
  const extra = Object.entries(env).map(([k, v]) => `AGENTHOST_${k.toUpperCase()}=${v}`).join(' ');
  const cmd = readFileSync(path.join(run, 'runner.cmd'), 'utf8').trim();
  const log = openSync(path.join(VAR, 'log', 'runner.log'), 'a');
  const child = spawn('bash', ['-c', `exec env ${extra} ${cmd}`], { detached: true, stdio: ['ignore', log, log] });
  closeSync(log);
  child.unref();
  writeFileSync(pidFile, `${child.pid}\n`);
  for (let i = 0; i < 300; i++) {
    if (!alive(child.pid)) throw new Error('the runner exited at start (see its log)');
    if (await runnerPing(path.join(run, 'runner.sock'))) return;
    await sleep(100);
  }
  throw new Error('the runner did not come up in 30 s');
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function alive(pid) {
  try { process.kill(pid, 0); return true; } catch { return false; }
}
function runnerPing(sock) {
  return new Promise((resolve) => {
    const c = net.createConnection(sock, () => c.write('{"op":"ping"}\n'));
    let got = '';
    c.setTimeout(5000, () => { c.destroy(); resolve(false); });
    c.on('data', (d) => { got += d; if (got.includes('\n')) { c.destroy(); resolve(/"ok":\s*true/.test(got)); } });
    c.on('error', () => resolve(false));
    c.on('close', () => resolve(/"ok":\s*true/.test(got)));
  });
}
