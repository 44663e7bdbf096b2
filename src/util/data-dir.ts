/**
 * berm's data directory and its content-addressed store of installed harness ELFs: what
 * `berm install` fetches and verifies goes to `{data}/harnesses/sha256/{hex}.elf`, where a
 * declaration naming a harness by reference (`source = "oci:..."`, with its sha256) finds it.
 */
import { homedir } from 'node:os';
import * as path from 'node:path';

/** berm's data directory: `$BERM_DATA_DIR`, else `$XDG_DATA_HOME/berm`, else `~/.local/share/berm`. */
export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.BERM_DATA_DIR) return path.resolve(env.BERM_DATA_DIR);
  const xdg = env.XDG_DATA_HOME;
  return path.join(xdg && xdg.length > 0 ? xdg : path.join(env.HOME || homedir(), '.local', 'share'), 'berm');
}

/** Where the installed ELF of lowercase hex sha256 `hex` is stored under `dataDir` (absolute). */
export function storedHarnessPath(dataDir: string, hex: string): string {
  return path.join(path.resolve(dataDir), 'harnesses', 'sha256', `${hex.toLowerCase()}.elf`);
}

/** The scheme of a declaration `source` naming a harness by registry reference. */
export const OCI_SOURCE_PREFIX = 'oci:';
