/**
 * The berm harness artifact (upstream's layout): an OCI image manifest
 * (`application/vnd.oci.image.manifest.v1+json`) with `artifactType`
 * `application/vnd.berm.harness.v1`, whose config blob is the harness's `.berm.abi` section byte
 * for byte (`application/vnd.berm.manifest.v1+json`) and whose single layer is the ELF itself
 * (`application/vnd.berm.harness.v1`). The layer digest is therefore sha256 of the ELF file.
 *
 * This module knows nothing of ELF: the caller extracts the `.berm.abi` bytes and hands both over.
 */
import { isDigest, sha256Digest, verifyDigest } from './digest.js';
import { OciError } from './errors.js';
import { formatReference, manifestReference, type Reference } from './reference.js';
import { Registry, type RegistryOptions } from './registry.js';

/** Media type of the layer (the ELF) and the artifactType of the whole artifact. */
export const HARNESS_MEDIA_TYPE = 'application/vnd.berm.harness.v1';
/** Media type of the config blob (the `.berm.abi` JSON). */
export const MANIFEST_MEDIA_TYPE = 'application/vnd.berm.manifest.v1+json';
/** OCI image manifest. */
export const OCI_MANIFEST_MEDIA_TYPE = 'application/vnd.oci.image.manifest.v1+json';
/** OCI image index (multi-platform image): refused by name. */
export const OCI_INDEX_MEDIA_TYPE = 'application/vnd.oci.image.index.v1+json';
/** Docker manifest list (multi-platform image): refused by name. */
export const DOCKER_LIST_MEDIA_TYPE = 'application/vnd.docker.distribution.manifest.list.v2+json';
/** Docker image manifest (a container image): refused by name. */
export const DOCKER_MANIFEST_MEDIA_TYPE = 'application/vnd.docker.distribution.manifest.v2+json';

/** An OCI content descriptor. */
export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
}

/**
 * The artifact manifest's bytes, serialised as upstream's client serialises them, so that the same
 * ELF and annotations pushed by either tool get the same manifest digest: compact JSON (no
 * whitespace) with the keys of every object in ascending byte order (its JSON maps are sorted
 * maps), and `annotations` always present, `{}` when empty:
 *
 *   {"annotations":{...},"artifactType":"application/vnd.berm.harness.v1",
 *    "config":{"digest":"sha256:...","mediaType":"application/vnd.berm.manifest.v1+json","size":N},
 *    "layers":[{"digest":"sha256:...","mediaType":"application/vnd.berm.harness.v1","size":N}],
 *    "mediaType":"application/vnd.oci.image.manifest.v1+json","schemaVersion":2}
 *
 * Annotations are only the standard source/revision keys, set from `GITHUB_REPOSITORY`/`GITHUB_SHA`
 * when present (what lets GHCR link a package to its repository); nothing about the harness is
 * repeated there, the config blob says it.
 */
export function buildArtifactManifest(
  config: Descriptor,
  layer: Descriptor,
  env: Record<string, string | undefined> = {},
): Uint8Array {
  const annotations: Record<string, string> = {};
  if (env.GITHUB_REPOSITORY) {
    annotations['org.opencontainers.image.source'] = `https://github.com/${env.GITHUB_REPOSITORY}`;
  }
  if (env.GITHUB_SHA) annotations['org.opencontainers.image.revision'] = env.GITHUB_SHA;
  const descriptor = (d: Descriptor) => ({ mediaType: d.mediaType, digest: d.digest, size: d.size });
  const manifest = {
    schemaVersion: 2,
    mediaType: OCI_MANIFEST_MEDIA_TYPE,
    artifactType: HARNESS_MEDIA_TYPE,
    config: descriptor(config),
    layers: [descriptor(layer)],
    annotations,
  };
  return new TextEncoder().encode(sortedJson(manifest));
}

/**
 * `v` as compact JSON with every object's keys in ascending order of their UTF-16 code units
 * (the same as byte order for the ASCII keys of a manifest).
 */
export function sortedJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(sortedJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${sortedJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

function descriptorOf(v: unknown, what: string): Descriptor {
  const d = v as Partial<Descriptor> | null;
  if (!d || typeof d !== 'object')
    throw new OciError('not-a-harness', `not a berm harness: the artifact has no ${what}`);
  if (typeof d.digest !== 'string' || !isDigest(d.digest)) {
    throw new OciError('not-a-harness', `not a berm harness: the ${what} has no sha256 digest`);
  }
  if (typeof d.size !== 'number' || !Number.isSafeInteger(d.size) || d.size < 0) {
    throw new OciError('not-a-harness', `not a berm harness: the ${what} has no valid size`);
  }
  return { mediaType: String(d.mediaType ?? ''), digest: d.digest, size: d.size };
}

/**
 * Read an artifact manifest and return its config and layer descriptors.
 * @param mediaType the Content-Type the registry served it with
 * @throws OciError('not-a-harness') naming what it is instead: an OCI image index or docker
 *   manifest list (a multi-platform image), a container image, more or fewer than one layer, a
 *   layer or config of another media type
 */
export function readArtifactManifest(
  bytes: Uint8Array,
  mediaType: string,
): { config: Descriptor; layer: Descriptor } {
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)) as Record<string, unknown>;
  } catch {
    throw new OciError('not-a-harness', 'not a berm harness: the manifest is not JSON');
  }
  if (!json || typeof json !== 'object' || Array.isArray(json)) {
    throw new OciError('not-a-harness', 'not a berm harness: the manifest is not a JSON object');
  }
  const declared = typeof json.mediaType === 'string' ? json.mediaType : '';
  const types = [mediaType, declared];
  if (types.includes(OCI_INDEX_MEDIA_TYPE) || types.includes(DOCKER_LIST_MEDIA_TYPE) || 'manifests' in json) {
    throw new OciError(
      'not-a-harness',
      `not a berm harness: this is an image index (${types.includes(DOCKER_LIST_MEDIA_TYPE) ? DOCKER_LIST_MEDIA_TYPE : OCI_INDEX_MEDIA_TYPE}), a multi-platform container image; berm pulls a single-layer artifact of type ${HARNESS_MEDIA_TYPE}`,
    );
  }
  if (types.includes(DOCKER_MANIFEST_MEDIA_TYPE)) {
    throw new OciError(
      'not-a-harness',
      `not a berm harness: this is a docker container image (${DOCKER_MANIFEST_MEDIA_TYPE}); berm pulls artifacts of type ${HARNESS_MEDIA_TYPE}`,
    );
  }
  if (json.schemaVersion !== 2)
    throw new OciError('not-a-harness', 'not a berm harness: schemaVersion is not 2');
  const config = descriptorOf(json.config, 'config');
  const layers = json.layers;
  if (!Array.isArray(layers))
    throw new OciError('not-a-harness', 'not a berm harness: the manifest has no layers');
  if (layers.length !== 1) {
    throw new OciError(
      'not-a-harness',
      `not a berm harness: ${layers.length} layers where a harness is exactly one (the ELF)`,
    );
  }
  const layer = descriptorOf(layers[0], 'layer');
  if (layer.mediaType !== HARNESS_MEDIA_TYPE) {
    throw new OciError(
      'not-a-harness',
      `not a berm harness: its layer is '${layer.mediaType}', not ${HARNESS_MEDIA_TYPE}${layer.mediaType.includes('image.layer') ? ' (a container image layer)' : ''}`,
    );
  }
  if (config.mediaType !== MANIFEST_MEDIA_TYPE) {
    throw new OciError(
      'not-a-harness',
      `not a berm harness: its config is '${config.mediaType}', not ${MANIFEST_MEDIA_TYPE}`,
    );
  }
  return { config, layer };
}

/** What {@link pushHarness} did. */
export interface PushResult {
  /** the reference pushed to, as text */
  reference: string;
  /** the layer's digest: sha256 of the ELF */
  digest: string;
  /** the artifact manifest's digest (pull by `repo@<this>` for exactly this artifact) */
  manifestDigest: string;
  /** false when the registry already had the blob (HEAD answered 200) */
  uploaded: { layer: boolean; config: boolean };
}

/**
 * Push a harness: the ELF as the layer, its `.berm.abi` bytes as the config, then the manifest
 * under the reference's tag (or digest).
 * @throws OciError (see Registry and parseReference); a reference by digest that does not match
 *   the manifest being pushed is refused before anything is uploaded
 */
export async function pushHarness(
  ref: Reference,
  elf: Uint8Array,
  abi: Uint8Array,
  opts: RegistryOptions = {},
): Promise<PushResult> {
  const env = opts.env ?? process.env;
  const layer: Descriptor = { mediaType: HARNESS_MEDIA_TYPE, digest: sha256Digest(elf), size: elf.length };
  const config: Descriptor = { mediaType: MANIFEST_MEDIA_TYPE, digest: sha256Digest(abi), size: abi.length };
  const manifest = buildArtifactManifest(config, layer, env);
  const manifestDigest = sha256Digest(manifest);
  if (ref.digest !== null && ref.digest !== manifestDigest) {
    throw new OciError(
      'reference',
      `cannot push to ${formatReference(ref)}: the artifact's manifest digest is ${manifestDigest}; push by tag instead`,
    );
  }
  const reg = await Registry.open(ref, 'push', opts);
  try {
    const l = await reg.pushBlob(elf);
    const c = await reg.pushBlob(abi);
    await reg.putManifest(ref.tag ?? manifestDigest, manifest, OCI_MANIFEST_MEDIA_TYPE);
    if (ref.tag !== null && ref.digest !== null) {
      await reg.putManifest(manifestDigest, manifest, OCI_MANIFEST_MEDIA_TYPE);
    }
    return {
      reference: formatReference(ref),
      digest: layer.digest,
      manifestDigest,
      uploaded: { layer: l.uploaded, config: c.uploaded },
    };
  } finally {
    await reg.close();
  }
}

/** What {@link pullHarness} fetched (all verified against their digests). */
export interface PullResult {
  reference: string;
  /** the ELF bytes (the layer) */
  elf: Uint8Array;
  /** the `.berm.abi` bytes (the config blob) */
  abi: Uint8Array;
  /** the layer's digest: sha256 of the ELF */
  digest: string;
  manifestDigest: string;
}

/**
 * Pull a harness: the manifest (refusing anything that is not a berm artifact, by name), then the
 * config blob and the layer, each verified against its digest and size before it is returned.
 * @throws OciError('not-a-harness' | 'digest-mismatch' | 'not-found' | 'unauthorized' | ...)
 */
export async function pullHarness(ref: Reference, opts: RegistryOptions = {}): Promise<PullResult> {
  const reg = await Registry.open(ref, 'pull', opts);
  try {
    const m = await reg.getManifest(manifestReference(ref));
    if (ref.digest !== null) verifyDigest(m.bytes, ref.digest, `manifest of ${formatReference(ref)}`);
    const { config, layer } = readArtifactManifest(m.bytes, m.mediaType);
    const abi = await reg.getBlob(config.digest, config.size);
    const elf = await reg.getBlob(layer.digest, layer.size);
    return { reference: formatReference(ref), elf, abi, digest: layer.digest, manifestDigest: m.digest };
  } finally {
    await reg.close();
  }
}
