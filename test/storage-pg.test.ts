// The storage capability with a postgres:// database (the keys several daemons share), against the
// real test cluster (BERM_TEST_PG_URL, started by .ci/run through scripts/pg-cluster.sh): a key
// set from one thread is read from another (each thread has its own bridge worker and pool, as two
// daemons would), the quota holds, and an unreachable database refuses the call with the reason.
import t from 'tap';
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import pg from 'pg';
import { STORAGE_PG_TIMEOUT_MS, storageCapability } from '../src/capabilities/storage/index.js';
import { CALL_DEADLINE } from '../src/capabilities/types.js';
import { shutdownBridge } from '../src/sync/bridge.js';
import { ctx, F, okText } from './helpers/cap-util.js';
import { freshDatabase } from './helpers/pg.js';

t.teardown(() => shutdownBridge());
const call = storageCapability.calls;

// Another thread running the capability: its own synchronous bridge and connection pool.
const OTHER = `
import { workerData, parentPort } from 'node:worker_threads';
const { storageCapability } = await import(workerData.module);
const enc = (s) => new TextEncoder().encode(s);
const r = storageCapability.calls[workerData.call](workerData.fields.map(enc), { harness: workerData.harness, grant: { database: workerData.url }, depth: 0 });
parentPort.postMessage('fields' in r ? { fields: r.fields.map((f) => new TextDecoder().decode(f)) } : r);
`;
async function inOtherThread(
  url: string,
  callName: string,
  fields: string[],
  harness = 'h',
): Promise<unknown> {
  const w = new Worker(new URL(`data:text/javascript,${encodeURIComponent(OTHER)}`), {
    workerData: {
      module: new URL('../src/capabilities/storage/index.ts', import.meta.url).href,
      url,
      call: callName,
      fields,
      harness,
    },
    execArgv: process.execArgv.filter((a) => !a.startsWith('--stack-size')),
  });
  const [msg] = (await once(w, 'message')) as [unknown];
  await w.terminate();
  return msg;
}

t.test('keys written on one thread are read on another; per harness; delete', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const c = ctx({ database: url }, { harness: 'h' });
  t.same(call['berm.set']!(F('k', 'v1'), c), { fields: [] });
  t.same(await inOtherThread(url, 'berm.get', ['k']), { fields: ['v1'] });
  t.same(
    await inOtherThread(url, 'berm.get', ['k'], 'other'),
    { fields: [] },
    'another harness sees nothing',
  );
  t.same(await inOtherThread(url, 'berm.set', ['k', 'v2']), { fields: [] });
  t.equal(okText(call['berm.get']!(F('k'), c)), 'v2');
  t.same(call['berm.delete']!(F('k'), c), { fields: [] });
  t.same(call['berm.get']!(F('k'), c), { fields: [] });
});

t.test('the quota is checked with the write', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const q = ctx({ database: url }, { harness: 'q', limits: { storageQuota: 10 } });
  t.same(call['berm.set']!(F('abc', 'defg'), q), { fields: [] });
  t.same(call['berm.set']!(F('xyz', 'uvw'), q), {
    refused: 'berm.set: q would store 13 bytes; the quota is 10',
  });
  t.same(call['berm.set']!(F('abc', 'defgabc'), q), { fields: [] }, 'replacing a value counts it once');
});

t.test('an unreachable database refuses the call with the reason', async (t) => {
  const down = ctx({ database: 'postgres://nobody@127.0.0.1:1/none' }, { harness: 'h' });
  t.match(call['berm.get']!(F('k'), down), { refused: /^berm\.get: PostgreSQL: .*ECONNREFUSED/ });
  t.match(call['berm.set']!(F('k', 'v'), down), { refused: /^berm\.set: PostgreSQL: .*ECONNREFUSED/ });
});

t.test("a call waiting on PostgreSQL ends at the call's deadline, not the store's timeout", async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const h = ctx({ database: url }, { harness: 'h' });
  t.same(call['berm.set']!(F('k', 'v1'), h), { fields: [] }, 'the bridge and the table are ready');
  // another session holds the harness's quota lock: a write waits for it as long as it is held
  const holder = new pg.Client({ connectionString: url });
  await holder.connect();
  t.teardown(() => holder.end());
  await holder.query('BEGIN');
  await holder.query('SELECT pg_advisory_xact_lock(hashtext($1))', ['berm_kv:h']);
  const t0 = Date.now();
  const r = call['berm.set']!(
    F('k', 'v2'),
    ctx({ database: url }, { harness: 'h', limits: { [CALL_DEADLINE]: t0 + 1000 } }),
  );
  const waited = Date.now() - t0;
  t.match(r, {
    refused: /^berm\.set: the call's deadline passed while waiting for PostgreSQL \(waited \d+ ms/,
  });
  // the store's own timeout is 10 s; the deadline cut it (generous bound for a loaded machine)
  t.ok(waited < STORAGE_PG_TIMEOUT_MS - 1000, `returned after ${waited} ms`);
  await holder.query('ROLLBACK');
  t.same(okText(call['berm.get']!(F('k'), h)), 'v1', 'the write cut off was rolled back');
  t.same(call['berm.set']!(F('k', 'v3'), h), { fields: [] }, 'the next call goes through');
  t.equal(okText(call['berm.get']!(F('k'), h)), 'v3');
});
