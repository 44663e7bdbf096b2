// Rust v0 symbol demangling (src/util/demangle.ts) against an independent implementation: GNU
// c++filt (binutils), over every `_R` symbol of the rustc-built fixtures; hostile names stay as
// they are and cost bounded work; a trap report of the CLI names Rust functions readably.
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { trapText } from '../src/cli/context.js';
import { readElf } from '../src/elf/reader.js';
import { MemoryFault } from '../src/engine/traps.js';
import { demangle, demangleIn } from '../src/util/demangle.js';
import { ROOT } from './helpers/fixtures.js';

t.test('every Rust symbol of the fixtures reads as c++filt reads it (crate hashes left out)', async (t) => {
  const dir = join(ROOT, 'fixtures', 'rust', 'build');
  const names = new Set<string>();
  for (const f of readdirSync(dir).filter((f) => f.endsWith('.elf'))) {
    for (const s of readElf(readFileSync(join(dir, f))).symbols)
      if (s.name.startsWith('_R')) names.add(s.name);
  }
  const list = [...names];
  t.ok(list.length > 1000, `${list.length} symbols`);
  // binutils' c++filt: the host's, else the cross binutils CI installs (.ci/run)
  const cxxfilt = ['c++filt', 'riscv64-linux-gnu-c++filt', 'riscv64-unknown-elf-c++filt'].find(
    (c) => spawnSync(c, ['--version']).status === 0,
  );
  if (cxxfilt === undefined) throw new Error('no c++filt: install binutils');
  const ref = execFileSync(cxxfilt, { input: list.join('\n') + '\n', encoding: 'utf8', maxBuffer: 1 << 28 })
    .trimEnd()
    .split('\n')
    .map((l) => l.replace(/\[[0-9a-f]+\]/g, ''));
  t.equal(ref.length, list.length);
  let same = 0;
  const differ: string[] = [];
  for (let i = 0; i < list.length; i++) {
    const ours = demangle(list[i]!);
    if (ours === ref[i]) same++;
    // over 1 KiB of text a name is left as it is (a backtrace line stays readable)
    else if (ref[i]!.length > 1024) t.equal(ours, list[i], 'a very long name is kept mangled');
    // binutils 2.40 prints a slice of a float as `<>` (`Sd` -> `[f64]`)
    else if (ref[i]!.includes('<>') && /S[df]/.test(list[i]!)) t.match(ours, /\[f(64|32)\]/);
    else differ.push(`${list[i]}\n  ours: ${ours}\n  c++filt: ${ref[i]}`);
  }
  t.same(differ, [], 'no other difference');
  t.ok(same > list.length - 10, `${same} of ${list.length} identical`);
});

t.test('named cases', async (t) => {
  t.equal(demangle('_RNvNtCs9Y3AgaxtF4a_4berm3cap6invoke'), 'berm::cap::invoke');
  t.equal(
    demangle(
      '_RNCINvNtCs9Y3AgaxtF4a_4berm2rt8run_toolNtNtCsltMnb3B7lZB_5alloc6string6StringBB_E0Cs4BfU7N8BIiz_6rtally',
    ),
    'berm::rt::run_tool::<alloc::string::String, alloc::string::String>::{closure#0}',
    'generic arguments, a backreference, a closure, the instantiating crate left out',
  );
  t.equal(demangle('_RNvCs4BfU7N8BIiz_6rtally5count.llvm.1234'), 'rtally::count', 'vendor suffix');
  for (const raw of [
    'main',
    '_ZN4core3fmt5write17h0123456789abcdefE',
    'berm_tool_wc',
    '_R',
    '_RC',
    '_RNvC3foo',
  ])
    t.equal(demangle(raw), raw, `${raw} is not a (complete) v0 name: unchanged`);
  t.equal(demangle('_RNvCu6foobar3baz'), '_RNvCu6foobar3baz', 'punycode identifiers are not decoded');
  t.equal(demangle('_RNvC3foo3bar'), 'foo::bar');
  t.equal(
    demangleIn(
      'rtally.wc trapped: UnknownHostCall: ... at pc 0x14f5e (_RNvNtCs9Y3AgaxtF4a_4berm3cap6invoke+0x3c); _RNvC3foo',
    ),
    'rtally.wc trapped: UnknownHostCall: ... at pc 0x14f5e (berm::cap::invoke+0x3c); _RNvC3foo',
    'names in a message; an incomplete one stays',
  );
});

t.test(
  'hostile names: forward or self references and exponential expansion end at once, unchanged',
  async (t) => {
    for (const raw of ['_RNvB_3foo', '_RNvB2_3foo', '_RNvNvB0_1a1b', '_RINvC1a1bBa_E']) {
      t.equal(demangle(raw), raw, raw);
    }
    // base-62-number as the mangling writes it: '_' is 0, else (n - 1) in 0-9a-zA-Z, then '_'
    const DIGITS = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
    const base62 = (n: number): string => {
      if (n === 0) return '_';
      let v = n - 1;
      let out = '';
      do {
        out = DIGITS[v % 62] + out;
        v = Math.floor(v / 62);
      } while (v > 0);
      return out + '_';
    };
    t.equal(base62(0), '_');
    t.equal(base62(63), '10_');
    // each tuple holds two backreferences to the previous one: 2^25 leaves if expanded, within the
    // depth bound (the work bound must stop it)
    let body = 'INvC1a1fTuuE';
    let previous = 8; // where the first tuple `TuuE` starts in the body after `_R`
    for (let i = 0; i < 25; i++) {
      const ref = `B${base62(previous)}`;
      previous = body.length;
      body += `T${ref}${ref}E`;
    }
    const hostile = `_R${body}E`;
    t.equal(
      demangle(`_RINvC1a1fTuuETB7_B7_EE`),
      'a::f::<((), ()), (((), ()), ((), ()))>',
      'the pattern, one level',
    );
    const t0 = performance.now();
    t.equal(demangle(hostile), hostile);
    t.ok(performance.now() - t0 < 2000, 'bounded work');
  },
);

t.test("the CLI's trap report demangles; the trap keeps the ELF's names", async (t) => {
  const trap = new MemoryFault(8n);
  trap.pc = 0x14f5e;
  trap.symbol = '_RNvNtCs9Y3AgaxtF4a_4berm3cap6invoke';
  trap.offset = 0x3c;
  trap.backtrace = [
    { symbol: '_RNvNtCs9Y3AgaxtF4a_4berm3cap6invoke', address: 0x14f22 },
    { symbol: '_RNvCs4BfU7N8BIiz_6rtally5count', address: 0x12000 },
    { symbol: 'berm_tool_wc', address: 0x11000 },
  ];
  t.equal(
    trapText(trap),
    'berm: guest trap MemoryFault: memory fault at guest address 0x8\n' +
      '  at pc 0x14f5e (berm::cap::invoke+0x3c)\n' +
      '  backtrace: berm::cap::invoke <- rtally::count <- berm_tool_wc\n',
  );
  t.equal(trap.symbol, '_RNvNtCs9Y3AgaxtF4a_4berm3cap6invoke');
});
