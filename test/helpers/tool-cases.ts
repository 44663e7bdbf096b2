// The loop both fixture suites share: run a harness's expected tool cases (results of the same
// source built natively against the SDK's stand-in host) through Harness.invoke and compare.
import type { Test } from 'tap';
import type { Engine } from '../../src/engine/engine.js';
import { Harness, type InvokeOptions } from '../../src/harness/harness.js';

/** One expected case: `tool(args)` gives `result`, or fails through berm.fail with it when !ok. */
export interface ExpectedToolCase {
  tool: string;
  args: string;
  ok: boolean;
  result: string;
}

const enc = new TextEncoder();

/**
 * Load the ELF at `elfPath` through `engine`, invoke every case (arguments as raw bytes, so the
 * guest parses them itself) and assert its status and its result or failure message.
 * @param options per-call invoke options (called once per case: capabilities with state start fresh)
 * @param width characters of the arguments shown in each assertion's name
 */
export async function runToolCases(
  t: Test,
  engine: Engine,
  elfPath: string,
  cases: readonly ExpectedToolCase[],
  options: () => InvokeOptions,
  width = 40,
): Promise<void> {
  const h = await Harness.load(engine, elfPath);
  for (const c of cases) {
    const r = h.invoke(c.tool, enc.encode(c.args), options());
    const what = `${c.tool}(${c.args.slice(0, width)})`;
    if (c.ok) {
      t.equal(r.status, 'ok', `${what} succeeds`);
      if (r.status === 'ok') t.equal(r.result, c.result, `${what} result`);
    } else {
      t.equal(r.status, 'failed', `${what} fails through berm.fail`);
      if (r.status === 'failed') t.equal(r.message, c.result, `${what} message`);
    }
  }
}
