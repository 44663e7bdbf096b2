/**
 * The OCI registry client of berm (client side only; the daemon never talks to a registry):
 * references, the v2 API with token auth, and the harness artifact (ELF layer + `.berm.abi`
 * config). Depends on src/util at most; the CLI extracts the `.berm.abi` bytes with src/elf.
 */
export { OciError, type OciErrorKind } from './errors.js';
export { sha256Digest, isDigest, verifyDigest } from './digest.js';
export {
  parseReference,
  formatReference,
  manifestReference,
  isLoopbackHost,
  registryBaseUrl,
  type Reference,
} from './reference.js';
export { parseChallenges, credentialsFromEnv, type Challenge, type Credentials } from './auth.js';
export { Registry, type Access, type RegistryOptions, type FetchedManifest } from './registry.js';
export {
  HARNESS_MEDIA_TYPE,
  MANIFEST_MEDIA_TYPE,
  OCI_MANIFEST_MEDIA_TYPE,
  OCI_INDEX_MEDIA_TYPE,
  DOCKER_LIST_MEDIA_TYPE,
  DOCKER_MANIFEST_MEDIA_TYPE,
  buildArtifactManifest,
  readArtifactManifest,
  pushHarness,
  pullHarness,
  type Descriptor,
  type PushResult,
  type PullResult,
} from './artifact.js';
