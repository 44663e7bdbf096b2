/**
 * `GET /events`: the change feed as server-sent events (deploys, undeploys, wakes armed, fired and
 * cancelled, invocations; src/daemon/events.ts). Served while the daemon restores; a stream stays
 * open as long as its client does, so it does not hold the drain at shutdown.
 */
import type { EventHub } from '../events.js';
import type { Resource } from './router.js';

/** The change-feed resource. */
export function eventRoutes(events: EventHub): Resource {
  return {
    routes: [
      {
        path: '/events',
        duringRestore: true,
        counts: (method) => method !== 'GET',
        methods: { GET: ({ req, res }) => events.subscribe(req, res) },
      },
    ],
  };
}
