//! The declaration macros: [`crate::harness!`] and the logging/failure helpers.

/// Declare a harness: its usage text, dependencies, tools and wake/notify entries. Use it once per
/// crate, at the top level.
///
/// ```ignore
/// berm::harness! {
///     usage: "What these tools are for.",
///     deps: ["other-harness"],                       // optional (ABI 1 "deps")
///     tools: {
///         greet: "Return a greeting.", r#"{"type":"object"}"#;   // name: description[, schema];
///         ping: "Answer pong.";
///     },
///     on_wake(every = 60_000): tick,                  // optional; or `on_wake: tick,`
///     on_notify: notified,                            // optional
/// }
/// fn greet(args: &str) -> Result<String, String> { … }            // Ok: berm.done, Err: berm.fail
/// fn tick(w: &berm::Wake) -> Result<(), String> { … }
/// fn notified(n: &berm::Notify) -> Result<(), String> { … }
/// ```
///
/// Each tool `NAME` is a function `fn(&str) -> Result<R, E>` in scope, with `R` a
/// [`rt::Output`](crate::rt::Output) (`String`, `&str`, `Vec<u8>`, `&[u8]`, `()`) and `E: Display`;
/// the macro defines the export `berm_tool_NAME`. The manifest (`.berm.abi`) is built at compile
/// time: tool names must be unique, parameters the text of a JSON Schema object. `every = P` re-arms
/// the wake P ms later (keeping its phase) before the body runs, so a failing body costs one
/// occurrence, not the schedule.
#[macro_export]
macro_rules! harness {
    (
        usage: $usage:expr,
        $(deps: [$($dep:expr),* $(,)?],)?
        tools: { $($name:ident : $desc:expr $(, $schema:expr)?);* $(;)? } $(,)?
        $(on_wake $((every = $period:expr))? : $wake:path,)?
        $(on_notify: $notify:path $(,)?)?
    ) => {
        const __BERM_TOOLS: &[$crate::ToolDecl] = &[$(
            $crate::ToolDecl { name: stringify!($name), description: $desc, parameters: $crate::__schema!($($schema)?) }
        ),*];
        const __BERM_DEPS: &[&str] = &[$($($dep),*)?];
        const _: () = $crate::manifest::check(__BERM_TOOLS);
        const __BERM_MANIFEST_LEN: usize = $crate::manifest::len($crate::ABI, $usage, __BERM_DEPS, __BERM_TOOLS);
        const __BERM_MANIFEST_BYTES: [u8; __BERM_MANIFEST_LEN] =
            $crate::manifest::build::<__BERM_MANIFEST_LEN>($crate::ABI, $usage, __BERM_DEPS, __BERM_TOOLS);
        /// The `.berm.abi` section: the manifest, built at compile time (no post-link step).
        #[cfg(target_os = "none")]
        #[link_section = ".berm.abi"]
        #[used]
        static __BERM_MANIFEST: [u8; __BERM_MANIFEST_LEN] = __BERM_MANIFEST_BYTES;

        /// This harness: its manifest and exports. The guest's `_start` references it, so the
        /// linker keeps every export; natively, `berm::host::Host` runs tools through it.
        #[export_name = "__berm_harness"]
        pub static HARNESS: $crate::Harness = $crate::Harness {
            manifest: $crate::__manifest_ref!(__BERM_MANIFEST_BYTES),
            tools: &[$(
                (stringify!($name), $crate::__export!(concat!("berm_tool_", stringify!($name)), {
                    $crate::rt::run_tool(stringify!($name), $name)
                }))
            ),*],
            on_wake: $crate::__opt!($(
                $crate::__export!("on_wake", {
                    $crate::rt::run_entry(&mut || {
                        if let Some(w) = $crate::wake::Wake::from_args() {
                            $( let _ = $crate::wake::schedule::every(&w, $period, None); )?
                            if let Err(e) = $wake(&w) { $crate::rt::fail_display(&e) }
                        }
                    })
                })
            )?),
            on_notify: $crate::__opt!($(
                $crate::__export!("on_notify", {
                    $crate::rt::run_entry(&mut || {
                        if let Some(n) = $crate::wake::Notify::from_args() {
                            if let Err(e) = $notify(&n) { $crate::rt::fail_display(&e) }
                        }
                    })
                })
            )?),
        };
    };
}

/// An export named `$sym` whose body is `$body`, as a [`rt::Export`](crate::rt::Export) value.
#[doc(hidden)]
#[macro_export]
macro_rules! __export {
    ($sym:expr, $body:block) => {{
        #[cfg(target_os = "none")]
        #[export_name = $sym]
        #[link_section = ".text.berm_tool"]
        extern "C" fn export() -> $crate::rt::Ret $body
        #[cfg(not(target_os = "none"))]
        #[export_name = $sym]
        extern "C-unwind" fn export() -> $crate::rt::Ret $body
        export as $crate::rt::Export
    }};
}

#[doc(hidden)]
#[macro_export]
macro_rules! __opt {
    () => {
        None
    };
    ($e:expr) => {
        Some($e)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __schema {
    () => {
        ""
    };
    ($e:expr) => {
        $e
    };
}

#[doc(hidden)]
#[cfg(target_os = "none")]
#[macro_export]
macro_rules! __manifest_ref {
    ($m:ident) => {
        &[] // the manifest lives in the non-allocated .berm.abi section only
    };
}

#[doc(hidden)]
#[cfg(not(target_os = "none"))]
#[macro_export]
macro_rules! __manifest_ref {
    ($m:ident) => {
        &$m
    };
}

/// `berm::log!("fmt", args…)`: one formatted `berm.log` line.
#[macro_export]
macro_rules! log {
    ($($t:tt)*) => {
        $crate::log(&$crate::__format!($($t)*))
    };
}

/// `berm::fail!("fmt", args…)`: fail the call with a formatted message (then return).
#[macro_export]
macro_rules! fail {
    ($($t:tt)*) => {
        $crate::fail(&$crate::__format!($($t)*))
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __format {
    ($($t:tt)*) => {
        $crate::__alloc::format!($($t)*)
    };
}
