// GET /harnesses/{name}/code on a real bermd: the function list against the ELF's symbol table as
// binutils' nm reads it, a function's rows against llvm-objdump's disassembly (addresses, encoding
// bytes, text), the WAT lined up by the fault pcs the code raises (a load or store faults with its
// own pc), the whole function's WAT, the pc form with its focus, and the refusals.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { elf, REPO, testDaemon } from './helpers/daemon.js';

const ECHO = join(REPO, 'fixtures', 'build', 'echo-gcc-O2.elf');
const BIG = join(REPO, 'fixtures', 'rust', 'build', 'rs_fmt-O0.elf');

interface Row {
  pc: string;
  hex: string;
  asm: string;
  wat: string[];
}
interface Listing {
  name: string;
  pc: string;
  size: number;
  focus: string | null;
  rows: Row[];
  wat: string;
}

/** Function symbols (T/t with a size) by address: [names, size], from binutils' nm. */
function nmFunctions(file: string): Map<number, { names: string[]; size: number }> {
  const out = new Map<number, { names: string[]; size: number }>();
  const text = execFileSync('riscv64-unknown-elf-nm', ['-S', '--defined-only', file], { encoding: 'utf8' });
  for (const l of text.split('\n')) {
    const m = /^([0-9a-f]+) ([0-9a-f]+) [Tt] (\S+)$/.exec(l);
    if (!m) continue;
    const pc = parseInt(m[1], 16);
    const e = out.get(pc) ?? { names: [], size: parseInt(m[2], 16) };
    e.names.push(m[3]);
    out.set(pc, e);
  }
  return out;
}

/** llvm-objdump's lines of [start, end): address, encoding (as a number, hex), text without `<sym>`. */
function objdump(file: string, start: number, end: number): { pc: number; hex: string; asm: string }[] {
  const text = execFileSync(
    'llvm-objdump',
    [
      '-d',
      '-M',
      'no-aliases',
      `--start-address=0x${start.toString(16)}`,
      `--stop-address=0x${end.toString(16)}`,
      file,
    ],
    { encoding: 'utf8' },
  );
  const out: { pc: number; hex: string; asm: string }[] = [];
  for (const l of text.split('\n')) {
    const m = /^\s*([0-9a-f]+):\s((?:[0-9a-f]{2} )+)\s*\t(.*)$/.exec(l);
    if (!m) continue;
    const bytes = m[2].trim().split(' ');
    out.push({
      pc: parseInt(m[1], 16),
      hex: bytes.reverse().join(''),
      asm: m[3].replace(/ <[^>]*>$/, '').trimEnd(),
    });
  }
  return out;
}

const MEMORY = /^(c\.)?(lb|lh|lw|ld|lbu|lhu|lwu|sb|sh|sw|sd|lwsp|ldsp|swsp|sdsp)\t/;

t.test('GET /harnesses/{name}/code: functions, listings, focus and refusals', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  t.equal(
    (await d.req('/harnesses/echo', { method: 'PUT', body: elf('fixtures/build/echo-gcc-O2.elf') })).status,
    200,
  );

  const list = await d.req('/harnesses/echo/code');
  t.equal(list.status, 200);
  const { functions } = (await list.json()) as { functions: { name: string; pc: string; size: number }[] };
  const nm = nmFunctions(ECHO);
  t.equal(functions.length, nm.size, 'one entry per function address of the symbol table');
  const pcs = functions.map((f) => parseInt(f.pc, 16));
  t.same(
    pcs,
    [...pcs].sort((a, b) => a - b),
    'sorted by pc',
  );
  for (const f of functions) {
    t.match(f.pc, /^0x[0-9a-f]+$/);
    const s = nm.get(parseInt(f.pc, 16));
    t.ok(s && s.names.includes(f.name) && s.size === f.size, `${f.name} ${f.pc} ${f.size} as nm has it`);
  }

  for (const fn of ['berm_tool_echo_len', 'berm_args', 'strlen']) {
    const r = await d.req(`/harnesses/echo/code?function=${fn}`);
    t.equal(r.status, 200, fn);
    const l = (await r.json()) as Listing;
    const sym = [...nm.entries()].find(([, s]) => s.names.includes(fn))!;
    t.equal(l.name, fn);
    t.equal(l.pc, '0x' + sym[0].toString(16));
    t.equal(l.size, sym[1].size);
    t.equal(l.focus, null);
    const want = objdump(ECHO, sym[0], sym[0] + sym[1].size);
    t.same(
      l.rows.map((x) => ({ pc: parseInt(x.pc, 16), hex: x.hex, asm: x.asm.replace(/ <[^>]*>$/, '') })),
      want,
      `${fn}: each instruction's pc, encoding and text as llvm-objdump prints them`,
    );
    t.match(l.wat, new RegExp(`^\\(func \\$f_${sym[0].toString(16)} `), 'the whole function as WAT');
    // (one assertion per function: a slow test would let the keep-alive connection time out)
    const stray: string[] = [];
    const unfaulted: string[] = [];
    let memory = 0;
    for (const x of l.rows) {
      for (const w of x.wat) if (!l.wat.includes(w.trim())) stray.push(`${x.pc}: ${w}`);
      if (MEMORY.test(x.asm)) {
        memory++;
        if (!x.wat.some((w) => w.trim() === `i32.const ${parseInt(x.pc, 16)}`))
          unfaulted.push(`${x.pc} ${x.asm}`);
      }
    }
    t.same(stray, [], `${fn}: every row's line is in the function's WAT`);
    t.same(unfaulted, [], `${fn}: each of its ${memory} loads and stores faults with its own pc`);
    t.ok(
      l.rows.every((x) => x.wat.length > 0 || /^(c\.)?j\t/.test(x.asm)),
      `${fn}: every row but a jump has code`,
    );
  }

  // any pc inside a function selects it and is the focus
  const strlen = [...nm.entries()].find(([, s]) => s.names.includes('strlen'))![0];
  const inside = '0x' + (strlen + 2).toString(16).toUpperCase().replace('0X', '');
  const byPc = await d.req(`/harnesses/echo/code?pc=0x${(strlen + 2).toString(16).toUpperCase()}`);
  t.equal(byPc.status, 200, inside);
  const lp = (await byPc.json()) as Listing;
  t.equal(lp.name, 'strlen');
  t.equal(lp.focus, '0x' + (strlen + 2).toString(16));

  const refusals: [string, number, RegExp][] = [
    ['/harnesses/nope/code', 404, /no harness named nope/],
    ['/harnesses/echo/code?function=no_such_function', 404, /no function named no_such_function/],
    ['/harnesses/echo/code?pc=0x1', 404, /no function contains pc 0x1/],
    ['/harnesses/echo/code?pc=12ab', 400, /pc must be a hexadecimal address/],
    ['/harnesses/echo/code?pc=0xzz', 400, /pc must be a hexadecimal address/],
    ['/harnesses/echo/code?pc=', 400, /pc must be a hexadecimal address/],
    ['/harnesses/echo/code?function=strlen&pc=0x104b2', 400, /not both/],
  ];
  for (const [path, status, error] of refusals) {
    const r = await d.req(path);
    t.equal(r.status, status, path);
    t.match(((await r.json()) as { error: string }).error, error, path);
  }
  const post = await d.req('/harnesses/echo/code', { method: 'POST', body: '' });
  t.equal(post.status, 405);
});

t.test('a big image is listed on a worker: the daemon keeps answering meanwhile', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  t.equal(
    (await d.req('/harnesses/big', { method: 'PUT', body: elf('fixtures/rust/build/rs_fmt-O0.elf') })).status,
    200,
  );
  const { functions } = (await (await d.req('/harnesses/big/code')).json()) as {
    functions: { name: string; pc: string; size: number }[];
  };
  t.ok(functions.length > 500, `${functions.length} functions`);
  const main = functions.find((f) => f.name === 'main') ?? functions[0];
  const order: string[] = [];
  const code = d.req(`/harnesses/big/code?pc=${main.pc}`).then(async (r) => {
    order.push('code');
    return r;
  });
  const health = d.req('/health').then((r) => {
    order.push('health');
    return r;
  });
  t.equal((await health).status, 200);
  const r = await code;
  t.equal(r.status, 200);
  t.equal(((await r.json()) as Listing).name, main.name);
  t.same(order, ['health', 'code'], 'the health check answered while the image was being translated');
  t.ok(BIG.length > 0);
});
