// SHA-256 of a File, read in slices: the presigned upload's confirm needs the
// hash, and crypto.subtle exists only in secure contexts (a dashboard opened
// as http://HOST/ on a LAN is not one) and wants the whole file in memory.

const K256 = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

// Compresses every whole 64-byte block of bytes[0..len) into state.
function blocks(state, w, bytes, len) {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, len);
  for (let off = 0; off + 64 <= len; off += 64) {
    for (let i = 0; i < 16; i++) w[i] = dv.getInt32(off + i * 4);
    for (let i = 16; i < 64; i++) {
      const a = w[i - 15], b = w[i - 2];
      const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
      const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
    }
    let a = state[0], b = state[1], c = state[2], d = state[3], e = state[4], f = state[5], g = state[6], h = state[7];
    for (let i = 0; i < 64; i++) {
      const t1 = (h + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7)))
        + ((e & f) ^ (~e & g)) + K256[i] + w[i]) | 0;
      const t2 = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10)))
        + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    state[0] += a; state[1] += b; state[2] += c; state[3] += d;
    state[4] += e; state[5] += f; state[6] += g; state[7] += h;
  }
}

export async function sha256File(file, onProgress) {
  // The browser's own, where it has one and the file fits in memory comfortably.
  if (globalThis.crypto && crypto.subtle && file.size <= (256 << 20)) {
    const d = await crypto.subtle.digest('SHA-256', await file.arrayBuffer());
    return [...new Uint8Array(d)].map((x) => x.toString(16).padStart(2, '0')).join('');
  }
  return sha256Slices(file, onProgress);
}

export async function sha256Slices(file, onProgress) {
  const state = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const w = new Int32Array(64);
  const SLICE = 4 << 20;
  let carry = new Uint8Array(0);
  for (let pos = 0; pos < file.size; pos += SLICE) {
    const chunk = new Uint8Array(await file.slice(pos, pos + SLICE).arrayBuffer());
    const buf = new Uint8Array(carry.length + chunk.length);
    buf.set(carry);
    buf.set(chunk, carry.length);
    const whole = buf.length - (buf.length % 64);
    blocks(state, w, buf, whole);
    carry = buf.slice(whole);
    if (onProgress) onProgress(Math.min(file.size, pos + SLICE) / file.size);
  }
  // Padding: 0x80, zeros, then the length in bits as a 64-bit big-endian number.
  const padLen = carry.length < 56 ? 64 : 128;
  const last = new Uint8Array(padLen);
  last.set(carry);
  last[carry.length] = 0x80;
  const dv = new DataView(last.buffer);
  dv.setUint32(padLen - 8, Math.floor(file.size / 0x20000000));
  dv.setUint32(padLen - 4, (file.size * 8) >>> 0);
  blocks(state, w, last, padLen);
  return [...state].map((x) => (x >>> 0).toString(16).padStart(8, '0')).join('');
}
