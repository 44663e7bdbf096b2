/**
 * Benchmark of the index (bench/run.ts section `index`; run alone with
 *   node --stack-size=4000 --import ./scripts/ts/register.mjs bench/run.ts section index):
 * - search latency p50/p99 at 10,000 and 100,000 entries, a page of 50 (what berm search, the
 *   workbench and `GET /harnesses?limit=50` ask), over a fixed mix of 400 terms; baseline in the
 *   same run: the reference implementation's way, a scan of every entry with the same substring
 *   rule (src/index/entry.ts entryMatches), same terms, same page;
 * - berm-indexd start-up on 100,000 entries: the first start (no snapshot: read every JSON Lines
 *   file, build the search structures, listen), then starts through the snapshot (every file
 *   checked against it), in-process and as the real bin (spawn to the answer of its first search);
 * - publishes/s against a local docker-registry: sequential POST /harnesses of distinct tags, each
 *   an anonymous manifest + config pull and an fsynced append.
 *
 * The corpus is generated from a fixed seed: pseudo-words of 3-9 letters drawn with English letter
 * frequencies (a vocabulary of 30,000, picked with a Zipf-like skew), each entry a reference
 * `{registry}/org{n}/{word}-{i}:v{k}`, a 12-word usage and 1-4 tools of a 2-word name and an
 * 8-word description. The term mix: 30% one vocabulary word (skewed like the text), 5% the first
 * 3-4 letters of a word of a tool description (a prefix, as typed so far), 20% a two-word phrase
 * taken from an entry (a hit), 15% two vocabulary words side by side (mostly misses), 10% a
 * reference fragment, 10% a random 6-letter string (a miss), 5% one or two letters, 5% the empty
 * term (everything, first page).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Catalog } from '../src/index/catalog.js';
import { entryKey, entryMatches, formatEntryLine, type IndexEntry } from '../src/index/entry.js';
import { startIndexService } from '../src/index/service.js';
import { readElf } from '../src/elf/reader.js';
import { parseReference, pushHarness } from '../src/oci/index.js';
import { startRegistry } from '../test/helpers/oci-registry.js';

type Fig = (name: string, value: number, unit: string, label: string, better?: 'lower' | 'higher') => void;

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const QUICK = process.env.BENCH_QUICK === '1';

/** A deterministic generator (LCG), values in [0, 1). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

const LETTERS = 'etaoinshrdlcumwfgypbvkjxqz';
const FREQ = [
  12.7, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4, 2.4, 2.2, 2.0, 2.0, 1.9, 1.5, 1.0,
  0.8, 0.2, 0.2, 0.1, 0.1,
];
const CUM: number[] = [];
for (const f of FREQ) CUM.push((CUM[CUM.length - 1] ?? 0) + f);
const TOTAL = CUM[CUM.length - 1]!;

/** The generated corpus and the term mix over it. */
export function corpus(n: number, seed = 42): { entries: IndexEntry[]; terms: string[] } {
  const r = rng(seed);
  const letter = (): string => {
    const x = r() * TOTAL;
    let i = 0;
    while (CUM[i]! < x) i++;
    return LETTERS[i]!;
  };
  const vocab: string[] = [];
  for (let i = 0; i < 30_000; i++) {
    let w = '';
    const len = 3 + Math.floor(r() * 7);
    for (let j = 0; j < len; j++) w += letter();
    vocab.push(w);
  }
  const word = (): string => vocab[Math.floor(vocab.length * Math.pow(r(), 3))]!;
  const words = (k: number): string => Array.from({ length: k }, word).join(' ');
  const cap = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);
  const entries: IndexEntry[] = [];
  for (let i = 0; i < n; i++) {
    const tools = Array.from({ length: 1 + Math.floor(r() * 4) }, () => ({
      name: `${word()}_${word()}`,
      description: cap(words(8)) + '.',
      parameters: { type: 'object', properties: { [word()]: { type: 'string' } } },
    }));
    entries.push({
      reference: `ghcr.io/org${i % 4999}/${word()}-${i}:v${i % 5}`,
      digest: 'sha256:' + (i.toString(16).padStart(8, '0') + 'ab').repeat(7).slice(0, 64),
      usage: cap(words(12)) + '.',
      tools,
    });
  }
  const terms: string[] = [];
  for (let q = 0; q < 400; q++) {
    const x = q % 20;
    if (x < 6) terms.push(word());
    else if (x === 6) {
      // a prefix, as typed so far: the first 3-4 letters of a word of a tool description
      const e = entries[Math.floor(r() * n)]!;
      const w = e.tools[0]!.description.toLowerCase().split(' ')[1]!;
      terms.push(w.slice(0, 3 + (q % 2)));
    } else if (x < 11) {
      const e = entries[Math.floor(r() * n)]!;
      const ws = e.tools[0]!.description.toLowerCase().replace('.', '').split(' ');
      const at = Math.floor(r() * (ws.length - 1));
      terms.push(`${ws[at]} ${ws[at + 1]}`);
    } else if (x < 14) terms.push(`${word()} ${word()}`);
    else if (x < 16) terms.push(`org${Math.floor(r() * 4999)}/`);
    else if (x < 18) terms.push(Array.from({ length: 6 }, () => LETTERS[Math.floor(r() * 26)]).join(''));
    else if (x === 18) terms.push(Array.from({ length: 1 + (Math.floor(q / 20) % 2) }, letter).join(''));
    else terms.push(''); // everything, first page
  }
  return { entries, terms };
}

function percentiles(ms: number[]): { p50: number; p99: number } {
  const s = [...ms].sort((a, b) => a - b);
  const at = (p: number): number => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]!;
  return { p50: at(0.5), p99: at(0.99) };
}

function benchSearch(fig: Fig, progress: (m: string) => void, n: number, tag: string): void {
  const { entries, terms } = corpus(n);
  const c = new Catalog();
  const t0 = performance.now();
  for (const e of entries) c.add(e);
  fig(
    `index.build_${tag}_ms`,
    performance.now() - t0,
    'ms',
    `index: build the search structures of ${tag} entries`,
  );
  for (const term of terms.slice(0, 50)) c.search(term, { limit: 50 }); // warm-up
  const rounds = QUICK ? 1 : 3;
  const times: number[] = [];
  let hits = 0;
  for (let k = 0; k < rounds; k++)
    for (const term of terms) {
      const s = performance.now();
      hits += c.search(term, { limit: 50 }).entries.length;
      times.push(performance.now() - s);
    }
  // the reference implementation's way: every entry checked, same rule, same page
  const scan: number[] = [];
  for (const term of terms) {
    const s = performance.now();
    const l = term.toLowerCase();
    const out: IndexEntry[] = [];
    for (const e of entries) {
      if (entryMatches(e, l)) {
        out.push(e);
        if (out.length === 50) break;
      }
    }
    scan.push(performance.now() - s);
  }
  const p = percentiles(times);
  const b = percentiles(scan);
  progress(
    `index search ${tag}: p50 ${p.p50.toFixed(3)} ms p99 ${p.p99.toFixed(3)} ms (scan p50 ${b.p50.toFixed(2)} p99 ${b.p99.toFixed(2)}); ${hits} hits`,
  );
  fig(
    `index.search_${tag}_p50_ms`,
    p.p50,
    'ms',
    `index: search p50, ${tag} entries, page of 50, 400-term mix`,
  );
  fig(
    `index.search_${tag}_p99_ms`,
    p.p99,
    'ms',
    `index: search p99, ${tag} entries (target ≤ 10 ms at 100k)`,
  );
  fig(
    `index.scan_${tag}_p50_ms`,
    b.p50,
    'ms',
    `index: baseline, scanning every entry (the reference's way), p50, ${tag}`,
  );
  fig(`index.scan_${tag}_p99_ms`, b.p99, 'ms', `index: baseline scan p99, ${tag}`);
}

/** Write a corpus as an index directory (one JSON Lines file per key). */
function writeDirectory(dir: string, entries: IndexEntry[]): void {
  const byFile = new Map<string, string[]>();
  for (const e of entries) {
    const k = entryKey(e.reference);
    const l = byFile.get(k);
    if (l) l.push(formatEntryLine(e));
    else byFile.set(k, [formatEntryLine(e)]);
  }
  for (const [k, lines] of byFile) {
    const file = join(dir, `${k}.json`);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, lines.join('\n') + '\n');
  }
}

/** Spawn the bin on `dir` and time it from spawn to the answer of its first search. */
async function binFirstAnswer(dir: string, snapshot: string): Promise<number> {
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    [join(ROOT, 'bin', 'berm-indexd.js'), '--index', dir, '--addr', '127.0.0.1:0', '--snapshot', snapshot],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let log = '';
      child.stderr!.on('data', (b: Buffer) => {
        log += b.toString();
        const m = / on (http:\/\/\S+)/.exec(log);
        if (m) resolve(m[1]!);
      });
      child.once('exit', (code) => reject(new Error(`berm-indexd exited ${code}: ${log}`)));
    });
    const r = await fetch(`${url}/harnesses?q=tool&limit=50`);
    if (r.status !== 200 || ((await r.json()) as unknown[]).length === 0)
      throw new Error(`the first search answered ${r.status}`);
    return performance.now() - t0;
  } finally {
    child.kill('SIGTERM');
  }
}

async function benchStartup(fig: Fig, progress: (m: string) => void): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'berm-bench-index-'));
  try {
    const dir = join(work, 'index');
    const snapshot = join(work, 'index.snapshot');
    writeDirectory(dir, corpus(100_000).entries);
    // the first start reads every file and writes the snapshot; the next ones read the snapshot
    // and check every file's size and modification time against it
    const times: number[] = [];
    const checks: number[] = [];
    for (let k = 0; k < (QUICK ? 2 : 4); k++) {
      const t0 = performance.now();
      const svc = await startIndexService({ root: dir, addr: '127.0.0.1:0', snapshot });
      times.push(performance.now() - t0);
      if (svc.catalog.size !== 100_000) throw new Error(`loaded ${svc.catalog.size} entries, not 100000`);
      // the files are checked against the snapshot (the first start: the snapshot is written) after
      // the socket listens
      await svc.checked;
      checks.push(performance.now() - t0);
      await svc.close();
    }
    const cold = times[0]!;
    const inProc = Math.min(...times.slice(1));
    const checked = Math.min(...checks.slice(1));
    fig(
      'index.startup_100k_checked_ms',
      checked,
      'ms',
      'berm-indexd: start through the snapshot to the end of the background check of all 100,000 files, in-process',
    );
    fig(
      'index.startup_100k_cold_ms',
      cold,
      'ms',
      'berm-indexd: first start on 100,000 entries, no snapshot: read every file, index, listen',
    );
    fig(
      'index.startup_100k_ms',
      inProc,
      'ms',
      'berm-indexd: start on 100,000 entries through the snapshot to listening (the files checked after), in-process (target ≤ 1000)',
    );
    // the real bin (Node's own start and the module loading included), best of 3
    const bins: number[] = [];
    for (let k = 0; k < (QUICK ? 1 : 3); k++) bins.push(await binFirstAnswer(dir, snapshot));
    const bin = Math.min(...bins);
    fig(
      'index.startup_100k_bin_ms',
      bin,
      'ms',
      'berm-indexd bin on 100,000 entries: spawn to the answer of its first search (target ≤ 1000)',
    );
    progress(
      `index start-up 100k: ${cold.toFixed(0)} ms cold, ${inProc.toFixed(0)} ms through the snapshot (files checked at ${checked.toFixed(0)} ms), ${bin.toFixed(0)} ms bin spawn to first answer`,
    );
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

async function benchPublish(fig: Fig, progress: (m: string) => void): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'berm-bench-publish-'));
  const reg = await startRegistry();
  try {
    const elf = new Uint8Array(readFileSync(join(ROOT, 'fixtures/build/echo-gcc-O2.elf')));
    const abi = readElf(elf).manifest!;
    const n = QUICK ? 20 : 100;
    for (let i = 0; i < n; i++)
      await pushHarness(parseReference(`${reg.host}/bench/echo:t${i}`), elf, abi, { env: {} });
    const svc = await startIndexService({
      root: join(work, 'index'),
      addr: '127.0.0.1:0',
      publishesPerMinute: 1e9,
    });
    try {
      const t0 = performance.now();
      for (let i = 0; i < n; i++) {
        const r = await fetch(`${svc.url}/harnesses`, {
          method: 'POST',
          body: JSON.stringify({ reference: `${reg.host}/bench/echo:t${i}` }),
        });
        if (r.status !== 200) throw new Error(`publish answered ${r.status}: ${await r.text()}`);
      }
      const perS = n / ((performance.now() - t0) / 1000);
      fig(
        'index.publishes_per_s',
        perS,
        '1/s',
        `berm-indexd: sequential publishes per second against a local docker-registry (${n})`,
        'higher',
      );
      progress(`index publishes: ${perS.toFixed(1)}/s`);
    } finally {
      await svc.close();
    }
  } finally {
    await reg.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

/** The `index` section: see the module comment. */
export async function benchIndex(fig: Fig, progress: (msg: string) => void): Promise<void> {
  benchSearch(fig, progress, 10_000, '10k');
  benchSearch(fig, progress, 100_000, '100k');
  await benchStartup(fig, progress);
  await benchPublish(fig, progress);
}
