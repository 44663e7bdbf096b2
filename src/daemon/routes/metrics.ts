/** `GET /metrics`: the Prometheus text of {@link Metrics}; served while the daemon restores. */
import type { Metrics } from '../metrics.js';
import type { Resource } from './router.js';

/** The metrics resource. */
export function metricsRoutes(metrics: Metrics): Resource {
  return {
    routes: [
      {
        path: '/metrics',
        duringRestore: true,
        methods: {
          GET: async ({ res }) => {
            const m = await metrics.render();
            res.writeHead(200, { 'content-type': m.contentType });
            res.end(m.text);
          },
        },
      },
    ],
  };
}
