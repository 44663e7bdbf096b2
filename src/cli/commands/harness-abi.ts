/**
 * Whether an ELF is a harness a deploy accepts, checked without translating or running it: what
 * `push` checks before uploading and `compile` reports for each file it translated.
 */
import { readImage } from '../../engine/image.js';
import { TOOL_PREFIX } from '../../harness/harness.js';
import { parseManifest, type Manifest } from '../../harness/manifest.js';
import { CliError } from '../context.js';

/**
 * The `.berm.abi` bytes and manifest of a harness ELF, checked the way a deploy would check them
 * (valid manifest; every declared tool exported as `berm_tool_<name>` and every such export
 * declared), without translating or running anything.
 * @throws ElfError, ManifestError (exit 2); CliError naming the tool whose export is missing
 */
export function harnessAbi(file: string, bytes: Uint8Array): { abi: Uint8Array; manifest: Manifest } {
  const image = readImage(bytes);
  const manifest = parseManifest(image.manifest);
  const exported = new Set(
    image.functions.flatMap((f) => (f.global ? f.names.filter((n) => n.startsWith(TOOL_PREFIX)) : [])),
  );
  for (const t of manifest.tools) {
    if (!exported.has(TOOL_PREFIX + t.name)) {
      throw new CliError(
        `${file}: tool ${t.name} is declared in .berm.abi but ${TOOL_PREFIX}${t.name} is not exported`,
      );
    }
  }
  const declared = new Set(manifest.tools.map((t) => TOOL_PREFIX + t.name));
  for (const e of exported) {
    if (!declared.has(e)) throw new CliError(`${file}: ${e} is exported but not declared in .berm.abi`);
  }
  return { abi: image.manifest as Uint8Array, manifest };
}
