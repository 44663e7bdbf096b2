// Fuzzing the protocol door (crabtalk.protocol.call): random bytes, mutated valid messages and
// hostile-but-valid ClientMessages (every member, fields filled from the schema with other agents'
// ULIDs, foreign sessions, wildcards, long and odd strings, nested berm messages, unknown fields)
// go through the door function against the agent-daemon double over a real socket, and a few
// hundred through a real guest. Each case must be answered or refused cleanly (never a throw, a
// trap or a hang), an answer must decode as a ServerMessage without the daemon's secret, and
// nothing the daemon receives may break the scope (a refused or out-of-scope message never
// reaches it). The seed is printed; set BERM_FUZZ_SEED to replay one run.
import * as fs from 'node:fs';
import * as path from 'node:path';
import t from 'tap';
import type protobuf from 'protobufjs';
import { Engine } from '../src/engine/engine.js';
import { Harness } from '../src/harness/harness.js';
import { linkerEntries } from '../src/config/declarations.js';
import {
  clientType,
  GROUPS,
  GROUP_OF,
  bridgeTransport,
  callDoor,
  configureProtocol,
  decodeServer,
  encode,
  type DoorScope,
  type Plain,
} from '../src/protocol/index.js';
import { DOUBLE_AGENT_IDS, DOUBLE_SECRET } from './helpers/agent-daemon-double.js';
import { shutdownBridge } from '../src/sync/bridge.js';
import { startDoubleThread } from './helpers/double-thread.js';
import { TEST_CACHE } from './helpers/fixtures.js';

const SEED = Number(process.env.BERM_FUZZ_SEED ?? Date.now() % 2 ** 31);
t.comment(`seed ${SEED} (BERM_FUZZ_SEED=${SEED} replays it)`);

// xorshift32: small, seedable, good enough to spread cases
let state = SEED || 1;
function rnd(): number {
  state ^= state << 13;
  state ^= state >>> 17;
  state ^= state << 5;
  return (state >>> 0) / 2 ** 32;
}
const int = (n: number) => Math.floor(rnd() * n);
const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;

const dbl = await startDoubleThread();
t.teardown(async () => {
  shutdownBridge();
  await dbl.close();
});
const transport = bridgeTransport(dbl.endpoint, 5_000);
const ASSISTANT = DOUBLE_AGENT_IDS.assistant;
const AUTH = { agent: ASSISTANT, session: 'tg:4412:main', sender: 'telegram:4412' };
// every group but events (its local bus is the queue's) and schedule (the due-set's): their
// operations are then refused for want of a backend, which is one of the outcomes under test
const SCOPE: DoorScope = { harness: 'fz', groups: new Set(Object.keys(GROUPS)), authority: AUTH };

const HOSTILE_STRINGS = [
  '',
  ASSISTANT,
  DOUBLE_AGENT_IDS.researcher,
  '01ARZ3NDEKTSV4RRFFQ69G5FAV',
  '*',
  'tg:4412:main',
  'cli:alice:1',
  'harness:fz',
  'harness:other',
  'telegram:4412',
  'admin',
  'summarize',
  'code-review',
  'on_wake',
  'sessions/researcher/cli-alice-1.jsonl',
  '../../etc/passwd',
  '\u0000\u0001\u0002',
  '\u{1F980}'.repeat(50),
  'x'.repeat(70_000),
];

function randomString(): string {
  if (rnd() < 0.7) return pick(HOSTILE_STRINGS);
  const n = int(40);
  let s = '';
  for (let i = 0; i < n; i++) s += String.fromCharCode(int(0x3000));
  return s;
}

/** A value for one field of the schema, recursively for messages (depth-bounded). */
function randomValue(f: protobuf.Field, depth: number): unknown {
  const one = (): unknown => {
    if (f.resolvedType && 'fields' in f.resolvedType) {
      return depth > 3 ? {} : randomMessage(f.resolvedType as protobuf.Type, depth + 1);
    }
    if (f.resolvedType) return pick(Object.keys((f.resolvedType as protobuf.Enum).values));
    switch (f.type) {
      case 'string':
        return randomString();
      case 'bool':
        return rnd() < 0.5;
      case 'bytes':
        return Uint8Array.from({ length: int(32) }, () => int(256));
      case 'double':
        return pick([0, -1, 1e308, Number.NaN, 0.5]);
      case 'uint64':
        return pick(['0', '1', '18446744073709551615', '9007199254740993', String(int(1e6))]);
      default:
        return pick([0, 1, 4294967295, int(1000)]);
    }
  };
  if (f.map) return { [randomString().slice(0, 10)]: randomString().slice(0, 10) };
  if (f.repeated) return Array.from({ length: int(4) }, one);
  return one();
}

function randomMessage(type: protobuf.Type, depth = 0): Plain {
  const out: Plain = {};
  const oneof = type.oneofsArray.find((o) => !o.name.startsWith('_'));
  if (oneof && rnd() < 0.95) {
    const f = pick(oneof.fieldsArray);
    out[f.name] = randomValue(f, depth);
  }
  for (const f of type.fieldsArray) {
    if (f.partOf && !f.partOf.name.startsWith('_')) continue;
    if (rnd() < 0.6) out[f.name] = randomValue(f, depth);
  }
  return out;
}

/** Unknown fields, appended: a field number the schema does not use, varint or bytes. */
function withUnknown(bytes: Uint8Array): Uint8Array {
  const extra = rnd() < 0.5 ? [0xa8, 0x3e, 0x2a] /* field 1000+? varint */ : [0xfa, 0x7f, 3, 1, 2, 3];
  return Uint8Array.from([...bytes, ...extra]);
}

function mutate(bytes: Uint8Array): Uint8Array {
  const b = Uint8Array.from(bytes);
  switch (int(4)) {
    case 0:
      if (b.length) b[int(b.length)] ^= 1 << int(8);
      return b;
    case 1:
      return b.subarray(0, int(b.length + 1));
    case 2:
      return Uint8Array.from([...b, ...Array.from({ length: int(8) }, () => int(256))]);
    default:
      return withUnknown(b);
  }
}

function hostile(): Uint8Array {
  const r = rnd();
  if (r < 0.15) return Uint8Array.from({ length: int(64) }, () => int(256));
  let bytes: Uint8Array;
  try {
    bytes = encode(clientType(), randomMessage(clientType()));
  } catch {
    bytes = Uint8Array.from({ length: int(16) }, () => int(256));
  }
  if (r < 0.4) return mutate(bytes);
  if (r < 0.5) return withUnknown(bytes);
  return bytes;
}

const secret = Buffer.from(DOUBLE_SECRET);

t.test('20,000 cases through the door function', async (t) => {
  const N = 20_000;
  const counts = { ok: 0, refused: 0, error: 0 };
  const byOp = new Map<string, number>();
  let bad = 0;
  const t0 = Date.now();
  for (let i = 0; i < N; i++) {
    const req = hostile();
    let reply;
    try {
      reply = callDoor(req, SCOPE, { transport });
    } catch (e) {
      bad++;
      t.fail(`case ${i} threw: ${(e as Error).message}`);
      continue;
    }
    if ('fields' in reply) {
      counts.ok++;
      const bytes = reply.fields[0]!;
      if (reply.fields.length !== 1 || Buffer.from(bytes).includes(secret)) {
        bad++;
        t.fail(`case ${i}: reply of ${reply.fields.length} fields or with the secret`);
      }
      try {
        const m = decodeServer(bytes);
        byOp.set(m.msg ?? '?', (byOp.get(m.msg ?? '?') ?? 0) + 1);
      } catch (e) {
        bad++;
        t.fail(`case ${i}: reply does not decode: ${(e as Error).message}`);
      }
    } else if ('refused' in reply) {
      counts.refused++;
      if (typeof reply.refused !== 'string' || reply.refused === '') bad++;
    } else {
      counts.error++;
      if (typeof reply.error !== 'string' || reply.error === '') bad++;
    }
  }
  t.equal(bad, 0, 'every case answered or refused cleanly');
  t.equal(counts.ok + counts.refused + counts.error, N);
  t.ok(counts.ok > 1000, `many cases reached the daemon and were answered (${counts.ok})`);
  t.ok(counts.refused > 1000, `many were refused (${counts.refused})`);
  t.comment(`ok ${counts.ok}, refused ${counts.refused}, error ${counts.error} in ${Date.now() - t0} ms`);
  t.comment(`answers: ${JSON.stringify(Object.fromEntries(byOp))}`);

  // What reached the daemon stayed in scope.
  const received = await dbl.received();
  t.ok(received.length > 1000, `${received.length} messages reached the daemon`);
  let outOfScope = 0;
  for (const m of received) {
    const op = m.msg === 'berm' ? (m.berm as Plain).msg : m.msg;
    const group = GROUP_OF.get(String(op));
    if (!group || !SCOPE.groups.has(group)) {
      outOfScope++;
      t.fail(`a ${String(op)} reached the daemon`);
      continue;
    }
    const body = (m[m.msg!] ?? {}) as Plain;
    if (op === 'send' || op === 'stream') {
      if (body.agent !== ASSISTANT || body.session_handle !== AUTH.session || body.sender !== AUTH.sender) {
        outOfScope++;
        t.fail(`${op} left the invocation's scope: ${JSON.stringify(body).slice(0, 200)}`);
      }
    }
    if (op === 'search_sessions' || op === 'list_conversations' || op === 'list_active_conversations') {
      if (body.agent !== ASSISTANT || body.sender !== AUTH.sender) {
        outOfScope++;
        t.fail(`${op} filters were not overwritten`);
      }
    }
  }
  t.equal(outOfScope, 0, 'nothing out of scope reached the daemon');
  const st = await dbl.state();
  t.equal(st.agents.length, 2, 'no agent was deleted or created');
});

t.test('a few hundred cases through a real guest', async (t) => {
  configureProtocol({ endpoint: dbl.endpoint, timeoutMs: 5_000, log: null });
  t.teardown(() => configureProtocol({}));
  const engine = new Engine({ cacheDir: TEST_CACHE });
  const h = await Harness.load(
    engine,
    fs.readFileSync(path.join(import.meta.dirname, 'data', 'door-guest.elf')),
  );
  const caps = linkerEntries(
    { name: 'fz', capabilities: Object.keys(GROUPS).sort(), grant: {} },
    { authority: AUTH },
  );
  const number = Buffer.alloc(8);
  const { fnv1a64 } = await import('../src/util/fnv.js');
  number.writeBigUInt64LE(fnv1a64('crabtalk.protocol.call'));
  const seen = { o: 0, e: 0, r: 0 };
  for (let i = 0; i < 300; i++) {
    let req = hostile();
    if (req.length > 60_000) req = req.subarray(0, 60_000);
    // most as one framed field (the door's shape); some with a broken framing
    const framed =
      rnd() < 0.9
        ? Buffer.concat([Buffer.from(Uint32Array.of(req.length).buffer), Buffer.from(req)])
        : Buffer.from(req);
    const r = h.invoke('raw', Buffer.concat([number, framed]), { capabilities: caps });
    t.equal(r.status, 'ok', `case ${i}: the guest finished`);
    if (r.status !== 'ok') continue;
    const status = r.result[0] as 'o' | 'e' | 'r';
    t.ok('oer'.includes(status), `case ${i}: status ${status}`);
    seen[status]++;
    if (status === 'o') {
      const bytes = Buffer.from(r.result.slice(1), 'hex');
      t.notOk(bytes.includes(secret), 'no secret');
      decodeServer(bytes);
    }
  }
  t.ok(seen.o > 0 && seen.r > 0, `answered ${seen.o}, refused ${seen.r}, errors ${seen.e}`);
});
