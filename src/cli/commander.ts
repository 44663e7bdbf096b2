/**
 * commander, loaded as the CommonJS package it is: `require` skips the ES-module facade
 * (esm.mjs) and the export scan Node runs over CommonJS imported from ESM, ~4 ms of every CLI
 * start. Same module instance as `import ... from 'commander'` elsewhere.
 */
import { createRequire } from 'node:module';

type Commander = typeof import('commander');
const commander = createRequire(import.meta.url)('commander') as Commander;

export const { Command, CommanderError, InvalidArgumentError, Option } = commander;
export type Command = import('commander').Command;
export type CommanderError = import('commander').CommanderError;
export type InvalidArgumentError = import('commander').InvalidArgumentError;
export type Option = import('commander').Option;
