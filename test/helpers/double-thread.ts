// The agent-daemon double in its own worker thread (see double-worker.ts), driven from a test.
import { Worker } from 'node:worker_threads';
import type { Envelope } from '../../src/protocol/schema.js';

/** A handle on a double running in a worker thread. */
export interface DoubleThread {
  /** endpoint text for the door (`127.0.0.1:port` or `unix:/path`) */
  endpoint: string;
  received(): Promise<Envelope[]>;
  clear(): Promise<void>;
  silent(on: boolean): Promise<void>;
  drop(): Promise<void>;
  state(): Promise<{
    agents: { name: string; skills: string[] }[];
    sessions: unknown[];
    subscriptions: unknown[];
    published: { source: string; payload: string }[];
  }>;
  setSkills(agent: string, skills: string[]): Promise<void>;
  close(): Promise<void>;
}

/** Start the double on 127.0.0.1:0 (or `options.path`) in a worker thread. */
export async function startDoubleThread(
  options: { path?: string; secret?: string } = {},
): Promise<DoubleThread> {
  const w = new Worker(new URL('./double-worker.ts', import.meta.url), {
    workerData: options,
    execArgv: process.execArgv.filter((a) => !a.startsWith('--stack-size')),
  });
  w.unref();
  let next = 1;
  const pending = new Map<number, (v: unknown) => void>();
  let ready!: (v: unknown) => void;
  const endpoint = new Promise<unknown>((r) => (ready = r));
  pending.set(0, ready);
  w.on('message', (m: { id: number; value: unknown }) => {
    const f = pending.get(m.id);
    pending.delete(m.id);
    f?.(m.value);
  });
  w.on('error', (e) => {
    for (const f of pending.values()) f(Promise.reject(e));
  });
  const ask = <T>(cmd: string, arg?: unknown) =>
    new Promise<T>((resolve) => {
      const id = next++;
      pending.set(id, resolve as (v: unknown) => void);
      w.postMessage({ id, cmd, arg });
    });
  const ep = (await endpoint) as string;
  return {
    endpoint: ep,
    received: () => ask('received'),
    clear: () => ask('clear'),
    silent: (on) => ask('silent', on),
    drop: () => ask('drop'),
    state: () => ask('state'),
    setSkills: (agent, skills) => ask('skills', [agent, skills]),
    close: async () => {
      await ask('close');
      await w.terminate();
    },
  };
}
