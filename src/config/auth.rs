//! The `[auth]` section of the configuration: API keys (their SHA-256),
//! each with a namespace and a role. Settings only; the server checks
//! requests against them (`server::auth`).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// What a key may do, each role including the ones below it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read sessions, turns, summaries, bundles, facts, episodes; search;
    /// watch.
    Read,
    /// Also create, append, close, summarize, hand off, put and delete
    /// facts, update actions, resolve review items.
    Write,
    /// Also delete whole sessions.
    Admin,
}

impl Role {
    /// The role's name as the contract and messages spell it.
    pub fn name(self) -> &'static str {
        match self {
            Role::Read => "READ",
            Role::Write => "WRITE",
            Role::Admin => "ADMIN",
        }
    }
}

/// The namespace value of a key valid in every namespace.
pub const ANY_NAMESPACE: &str = "*";

/// One configured key (`[[auth.keys]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    /// A label for logs (never the key itself).
    pub name: String,
    /// The namespace the key may use, or `*` for all.
    pub namespace: String,
    /// What the key may do there.
    pub role: Role,
    /// Lowercase hex SHA-256 of the key, as `mnemo key create` prints it.
    pub sha256: String,
}

/// The `[auth]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Require a key on every MemoryService call. Unset: required when
    /// the daemon listens on a non-loopback address or keys are
    /// configured.
    pub required: Option<bool>,
    /// The accepted keys.
    pub keys: Vec<KeyConfig>,
}

impl AuthConfig {
    /// Whether keys are checked for a daemon listening on `loopback` or not.
    pub fn enabled(&self, loopback: bool) -> bool {
        self.required.unwrap_or(!loopback || !self.keys.is_empty())
    }

    /// Rejects malformed entries, and auth that is on with no key.
    pub fn validate(&self, loopback: bool) -> Result<()> {
        for k in &self.keys {
            let hex_ok = k.sha256.len() == 64
                && k.sha256
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if !hex_ok {
                return Err(Error::invalid(format!(
                    "auth key {:?}: sha256 must be 64 lowercase hex digits (run `mnemo key create`)",
                    k.name
                )));
            }
            if k.namespace.is_empty() {
                return Err(Error::invalid(format!(
                    "auth key {:?}: namespace must be a namespace or \"*\"",
                    k.name
                )));
            }
        }
        if self.enabled(loopback) && self.keys.is_empty() {
            return Err(Error::invalid(
                "auth is required (the daemon listens on a non-loopback address, or auth.required = true) \
                 but no [[auth.keys]] are configured: run `mnemo key create` and add its line to the config, \
                 or set auth.required = false on a trusted network",
            ));
        }
        Ok(())
    }
}

/// Parses a key given on the command line or in `MNEMO_AUTH_KEYS`:
/// `NAME:NAMESPACE:ROLE:SHA256`. The hash is checked with the rest of the
/// configuration ([`AuthConfig::validate`]).
pub fn parse_key_flag(text: &str) -> std::result::Result<KeyConfig, String> {
    let parts: Vec<&str> = text.trim().split(':').collect();
    let [name, namespace, role, sha256] = parts[..] else {
        return Err(format!(
            "expected NAME:NAMESPACE:ROLE:SHA256 (four fields separated by ':'), got {} field(s)",
            parts.len()
        ));
    };
    let role = match role.to_ascii_lowercase().as_str() {
        "read" => Role::Read,
        "write" => Role::Write,
        "admin" => Role::Admin,
        other => return Err(format!("role must be read, write or admin, not {other:?}")),
    };
    if name.is_empty() {
        return Err("the key's NAME must not be empty".to_owned());
    }
    Ok(KeyConfig {
        name: name.to_owned(),
        namespace: namespace.to_owned(),
        role,
        sha256: sha256.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_flag_has_four_fields_and_a_known_role() {
        let k = parse_key_flag("ci:team-a:write:ab").unwrap();
        assert_eq!(
            (
                k.name.as_str(),
                k.namespace.as_str(),
                k.role,
                k.sha256.as_str()
            ),
            ("ci", "team-a", Role::Write, "ab")
        );
        assert_eq!(parse_key_flag("ops:*:ADMIN:cd").unwrap().role, Role::Admin);
        assert!(parse_key_flag("ci:team-a:write")
            .unwrap_err()
            .contains("four fields"));
        assert!(parse_key_flag("ci:team-a:owner:ab")
            .unwrap_err()
            .contains("read, write or admin"));
        assert!(parse_key_flag(":team-a:read:ab")
            .unwrap_err()
            .contains("NAME"));
    }
}
