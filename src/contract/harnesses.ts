/** The harness shapes of bermd's HTTP API (`GET /harnesses`, `GET|PUT /harnesses/{name}`). */

/** One tool of a harness as its manifest describes it. */
export interface ToolInfo {
  name: string;
  description?: string;
  /** the tool's JSON Schema of its arguments */
  parameters?: unknown;
}

/**
 * A deployed harness as the daemon describes it: the upstream inspect shape
 * `{name, digest, usage, tools, deps}` plus `granted` (`{"capabilities": [...], ...arguments}`) and
 * `deployed_at` (ms since the Unix epoch). A client reads further fields a daemon adds as unknown.
 */
export interface HarnessInfo {
  name: string;
  /** sha256 of the ELF, hex */
  digest: string;
  usage?: string;
  tools: ToolInfo[];
  deps?: string[];
  granted?: { capabilities?: string[]; [k: string]: unknown };
  deployed_at?: number;
  [k: string]: unknown;
}
