/**
 * Benchmark of WebSocket connections as a trigger (bench/run.ts section `ws`; run alone with
 *   node --stack-size=4000 --import ./scripts/ts/register.mjs bench/run.ts section ws):
 * frames/s through one connection into a harness. A `ws` WebSocketServer on loopback sends N
 * frames at once to the example harness wsecho (examples/wsecho.elf), which takes each in its
 * own invocation (one at a time, in order), counts it in its keys (berm.get + berm.set) and
 * echoes it back; the figure is N over the time from the first frame sent to the last echo
 * received. The baseline in the same run: the same N events handed to the same tool by
 * BermRuntime.invoke one after another (what the connection does per frame, minus the socket),
 * so the ratio is what the connection path costs over the queue alone.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { WebSocketServer } from 'ws';
import { eventArgs } from '../src/capabilities/ws/events.js';
import { BermRuntime } from '../src/runtime/index.js';

type Fig = (name: string, value: number, unit: string, label: string, better?: 'lower' | 'higher') => void;

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const QUICK = process.env.BENCH_QUICK === '1';
const ELF = new Uint8Array(readFileSync(join(ROOT, 'examples/wsecho.elf')));
const CACHE = join(tmpdir(), 'berm-bench-cache');

/** The `ws` section: see the module comment. */
export async function benchWs(fig: Fig, progress: (msg: string) => void): Promise<void> {
  const n = QUICK ? 2_000 : 10_000;
  const work = mkdtempSync(join(tmpdir(), 'berm-bench-ws-'));
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((r) => wss.once('listening', () => r()));
  const port = (wss.address() as AddressInfo).port;
  const rt = await BermRuntime.create({
    state: join(work, 'state'),
    poolSize: 2,
    cacheDir: CACHE,
    limits: { harnessRate: 1e9, harnessBurst: 1e9 },
  });
  try {
    rt.start();
    await rt.deploy('wsecho', ELF, { capabilities: ['ws', 'storage'], grant: { hosts: ['127.0.0.1'] } });

    progress(`ws: ${n} frames through one connection into wsecho (echoed, counted in keys)`);
    const done = new Promise<number>((resolve, reject) => {
      wss.once('connection', (socket) => {
        let echoed = 0;
        let t0 = 0;
        socket.on('message', (data) => {
          if (String(data) !== String(echoed))
            reject(new Error(`echo ${echoed} came back as ${String(data)}`));
          if (++echoed === n) resolve(performance.now() - t0);
        });
        t0 = performance.now();
        for (let i = 0; i < n; i++) socket.send(String(i));
      });
    });
    const dial = await rt.invoke('wsecho', 'dial', JSON.stringify({ url: `ws://127.0.0.1:${port}/` }));
    if (dial.status !== 'ok') throw new Error(`dial: ${JSON.stringify(dial)}`);
    const ms = await done;
    const framesPerS = n / (ms / 1000);
    fig(
      'ws.frames_per_s',
      framesPerS,
      '/s',
      `frames/s through one connection into a harness (${n} echoed)`,
      'higher',
    );

    // the baseline: the same events handed to the same tool through the queue, one after another
    const id = (JSON.parse(dial.result) as { id: number }).id;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const o = await rt.invoke('wsecho', 'on_event', eventArgs('message', id + 1000, 'bye!'), {
        trigger: 'event',
      });
      if (o.status !== 'failed' && o.status !== 'ok') throw new Error(`on_event: ${JSON.stringify(o)}`);
    }
    const invokesPerS = n / ((performance.now() - t0) / 1000);
    fig(
      'ws.queue_invocations_per_s',
      invokesPerS,
      '/s',
      'the same tool invoked one at a time through the queue',
      'higher',
    );
    fig(
      'ws.frames_vs_queue',
      framesPerS / invokesPerS,
      'x',
      'frames/s over one-at-a-time invocations/s',
      'higher',
    );
  } finally {
    for (const c of wss.clients) c.terminate();
    wss.close();
    await rt.close();
    rmSync(work, { recursive: true, force: true });
  }
}
