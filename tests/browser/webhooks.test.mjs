// Webhooks in the dashboard (issue 28) in a real headless Chromium against
// the real stack: a signing secret made on the API keys page is shown once,
// an agent's webhook URL is set in its settings, and its deliveries (here to
// a port on the test stack's webhook_allow_hosts where nothing listens, so
// they stay pending with the connection error) are listed on its page.
// Run like dashboard.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { API, ORIGIN, launch, newUser, call, signedIn, shot, ECHO_PROJECT } from './lib.mjs';

let browser;
const bag = { errors: [], dialogs: [] };
const T = { timeout: 180000 };
const NOBODY = `http://127.0.0.1:${Number(new URL(API).port) + 399}/hook`;

before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test("a webhook secret is shown once; an agent's webhook URL is set in its page, which lists its deliveries", T, async () => {
  const { key } = newUser();
  const page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/keys`);
  await page.getByRole('button', { name: 'New webhook secret' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Replace' }).click();
  const secret = await page.locator('#new-webhook-secret-value').inputValue();
  assert.match(secret, /^whsec_[A-Za-z0-9_-]{43}$/);

  assert.equal((await call(key, 'POST', '/agents', { name: 'hooked', source_type: 'local' })).status, 201);
  const put = await fetch(`${API}/agents/hooked/code`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/gzip' }, body: ECHO_PROJECT() });
  assert.equal(put.status, 200);
  assert.equal((await call(key, 'POST', '/agents/hooked/deploy')).status, 202);
  await page.goto(`${ORIGIN}/#/agents/hooked`);
  await page.locator('#webhooks', { hasText: 'No deliveries yet' }).waitFor();
  const edit = page.locator('#edit');
  await edit.getByLabel('Webhook URL').fill(NOBODY);
  await edit.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('#notice', { hasText: 'Saved.' }).waitFor();
  assert.equal((await call(key, 'GET', '/agents/hooked')).data.webhook_url, NOBODY);
  await page.locator('#status .badge', { hasText: /^active$/ }).waitFor({ timeout: 100000 });
  const inv = await call(key, 'POST', '/agents/hooked/invoke', { prompt: 'hi' });
  assert.equal(inv.status, 200);
  const row = page.locator('#webhooks tr', { hasText: inv.data.invocation_id });
  for (let i = 0; i < 50 && !await row.count(); i++) {
    await page.locator('#webhooks').getByRole('button', { name: 'Refresh' }).click();
    await page.waitForTimeout(300);
  }
  await row.waitFor();
  await shot(page, 'webhooks');
  await page.context().close();
});

test('no console errors, uncaught exceptions or dialogs in any page', () => {
  assert.deepEqual(bag.errors, []);
  assert.deepEqual(bag.dialogs, []);
});
