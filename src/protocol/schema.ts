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
import protobuf from 'protobufjs';

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

/** The parsed schema (package crabtalk.protocol). */
export const ROOT: protobuf.Root = protobuf.parse(protoText(), { keepCase: true }).root;

/** Look up a message type of package crabtalk.protocol by its short name. */
export function messageType(name: string): protobuf.Type {
  return ROOT.lookupType(`crabtalk.protocol.${name}`);
}

/** crabtalk.protocol.ClientMessage */
export const ClientMessage: protobuf.Type = messageType('ClientMessage');
/** crabtalk.protocol.ServerMessage */
export const ServerMessage: protobuf.Type = messageType('ServerMessage');
/** crabtalk.protocol.BermClientMessage (ClientMessage.berm) */
export const BermClientMessage: protobuf.Type = messageType('BermClientMessage');

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
  return decode(ClientMessage, bytes);
}

/** Decode a ServerMessage (see {@link decode}). */
export function decodeServer(bytes: Uint8Array): Envelope {
  return decode(ServerMessage, bytes);
}

/** Encode a ClientMessage with one member set: `clientMessage('ping', {})`. */
export function encodeClient(member: string, body: unknown): Uint8Array {
  return encode(ClientMessage, { [member]: body });
}

/** Encode a ServerMessage with one member set: `serverMessage('pong', {})`. */
export function encodeServer(member: string, body: unknown): Uint8Array {
  return encode(ServerMessage, { [member]: body });
}

/** The set member of a decoded envelope, or undefined when none is set (an empty message). */
export function member(env: Envelope): { name: string; body: Plain } | undefined {
  const name = env.msg;
  if (typeof name !== 'string') return undefined;
  const body = env[name];
  return { name, body: (body ?? {}) as Plain };
}

/** Names of the ClientMessage oneof members, by field number. */
export const CLIENT_MEMBERS: ReadonlyMap<number, string> = new Map(
  ClientMessage.oneofs.msg!.fieldsArray.map((f) => [f.id, f.name]),
);
