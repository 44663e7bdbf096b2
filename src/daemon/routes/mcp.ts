/**
 * `/mcp`: MCP's streamable HTTP transport (POST messages, GET the session's notification stream,
 * DELETE the session). A GET stream stays open as long as its client does: it is not work in
 * progress and does not hold the drain at shutdown.
 */
import { readBody } from '../http.js';
import type { McpEndpoint } from '../mcp.js';
import type { RouteContext } from './context.js';
import { parseJson, type Resource } from './router.js';

/** The MCP resource. */
export function mcpRoutes(ctx: RouteContext, mcp: McpEndpoint): Resource {
  return {
    routes: [
      {
        path: '/mcp',
        counts: (method) => method !== 'GET',
        methods: {
          '*': async ({ req, res, method }) => {
            const body = method === 'POST' ? parseJson(await readBody(req, ctx.body())) : undefined;
            await mcp.handle(req, res, body);
          },
        },
      },
    ],
  };
}
