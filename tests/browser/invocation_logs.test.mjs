// The invocation detail view (issue 29) in a real headless Chromium against
// the real stack: a failed call's result links to it, it shows the record and
// the agent's stderr with a secret redacted, the history links to it, the
// agent's markup in its stderr stays text, and another user's invocation
// shows the API's 404; the record's facts include where its time went.
// Run like dashboard.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ORIGIN, launch, newUser, call, watch, signedIn, shot, tarball } from './lib.mjs';

let browser;
const bag = { errors: [], dialogs: [] };
const T = { timeout: 180000 };

before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

// Writes its prompt and its secret to stderr, then fails.
const JS = "const c=[];process.stdin.on('data',d=>c.push(d));process.stdin.on('end',()=>{"
  + "process.stderr.write('<img src=x onerror=alert(1)> '+Buffer.concat(c)+' key='+process.env.MY_KEY+'\\n',"
  + "()=>{process.stdout.write('partial');process.exitCode=4;});});\n";

async function deployed(key, name) {
  assert.equal((await call(key, 'POST', '/agents', { name, source_type: 'local' })).status, 201);
  const code = tarball({ 'agent.json': JSON.stringify({ name, version: '1.0.0', entrypoint: 'index.js', runtime: 'node' }), 'index.js': JS });
  const put = await fetch(`${ORIGIN}/api/v1/agents/${name}/code`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/gzip' }, body: code });
  assert.equal(put.status, 200);
  assert.equal((await call(key, 'POST', `/agents/${name}/deploy`)).status, 202);
}

test('a failed call links to its detail view: the record and its stderr, secret redacted', T, async () => {
  const { key } = newUser();
  await deployed(key, 'logger');
  const secret = `sv-${randomBytes(16).toString('hex')}`;
  assert.equal((await call(key, 'POST', '/agents/logger/secrets', { key: 'MY_KEY', value: secret })).status, 201);
  const page = await signedIn(browser, bag, key);
  const dialogs = bag.dialogs.length;
  await page.goto(`${ORIGIN}/#/agents/logger`);
  await page.locator('#status .badge', { hasText: /^(active|error)$/ }).waitFor({ timeout: 100000 });
  await page.getByLabel('Prompt').fill('hello');
  await page.getByRole('button', { name: 'Invoke' }).click();
  const alert = page.locator('#invoke-result [role=alert]');
  await alert.waitFor({ timeout: 60000 });
  assert.match(await alert.textContent(), /agent exited with status 4; its stderr is in the invocation's logs/);
  await page.getByRole('link', { name: 'Details and logs' }).click();
  await page.getByRole('heading', { name: /^Invocation inv_/, level: 1 }).waitFor();
  const logs = page.locator('#invocation-logs');
  await logs.waitFor();
  assert.equal(await logs.textContent(), '<img src=x onerror=alert(1)> hello key=[redacted]\n');
  assert.ok(!(await page.content()).includes(secret), 'the secret is nowhere on the page');
  assert.equal(await page.locator('main img').count(), 0);
  await page.locator('#invocation .badge', { hasText: 'failed' }).waitFor();
  assert.equal(await page.locator('#invocation-prompt').textContent(), 'hello');
  assert.equal(await page.locator('#invocation-response').textContent(), 'partial');
  assert.match(await page.locator('#invocation-error').textContent(), /status 4/);
  // Where its time went (issue 31), phase by phase.
  assert.match(await page.locator('#invocation-timing').textContent(),
    /^queue [0-9.]+ · take [0-9.]+ · start [0-9.]+ · run [0-9.]+ · collect [0-9.]+ · record [0-9.]+ ms$/);
  await shot(page, 'invocation-detail');
  // Back on the agent, the history's row links to the same view.
  await page.getByRole('link', { name: '← logger' }).click();
  await page.locator('#invocations a.inv-link').first().click();
  await page.locator('#invocation-logs').waitFor();
  assert.equal(bag.dialogs.length, dialogs, `a dialog fired: ${bag.dialogs}`);
  const url = page.url();
  await page.context().close();

  // Another user opening that view gets the API's 404, nothing of the record.
  const other = newUser();
  const page2 = await signedIn(browser, bag, other.key);
  await page2.goto(url);
  const err = page2.locator('main [role=alert]');
  await err.waitFor();
  assert.match(await err.textContent(), /Agent not found/);
  assert.equal(await page2.locator('#invocation-logs').count(), 0);
  await page2.context().close();
  assert.equal((await call(key, 'DELETE', '/agents/logger')).status, 204);
});
