// The npm `memcached` package (text protocol) or `memjs` (binary protocol) driven the way an
// application would, printing a JSON summary on stdout; the same modes and summary as the Go,
// Java and Python programs beside this one (see tests/clients/README.md).
// Run: node client.js --lib memcached|memjs --addr HOST:PORT --mode script|load|probe
'use strict';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
    return acc;
  }, []),
);
const addr = args.addr || '127.0.0.1:11211';
const mode = args.mode || 'script';
const prefix = args.prefix || 'node:';
const nkeys = Number(args.keys || 50);
const seconds = Number(args.seconds || 3);
const maxOps = Number(args.ops || 0); // load: stop after this many operations (0: none)
const lib = args.lib || 'memcached';
const timeoutS = Number(args.timeout || 1); // the library's timeouts

// Each library behind one promise-returning interface.
function memcachedLib() {
  const Memcached = require('memcached');
  // One connection, short timeouts; retries/failures as an application might set them.
  const c = new Memcached(addr, { timeout: timeoutS * 1000, retries: 0, retry: 100, failures: 1000000, reconnect: 100, idle: 0, poolSize: 1 });
  const p = (fn, ...a) => new Promise((resolve, reject) => fn.call(c, ...a, (err, r) => (err ? reject(err) : resolve(r))));
  return {
    name: 'memcached',
    set: (k, v) => p(c.set, k, v, 0),
    get: async (k) => { const v = await p(c.get, k); return v === undefined ? null : String(v); },
    getMulti: async (ks) => { const r = await p(c.getMulti, ks); const o = {}; for (const k of Object.keys(r).sort()) o[k] = String(r[k]); return o; },
    del: (k) => p(c.del, k),
    add: (k, v) => p(c.add, k, v, 0),
    replace: (k, v) => p(c.replace, k, v, 0),
    incr: (k, n) => p(c.incr, k, n),
    decr: (k, n) => p(c.decr, k, n),
    gets: async (k) => { const r = await p(c.gets, k); return r ? [String(r[k]), r.cas] : [null, null]; },
    cas: (k, v, t) => p(c.cas, k, v, t, 0),
    touch: (k, e) => p(c.touch, k, e),
    version: () => p(c.version),
    end: () => c.end(),
  };
}

function memjsLib() {
  const memjs = require('memjs');
  const c = memjs.Client.create(addr, { timeout: timeoutS, conntimeout: timeoutS, retries: 0, keepAlive: false });
  const val = (r) => (r && r.value != null ? r.value.toString() : null);
  return {
    name: 'memjs',
    set: (k, v) => c.set(k, v, { expires: 0 }),
    get: async (k) => val(await c.get(k)),
    getMulti: async (ks) => { const r = await c.getMulti(ks); const o = {}; for (const k of Object.keys(r).sort()) o[k] = val(r[k]); return o; },
    del: (k) => c.delete(k),
    add: (k, v) => c.add(k, v, { expires: 0 }),
    replace: (k, v) => c.replace(k, v, { expires: 0 }),
    incr: async (k, n) => { const r = await c.increment(k, n); return r.success ? r.value : false; },
    decr: async (k, n) => { const r = await c.decrement(k, n); return r.success ? r.value : false; },
    gets: async () => [null, null],
    cas: async () => 'unsupported',
    touch: (k, e) => c.touch(k, e),
    version: () => c.version(),
    end: () => c.close(),
  };
}

function kind(err) {
  const m = String((err && err.message) || err).toLowerCase();
  if (m.includes('timed out') || m.includes('timeout')) return 'timeout';
  if (m.includes('refused')) return 'refused';
  if (m.includes('server_error')) return 'server_error';
  if (m.includes('not available') || m.includes('connection') || m.includes('closed') || m.includes('reset')) return 'conn_closed';
  return 'other';
}

const s = { client: lib, mode, ops: 0, ok: 0, errors: {}, reconnects: null, seconds: 0, throughput: 0, reads: {} };
if (mode === 'script' || mode === 'probe') s.answers = [];

const ERR = Symbol('error');
async function call(what, fn) {
  s.ops++;
  try {
    const r = await fn();
    s.ok++;
    if (mode === 'script') s.answers.push(`${what}: ${JSON.stringify(r === undefined ? null : r)}`);
    return r;
  } catch (err) {
    const k = kind(err);
    s.errors[k] = (s.errors[k] || 0) + 1;
    if (mode === 'script') s.answers.push(`${what}: error ${k}`);
    return ERR;
  }
}

async function script(m) {
  const key = (i) => `${prefix}k${i}`;
  for (let i = 0; i < 20; i++) await call(`set ${key(i)}`, () => m.set(key(i), `v${i}`));
  for (let i = 0; i < 22; i++) {
    const v = await call(`get ${key(i)}`, () => m.get(key(i)));
    if (typeof v === 'string') s.reads[key(i)] = v;
  }
  const ks = [];
  for (let i = 0; i < 25; i += 2) ks.push(key(i));
  await call('getmulti', () => m.getMulti(ks));
  await call('delete k3', () => m.del(key(3)));
  await call('delete k3 again', () => m.del(key(3)));
  await call('get k3 after delete', () => m.get(key(3)));
  await call('add k3', () => m.add(key(3), 'added'));
  await call('add k4 (exists)', () => m.add(key(4), 'x'));
  await call('replace k30 (missing)', () => m.replace(key(30), 'x'));
  await call('set counter', () => m.set(key(100), '10'));
  await call('incr counter 5', () => m.incr(key(100), 5));
  await call('decr counter 20', () => m.decr(key(100), 20));
  await call('incr missing', () => m.incr(key(101), 1));
  const g = await call('gets k5', async () => { const [v, t] = await m.gets(key(5)); return v; });
  if (g !== ERR && lib === 'memcached') {
    const [, token] = await m.gets(key(5));
    await call('cas k5 fresh', () => m.cas(key(5), 'cas1', token));
    await call('cas k5 stale', () => m.cas(key(5), 'cas2', token));
  }
  const v = await call('get k5', () => m.get(key(5)));
  if (typeof v === 'string') s.reads[key(5)] = v;
  await call('touch k6', () => m.touch(key(6), 100));
  await call('touch missing', () => m.touch(key(31), 100));
  await call('set 2 MiB', () => m.set(key(40), 'x'.repeat(2 << 20)));
}

async function load(m) {
  s.acked = {};
  s.attempted = {};
  s.acked_at = {};
  s.stale_reads = 0; // reads older than the key's last acknowledged write (misses included)
  const buckets = new Map();
  const deadline = Date.now() + seconds * 1000;
  let seq = 0;
  while (Date.now() < deadline && (maxOps === 0 || seq < maxOps)) {
    const i = seq % nkeys;
    const k = `${prefix}k${i}`;
    const op = (seq + Math.floor(seq / nkeys)) % 10; // shifts each round: every key sees every op
    let r;
    let v = null;
    if (op <= 3) {
      v = `${k}#${seq}`;
      (s.attempted[k] = s.attempted[k] || []).push(v);
      r = await call('', () => m.set(k, v));
    } else if (op === 9) {
      (s.attempted[k] = s.attempted[k] || []).push('');
      r = await call('', () => m.del(k));
    } else if (op === 5) {
      r = await call('', () => m.getMulti([k, `${prefix}k${(i + 1) % nkeys}`, `${prefix}k${(i + 2) % nkeys}`]));
    } else {
      r = await call('', () => m.get(k));
      if (typeof r === 'string') s.reads[k] = r;
      if (r !== ERR && k in s.acked && !s.attempted[k].slice(s.acked[k]).includes(r || '')) s.stale_reads++;
    }
    const ok = r !== ERR && !(op <= 3 && r !== true);
    if (ok && (op <= 3 || op === 9)) {
      s.acked[k] = s.attempted[k].length - 1; // its index in attempted
      s.acked_at[k] = Date.now();
    }
    seq++;
    const b = Math.floor(Date.now() / 100) * 100;
    if (!buckets.has(b)) buckets.set(b, [b, 0, 0]);
    buckets.get(b)[ok ? 1 : 2]++;
    if (!ok) await new Promise((res) => setTimeout(res, 1)); // no spinning on a failing call
  }
  s.timeline = [...buckets.values()].sort((a, b) => a[0] - b[0]);
}

async function probe(m) {
  for (let i = 0; i < 2; i++) {
    s.ops++;
    try {
      const r = await m.set(`${prefix}probe`, 'v');
      s.answers.push(`returned ${JSON.stringify(r === undefined ? null : r)}`);
    } catch (err) {
      s.answers.push(`error: ${String((err && err.message) || err)}`);
    }
  }
}

async function main() {
  const m = lib === 'memjs' ? memjsLib() : memcachedLib();
  const start = Date.now();
  if (mode === 'script') await script(m);
  else if (mode === 'load') await load(m);
  else if (mode === 'probe') await probe(m);
  else if (mode === 'version') { s.answers = [JSON.stringify(await m.version())]; }
  s.seconds = (Date.now() - start) / 1000;
  s.throughput = s.seconds > 0 ? s.ops / s.seconds : 0;
  done = true;
  m.end();
  // Exit only once the summary is flushed: a pipe takes 64 KiB at a time.
  process.stdout.write(`${JSON.stringify(s)}\n`, () => process.exit(0));
}

// A library that drops a call (its promise never settles) lets the event loop run dry: say so
// in the summary rather than exit silently.
let done = false;
process.on('beforeExit', () => {
  if (done) return;
  done = true;
  (s.answers = s.answers || []).push('never settled: the library dropped the call');
  s.errors.dropped = (s.errors.dropped || 0) + 1;
  process.stdout.write(`${JSON.stringify(s)}\n`, () => process.exit(0));
});

main().catch((err) => { process.stderr.write(`${err && err.stack}\n`); process.exit(1); });
