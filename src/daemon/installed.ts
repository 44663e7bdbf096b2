/**
 * Harnesses a declaration names by reference (`source = "oci:REF"` with its sha256): `berm install`
 * fetched and verified them into the data directory's store; at boot bermd deploys each one whose
 * deployment is missing or holds other bytes, from that store, under its declared name (the same
 * deploy as PUT /harnesses/{name}, so the sha256 pin and the grant apply). bermd never downloads:
 * a missing one has already refused the boot (./grants.ts).
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import type { Deployments } from './deployments.js';
import type { Grants } from './grants.js';

/**
 * Deploy every installed harness the declaration names whose deployment differs.
 * @returns one problem line per harness that could not be deployed (the boot goes on without it)
 */
export async function deployInstalled(
  grants: Grants,
  deployments: Deployments,
  log: (line: string) => void,
): Promise<string[]> {
  const problems: string[] = [];
  for (const d of grants.installed()) {
    if (deployments.get(d.name)?.digest === d.sha256) continue;
    try {
      const bytes = new Uint8Array(fs.readFileSync(d.source));
      const actual = createHash('sha256').update(bytes).digest('hex');
      if (actual !== d.sha256) {
        problems.push(
          `harness ${d.name}: the stored ${d.source} hashes to ${actual}, not ${d.sha256}; run berm install --config ${d.file} again`,
        );
        continue;
      }
      await deployments.deploy(d.name, bytes);
      log(`  installed ${d.name} from ${d.reference} sha256 ${d.sha256}`);
    } catch (e) {
      problems.push(`harness ${d.name} (${d.reference}) not deployed: ${(e as Error).message}`);
    }
  }
  return problems;
}
