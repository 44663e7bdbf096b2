// The .berm.abi manifest: ABI 0 and 1 accepted, everything else refused with a message naming why.
import t from 'tap';
import { ManifestError, parseManifest } from '../src/harness/manifest.js';

const enc = (v: unknown) => new TextEncoder().encode(typeof v === 'string' ? v : JSON.stringify(v));
const tool = { name: 'echo', description: 'echoes', parameters: { type: 'object' } };

t.test('valid manifests', async (t) => {
  const m1 = parseManifest(enc({ abi_version: 1, usage: 'u', deps: ['other'], tools: [tool] }));
  t.same(m1, { abi_version: 1, usage: 'u', deps: ['other'], tools: [tool] });
  const m0 = parseManifest(enc({ abi_version: 0, tools: [{ name: 'x' }] }));
  t.same(m0.tools[0], { name: 'x', description: '', parameters: { type: 'object' } }, 'defaults filled in');
  t.same(m0.deps, []);
});

t.test('refusals', async (t) => {
  const bad: [Uint8Array | null, RegExp][] = [
    [null, /no \.berm\.abi section/],
    [new Uint8Array([0xff, 0xfe]), /not valid UTF-8/],
    [enc('{"abi_version": 1,'), /not valid JSON/],
    [enc({ abi_version: 2, tools: [] }), /unknown abi_version 2/],
    [enc({ abi_version: '1', tools: [] }), /unknown abi_version "1"/],
    [enc({ abi_version: 1 }), /schema.*tools/],
    [enc({ abi_version: 0, deps: [], tools: [] }), /schema/],
    [enc({ abi_version: 1, tools: [{ name: 'has space' }] }), /schema/],
    [enc({ abi_version: 1, tools: [tool, tool] }), /declared twice/],
    [enc([1, 2]), /schema/],
  ];
  for (const [bytes, re] of bad) t.throws(() => parseManifest(bytes), { name: 'ManifestError', message: re });
  t.type(new ManifestError('x'), Error);
});
