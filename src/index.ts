/**
 * berm's library entry (`import ... from 'berm'`): the engine, the harness layer, traps and the
 * wire format of capability calls; enough to load a harness ELF, run its tools in fresh instances
 * and answer its capability calls with the embedder's own handlers (docs/embedding.md). The
 * built-in capabilities and operator declarations have their own entries, `berm/capabilities` and
 * `berm/config/runtime` (src/runtime/declared.ts) / `berm/runtime` / `berm/config/declarations`, so that embedding the engine alone loads
 * none of them. Importing this module loads neither Binaryen (only a cache miss does), ajv (only
 * arguments that are not plainly valid do), nor any network or database client.
 */
export {
  Engine,
  GuestModule,
  Instance,
  InterruptHandle,
  Linker,
  basicHostFunctions,
  raiseInterrupt,
  type CompileInfo,
  type EngineConfig,
  type InstantiateOptions,
} from './engine/engine.js';
export type { GuestMemory, HostCall, HostFunction } from './engine/host.js';
export {
  BadIndirectTarget,
  Breakpoint,
  FellOffFunction,
  HostCallError,
  IllegalInstruction,
  Interrupted,
  MemoryFault,
  OutOfFuel,
  StackOverflow,
  Trap,
  UnknownHostCall,
  type GuestFrame,
} from './engine/traps.js';
export {
  DEFAULT_CALL_LIMITS,
  Harness,
  HarnessError,
  TOOL_PREFIX,
  capabilityHostFunction,
  type CallLimits,
  type InvokeOptions,
  type ToolResult,
  type WireHandler,
  type WireReply,
} from './harness/harness.js';
export { ManifestError, parseManifest, type Manifest, type ToolDecl } from './harness/manifest.js';
export { ElfError, readElf } from './elf/reader.js';
export { LayoutError, TranslateError } from './translate/abi.js';
export { decodeFields, encodeFields, fieldText, textField, WireError } from './wire/fields.js';
export { fnv1a64 } from './util/fnv.js';
export { InputFileError } from './util/read-file.js';
