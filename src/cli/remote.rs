//! The rule for `mnemo inspect --http` and `mnemo mcp --http`: a
//! non-loopback address only with `--allow-remote`, which needs an explicit
//! list of the `Host` names clients use (`--allowed-host`) and is said
//! aloud on stderr, since whoever reaches the address acts with the API
//! key.

use std::net::SocketAddr;

/// Checks the address a front end (`what`: "inspector", "MCP server")
/// serves on; returns the warning to print when it is served remotely.
pub(super) fn check(
    what: &str,
    addr: SocketAddr,
    allow_remote: bool,
    allowed_hosts: &[String],
) -> Result<Option<String>, String> {
    if addr.ip().is_loopback() {
        return Ok(None);
    }
    if !allow_remote {
        return Err(format!(
            "refusing to serve the {what} on {addr}, a non-loopback address: it has no login of \
             its own, so whoever reaches it acts with this API key. Use a loopback address \
             (127.0.0.1), or pass --allow-remote with --allowed-host NAME[:PORT] (the names \
             clients use to reach it) behind your own authentication"
        ));
    }
    if allowed_hosts.iter().all(|h| h.trim().is_empty()) {
        return Err(format!(
            "--allow-remote needs the Host names clients use to reach the {what} on {addr}: \
             repeat --allowed-host NAME[:PORT] (requests naming any other host, loopback names \
             from other machines included, are refused)"
        ));
    }
    Ok(Some(format!(
        "warning: serving the {what} on {addr}, beyond this machine (--allow-remote): anyone who \
         reaches it by {} acts with this API key; put your own authentication in front of it",
        allowed_hosts.join(", ")
    )))
}
