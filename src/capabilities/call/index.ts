/**
 * The call capability:
 *   berm.call (harness, tool, args_json) -> the called tool's reply, passed through
 * The runtime supplies ctx.callTool, which runs the tool in a fresh instance. A harness may call
 * only the harnesses its declaration names in `callees` (an absent list reaches none: otherwise a
 * harness granted nothing could borrow another's capabilities). Chains deeper than maxCallDepth
 * (default 4) are refused; the caller gets a reply, never a trap.
 */
import { fieldText } from '../../wire/fields.js';
import {
  arity,
  defineCapability,
  guarded,
  limitsOf,
  type Capability,
  type CapabilityContext,
  type CapabilityReply,
} from '../types.js';

/** Limits of the call capability and their defaults. */
export const CALL_LIMITS = Object.freeze({
  /** deepest chain of berm.call (a top-level tool call has depth 0) */
  maxCallDepth: 4,
});

function call(fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const name = 'berm.call';
  const bad = arity(name, fields, 'harness, tool, args_json', 3);
  if (bad) return bad;
  const harness = fieldText(fields[0]!, 'harness');
  const tool = fieldText(fields[1]!, 'tool');
  const argsJson = fieldText(fields[2]!, 'args_json');
  if (!(ctx.grant.callees ?? []).includes(harness)) {
    return {
      refused: `${name}: ${ctx.harness} may not call ${JSON.stringify(harness)}; declare callees = ["${harness}"]`,
    };
  }
  if (tool === '') return { refused: `${name}: tool name is empty` };
  try {
    JSON.parse(argsJson);
  } catch (e) {
    return { refused: `${name}: args_json is not JSON: ${(e as Error).message}` };
  }
  const max = limitsOf(ctx, CALL_LIMITS).maxCallDepth;
  const depth = ctx.depth + 1;
  if (depth > max) return { refused: `${name}: call chain depth ${depth} exceeds the limit of ${max}` };
  if (!ctx.callTool) return { error: `${name}: this runtime cannot chain tool calls` };
  return ctx.callTool(harness, tool, argsJson, depth);
}

/** The call capability: see the module comment and docs/capabilities.md. */
export const callCapability: Capability = defineCapability({
  name: 'call',
  calls: { 'berm.call': (f, c) => guarded('berm.call', () => call(f, c)) },
  grant: {
    // Without callees the grant reaches no harness.
    schema: {
      type: 'object',
      properties: { callees: { type: 'array', items: { type: 'string', pattern: '^[A-Za-z0-9_-]+$' } } },
    },
    fixes: { callees: 'write callees = ["other-harness"]' },
    prepare: (values) => ({
      grant: values.callees === undefined ? {} : { callees: [...new Set(values.callees as string[])].sort() },
      problems: [],
    }),
  },
  limits: CALL_LIMITS,
});
