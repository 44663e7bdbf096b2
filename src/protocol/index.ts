/**
 * The protocol door (see ./door.ts): harnesses talk to the crabtalk agent daemon through granted
 * groups of its own protocol. Importing this module registers the `protocol:*` capabilities
 * with the capability registry, so a declaration may grant them (and is refused, with the fix,
 * when it names a message no harness may hold).
 */
import { CAPABILITIES, registerCapability, registerCapabilityFamily } from '../capabilities/index.js';
import { PROTOCOL_CAPABILITIES } from './capability.js';
import { checkGrantName } from './groups.js';

/** Register the protocol groups as capabilities (idempotent; done on import). */
export function registerProtocolCapabilities(): void {
  for (const c of PROTOCOL_CAPABILITIES) if (!CAPABILITIES[c.name]) registerCapability(c);
  registerCapabilityFamily('protocol', (name) => {
    const c = checkGrantName(name);
    return c.ok ? null : { problem: c.problem, fix: c.fix };
  });
}

registerProtocolCapabilities();

/**
 * This module's URL: hand it to the queue's `workerModules` so every worker thread registers the
 * protocol capabilities too (each thread has its own registry).
 */
export const PROTOCOL_MODULE: string = import.meta.url;

export {
  configureProtocol,
  protocolConfig,
  formatDoorLog,
  bridgeTransport,
  PROTOCOL_CAPABILITIES,
} from './capability.js';
export type { ProtocolConfig } from './capability.js';
export * from './door.js';
export * from './groups.js';
export { AgentClient, parseEndpoint, endpointText, NotConnectedError, CallTimeoutError } from './client.js';
export type { Endpoint, CallOptions } from './client.js';
export { MAX_FRAME, frame, FrameReader, FrameError } from './frame.js';
export * from './schema.js';
