/**
 * A development backend that runs guests on the calling thread with the harness layer directly.
 * It exists so the HTTP and MCP surfaces can be exercised without the queue; bermd uses the
 * queue's runtime, never this. It has no wakes and no limits beyond the harness layer's.
 */
import { linkerEntries } from '../config/declarations.js';
import { Engine } from '../engine/engine.js';
import { Trap } from '../engine/traps.js';
import { Harness, HarnessError } from '../harness/harness.js';
import type {
  Backend,
  DeployGrant,
  InvocationEvent,
  InvokeOutcome,
  RuntimeStats,
  WakeInfo,
  WakeRequest,
} from './backend.js';

/** See the module comment: guests on the calling thread, for tests of the HTTP surface only. */
export class InlineBackend implements Backend {
  private readonly harnesses = new Map<string, { harness: Harness; grant: DeployGrant }>();
  private readonly listeners: ((e: InvocationEvent) => void)[] = [];
  private inFlight = 0;

  /** @param cacheDir the Wasm cache directory (null: no cache) */
  constructor(cacheDir: string | null) {
    this.engine = new Engine({ cacheDir });
  }
  private readonly engine: Engine;

  async deploy(name: string, elf: Uint8Array, grant: DeployGrant): Promise<void> {
    const harness = await Harness.load(this.engine, elf);
    this.harnesses.set(name, { harness, grant });
  }

  async undeploy(name: string): Promise<void> {
    this.harnesses.delete(name);
  }

  async invoke(
    harness: string,
    tool: string,
    argsJson: string,
    options: { onLog?: (line: string) => void },
  ): Promise<InvokeOutcome> {
    const t0 = performance.now();
    const h = this.harnesses.get(harness);
    let out: InvokeOutcome;
    this.inFlight++;
    try {
      if (!h) throw new HarnessError(`no harness named ${harness}`);
      // yield once so a streaming caller has sent its headers before the guest runs
      await new Promise((r) => setImmediate(r));
      const capabilities = linkerEntries({ name: harness, ...h.grant });
      const r = h.harness.invoke(tool, argsJson, {
        capabilities,
        ...(options.onLog ? { onLog: options.onLog } : {}),
      });
      out = r.status === 'ok' ? { status: 'ok', result: r.result } : { status: 'failed', message: r.message };
    } catch (e) {
      if (e instanceof Trap) {
        out = {
          status: 'trapped',
          trap: e.name,
          message: e.message,
          pc: e.pc,
          symbol: e.symbol ? `${e.symbol}+0x${e.offset.toString(16)}` : '',
        };
      } else out = { status: 'error', message: (e as Error).message };
    } finally {
      this.inFlight--;
    }
    const ev: InvocationEvent = {
      trigger: 'call',
      harness,
      outcome: out.status,
      seconds: (performance.now() - t0) / 1000,
    };
    for (const l of this.listeners) l(ev);
    return out;
  }

  async armWake(_req: WakeRequest): Promise<WakeInfo> {
    throw new Error('wakes need the queue runtime; this backend has none');
  }
  async listWakes(): Promise<WakeInfo[]> {
    return [];
  }
  async cancelWake(_id: string): Promise<boolean> {
    return false;
  }
  stats(): RuntimeStats {
    return { queueDepth: 0, inFlight: this.inFlight, wakesPending: 0, spills: 0, translations: 0 };
  }
  onInvocation(listener: (e: InvocationEvent) => void): void {
    this.listeners.push(listener);
  }
  async close(): Promise<void> {
    this.harnesses.clear();
  }
}
