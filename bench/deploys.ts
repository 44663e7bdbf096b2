/**
 * Many distinct deployments on one bermd: what each deploy costs as the store grows, the daemon's
 * resident set after them, and whether every acknowledged one answers.
 *
 *   node --import ./scripts/ts/register.mjs bench/deploys.ts [--n 1000] [--workers 16]
 *     [--concurrency 8] [--json]
 *
 * A real bermd (bin/bermd.js on 127.0.0.1, port 0) with its own root and Wasm cache; the images
 * are the echo harness with a suffix past its last section (another digest each, so every deploy
 * is a new image: translated, stored and recorded), `--concurrency` PUTs in flight. Each deploy
 * must either answer 200 or be refused 507 naming its limit, and a sample of 50 names spread across
 * the range and the last one are called: an acknowledged one must answer, a refused one must be
 * unknown (404); the run fails (exit 1) otherwise ({@link checkDeploys}). Figures: deploys per second, the PUT latency of the
 * first and last tenth (median, p99; a cost that grows with the number of deployments shows as
 * the difference), the RSS once the deploys are done, and the restart time with that many.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startBermd, stopBermd, type Bermd } from '../test/helpers/cluster.js';
import { percentile, type Figure } from './lib/figures.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const ECHO = readFileSync(join(ROOT, 'fixtures/build/echo-gcc-O2.elf'));
const MiB = 1024 * 1024;

/** The echo ELF with a suffix past its last section: the same code, another digest. */
export const variant = (i: number): Buffer => Buffer.concat([ECHO, Buffer.from(`\0deploy ${i}\0`)]);

function rss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) * 1024;
}

/** What {@link benchDeploys} measured. */
export interface DeploysResult {
  n: number;
  workers: number;
  acknowledged: number;
  /** refusals by status and limit, e.g. {"507 max-images": 3} */
  refused: Record<string, number>;
  /** sampled calls that answered as they should, of those made */
  callsOk: number;
  callsMade: number;
  figures: Record<string, Figure>;
}

/**
 * Deploy `n` distinct images on a fresh bermd with `workers` workers, `concurrency` at once.
 * @throws when bermd does not start or a request fails at the transport level
 */
export async function benchDeploys(n: number, workers: number, concurrency: number): Promise<DeploysResult> {
  const tmp = mkdtempSync(join(tmpdir(), 'berm-bench-deploys-'));
  let b: Bermd | null = null;
  try {
    const root = join(tmp, 'root');
    const opts = { root, cacheDir: join(tmp, 'cache'), workers };
    b = await startBermd(opts, 120_000);
    const status: number[] = new Array<number>(n);
    const ms: number[] = new Array<number>(n);
    const refused: Record<string, number> = {};
    let next = 0;
    const t0 = performance.now();
    const bermd = b;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < n) {
          const i = next++;
          const s = performance.now();
          try {
            const r = await fetch(`${bermd.url}/harnesses/d${i}`, {
              method: 'PUT',
              body: variant(i),
              signal: AbortSignal.timeout(300_000),
            });
            const body = (await r.json()) as { limit?: string; error?: string };
            status[i] = r.status;
            if (r.status !== 200) {
              const k = `${r.status} ${body.limit ?? body.error ?? ''}`;
              refused[k] = (refused[k] ?? 0) + 1;
            }
          } catch (e) {
            // not answered in 300 s: counted, and the run goes on
            status[i] = 0;
            const k = `no answer: ${(e as Error).name}`;
            refused[k] = (refused[k] ?? 0) + 1;
          }
          ms[i] = performance.now() - s;
        }
      }),
    );
    const totalS = (performance.now() - t0) / 1000;
    const afterRss = rss(bermd.proc.pid!);
    const acked = status.filter((s) => s === 200).length;
    const sample = [...new Set([...Array.from({ length: 50 }, (_, k) => Math.floor((k * n) / 50)), n - 1])];
    let callsOk = 0;
    for (const i of sample) {
      const r = await fetch(`${bermd.url}/harnesses/d${i}/tools/echo`, {
        method: 'POST',
        body: JSON.stringify({ i }),
        signal: AbortSignal.timeout(60_000),
      });
      const text = await r.text();
      if (
        status[i] === 200
          ? r.status === 200 && text === JSON.stringify({ done: JSON.stringify({ i }) })
          : r.status === 404
      )
        callsOk++;
    }
    await stopBermd(b);
    b = null;
    const r0 = performance.now();
    b = await startBermd(opts, 600_000);
    const restartS = (performance.now() - r0) / 1000;
    const tenth = Math.max(1, Math.floor(n / 10));
    const first = ms.slice(0, tenth).sort((x, y) => x - y);
    const last = ms.slice(-tenth).sort((x, y) => x - y);
    const fig = (value: number, unit: string, better: Figure['better'], label: string): Figure => ({
      value,
      unit,
      better,
      label,
    });
    const figures: Record<string, Figure> = {
      'deploys.per_s': fig(
        n / totalS,
        '/s',
        'higher',
        `${n} distinct deploys on ${workers} workers, per second`,
      ),
      'deploys.put_first_p50_ms': fig(percentile(first, 50), 'ms', 'lower', 'PUT median, first tenth'),
      'deploys.put_first_p99_ms': fig(percentile(first, 99), 'ms', 'lower', 'PUT p99, first tenth'),
      'deploys.put_last_p50_ms': fig(percentile(last, 50), 'ms', 'lower', 'PUT median, last tenth'),
      'deploys.put_last_p99_ms': fig(percentile(last, 99), 'ms', 'lower', 'PUT p99, last tenth'),
      'deploys.rss_mib': fig(afterRss / MiB, 'MiB', 'lower', 'RSS once the deploys are done'),
      'deploys.restart_s': fig(restartS, 's', 'lower', 'restart with them: spawn to listening'),
    };
    return { n, workers, acknowledged: acked, refused, callsOk, callsMade: sample.length, figures };
  } finally {
    if (b) await stopBermd(b);
    rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * What must hold of a run: every deploy was
 * answered, every refusal is a 507 naming its limit, and every sampled call answered as its
 * deploy's status says (200 with the echo, or 404 for a refused one).
 * @returns the problems, one line each (empty when it holds)
 */
export function checkDeploys(r: DeploysResult): string[] {
  const problems: string[] = [];
  for (const [k, n] of Object.entries(r.refused))
    if (!/^507 \S/.test(k)) problems.push(`${n} deploys answered ${k}, not 200 or 507 naming a limit`);
  if (r.callsOk !== r.callsMade)
    problems.push(
      `${r.callsMade - r.callsOk} of ${r.callsMade} sampled calls did not answer as their deploy said`,
    );
  return problems;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const arg = (k: string, d: number): number => {
    const i = process.argv.indexOf(`--${k}`);
    return i > 0 ? Number(process.argv[i + 1]) : d;
  };
  const r = await benchDeploys(arg('n', 1000), arg('workers', 16), arg('concurrency', 8));
  const problems = checkDeploys(r);
  process.stderr.write(
    `deploys: ${r.acknowledged} of ${r.n} acknowledged on ${r.workers} workers; refused ${JSON.stringify(r.refused)}; sampled calls ${r.callsOk}/${r.callsMade} as expected\n`,
  );
  for (const p of problems) process.stderr.write(`deploys: FAILED: ${p}\n`);
  if (process.argv.includes('--json')) console.log(JSON.stringify({ figures: r.figures }));
  else
    for (const f of Object.values(r.figures))
      console.log(`  ${f.label.padEnd(52)} ${f.value.toFixed(1)} ${f.unit}`);
  if (problems.length > 0) process.exitCode = 1;
}
