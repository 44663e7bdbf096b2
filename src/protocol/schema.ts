/**
 * The agent daemon's message types, loaded with protobufjs from ./crabtalk.proto (the one source
 * of the schema; nothing is generated), and the codecs the door, the client and the test double
 * share.
 *
 * Messages travel as plain objects in protobufjs's conversion form: field names in snake_case as
 * the .proto spells them (keepCase), 64-bit integers as decimal strings (so ids above 2^53 survive
 * and structured clone across the worker bridge works), bytes as Uint8Array, the set member of a
 * oneof also named by its oneof (`msg: 'send'`). A field absent from the object takes its default.
 */
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import type protobuf from 'protobufjs';

/** A decoded message as a plain object (see the module comment). */
export type Plain = Record<string, unknown>;

/** A ClientMessage or ServerMessage: exactly one member of the `msg` oneof, named by `msg`. */
export interface Envelope extends Plain {
  msg?: string;
}

/** Thrown for bytes that are not a message of the expected type; the message says why. */
export class ProtocolDecodeError extends Error {
  override name = 'ProtocolDecodeError';
}

function protoText(): string {
  // Next to this module under the TypeScript loader (src/protocol); from a build (dist/protocol)
  // the source tree's copy.
  const candidates = [
    new URL('./crabtalk.proto', import.meta.url),
    new URL('../../src/protocol/crabtalk.proto', import.meta.url),
  ];
  for (const c of candidates) {
    try {
      return fs.readFileSync(c, 'utf8');
    } catch {
      /* next */
    }
  }
  throw new Error(`crabtalk.proto not found next to ${import.meta.url}`);
}

interface Schema {
  root: protobuf.Root;
  client: protobuf.Type;
  server: protobuf.Type;
  bermClient: protobuf.Type;
}
let loaded: Schema | null = null;

/**
 * The parsed schema, loaded on first use: protobufjs and the parse cost ~150 ms, which a process
 * that only registers the protocol capabilities (every CLI start) should not pay.
 */
function schema(): Schema {
  if (!loaded) {
    const pb = createRequire(import.meta.url)('protobufjs') as typeof protobuf;
    const root = pb.parse(protoText(), { keepCase: true }).root;
    const t = (n: string) => root.lookupType(`crabtalk.protocol.${n}`);
    loaded = {
      root,
      client: t('ClientMessage'),
      server: t('ServerMessage'),
      bermClient: t('BermClientMessage'),
    };
  }
  return loaded;
}

/** Look up a message type of package crabtalk.protocol by its short name. */
export function messageType(name: string): protobuf.Type {
  return schema().root.lookupType(`crabtalk.protocol.${name}`);
}

/** crabtalk.protocol.ClientMessage */
export function clientType(): protobuf.Type {
  return schema().client;
}
/** crabtalk.protocol.ServerMessage */
export function serverType(): protobuf.Type {
  return schema().server;
}
/** crabtalk.protocol.BermClientMessage (ClientMessage.berm) */
export function bermClientType(): protobuf.Type {
  return schema().bermClient;
}

const TO_OBJECT: protobuf.IConversionOptions = {
  longs: String,
  enums: String,
  bytes: Uint8Array as unknown as protobuf.IConversionOptions['bytes'],
  oneofs: true,
  defaults: false,
};

/**
 * Decode `bytes` as `type`.
 * @throws ProtocolDecodeError naming the type when the bytes are not a valid encoding (truncated,
 *   a wire type that contradicts the schema, a length past the end, invalid UTF-8 is replaced
 *   by protobufjs, not refused).
 */
export function decode(type: protobuf.Type, bytes: Uint8Array): Envelope {
  let m: protobuf.Message;
  try {
    m = type.decode(bytes);
  } catch (e) {
    throw new ProtocolDecodeError(`not a ${type.name}: ${(e as Error).message}`);
  }
  return stripSynthetic(type.toObject(m, TO_OBJECT)) as Envelope;
}

/**
 * Remove the virtual members protobufjs adds for proto3 `optional` fields (a synthetic oneof
 * named `_field` whose value is the field's name): they are no fields of the message.
 */
function stripSynthetic(v: unknown): unknown {
  if (Array.isArray(v)) {
    for (const x of v) stripSynthetic(x);
  } else if (v && typeof v === 'object' && !(v instanceof Uint8Array)) {
    const o = v as Record<string, unknown>;
    for (const k of Object.keys(o)) {
      if (k.startsWith('_')) delete o[k];
      else stripSynthetic(o[k]);
    }
  }
  return v;
}

/**
 * Encode a plain object as `type`. Unknown properties are ignored; values are converted as
 * protobufjs's fromObject does (numeric strings for 64-bit integers).
 * @throws Error when a value cannot be converted (e.g. a non-numeric string for a uint64).
 */
export function encode(type: protobuf.Type, object: Plain): Uint8Array {
  const o = { ...object };
  delete o.msg; // the oneof's name is derived from the member that is set
  return type.encode(type.fromObject(o)).finish();
}

/** Decode a ClientMessage (see {@link decode}). */
export function decodeClient(bytes: Uint8Array): Envelope {
  return decode(clientType(), bytes);
}

/** Decode a ServerMessage (see {@link decode}). */
export function decodeServer(bytes: Uint8Array): Envelope {
  return decode(serverType(), bytes);
}

/** Encode a ClientMessage with one member set: `clientMessage('ping', {})`. */
export function encodeClient(member: string, body: unknown): Uint8Array {
  return encode(clientType(), { [member]: body });
}

/** Encode a ServerMessage with one member set: `serverMessage('pong', {})`. */
export function encodeServer(member: string, body: unknown): Uint8Array {
  return encode(serverType(), { [member]: body });
}

/** The set member of a decoded envelope, or undefined when none is set (an empty message). */
export function member(env: Envelope): { name: string; body: Plain } | undefined {
  const name = env.msg;
  if (typeof name !== 'string') return undefined;
  const body = env[name];
  return { name, body: (body ?? {}) as Plain };
}

/** Names of the ClientMessage oneof members, by field number. */
export function clientMembers(): ReadonlyMap<number, string> {
  return new Map(clientType().oneofs.msg!.fieldsArray.map((f) => [f.id, f.name]));
}
