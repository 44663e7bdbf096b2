/**
 * The schedule capability: a harness arms wakes of its own `on_wake` and delayed tool calls.
 *   berm.wake.arm    (delay_ms, payload?, id?)       -> one field, the wake id
 *   berm.wake.cancel (id)                            -> one field, "1" cancelled or "0" no such wake
 *   berm.call.after  (delay_ms, harness, tool, args) -> one field, the wake id
 * delay_ms is decimal ASCII milliseconds (digits only: a sign, a fraction, "inf" or "NaN" are
 * refused). Re-arming an existing id replaces it; berm.call.after keeps at most one pending call
 * per arming harness (re-arming replaces it) and reaches only the harness itself and the callees
 * its declaration names (the call capability's `callees`, the rule of berm.call). This module checks the request's shape; the due-set
 * (ctx.schedule, provided by the runtime) checks the rest (the target exports `on_wake`, the
 * payload and delay limits) and owns the state. Without ctx.schedule the calls answer an error.
 *
 * A delay counts from the invocation's instant (ctx.now: the `now` of the wake or notify record,
 * the start of a tool call), not from the moment the host call arrives: the wake is due at
 * ctx.now + delay_ms exactly. So a recurring schedule that computes its next delay from its
 * record (the SDKs' berm_every: period - ((now - scheduled_at) mod period)) lands on
 * scheduled_at + k * period, whatever the time spent between the start of the delivery and the
 * arm call (docs/wakes.md). Without ctx.now (no runtime fixed one) a delay counts from the arrival.
 */
import { fieldText } from '../../wire/fields.js';
import {
  arity,
  defineCapability,
  guarded,
  type Capability,
  type CapabilityContext,
  type CapabilityReply,
} from '../types.js';

/** Longest decimal delay accepted before the runtime's own maximum applies (fits a double exactly). */
const MAX_DELAY_DIGITS = 15;

function delayOf(name: string, field: Uint8Array): number | CapabilityReply {
  const text = fieldText(field, 'delay_ms');
  if (!/^[0-9]+$/.test(text) || text.length > MAX_DELAY_DIGITS) {
    return {
      refused: `${name}: delay_ms must be decimal ASCII milliseconds (at most ${MAX_DELAY_DIGITS} digits), got ${JSON.stringify(text.slice(0, 40))}`,
    };
  }
  return Number(text);
}

/** The absolute due instant of a delay counted from the invocation's instant, when there is one. */
function due(delay: number, ctx: CapabilityContext): { at?: number } {
  return ctx.now !== undefined ? { at: ctx.now + delay } : {};
}

function host(
  name: string,
  ctx: CapabilityContext,
): NonNullable<CapabilityContext['schedule']> | CapabilityReply {
  return (
    ctx.schedule ?? {
      error: `${name}: this runtime has no due-set (run the harness under berm worker or bermd)`,
    }
  );
}

function arm(fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const name = 'berm.wake.arm';
  const bad = arity(name, fields, 'delay_ms, payload?, id?', 1, 3);
  if (bad) return bad;
  const delay = delayOf(name, fields[0]!);
  if (typeof delay !== 'number') return delay;
  const payload = fields.length > 1 ? fieldText(fields[1]!, 'payload') : '';
  const id = fields.length > 2 ? fieldText(fields[2]!, 'id') : null;
  if (id !== null && id === '') return { refused: `${name}: id is empty` };
  const h = host(name, ctx);
  if (!('arm' in h)) return h;
  return h.arm({ delayMs: delay, ...due(delay, ctx), payload, id });
}

function cancel(fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const name = 'berm.wake.cancel';
  const bad = arity(name, fields, 'id', 1);
  if (bad) return bad;
  const id = fieldText(fields[0]!, 'id');
  if (id === '') return { refused: `${name}: id is empty` };
  const h = host(name, ctx);
  if (!('cancel' in h)) return h;
  return h.cancel(id);
}

function callAfter(fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const name = 'berm.call.after';
  const bad = arity(name, fields, 'delay_ms, harness, tool, args', 4);
  if (bad) return bad;
  const delay = delayOf(name, fields[0]!);
  if (typeof delay !== 'number') return delay;
  const harness = fieldText(fields[1]!, 'harness');
  const tool = fieldText(fields[2]!, 'tool');
  const args = fieldText(fields[3]!, 'args');
  if (harness === '' || tool === '') return { refused: `${name}: harness and tool must not be empty` };
  // the callee runs later with its own grants, as a berm.call's does: the same rule as berm.call
  // (the declaration's callees), else a harness granted only schedule could borrow any deployed
  // harness's capabilities; its own tools need no grant (it can run them anyway)
  if (harness !== ctx.harness && !(ctx.grant.callees ?? []).includes(harness)) {
    return {
      refused: `${name}: ${ctx.harness} may not call ${JSON.stringify(harness)}; declare callees = ["${harness}"]`,
    };
  }
  try {
    JSON.parse(args);
  } catch (e) {
    return { refused: `${name}: args is not JSON: ${(e as Error).message}` };
  }
  const h = host(name, ctx);
  if (!('callAfter' in h)) return h;
  return h.callAfter({ delayMs: delay, ...due(delay, ctx), harness, tool, args });
}

/** The schedule capability: see the module comment and docs/runtime-queue.md. */
export const scheduleCapability: Capability = defineCapability({
  name: 'schedule',
  calls: {
    'berm.wake.arm': (f, c) => guarded('berm.wake.arm', () => arm(f, c)),
    'berm.wake.cancel': (f, c) => guarded('berm.wake.cancel', () => cancel(f, c)),
    'berm.call.after': (f, c) => guarded('berm.call.after', () => callAfter(f, c)),
  },
});
