//! Puts the berm linker scripts where the final link of a harness finds them: `-Tberm-rust.ld`
//! (passed by berm-rust.mk) resolves through the library search path this adds, and berm-rust.ld
//! INCLUDEs guest-sdk/berm.ld, the C SDK's layout, so both SDKs lay harnesses out the same way.
use std::{env, fs, path::PathBuf};

fn main() {
    let here = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    println!("cargo:rerun-if-changed=berm-rust.ld");
    println!("cargo:rerun-if-changed=../berm.ld");
    println!("cargo::rustc-check-cfg=cfg(berm_guest)");
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("none") {
        return; // host build (cargo test): no linker script
    }
    println!("cargo:rustc-cfg=berm_guest");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    fs::copy(here.join("berm-rust.ld"), out.join("berm-rust.ld")).expect("copy berm-rust.ld");
    fs::copy(here.join("../berm.ld"), out.join("berm.ld")).expect("copy guest-sdk/berm.ld");
    println!("cargo:rustc-link-search={}", out.display());
}
