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

// python3 makes a pipe, closes its read end and starts the command on the write end: its first
// write to stdout fails with EPIPE (Node ignores SIGPIPE)
const DEAD_PIPE = `
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
p = subprocess.Popen(sys.argv[1:], stdout=w, stderr=subprocess.PIPE)
os.close(w)
err = p.stderr.read()
sys.stdout.write('rc=%d\\n' % p.wait())
sys.stdout.buffer.write(err)
`;

t.test('a failed stdout keeps the exit code and stderr lines of the command', async (t) => {
  // the exit codes are the CLI's documented ones (berm --help): 3 a trap, 1 a failed tool, 2 usage
  const control = join(ROOT, 'fixtures', 'build', 'control-clang-O0.elf');
  const misbehave = join(ROOT, 'fixtures', 'build', 'misbehave-gcc-O2.elf');
  const cases: { args: string[]; code: number; stderr: RegExp }[] = [
    // a recursion deeper than any host stack: the trap's JSON on stdout, its line on stderr
    { args: ['--json', 'exec', control, 'ctl_fact', '1000000'], code: 3, stderr: /guest trap StackOverflow/ },
    { args: ['call', misbehave, 'always_fails'], code: 1, stderr: /berm: tool always_fails failed\n/ },
    { args: ['--json', 'call', misbehave, 'nosuch'], code: 2, stderr: /has no tool named nosuch/ },
  ];
  for (const c of cases) {
    // a reader that is gone (EPIPE): not an error of ours, the command's own code
    const p = spawnSync('python3', ['-c', DEAD_PIPE, ...BERM, ...c.args], { encoding: 'utf8' });
    t.equal(p.stdout.split('\n')[0], `rc=${c.code}`, `EPIPE: ${c.args.join(' ')} exits ${c.code}`);
    t.match(p.stdout, c.stderr, 'EPIPE: its stderr line is written');
    t.notMatch(p.stdout, /writing to stdout failed/, 'EPIPE: no complaint');
    // a full disk (ENOSPC): the command's own non-zero code, its line, then the failed write's
    const f = spawnSync('sh', ['-c', '"$@" > /dev/full', 'sh', ...BERM, ...c.args], { encoding: 'utf8' });
    t.equal(f.status, c.code, `/dev/full: ${c.args.join(' ')} exits ${c.code} (${f.stderr})`);
    t.match(f.stderr, c.stderr, '/dev/full: its stderr line is written');
    t.match(f.stderr, /berm: writing to stdout failed: ENOSPC/, '/dev/full: the failed write is named');
  }
});

// python3 makes the pipe non-blocking, lets the command fill it (EAGAIN: the rest is queued in
// Node's stream), then reads a little and closes it: the queued writes fail with EPIPE
const NONBLOCKING_CLOSER = `
import os, subprocess, sys, time
r, w = os.pipe()
os.set_blocking(w, False)
p = subprocess.Popen(sys.argv[1:], stdout=w, stderr=subprocess.PIPE)
os.close(w)
time.sleep(1.0)
os.read(r, 100)
os.close(r)
err = p.stderr.read()
sys.stdout.write('rc=%d\\n' % p.wait())
sys.stdout.buffer.write(err)
`;

t.test('a non-blocking pipe closed while output is queued: exit 0, nothing on stderr', async (t) => {
  const r = spawnSync('python3', ['-c', NONBLOCKING_CLOSER, ...BERM, 'disasm', ELF], { encoding: 'utf8' });
  // not an unhandled 'error' event of the stream (a stack trace, exit 1)
  t.equal(r.stdout, 'rc=0\n', 'exit 0 (EPIPE: a reader that stopped), no stderr');
});

t.test('a stdout open for reading only: the lost output is reported, not dropped', async (t) => {
  // EBADF from an open descriptor (write(2) on an fd opened O_RDONLY), unlike a closed stdout
  const misbehave = join(ROOT, 'fixtures', 'build', 'misbehave-gcc-O2.elf');
  const ok = spawnSync('sh', ['-c', '"$@" 1</dev/null', 'sh', ...BERM, 'inspect', ELF], { encoding: 'utf8' });
  t.equal(ok.status, 1, 'exit 1: output the caller asked for was lost');
  t.match(ok.stderr, /^berm: writing to stdout failed: EBADF/m, 'says why');
  const failed = spawnSync(
    'sh',
    ['-c', '"$@" 1</dev/null', 'sh', ...BERM, 'call', misbehave, 'always_fails'],
    {
      encoding: 'utf8',
    },
  );
  t.equal(failed.status, 1, 'a failed tool: exit 1');
  t.match(failed.stderr, /berm: tool always_fails failed\n[^]*writing to stdout failed: EBADF/, 'both lines');
});
