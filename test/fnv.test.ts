import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fnv1a64 } from '../src/util/fnv.js';
import {
  CORE_HOST_CALL_NAMES,
  hostCallName,
  hostCallOwners,
  knownHostCallNames,
  registerHostCallNames,
} from '../src/util/host-call-names.js';
import { capabilityWireNames } from '../src/capabilities/index.js';
import { UnknownHostCall } from '../src/engine/traps.js';
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

t.test('an unlinked call names the capability whose grant would link it', async (t) => {
  t.same(hostCallOwners(fnv1a64('berm.fs.read')), ['fs']);
  t.same(
    hostCallOwners(fnv1a64('crabtalk.fs.read')),
    ['fs'],
    'crabtalk.* twins belong to the same capability',
  );
  t.same(hostCallOwners(fnv1a64('berm.http.fetch')), ['http']);
  t.same(hostCallOwners(fnv1a64('berm.wake.arm')), ['schedule']);
  t.same(hostCallOwners(fnv1a64('berm.args.len')), [], 'the harness ABI belongs to no capability');
  t.same(hostCallOwners(1n), []);
  // the door's one handler is linked by each of its groups (docs/protocol-door.md)
  const door = hostCallOwners(fnv1a64('crabtalk.protocol.call'));
  t.ok(door.length >= 6 && door.every((g) => g.startsWith('protocol:')), door.join(', '));
  t.same([...door].sort(), door, 'sorted');
  t.same(hostCallOwners(fnv1a64('crabtalk.protocol.send')), ['protocol:send']);

  t.equal(
    new UnknownHostCall(fnv1a64('berm.http.fetch')).message,
    'unknown host call 0x29dacfd913edc957 (berm.http.fetch): it is not linked into this instance: ' +
      'capability "http" is not granted to this harness (an operator grants it in the declaration ' +
      'file: capabilities = ["http"]; docs/capabilities.md)',
  );
  t.match(
    new UnknownHostCall(fnv1a64('crabtalk.protocol.call')).message,
    /\(crabtalk\.protocol\.call\): it is not linked into this instance: none of the capabilities answering it \(protocol:[a-z:, ]+\) is granted/,
  );
  t.equal(
    new UnknownHostCall(fnv1a64('berm.args.len')).message,
    'unknown host call 0x6ee73f4eae1c1535 (berm.args.len): it is not linked into this instance (not a tool call)',
  );
  t.equal(
    new UnknownHostCall(1n).message,
    'unknown host call 0x0000000000000001: nothing is registered under it',
  );
});
