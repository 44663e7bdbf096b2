/**
 * The package's version, as package.json (two folders up from this module, so from src/util and
 * dist/util alike; the CLI bundle keeps each module's own `import.meta.url`) gives it.
 */
import { readFileSync } from 'node:fs';

/**
 * The `version` field of the package's package.json.
 * @returns the version string, or "0.0.0" when the file is missing or unreadable (never throws)
 */
export function packageVersion(): string {
  try {
    return String(JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version);
  } catch {
    return '0.0.0';
  }
}
