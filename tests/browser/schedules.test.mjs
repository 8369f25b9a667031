// The agent page's schedules (issue 32) in a real headless Chromium against
// the real stack: create one and see its next run times, pause and resume it,
// delete it; a bad expression is refused in place, naming the field.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ORIGIN, launch, newUser, call, signedIn, shot } from './lib.mjs';

let browser;
const bag = { errors: [], dialogs: [] };
const T = { timeout: 120000 };

before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test('a schedule is created with its next runs, paused, resumed and deleted', T, async () => {
  const { key } = newUser();
  assert.equal((await call(key, 'POST', '/agents', { name: 'scheduled', source_type: 'local' })).status, 201);
  const page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/agents/scheduled`);
  const form = page.locator('#schedule-form');
  await form.getByLabel('Cron').fill('0 0 31 2 *');
  await form.getByLabel('Time zone').fill('Europe/Berlin');
  await form.getByLabel('Input for each run').fill('morning report');
  await form.getByRole('button', { name: 'Create schedule' }).click();
  await page.locator('#schedules', { hasText: 'cron' }).waitFor();  // the 422 names the field
  assert.equal((await call(key, 'GET', '/agents/scheduled/schedules')).data.length, 0);
  await form.getByLabel('Cron').fill('0 9 * * 1-5');
  await form.getByRole('button', { name: 'Create schedule' }).click();
  await page.locator('#schedules code', { hasText: '0 9 * * 1-5' }).waitFor();
  await page.locator('#schedules', { hasText: 'Next runs:' }).waitFor();
  await shot(page, 'schedules');
  const [s] = (await call(key, 'GET', '/agents/scheduled/schedules')).data;
  assert.equal(s.timezone, 'Europe/Berlin');
  assert.equal(s.prompt, 'morning report');
  await page.locator('#schedules').getByRole('button', { name: 'Pause' }).click();
  await page.locator('#schedules').getByRole('button', { name: 'Resume' }).waitFor();
  assert.equal((await call(key, 'GET', `/agents/scheduled/schedules/${s.id}`)).data.paused, true);
  await page.locator('#schedules').getByRole('button', { name: 'Resume' }).click();
  await page.locator('#schedules').getByRole('button', { name: 'Pause' }).waitFor();
  assert.equal((await call(key, 'GET', `/agents/scheduled/schedules/${s.id}`)).data.paused, false);
  await page.locator('#schedules').getByRole('button', { name: 'Delete' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
  await page.locator('#schedules td.empty').waitFor();
  assert.equal((await call(key, 'GET', '/agents/scheduled/schedules')).data.length, 0);
  assert.deepEqual(bag.errors, []);
  await page.context().close();
});
