/**
 * `GET /index` (search the index of `--index`) and `POST /index/install` (install from it), served
 * by src/daemon/index-routes.ts; counted as `/index` until that module names the sub-route.
 */
import type { IndexSource } from '../../index/source.js';
import { readBody } from '../http.js';
import { serveIndex } from '../index-routes.js';
import type { RouteContext } from './context.js';
import type { Resource } from './router.js';

/**
 * The index resource.
 * @param source the opened index, or null without `--index` (every request then answers 404)
 */
export function indexRoutes(ctx: RouteContext, source: IndexSource | null): Resource {
  return {
    routes: [
      {
        path: '/index/**',
        label: '/index',
        methods: {
          '*': ({ req, res, method, parts }) => {
            const url = req.url ?? '';
            const query = url.includes('?') ? url.slice(url.indexOf('?') + 1) : '';
            const index = {
              source,
              deployments: ctx.deployments,
              body: (r: typeof req) => readBody(r, ctx.body()),
              log: ctx.log,
            };
            return serveIndex(index, method, parts, query, req, res);
          },
        },
      },
    ],
  };
}
