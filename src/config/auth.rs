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
    /// facts, update actions.
    Write,
    /// Also delete whole sessions, erase and export subjects, list
    /// erasures, and resolve review items.
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

/// A right granted beside the role order: a key holds it or not whatever
/// its role, and no role below ADMIN implies it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    /// Approve or reject review items (ResolveReviewItem). The review
    /// queue is there so that a person checks the agent, so the agent's
    /// own write key must not hold it: give it to the reviewers' keys.
    Review,
}

impl Permission {
    /// The permission's name as the config spells it.
    pub fn name(self) -> &'static str {
        match self {
            Permission::Review => "review",
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
    /// Rights beside the role (`permissions = ["review"]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<Permission>,
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

/// Refuses keys that would cross the network in clear: auth on, a
/// non-loopback address and no TLS, unless the operator said so
/// (`allow_plaintext_keys_off_loopback`, for a daemon behind a
/// TLS-terminating proxy).
pub fn plaintext_keys_check(
    auth: &AuthConfig,
    loopback: bool,
    tls: bool,
    allowed: bool,
) -> Result<()> {
    if auth.enabled(loopback) && !loopback && !tls && !allowed {
        return Err(Error::invalid(
            "refusing to accept API keys in clear: the daemon listens on a non-loopback address \
             without TLS, so every key (and every turn) would cross the network readable by anyone \
             on the path. Configure [tls] (or --tls-cert/--tls-key), or listen on 127.0.0.1; behind \
             a TLS-terminating proxy on a private link, set allow_plaintext_keys_off_loopback = true \
             (--allow-plaintext-keys-off-loopback true) to accept the risk",
        ));
    }
    Ok(())
}

/// Parses a key given on the command line or in `MNEMO_AUTH_KEYS`:
/// `NAME:NAMESPACE:ROLE:SHA256`, the role optionally followed by
/// permissions (`write+review`). The hash is checked with the rest of the
/// configuration ([`AuthConfig::validate`]).
pub fn parse_key_flag(text: &str) -> std::result::Result<KeyConfig, String> {
    let parts: Vec<&str> = text.trim().split(':').collect();
    let [name, namespace, role, sha256] = parts[..] else {
        return Err(format!(
            "expected NAME:NAMESPACE:ROLE:SHA256 (four fields separated by ':'), got {} field(s)",
            parts.len()
        ));
    };
    let mut granted = role.split('+');
    let role = granted.next().unwrap_or_default();
    let permissions = granted
        .map(|p| match p.to_ascii_lowercase().as_str() {
            "review" => Ok(Permission::Review),
            other => Err(format!(
                "unknown permission {other:?} after the role (the one permission is review, as in write+review)"
            )),
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
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
        permissions,
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
        let reviewer = parse_key_flag("lea:team-a:read+review:ab").unwrap();
        assert_eq!(
            (reviewer.role, reviewer.permissions),
            (Role::Read, vec![Permission::Review])
        );
        assert!(parse_key_flag("ci:team-a:write+owner:ab")
            .unwrap_err()
            .contains("permission"));
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
