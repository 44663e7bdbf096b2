// The artifact manifest berm pushes is byte for byte the one upstream's client pushes for the same
// ELF and annotations, so both agree on its digest. Upstream builds it as a serde_json value and
// serialises it compactly; serde_json's maps are sorted maps (BTreeMap, its default), so every
// object's keys come out in ascending order, and `annotations` is always there (`{}` when empty).
// The pinned digests were computed outside berm (Python: json.dumps(m, sort_keys=True,
// separators=(',', ':')) over the same fields, then sha256). Then an artifact pushed to a real
// registry in upstream's layout, by plain HTTP with those bytes, is pulled by berm.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import {
  buildArtifactManifest,
  parseReference,
  pullHarness,
  pushHarness,
  HARNESS_MEDIA_TYPE,
  MANIFEST_MEDIA_TYPE,
} from '../src/oci/index.js';
import { readElf } from '../src/elf/reader.js';
import { ROOT } from './helpers/fixtures.js';
import { startRegistry } from './helpers/oci-registry.js';

const sha = (b: Uint8Array | string): string => 'sha256:' + createHash('sha256').update(b).digest('hex');

t.test('the manifest bytes and digest pinned from upstream serialisation rules', async (t) => {
  const elf = Buffer.from('\x7fELF reference digest fixture', 'latin1');
  const abi = Buffer.from('{"abi_version":0,"tools":[],"usage":""}');
  t.equal(elf.length, 29);
  const layer = { mediaType: HARNESS_MEDIA_TYPE, digest: sha(elf), size: elf.length };
  const config = { mediaType: MANIFEST_MEDIA_TYPE, digest: sha(abi), size: abi.length };

  const bare = Buffer.from(buildArtifactManifest(config, layer, {}));
  t.equal(
    bare.toString('utf8'),
    '{"annotations":{},"artifactType":"application/vnd.berm.harness.v1",' +
      '"config":{"digest":"sha256:2c23e5ed99dd5c71f332afa06b573cd1d7d308f25eaa78f895726c352befb0f9",' +
      '"mediaType":"application/vnd.berm.manifest.v1+json","size":39},' +
      '"layers":[{"digest":"sha256:fc75c452eec3cf80b433eab23e611072dc8cfc94748f17bf2f2b2a26780963e5",' +
      '"mediaType":"application/vnd.berm.harness.v1","size":29}],' +
      '"mediaType":"application/vnd.oci.image.manifest.v1+json","schemaVersion":2}',
  );
  t.equal(sha(bare), 'sha256:558aba4615a8366827a1b9a7c569b3cd11f47beb380252c7dc97e9e35d1707bd');

  const annotated = buildArtifactManifest(config, layer, {
    GITHUB_REPOSITORY: 'crabtalk/example',
    GITHUB_SHA: '0123456789abcdef0123456789abcdef01234567',
  });
  t.equal(
    sha(annotated),
    'sha256:3e0ae0fc1456b05c3b9d3dd942aac642a55570d50b1796809e783f843ad7cc04',
    'annotations sorted too: revision before source',
  );
});

t.test("an artifact pushed in upstream's layout is pulled; berm's push of it has its digest", async (t) => {
  const reg = await startRegistry();
  t.teardown(() => reg.stop());
  const elf = readFileSync(join(ROOT, 'fixtures', 'build', 'echo-gcc-O2.elf'));
  const abi = Buffer.from(readElf(new Uint8Array(elf)).manifest as Uint8Array);
  const base = `http://${reg.host}/v2/upstream/echo`;

  // upstream's push, by plain HTTP: each blob monolithically (POST for a location, PUT ?digest=)
  for (const blob of [elf, abi]) {
    const open = await fetch(`${base}/blobs/uploads/`, { method: 'POST' });
    t.equal(open.status, 202);
    const loc = open.headers.get('location')!;
    const url = new URL(loc, `http://${reg.host}`);
    url.searchParams.set('digest', sha(blob));
    const put = await fetch(url, {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream' },
      body: blob,
    });
    t.equal(put.status, 201, await put.text());
  }
  // the manifest as upstream serialises it: keys sorted, compact, annotations {}
  const manifest =
    `{"annotations":{},"artifactType":"application/vnd.berm.harness.v1",` +
    `"config":{"digest":"${sha(abi)}","mediaType":"application/vnd.berm.manifest.v1+json","size":${abi.length}},` +
    `"layers":[{"digest":"${sha(elf)}","mediaType":"application/vnd.berm.harness.v1","size":${elf.length}}],` +
    `"mediaType":"application/vnd.oci.image.manifest.v1+json","schemaVersion":2}`;
  const put = await fetch(`${base}/manifests/v1`, {
    method: 'PUT',
    headers: { 'content-type': 'application/vnd.oci.image.manifest.v1+json' },
    body: manifest,
  });
  t.equal(put.status, 201, await put.text());
  const upstreamDigest = put.headers.get('docker-content-digest');
  t.equal(upstreamDigest, sha(manifest), "the registry's digest of upstream's bytes");

  const pulled = await pullHarness(parseReference(`${reg.host}/upstream/echo:v1`), { env: {} });
  t.ok(Buffer.from(pulled.elf).equals(elf), 'pulled bit for bit');
  t.ok(Buffer.from(pulled.abi).equals(abi), 'the config blob is the .berm.abi section');
  t.equal(pulled.manifestDigest, upstreamDigest);

  // berm pushes the same ELF: the same manifest digest, under a tag of its own
  const pushed = await pushHarness(
    parseReference(`${reg.host}/upstream/echo:berm`),
    new Uint8Array(elf),
    new Uint8Array(abi),
    {
      env: {},
    },
  );
  t.equal(pushed.manifestDigest, upstreamDigest, 'both tools agree on the digest');
  t.same(pushed.uploaded, { layer: false, config: false }, 'the blobs were already there');
});
