/**
 * A deployed harness's translated code, for the workbench's Code view and any client:
 *
 *   GET /harnesses/{name}/code                  200 {"functions":[{"name","pc":"0x...","size"}]},
 *                                               sorted by pc (size in bytes)
 *   GET /harnesses/{name}/code?function=NAME    200 {"name","pc","size","focus":null,
 *   GET /harnesses/{name}/code?pc=0xHEX             "rows":[{"pc","hex","asm","wat":[...]}],
 *                                                   "wat":"(func ...)"}; with pc, the function
 *                                               containing it, and focus is that pc
 *
 * Each row is a guest instruction (`berm disasm`'s text; hex its encoding) with the WAT lines of
 * the baseline-tier code it was translated to; `wat` is the whole function (src/translate/listing.ts).
 * Refusals: 404 unknown harness, function, or a pc in no function; 400 a malformed pc or query;
 * 413 a function too long to list; 422 an image that is not an ELF (a WebAssembly image has no
 * guest code). The work (reading, translating, printing) runs on one worker thread that keeps the
 * last images by digest, so the serving thread only routes.
 */
import { createRequire } from 'node:module';
import type { Worker } from 'node:worker_threads';
import type { ListingQuery } from '../translate/listing-worker.js';
import type { Deployments } from './deployments.js';
import { HttpError, sendJson } from './http.js';
import type { ServerResponse } from 'node:http';

interface Pending {
  resolve(v: unknown): void;
  reject(e: Error): void;
}

function workerUrl(): URL {
  // under the TypeScript loader this module is .ts and so is the worker; built, .js
  const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
  return new URL(`../translate/listing-worker${ext}`, import.meta.url);
}

const hex = (n: number): string => '0x' + n.toString(16);

/** The listing worker, started on the first request and unreferenced while idle. */
export class CodeListings {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();

  constructor(private readonly deployments: Deployments) {}

  /**
   * Serve GET /harnesses/{name}/code (`query`: the text after '?').
   * @throws HttpError for every refusal (see the module comment)
   */
  async serve(name: string, method: string, query: string, res: ServerResponse): Promise<void> {
    if (method !== 'GET') throw new HttpError(405, `${method} is not allowed here (GET)`);
    const d = this.deployments.require(name);
    const params = new URLSearchParams(query);
    const fn = params.get('function');
    const pcText = params.get('pc');
    if (fn !== null && pcText !== null) throw new HttpError(400, 'give function or pc, not both');
    let q: ListingQuery = { kind: 'functions' };
    if (fn !== null) {
      if (fn === '') throw new HttpError(400, 'function= needs a function name');
      q = { kind: 'function', name: fn };
    } else if (pcText !== null) {
      if (!/^0x[0-9a-fA-F]{1,16}$/.test(pcText)) {
        throw new HttpError(
          400,
          `pc must be a hexadecimal address like 0x10078, not ${JSON.stringify(pcText)}`,
        );
      }
      const pc = Number(BigInt(pcText));
      if (!Number.isSafeInteger(pc)) throw new HttpError(404, `no function contains pc ${pcText}`);
      q = { kind: 'pc', pc };
    }
    const result = await this.ask(d.digest, this.deployments.images.imagePath(d.digest), q);
    if (q.kind === 'functions') {
      const fns = result as { name: string; pc: number; size: number }[];
      sendJson(res, 200, { functions: fns.map((f) => ({ name: f.name, pc: hex(f.pc), size: f.size })) });
      return;
    }
    const l = result as {
      name: string;
      pc: number;
      size: number;
      rows: { pc: number; hex: string; asm: string; wat: string[] }[];
      wat: string;
    };
    sendJson(res, 200, {
      name: l.name,
      pc: hex(l.pc),
      size: l.size,
      focus: q.kind === 'pc' ? hex(q.pc) : null,
      rows: l.rows.map((r) => ({ pc: hex(r.pc), hex: r.hex, asm: r.asm, wat: r.wat })),
      wat: l.wat,
    });
  }

  /** Stop the worker; pending requests fail. */
  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    if (w) await w.terminate();
  }

  private ask(digest: string, path: string, query: ListingQuery): Promise<unknown> {
    const w = this.start();
    const id = this.nextId++;
    const p = new Promise<unknown>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    if (this.pending.size === 1) w.ref();
    w.postMessage({ id, digest, path, query });
    return p;
  }

  private settle(id: number): Pending | undefined {
    const p = this.pending.get(id);
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker?.unref();
    return p;
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const { Worker } = createRequire(import.meta.url)(
      'node:worker_threads',
    ) as typeof import('node:worker_threads');
    const w = new Worker(workerUrl(), {
      execArgv: process.execArgv.filter((a) => !a.startsWith('--stack-size')),
      resourceLimits: { stackSizeMb: 32 },
    });
    w.on('message', (msg: { id: number; result?: unknown; error?: { status: number; message: string } }) => {
      const p = this.settle(msg.id);
      if (!p) return;
      if (msg.error) p.reject(new HttpError(msg.error.status, msg.error.message));
      else p.resolve(msg.result);
    });
    const fail = (e: Error) => {
      if (this.worker === w) this.worker = null;
      for (const p of this.pending.values())
        p.reject(new HttpError(500, `code listing failed: ${e.message}`));
      this.pending.clear();
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`the listing worker exited (code ${code})`)));
    w.unref();
    this.worker = w;
    return w;
  }
}
