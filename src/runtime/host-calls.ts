/**
 * Host calls that come back to the queue's thread from a guest (worker-messages.ts): the schedule
 * capability's arm, cancel and call-after, checked and stored by the arming (arming.ts), and the
 * services registered on the queue (the protocol door's event bus), reached by name through
 * CapabilityContext.service. Answered synchronously, so the due-set has one writer.
 */
import type { CapabilityReply } from '../capabilities/types.js';
import { ok } from '../capabilities/types.js';
import type { WakeArming } from './arming.js';
import type { ChainSpec, HostRequest } from './worker-messages.js';

/**
 * A service on the queue's thread that guests reach synchronously through
 * CapabilityContext.service (e.g. the protocol door's event bus). Must not throw; runs on the
 * queue's thread, so it must be quick.
 * @param harness the calling harness; @param chain its chain (pass it on to notify for depth and gas)
 */
export type QueueService = (harness: string, chain: ChainSpec, request: unknown) => CapabilityReply;

/** The queue's services by name and the answer to every host call a worker sends. */
export class HostCalls {
  private readonly services = new Map<string, QueueService>();

  constructor(private readonly arming: WakeArming) {}

  /** Register (or replace) the service reached by `name`. */
  register(name: string, service: QueueService): void {
    this.services.set(name, service);
  }

  /**
   * Answer a worker's host call: a service request, or the schedule capability's arm, cancel or
   * call-after. Never throws: a refusal of the arming (ArmError, LimitError) is a `refused` reply
   * naming the guest's function, an unknown service an `error` reply.
   */
  handle(req: HostRequest): CapabilityReply {
    const r = req.req as Record<string, unknown>;
    if (req.op === 'service') {
      const service = this.services.get(r.name as string);
      if (!service) return { error: `no service named ${String(r.name)} runs on the queue` };
      return service(req.harness, req.chain, r.request);
    }
    try {
      switch (req.op) {
        case 'arm': {
          const w = this.arming.arm({
            harness: req.harness,
            // an absolute instant stays one (the schedule capability sends the invocation's
            // instant + delay): converting it back to a delay would move it by the time between
            // the start of the invocation and this call; the delay is still checked against
            // maxDelayMs (instant)
            ...(r.at !== undefined ? { at: r.at as number } : {}),
            delayMs: r.delayMs as number,
            payload: r.payload as string,
            ...(typeof r.id === 'string' ? { id: r.id } : {}),
            armedBy: req.harness,
            guest: true,
            chain: req.chain,
          });
          return ok(w.id);
        }
        case 'cancel':
          return ok(this.arming.cancel(r.id as string, req.harness) ? '1' : '0');
        case 'callAfter': {
          const w = this.arming.callAfter({
            by: req.harness,
            delayMs: r.delayMs as number,
            ...(r.at !== undefined ? { at: r.at as number } : {}),
            harness: r.harness as string,
            tool: r.tool as string,
            args: r.args as string,
            chain: req.chain,
          });
          return ok(w.id);
        }
      }
    } catch (e) {
      const name =
        req.op === 'arm' ? 'berm.wake.arm' : req.op === 'cancel' ? 'berm.wake.cancel' : 'berm.call.after';
      return { refused: `${name}: ${(e as Error).message}` };
    }
  }
}
