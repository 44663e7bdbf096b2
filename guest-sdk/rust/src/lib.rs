//! berm guest SDK for Rust: write berm harness tools in `no_std` Rust (with `alloc`) for
//! `riscv64imac-unknown-none-elf`, and test them natively with `cargo test`.
//!
//! ```ignore
//! #![cfg_attr(target_os = "none", no_std, no_main)]
//! extern crate alloc;
//! use alloc::{format, string::String};
//!
//! berm::harness! {
//!     usage: "Greeting tools.",
//!     tools: {
//!         greet: "Return a greeting.", r#"{"type":"object","properties":{"name":{"type":"string"}}}"#;
//!     },
//! }
//!
//! fn greet(args: &str) -> Result<String, String> {
//!     berm::log!("greet: {} bytes of arguments", args.len());
//!     Ok(format!("hello {args}"))
//! }
//! ```
//!
//! The contract with the runtime (guest-sdk/README.md, docs/wakes.md, docs/capabilities.md) is the
//! C SDK's: host calls by FNV-1a-64 number ([`sys`]), arguments pulled with `berm.args.len/read`,
//! results through `berm.done` (ABI 1, the default) or returned in a0/a1 (ABI 0, feature `abi0`),
//! failures through `berm.fail`, capability replies staged and read back with `berm.result.read`.
//! Natively (any target but `target_os = "none"`) the same code runs against the stand-in host of
//! [`host`].
#![no_std]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(not(berm_guest))]
extern crate std;

pub mod cap;
pub mod json;
pub mod manifest;
pub mod protocol;
pub mod rt;
pub mod sys;
pub mod wake;

#[cfg(not(berm_guest))]
pub mod host;

mod macros;

pub use cap::{CapError, CapResult};
pub use cap::{call, clock, crabtalk, exec, fs, http, storage};
pub use manifest::ToolDecl;
pub use rt::{args, done, fail, finished, heap_remaining, log};
pub use wake::{schedule, Notify, Wake};

/// The ABI this build targets: 1 (default) or 0 (feature `abi0`).
pub const ABI: u32 = if cfg!(feature = "abi0") { 0 } else { 1 };

/// What the [`harness!`] macro declares: the manifest and every export. The guest's `_start`
/// references it (so the linker keeps every export); [`host::Host`] runs tools through it.
pub struct Harness {
    /// the `.berm.abi` JSON, as emitted into the section
    pub manifest: &'static [u8],
    /// (tool name, `berm_tool_<name>` export)
    pub tools: &'static [(&'static str, rt::Export)],
    /// the `on_wake` export, if declared
    pub on_wake: Option<rt::Export>,
    /// the `on_notify` export, if declared
    pub on_notify: Option<rt::Export>,
}

#[doc(hidden)]
pub extern crate alloc as __alloc;
