/**
 * What `push`, `pull` and `deploy REF` share: reading the `.berm.abi` section out of an ELF with
 * src/elf (src/oci knows nothing of ELF), pulling with the cross-check that the config blob is the
 * ELF's own section, and turning registry errors into CLI errors (exit 2).
 */
import { readImage } from '../../engine/image.js';
import {
  OciError,
  parseReference,
  pullHarness,
  type PullResult,
  type RegistryOptions,
} from '../../oci/index.js';
import { CliError, ExitCode } from '../context.js';

/** Run a registry operation; an OciError becomes a CliError with the same message (exit 2). */
export async function registryCall<T>(body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (e) {
    if (e instanceof OciError) throw new CliError(e.message, ExitCode.BadInput);
    throw e;
  }
}

/**
 * Pull a harness by reference and check it is one: the ELF parses, and its `.berm.abi` section is
 * byte for byte the config blob the registry served (so what the registry describes cannot
 * disagree with what will run).
 * @throws CliError for a bad reference or a registry refusal (including a blob that fails its
 *   digest, an image index); ElfError for a layer that is not an ELF
 */
export async function pullChecked(refText: string, opts: RegistryOptions = {}): Promise<PullResult> {
  const pulled = await registryCall(() => pullHarness(parseReference(refText), opts));
  const image = readImage(pulled.elf);
  const own = image.manifest;
  if (own === null || Buffer.compare(Buffer.from(own), Buffer.from(pulled.abi)) !== 0) {
    throw new CliError(
      `${refText}: the artifact's config blob is not the ELF's own .berm.abi section (refused: the artifact was not built by berm push, or was altered)`,
    );
  }
  return pulled;
}
