//! A closed stdout (`mnemo bundle … | head`) ends a client command quietly
//! instead of with a panic: Rust ignores SIGPIPE, so `println!` fails with
//! EPIPE and panics; this hook turns exactly that panic into exit status 0
//! (the reader had what it wanted). Not for `serve` or `mcp`, whose
//! output is not a pipe a person closes.

/// Installs the hook (once, before any output).
pub fn end_quietly_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && is_broken_pipe(message) {
            std::process::exit(0);
        }
        default(info);
    }));
}

/// Whether a print failure is a closed pipe (the OS's words for EPIPE).
fn is_broken_pipe(message: &str) -> bool {
    message.contains("Broken pipe") || message.contains("os error 32")
}
