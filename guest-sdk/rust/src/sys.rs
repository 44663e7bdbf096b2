//! Raw host calls: one `ecall` with the call number in a7, arguments in a0..a5 and the result in
//! a0 (guest-sdk/README.md, "Reference"). Call numbers are FNV-1a-64 of the capability name,
//! computed at compile time by [`fnv1a64`]: nobody types a number.

/// FNV-1a-64 of `name` (offset basis 0xcbf29ce484222325, prime 0x100000001b3, per byte: xor,
/// then multiply mod 2^64), the host-call number of a capability name.
pub const fn fnv1a64(name: &str) -> u64 {
    let b = name.as_bytes();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < b.len() {
        h ^= b[i] as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    h
}

/// Every host-call name the SDK uses (guest-sdk/caps.txt), with its number.
pub mod caps {
    use super::fnv1a64;
    macro_rules! caps {
        ($($id:ident = $name:literal;)*) => {
            $(#[doc = concat!("`", $name, "`")] pub const $id: u64 = fnv1a64($name);)*
            /// (number, name) of every host call above.
            pub const ALL: &[(u64, &str)] = &[$(($id, $name)),*];
        };
    }
    caps! {
        LOG = "berm.log";
        ARGS_LEN = "berm.args.len";
        ARGS_READ = "berm.args.read";
        FAIL = "berm.fail";
        DONE = "berm.done";
        RESULT_READ = "berm.result.read";
        HEAP_START = "berm.heap.start";
        HEAP_SIZE = "berm.heap.size";
        FS_READ = "berm.fs.read";
        FS_WRITE = "berm.fs.write";
        FS_GLOB = "berm.fs.glob";
        FS_GREP = "berm.fs.grep";
        EXEC_RUN = "berm.exec.run";
        HTTP_FETCH = "berm.http.fetch";
        NOW = "berm.now";
        CLOCK_OFFSET = "berm.clock.offset";
        GET = "berm.get";
        SET = "berm.set";
        DELETE = "berm.delete";
        CALL = "berm.call";
        WAKE_ARM = "berm.wake.arm";
        WAKE_CANCEL = "berm.wake.cancel";
        CALL_AFTER = "berm.call.after";
        CRABTALK_FS_READ = "crabtalk.fs.read";
        CRABTALK_FS_WRITE = "crabtalk.fs.write";
        CRABTALK_EXEC_RUN = "crabtalk.exec.run";
        CRABTALK_HTTP_FETCH = "crabtalk.http.fetch";
        PROTOCOL_CALL = "crabtalk.protocol.call";
        PROTOCOL_PING = "crabtalk.protocol.ping";
        PROTOCOL_GET_STATS = "crabtalk.protocol.get_stats";
        PROTOCOL_LIST_AGENTS = "crabtalk.protocol.list_agents";
        PROTOCOL_GET_AGENT = "crabtalk.protocol.get_agent";
        PROTOCOL_LIST_SKILLS = "crabtalk.protocol.list_skills";
        PROTOCOL_GET_SKILL = "crabtalk.protocol.get_skill";
        PROTOCOL_LIST_MODELS = "crabtalk.protocol.list_models";
        PROTOCOL_LIST_SUBSCRIPTIONS = "crabtalk.protocol.list_subscriptions";
        PROTOCOL_LIST_CONVERSATIONS = "crabtalk.protocol.list_conversations";
        PROTOCOL_LIST_ACTIVE_CONVERSATIONS = "crabtalk.protocol.list_active_conversations";
        PROTOCOL_GET_CONVERSATION_HISTORY = "crabtalk.protocol.get_conversation_history";
        PROTOCOL_SEARCH_SESSIONS = "crabtalk.protocol.search_sessions";
        PROTOCOL_SEND = "crabtalk.protocol.send";
        PROTOCOL_STREAM = "crabtalk.protocol.stream";
        PROTOCOL_SCHEDULE_WAKE = "crabtalk.protocol.schedule_wake";
        PROTOCOL_CANCEL_WAKE = "crabtalk.protocol.cancel_wake";
        PROTOCOL_LIST_WAKES = "crabtalk.protocol.list_wakes";
        PROTOCOL_SUBSCRIBE_EVENT = "crabtalk.protocol.subscribe_event";
        PROTOCOL_UNSUBSCRIBE_EVENT = "crabtalk.protocol.unsubscribe_event";
        PROTOCOL_PUBLISH_EVENT = "crabtalk.protocol.publish_event";
    }

    /// The name of host call `n`, if the SDK knows it.
    pub fn name(n: u64) -> Option<&'static str> {
        ALL.iter().find(|(k, _)| *k == n).map(|(_, s)| *s)
    }
}

/// One host call. The host treats a1 as written (it may be) and preserves every other register.
///
/// # Safety
/// Pointer arguments must describe memory of this instance that the call may read or write.
#[cfg(berm_guest)]
#[inline(always)]
pub unsafe fn hostcall(n: u64, a0: u64, a1: u64, a2: u64, a3: u64, a4: u64, a5: u64) -> u64 {
    let r: u64;
    core::arch::asm!(
        "ecall",
        inlateout("a0") a0 => r,
        inlateout("a1") a1 => _,
        in("a2") a2, in("a3") a3, in("a4") a4, in("a5") a5, in("a7") n,
        options(nostack),
    );
    r
}

/// One host call, answered by the stand-in host of [`crate::host`] (native builds).
///
/// # Safety
/// Pointer arguments must describe memory the call may read or write.
#[cfg(not(berm_guest))]
#[inline(never)]
pub unsafe fn hostcall(n: u64, a0: u64, a1: u64, a2: u64, a3: u64, a4: u64, a5: u64) -> u64 {
    crate::host::dispatch(n, [a0, a1, a2, a3, a4, a5])
}

/// `hostcall` with two arguments (a pointer and a length, usually).
#[inline(always)]
pub fn call2(n: u64, a0: u64, a1: u64) -> u64 {
    // SAFETY: callers pass (ptr, len) of a live buffer, or plain numbers.
    unsafe { hostcall(n, a0, a1, 0, 0, 0, 0) }
}
