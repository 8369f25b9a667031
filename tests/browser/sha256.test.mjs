// The dashboard's own SHA-256 (nginx/www/src/sha256.js, used to confirm a
// presigned upload where the browser has no crypto.subtle) against node's, on
// the lengths where padding and slicing change.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';

const src = readFileSync(new URL('../../nginx/www/src/sha256.js', import.meta.url), 'utf8');
const { sha256Slices } = await import(`data:text/javascript,${encodeURIComponent(src)}`);

test('sha256Slices matches node on every padding and slice boundary', async () => {
  const SLICE = 4 << 20;
  for (const n of [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, SLICE - 1, SLICE, SLICE + 1, 2 * SLICE + 57]) {
    const b = randomBytes(n);
    assert.equal(await sha256Slices(new Blob([b])), createHash('sha256').update(b).digest('hex'), `${n} bytes`);
  }
  assert.equal(await sha256Slices(new Blob(['abc'])), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
});
