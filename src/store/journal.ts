/**
 * The invocation journal as a JSONL file: one JSON object per line, appended with a synchronous
 * write (so a record is in the kernel's page cache before the queue moves on: a killed process
 * loses nothing it acknowledged), rotated by size: journal.jsonl -> journal.1.jsonl -> ... up to
 * `keep` old files (logrotate's numbering, newest rotation = .1).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PRIVATE_FILE_MODE, privateDir, privateFile } from '../util/private-files.js';
import type { Journal, JournalRecord } from './store.js';

/** A size-rotated JSONL journal. */
export class JsonlJournal implements Journal {
  private fd: number;
  private size: number;
  /** the file ends in part of a line (a short write that could not be truncated away) */
  private torn = false;

  /**
   * @param file the live journal file (created with its directory if missing)
   * @param rotateBytes rotate when a write would take the file past this size
   * @param keep rotated files kept; older ones are deleted
   */
  constructor(
    readonly file: string,
    private readonly rotateBytes: number,
    private readonly keep: number,
  ) {
    privateDir(path.dirname(file));
    privateFile(file);
    this.fd = fs.openSync(file, 'a');
    this.size = fs.fstatSync(this.fd).size;
  }

  /** Name of the n-th rotated file (n >= 1). */
  rotated(n: number): string {
    return this.file.replace(/(\.jsonl)?$/, `.${n}.jsonl`);
  }

  /**
   * Append one record as a whole line.
   * @throws the write's error (ENOSPC on a full disk, ...): then no part of the line stays in the
   *   file, so the next record starts a line of its own (a short write is taken back)
   */
  append(rec: JournalRecord): void {
    const line = Buffer.from(JSON.stringify(rec) + '\n');
    if (this.size > 0 && this.size + line.length > this.rotateBytes) this.rotate();
    let done = 0;
    try {
      if (this.torn) {
        // a torn line could not be taken back: end it, so it alone is unreadable
        fs.writeSync(this.fd, '\n');
        this.torn = false;
      }
      while (done < line.length) done += fs.writeSync(this.fd, line, done);
    } catch (e) {
      if (done > 0) {
        try {
          fs.ftruncateSync(this.fd, this.size);
        } catch {
          this.torn = true;
        }
      }
      throw e;
    }
    this.size += line.length;
  }

  private rotate(): void {
    fs.closeSync(this.fd);
    fs.rmSync(this.rotated(this.keep), { force: true });
    for (let n = this.keep - 1; n >= 1; n--) {
      if (fs.existsSync(this.rotated(n))) fs.renameSync(this.rotated(n), this.rotated(n + 1));
    }
    fs.renameSync(this.file, this.rotated(1));
    this.fd = fs.openSync(this.file, 'a', PRIVATE_FILE_MODE);
    this.size = 0;
  }

  close(): void {
    if (this.fd >= 0) fs.closeSync(this.fd);
    this.fd = -1;
  }
}

/**
 * Every record of a journal, oldest first: the rotated files from the highest number down, then
 * the live file. A torn last line (the process was killed mid-write) is skipped.
 */
export function readJournal(file: string, keep = 64): JournalRecord[] {
  const j = { rotated: (n: number) => file.replace(/(\.jsonl)?$/, `.${n}.jsonl`) };
  const files: string[] = [];
  for (let n = keep; n >= 1; n--) if (fs.existsSync(j.rotated(n))) files.push(j.rotated(n));
  if (fs.existsSync(file)) files.push(file);
  const out: JournalRecord[] = [];
  for (const f of files) {
    for (const line of fs.readFileSync(f, 'utf8').split('\n')) {
      if (line === '') continue;
      try {
        out.push(JSON.parse(line) as JournalRecord);
      } catch {
        // a torn write at a kill: the record was never acknowledged
      }
    }
  }
  return out;
}
