// The Usage page's spend limits (issue 32) in a real headless Chromium against
// the real stack: each budget of the user, its agents and its keys with what
// it has spent and left; none shown when none is set. Run like dashboard.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ORIGIN, launch, newUser, call, signedIn, shot } from './lib.mjs';

let browser;
const bag = { errors: [], dialogs: [] };

before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test('the usage page lists each spend limit with what remains', { timeout: 60000 }, async () => {
  const { key } = newUser();
  let page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/usage`);
  await page.locator('#usage-chart').waitFor();
  assert.equal(await page.locator('#usage-budgets').count(), 0);
  await page.context().close();

  assert.equal((await call(key, 'PATCH', '/users/me', { max_cost_usd_per_month: 100 })).status, 200);
  assert.equal((await call(key, 'POST', '/agents', { name: 'capped', source_type: 'local', max_cost_usd_per_day: '2.5' })).status, 201);
  page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/usage`);
  await page.locator('#usage-budgets').waitFor();
  const rows = await page.locator('#usage-budgets tbody tr').allTextContents();
  assert.equal(rows.length, 2, rows.join(' | '));
  assert.match(rows[0], /^You.*Month\$100\.00\$0\.00\$100\.00/);
  assert.match(rows[1], /^AgentcappedDay\$2\.50\$0\.00\$2\.50/);
  await shot(page, 'usage-budgets');
  await page.context().close();
  assert.deepEqual(bag.errors, []);
});
