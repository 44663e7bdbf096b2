/**
 * `GET /health` (also POST and HEAD, as upstream): `{"status":"ok"}`, or while the daemon restores
 * its deployments `{"status":"restoring","restore":"..."}`. Open: no token needed, and served while
 * restoring.
 */
import { readBody, sendJson } from '../http.js';
import type { RouteContext } from './context.js';
import type { Resource } from './router.js';

/**
 * The health resource.
 * @param restoring what the daemon restores ("restoring 3 of 12 deployments"), or null once serving
 */
export function healthRoutes(ctx: RouteContext, restoring: () => string | null): Resource {
  const reply = (r: { res: import('node:http').ServerResponse }): void => {
    const progress = restoring();
    sendJson(r.res, 200, progress === null ? { status: 'ok' } : { status: 'restoring', restore: progress });
  };
  return {
    routes: [
      {
        path: '/health',
        open: true,
        duringRestore: true,
        allow: 'GET',
        methods: {
          GET: reply,
          HEAD: reply,
          POST: async (r) => {
            await readBody(r.req, ctx.body());
            reply(r);
          },
        },
      },
    ],
  };
}
