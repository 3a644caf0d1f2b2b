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
