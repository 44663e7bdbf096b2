/**
 * What an index learns about a reference before listing it: the artifact manifest and its config
 * blob, pulled **anonymously** (no credentials from anywhere, so nothing a publisher holds is used,
 * and a harness nobody can pull is never listed) and never the layer. The config must be a valid
 * `.berm.abi` manifest; the entry records the layer digest (sha256 of the ELF), the usage and the
 * tools.
 */
import { ManifestError, parseManifest } from '../harness/manifest.js';
import {
  formatReference,
  manifestReference,
  OciError,
  parseReference,
  readArtifactManifest,
  Registry,
  verifyDigest,
  type RegistryOptions,
} from '../oci/index.js';
import type { IndexEntry } from './entry.js';

/** Why a reference cannot be listed; `status` is the index service's HTTP answer. */
export class PublishError extends Error {
  override name = 'PublishError';
  /**
   * @param status 400 malformed reference, 422 not a pullable berm artifact, 502 registry
   *   unreachable or misbehaving
   */
  constructor(
    readonly status: 400 | 422 | 502,
    message: string,
  ) {
    super(message);
  }
}

/** The HTTP status of a registry failure while publishing. */
function statusOf(e: OciError): 400 | 422 | 502 {
  switch (e.kind) {
    case 'reference':
      return 400;
    case 'unreachable':
    case 'registry':
      return 502;
    default:
      // not-a-harness, not-found, unauthorized (nobody can pull it anonymously), digest-mismatch,
      // too-large: the artifact is the publisher's to fix
      return 422;
  }
}

/**
 * Describe `referenceText` as an index entry, from the registry, anonymously.
 * @param publisher who the service vouches for, if anyone
 * @param opts registry options (`env` is always replaced by an empty one)
 * @throws PublishError (400 | 422 | 502) naming what is wrong
 */
export async function describeArtifact(
  referenceText: string,
  publisher: string | undefined,
  opts: RegistryOptions = {},
): Promise<IndexEntry> {
  try {
    const ref = parseReference(referenceText);
    const reg = await Registry.open(ref, 'pull', { ...opts, env: {} });
    try {
      const m = await reg.getManifest(manifestReference(ref));
      if (ref.digest !== null) verifyDigest(m.bytes, ref.digest, `manifest of ${formatReference(ref)}`);
      const { config, layer } = readArtifactManifest(m.bytes, m.mediaType);
      const abi = await reg.getBlob(config.digest, config.size);
      let manifest;
      try {
        manifest = parseManifest(abi);
      } catch (e) {
        if (e instanceof ManifestError)
          throw new PublishError(
            422,
            `not a berm harness: its config blob is not a valid .berm.abi manifest: ${e.message}`,
          );
        throw e;
      }
      const reference = formatReference(ref);
      const entry: IndexEntry =
        publisher === undefined
          ? { reference, digest: layer.digest, usage: manifest.usage, tools: manifest.tools }
          : { reference, digest: layer.digest, publisher, usage: manifest.usage, tools: manifest.tools };
      return entry;
    } finally {
      await reg.close();
    }
  } catch (e) {
    if (e instanceof OciError) {
      const status = statusOf(e);
      const what = e.kind === 'unauthorized' ? ' (an index lists only what anyone can pull)' : '';
      throw new PublishError(status, `${e.message}${what}`);
    }
    throw e;
  }
}
