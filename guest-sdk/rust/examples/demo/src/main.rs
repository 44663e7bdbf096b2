//! demo: the Rust SDK's example harness (a result, a failure, a panic, a capability error).
#![cfg_attr(target_os = "none", no_std, no_main)]
extern crate alloc;
use alloc::format;
use alloc::string::String;

berm::harness! {
    usage: "Demonstration tools of the Rust guest SDK.",
    tools: {
        greet: "Return a greeting for `name`.", r#"{"type":"object","properties":{"name":{"type":"string"}}}"#;
        boom: "Panic with a message.";
        read: "Read a file through berm.fs.read.", r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#;
    },
}

fn greet(args: &str) -> Result<String, String> {
    berm::log!("greet: {} bytes of arguments", args.len());
    Ok(format!("{{\"greeting\":\"hello\",\"args\":{}}}", args))
}

fn boom(args: &str) -> Result<String, String> {
    let n = args.len();
    panic!("boom after {} bytes", n);
}

fn read(args: &str) -> Result<String, berm::CapError> {
    let path = args.split('"').nth(3).unwrap_or("");
    match berm::fs::read(path, 0, 0) {
        Ok(b) => Ok(format!("{} bytes", b.len())),
        Err(e) => Ok(format!("Err({}): {}", if e.is_refused() { "refused" } else { "failed" }, e.message())),
    }
}

#[cfg(not(target_os = "none"))]
fn main() {}
