/**
 * The daemon's {@link Backend} over the queue's runtime (src/runtime): guests and translations run
 * on its worker pool, wakes live in its due-set, every invocation is journaled by it. The daemon
 * writes the deployment records into the runtime's store itself (src/daemon/deployments.ts: after
 * its image file is durable and the runtime serves it), so deploys and undeploys go to the runtime
 * unpersisted.
 */
import {
  BermRuntime,
  LIST_WAKES_MAX_BYTES,
  type CancelSignal,
  deadWakeInfo,
  wakeInfo,
  type Outcome,
  type RuntimeLimits,
  type WakeRecord,
} from '../runtime/index.js';
import type {
  Authority,
  DeadWakeInfo,
  InvocationEvent,
  InvokeOutcome,
  RuntimeStats,
  WakeInfo,
  WakeRequest,
} from '../contract/index.js';
import type { DeploymentStore } from '../store/store.js';
import type { Backend, DeployGrant, WakeEvent } from './backend.js';

/**
 * Results and failure messages longer than this (UTF-16 units) reach their callers in a turn of the
 * event loop of their own (see {@link QueueBackend.invoke}); a shorter one is encoded in well under
 * a millisecond.
 */
export const LARGE_RESULT_CHARS = 64 * 1024;

/** Map the runtime's outcome to the daemon's. */
export function toInvokeOutcome(o: Outcome): InvokeOutcome {
  const chain = o.info?.chain;
  const withChain = <T extends InvokeOutcome>(x: T): T => (chain !== undefined ? { ...x, chain } : x);
  switch (o.status) {
    case 'ok':
      return withChain({ status: 'ok', result: o.result });
    case 'failed':
      return withChain({ status: 'failed', message: o.message });
    case 'trapped':
      return withChain({
        status: 'trapped',
        trap: o.trap.name,
        message: o.trap.message,
        pc: o.trap.pc,
        symbol: o.trap.symbol ? `${o.trap.symbol}+0x${o.trap.offset.toString(16)}` : '',
      });
    case 'refused':
      return { status: 'refused', message: o.error.message, limit: o.error.limit };
    case 'error':
      return withChain({ status: 'error', message: o.message, code: o.code });
    // nobody reads this reply (its caller went away); an error in the upstream shapes all the same
    case 'cancelled':
      return withChain({ status: 'error', message: o.message, code: 'cancelled' });
  }
}

/** A Backend on a running {@link BermRuntime}. */
export class QueueBackend implements Backend {
  private readonly closers: (() => Promise<void>)[] = [];

  constructor(readonly runtime: BermRuntime) {}

  /** Run `f` when the backend closes, before the runtime does (attached services). */
  onClose(f: () => Promise<void>): void {
    this.closers.push(f);
  }

  async deploy(name: string, elf: Uint8Array, grant: DeployGrant): Promise<void> {
    await this.runtime.deploy(
      name,
      elf,
      { capabilities: grant.capabilities, grant: grant.grant },
      { persist: false },
    );
  }

  async undeploy(name: string): Promise<void> {
    this.runtime.undeploy(name, { persist: false });
  }

  deploymentRecords(): DeploymentStore {
    return this.runtime.store.deployments;
  }

  async invoke(
    harness: string,
    tool: string,
    argsJson: string,
    options: { onLog?: (line: string) => void; authority?: Authority; signal?: CancelSignal },
  ): Promise<InvokeOutcome> {
    const o = await this.runtime.invoke(harness, tool, argsJson, options);
    // A large result is handed on in a turn of the event loop of its own. The workers' outcomes
    // arrive on message ports, and Node drains a port greedily: the messages that arrive while it
    // delivers one are delivered in the same turn (up to 1,000). A worker finishes the next large
    // result while this thread encodes the last one's reply, so a front end that encodes a reply
    // in one go (MCP's, through its SDK) would encode reply after reply in one turn, accepting no
    // connection and answering no /health until the queue ran dry. (HTTP replies are encoded a
    // slice per turn: ./reply-size.ts.)
    const text = o.status === 'ok' ? o.result : o.status === 'failed' ? o.message : '';
    if (text.length > LARGE_RESULT_CHARS) await new Promise((r) => setImmediate(r));
    return toInvokeOutcome(o);
  }

  async armWake(req: WakeRequest): Promise<WakeInfo> {
    return wakeInfo(
      this.runtime.arm({
        harness: req.harness,
        ...(req.at !== undefined ? { at: req.at } : { delayMs: req.delayMs ?? 0 }),
        payload: req.payload,
        armedBy: 'api',
        ...(req.id !== undefined ? { id: req.id } : {}),
      }),
    );
  }

  async listWakes(limit: number): Promise<{ wakes: WakeInfo[]; pending: number }> {
    const wakes = this.runtime.list({ limit, maxBytes: LIST_WAKES_MAX_BYTES }).map(wakeInfo);
    return { wakes, pending: this.runtime.stats().wakesPending };
  }

  async cancelWake(id: string): Promise<boolean> {
    return this.runtime.cancel(id);
  }

  async listDead(limit: number): Promise<{ dead: DeadWakeInfo[]; count: number }> {
    const counts = this.runtime.deadCounts();
    const count = Object.values(counts).reduce((a, b) => a + b, 0);
    return { dead: this.runtime.deadList({ limit }).map(deadWakeInfo), count };
  }

  async retryDead(id: string): Promise<WakeInfo | 'missing' | 'conflict'> {
    const r = this.runtime.retryDead(id);
    return r.status === 'armed' ? wakeInfo(r.record) : r.status;
  }

  async dropDead(id: string): Promise<boolean> {
    return this.runtime.dropDead(id) !== null;
  }

  deadCounts(): Record<string, number> {
    return this.runtime.deadCounts();
  }

  stats(): RuntimeStats {
    return this.runtime.stats();
  }

  onInvocation(listener: (e: InvocationEvent) => void): void {
    this.runtime.on(
      'invocation',
      (rec: { trigger: string; harness: string; outcome: string }, o: Outcome | null) => {
        if (!['call', 'wake', 'notify', 'event'].includes(rec.trigger)) return;
        const info = o?.info;
        listener({
          trigger: rec.trigger as InvocationEvent['trigger'],
          harness: rec.harness,
          outcome: rec.outcome as InvocationEvent['outcome'],
          seconds: info ? (info.ms + info.waitMs) / 1000 : 0,
        });
      },
    );
  }

  onWakeEvent(listener: (e: WakeEvent) => void): void {
    this.runtime.on('armed', (w: WakeRecord) => listener({ type: 'armed', wake: wakeInfo(w) }));
    this.runtime.on(
      'wake',
      (w: {
        id: string;
        harness: string;
        scheduledAt: number;
        firedAt: number;
        lateMs: number;
        attempt: number;
      }) => listener({ type: 'fired', ...w }),
    );
    this.runtime.on('cancelled', (w: { id: string; harness: string }) =>
      listener({ type: 'cancelled', ...w }),
    );
  }

  start(): void {
    this.runtime.start();
  }

  limits(): [string, string, string][] {
    const rt = this.runtime;
    return (Object.keys(rt.limits) as (keyof RuntimeLimits)[]).map((k) => [
      k,
      String(rt.limits[k]),
      rt.limitSources[k] === 'default'
        ? 'default'
        : rt.limitSources[k] === 'flag'
          ? 'flag --limit'
          : rt.limitSources[k] === 'env'
            ? 'env BERMD_LIMITS'
            : rt.limitSources[k] === 'file'
              ? 'file [limits]'
              : rt.limitSources[k],
    ]);
  }

  get drainMs(): number {
    return this.runtime.limits.drainMs;
  }

  async close(drainMs: number): Promise<void> {
    for (const f of this.closers.splice(0)) await f();
    await this.runtime.close(drainMs);
  }
}
