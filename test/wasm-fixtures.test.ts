// The C fixtures built both ways, as RISC-V ELFs (translated) and as WebAssembly harnesses
// (clang --target=wasm32, guest-sdk/berm.mk BERM_TARGET=wasm32; fixtures/fixtures.py WASM32),
// answer identically: every expected tool case of their sources (fixtures/expected.json, computed
// natively by fixtures/expected.py, never by berm) through the harness layer, and the same calls
// through `berm call`, bermd's HTTP API and its MCP endpoint (the official SDK's client), where
// the ELF build and the Wasm build must give the same answers.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Engine } from '../src/engine/engine.js';
import type { WireHandler } from '../src/harness/harness.js';
import { runBerm } from './helpers/berm-cli.js';
import { elf, testDaemon } from './helpers/daemon.js';
import { expected, fixtureElfs, fixtureWasms, TEST_CACHE } from './helpers/fixtures.js';
import { runToolCases } from './helpers/tool-cases.js';

const engine = new Engine({ cacheDir: TEST_CACHE });
const tools = expected().tools;
const dec = new TextDecoder();

function memoryStore(): Map<string, WireHandler> {
  const kv = new Map<string, Uint8Array>();
  return new Map<string, WireHandler>([
    ['berm.get', ([k]) => (kv.has(dec.decode(k)) ? { fields: [kv.get(dec.decode(k))!] } : { fields: [] })],
    ['berm.set', ([k, v]) => (kv.set(dec.decode(k), v), { fields: [] })],
    ['berm.delete', ([k]) => (kv.delete(dec.decode(k)), { fields: [] })],
  ]);
}

const wasms = fixtureWasms();
const casesOf = (source: string) => tools.filter((c) => c.source === source && (c.abi ?? 1) === 1);

t.test('the wasm32 fixtures exist for echo, hostcalls and misbehave', async (t) => {
  t.same(wasms.map((w) => w.source).sort(), ['echo.c', 'hostcalls.c', 'misbehave.c']);
});

for (const w of wasms) {
  t.test(`${w.path.split('/').pop()}: every expected tool case of ${w.source}`, async (t) => {
    const mine = casesOf(w.source);
    t.ok(mine.length > 0, `${mine.length} cases`);
    await runToolCases(t, engine, w.path, mine, () => ({ capabilities: memoryStore(), timeoutMs: 20_000 }));
  });
}

/** The ELF and the Wasm build of `source` (gcc -O2 for the ELF). */
function pair(source: string): { elf: string; wasm: string } {
  return {
    elf: fixtureElfs().find((e) => e.source === source && e.compiler === 'gcc' && e.opt === 'O2')!.path,
    wasm: wasms.find((e) => e.source === source)!.path,
  };
}

/** Cases answerable without capabilities (the daemon and CLI grant none here). */
const plain = ['echo.c', 'misbehave.c'].flatMap((s) =>
  casesOf(s)
    .filter((c) => c.caps === undefined || c.caps.length === 0)
    .map((c) => ({ ...c, ...pair(s) })),
);

t.test('berm call answers alike for the ELF and the Wasm build', async (t) => {
  t.setTimeout(180_000); // each case starts two CLI processes
  t.ok(plain.length >= 6, `${plain.length} cases`);
  // two of each source: ok and failed answers
  for (const c of [
    ...plain.filter((x) => x.source === 'echo.c').slice(0, 2),
    ...plain.filter((x) => x.source === 'misbehave.c').slice(0, 2),
  ]) {
    const [a, b] = await Promise.all(
      [c.elf, c.wasm].map((f) => runBerm(['call', '--no-validate', f, c.tool, c.args], TEST_CACHE)),
    );
    t.same(
      { code: b.code, stdout: b.stdout },
      { code: a.code, stdout: a.stdout },
      `${c.tool}(${c.args.slice(0, 30)}): same exit code and output`,
    );
    t.equal(a.code, c.ok ? 0 : 1, `${c.tool}: exit ${c.ok ? 0 : 1} as expected`);
    if (c.ok) t.equal(b.stdout.replace(/\n$/, ''), c.result, `${c.tool}: the expected result`);
  }
});

t.test('bermd HTTP and MCP answer alike for the ELF and the Wasm build', async (t) => {
  t.setTimeout(180_000);
  const d = await testDaemon();
  t.teardown(() => d.stop());
  const deploy = async (name: string, path: string) => {
    const r = await d.req(`/harnesses/${name}`, {
      method: 'PUT',
      body: elf(path.slice(path.indexOf('fixtures/'))),
    });
    t.equal(r.status, 200, `deploy ${name}: ${r.status === 200 ? 'ok' : await r.text()}`);
  };
  await deploy('echo', pair('echo.c').elf);
  await deploy('echow', pair('echo.c').wasm);
  await deploy('mis', pair('misbehave.c').elf);
  await deploy('misw', pair('misbehave.c').wasm);
  const described = (await (await d.req('/harnesses/echow')).json()) as { tools: { name: string }[] };
  t.same(
    described.tools.map((x) => x.name),
    ((await (await d.req('/harnesses/echo')).json()) as { tools: { name: string }[] }).tools.map(
      (x) => x.name,
    ),
    'the Wasm deployment describes the same tools',
  );

  const client = new Client({ name: 'berm-wasm-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/mcp`)));
  t.teardown(() => client.close());
  const names = (await client.listTools()).tools.map((x) => x.name);
  for (const n of ['echo.echo', 'echow.echo', 'mis.always_fails', 'misw.always_fails'])
    t.ok(names.includes(n), n);

  for (const c of plain) {
    const [e, w] = c.source === 'echo.c' ? ['echo', 'echow'] : ['mis', 'misw'];
    const what = `${c.tool}(${c.args.slice(0, 30)})`;
    let args: Record<string, unknown> | null = null;
    try {
      const parsed: unknown = JSON.parse(c.args);
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed))
        args = parsed as Record<string, unknown>;
    } catch {
      args = null;
    }
    const http = async (h: string) => {
      const r = await d.req(`/harnesses/${h}/tools/${c.tool}`, { method: 'POST', body: c.args });
      return { status: r.status, body: (await r.json()) as unknown };
    };
    const [he, hw] = [await http(e), await http(w)];
    t.equal(hw.status, he.status, `HTTP ${what}: the same status`);
    // arguments that are not a JSON object are refused by the daemon before any guest runs (their
    // message names the deployment); the others reach the guest
    if (args === null) continue;
    t.same(hw.body, he.body, `HTTP ${what}: the same body`);
    t.same(he.body, c.ok ? { done: c.result } : { failed: c.result }, `HTTP ${what}: the expected answer`);
    const [me, mw] = [
      await client.callTool({ name: `${e}.${c.tool}`, arguments: args }),
      await client.callTool({ name: `${w}.${c.tool}`, arguments: args }),
    ];
    t.same(mw, me, `MCP ${what}: the same result`);
  }
});

t.test('berm new --target wasm32 scaffolds a harness that builds to a Wasm module and answers', async (t) => {
  t.setTimeout(180_000);
  const dir = join(mkdtempSync(join(tmpdir(), 'berm-new-wasm-')), 'demo');
  const made = await runBerm(['new', '--target', 'wasm32', dir], TEST_CACHE);
  t.equal(made.code, 0, made.stderr);
  const log = execFileSync('make', ['-C', dir], { encoding: 'utf8', env: { PATH: process.env.PATH } });
  const wasm = join(dir, 'build', 'demo.wasm');
  t.same(
    [...readFileSync(wasm).subarray(0, 4)],
    [0, 0x61, 0x73, 0x6d],
    'build/demo.wasm is a WebAssembly module',
  );
  const r = await runBerm(['call', wasm, 'greet', '{"name":"ada"}'], TEST_CACHE);
  t.equal(r.code, 0, `${r.stderr}\n${log}`);
  // the answer the scaffold's own host test expects (test_demo.c, run natively)
  t.equal(r.stdout.trim(), '{"greeting":"hello","args":{"name":"ada"}}');
  const bad = await runBerm(['new', '--target', 'wasm64', join(dir, '..', 'x')], TEST_CACHE);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /--target must be riscv64 or wasm32/);
});
