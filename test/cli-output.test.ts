// The CLI writes its output to fds 1 and 2 synchronously (src/cli/output.ts). Covered here, with
// real processes and real pipes: a non-blocking pipe whose reader is behind (EAGAIN: the rest goes
// through Node's stream, all of it arrives and the exit code is kept), a closed stdout (EBADF:
// the output is dropped, as Node's stream does), and stdout and stderr interleaved in order on one
// pipe. The expected bytes come from the same command writing to a regular file.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ROOT } from './helpers/fixtures.js';

const TMP = mkdtempSync(join(tmpdir(), 'berm-cli-output-'));
t.teardown(() => rmSync(TMP, { recursive: true, force: true }));
const BERM = [
  process.execPath,
  '--stack-size=4000',
  join(ROOT, 'bin', 'berm.js'),
  '--cache-dir',
  join(TMP, 'cache'),
];
const ELF = join(ROOT, 'fixtures', 'build', 'text-clang-O0.elf');

/** The command's stdout written to a regular file (blocking writes): the expected bytes. */
function toFile(args: string[]): Buffer {
  const file = join(TMP, `out-${Math.random().toString(36).slice(2)}`);
  const r = spawnSync('sh', ['-c', '"$@" > "$0"', file, ...BERM, ...args], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return readFileSync(file);
}

// python3 makes the pipe, sets its write end non-blocking, starts the command on it and reads
// nothing for a second (the command fills the pipe's 64 KiB and meets EAGAIN), then reads it all
const NONBLOCKING_READER = `
import os, subprocess, sys, time
r, w = os.pipe()
os.set_blocking(w, False)
p = subprocess.Popen(sys.argv[1:], stdout=w)
os.close(w)
time.sleep(1.0)
out = bytearray()
while True:
    chunk = os.read(r, 1 << 16)
    if not chunk:
        break
    out += chunk
rc = p.wait()
sys.stdout.buffer.write(bytes(out))
sys.stderr.write('rc=%d\\n' % rc)
`;

t.test('a non-blocking pipe whose reader is behind gets every byte, in order', async (t) => {
  const want = toFile(['disasm', ELF]);
  t.ok(want.length > 1 << 16, `the listing (${want.length} bytes) is larger than a pipe holds`);
  const r = spawnSync('python3', ['-c', NONBLOCKING_READER, ...BERM, 'disasm', ELF], {
    maxBuffer: 64 << 20,
  });
  t.equal(r.stderr.toString(), 'rc=0\n', 'exit 0');
  t.equal(r.stdout.length, want.length, 'the same length');
  t.ok(r.stdout.equals(want), 'the same bytes');
});

t.test('a closed stdout: the output is dropped, the exit code is the command', async (t) => {
  const r = spawnSync('sh', ['-c', '"$@" >&-', 'sh', ...BERM, 'inspect', ELF], { encoding: 'utf8' });
  t.equal(r.status, 0, `exit 0 (${r.stderr})`);
  t.equal(r.stderr, '', 'nothing on stderr');
});

t.test('stdout and stderr on one pipe keep their order', async (t) => {
  // an unknown tool: the usage error on stderr; then --verbose timings on stderr around stdout
  const echo = join(ROOT, 'fixtures', 'build', 'echo-gcc-O2.elf');
  const r = spawnSync(
    'sh',
    ['-c', '"$@" 2>&1', 'sh', ...BERM, '--verbose', 'call', echo, 'echo', '{"x":1}'],
    {
      encoding: 'utf8',
    },
  );
  t.equal(r.status, 0, r.stdout);
  const lines = r.stdout.trimEnd().split('\n');
  t.match(lines[0], /^berm: .*echo-gcc-O2\.elf: /, 'first the compile line (stderr)');
  t.match(lines[1], /^berm: echo ran in /, 'then the timing (stderr)');
  t.equal(lines[2], '{"x":1}', 'then the result (stdout)');
});
