//! demo: the Rust SDK's example harness (a result, a failure, a panic, a capability error, a
//! capability call without fields, an empty result).
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
        now: "The host clock in ms (berm.now: a request of no fields, an empty slice).";
        nothing: "Succeed with an empty result (an empty Vec: a dangling pointer, length 0).";
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

fn now(_: &str) -> Result<String, berm::CapError> {
    Ok(format!("{}", berm::clock::now_ms()?))
}

fn nothing(_: &str) -> Result<alloc::vec::Vec<u8>, String> {
    Ok(alloc::vec::Vec::new())
}

#[cfg(not(target_os = "none"))]
fn main() {}
