import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fnv1a64 } from '../src/util/fnv.js';
import { hostCallName, knownHostCallNames } from '../src/util/host-call-names.js';
t.equal(fnv1a64('berm.log'), 0x718e2c830194e059n);

t.test('the known host-call names are exactly guest-sdk/caps.txt', async (t) => {
  const caps = readFileSync(join(import.meta.dirname, '..', 'guest-sdk', 'caps.txt'), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#'))
    .map((l) => l.split(/\s+/)[0]);
  t.same([...knownHostCallNames()].sort(), caps.sort());
  t.equal(hostCallName(0x6ee73f4eae1c1535n), 'berm.args.len');
  t.equal(hostCallName(1n), undefined);
});
