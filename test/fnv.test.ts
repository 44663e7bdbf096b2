import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fnv1a64 } from '../src/util/fnv.js';
import {
  CORE_HOST_CALL_NAMES,
  hostCallName,
  knownHostCallNames,
  registerHostCallNames,
} from '../src/util/host-call-names.js';
import { capabilityWireNames } from '../src/capabilities/index.js';
// the protocol door registers its crabtalk.protocol.* capabilities when loaded (as bermd loads it)
import '../src/protocol/index.js';

// FNV-1a-64 of "berm.log", computed independently (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
t.equal(fnv1a64('berm.log'), 0x718e2c830194e059n);

t.test(
  'guest-sdk/caps.txt names exactly what the host knows: core calls and the capability registry',
  async (t) => {
    const caps = readFileSync(join(import.meta.dirname, '..', 'guest-sdk', 'caps.txt'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.startsWith('#'))
      .map((l) => l.split(/\s+/)[0]!);
    const host = [...CORE_HOST_CALL_NAMES, ...capabilityWireNames()];
    t.same(
      host.filter((n) => !caps.includes(n)),
      [],
      'every host call can be named by the SDK',
    );
    t.same(
      caps.filter((n) => !host.includes(n)),
      [],
      'every SDK name is answered by the host',
    );
    t.same(
      [...knownHostCallNames()].sort(),
      [...new Set(host)].sort(),
      'the registry registered its wire names',
    );
    t.equal(hostCallName(0x6ee73f4eae1c1535n), 'berm.args.len');
    t.equal(hostCallName(fnv1a64('berm.fs.grep')), 'berm.fs.grep');
    t.equal(hostCallName(1n), undefined);
  },
);

t.test('registering a name is idempotent; a different name on a taken number would be refused', async (t) => {
  registerHostCallNames(['berm.log']);
  t.equal(hostCallName(fnv1a64('berm.log')), 'berm.log');
});
