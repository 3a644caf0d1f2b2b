//! Who may do what. Namespaces are the tenancy boundary: an API key
//! belongs to one namespace (or `*`, every namespace) and has a role
//! (READ < WRITE < ADMIN), and possibly permissions beside the role
//! (`review`: resolve review items). The config holds only SHA-256 hashes of keys;
//! a key is 256 random bits, so a plain hash is enough to make the config
//! useless to a thief, and it is compared in constant time.
//!
//! Two steps: a tonic interceptor here (before the body is decoded) turns
//! the `authorization: Bearer <key>` header into a [`Caller`] or
//! UNAUTHENTICATED; each handler then calls `api::admit::admit` with the
//! namespace of its request and the role it needs, which gives
//! PERMISSION_DENIED.
//! Health and reflection stay open (they reveal no stored data).
//!
//! The key table can be replaced while serving ([`Keys::reload`]; the
//! daemon does it on SIGHUP), so keys are added and revoked without a
//! restart.

use std::sync::{Arc, RwLock};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tonic::{Request, Status};

use crate::error::{Error, Result};

pub use crate::api::admit::Caller;
pub use crate::config::auth::{AuthConfig, KeyConfig, Permission, Role, ANY_NAMESPACE};

/// The key table the interceptor checks against. Clones share one table,
/// which [`Keys::reload`] replaces as a whole: a request sees the old
/// table or the new one, never a mix.
#[derive(Clone)]
pub struct Keys {
    listener: Listener,
    table: Arc<RwLock<Arc<Table>>>,
}

/// How the daemon is reached, which decides what a key table may be.
#[derive(Debug, Clone, Copy)]
pub struct Listener {
    /// It listens on a loopback address only.
    pub loopback: bool,
    /// It serves TLS.
    pub tls: bool,
    /// The operator accepts keys in clear off loopback
    /// (`allow_plaintext_keys_off_loopback`).
    pub plaintext_keys_allowed: bool,
}

impl Listener {
    /// A loopback listener (no question of keys in clear).
    pub fn loopback() -> Listener {
        Listener {
            loopback: true,
            tls: false,
            plaintext_keys_allowed: false,
        }
    }
}

struct Table {
    enabled: bool,
    keys: Vec<([u8; 32], KeyConfig)>,
}

impl Table {
    fn new(config: &AuthConfig, listener: Listener) -> Result<Table> {
        let loopback = listener.loopback;
        config.validate(loopback)?;
        crate::config::auth::plaintext_keys_check(
            config,
            loopback,
            listener.tls,
            listener.plaintext_keys_allowed,
        )?;
        let keys = config
            .keys
            .iter()
            .map(|k| {
                let mut hash = [0u8; 32];
                // validate() checked 64 lowercase hex digits.
                hex::decode_to_slice(&k.sha256, &mut hash)
                    .map_err(|e| Error::invalid(format!("auth key {:?}: {e}", k.name)))?;
                Ok((hash, k.clone()))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Table {
            enabled: config.enabled(loopback),
            keys,
        })
    }
}

impl Keys {
    /// The runtime form of `config` (validated first) for a daemon that
    /// listens on a loopback address or not, without TLS.
    pub fn new(config: &AuthConfig, loopback: bool) -> Result<Keys> {
        Keys::for_listener(
            config,
            Listener {
                loopback,
                ..Listener::loopback()
            },
        )
    }

    /// The runtime form of `config` (validated first, and refused when it
    /// would accept keys in clear off loopback) for `listener`.
    pub fn for_listener(config: &AuthConfig, listener: Listener) -> Result<Keys> {
        Ok(Keys {
            listener,
            table: Arc::new(RwLock::new(Arc::new(Table::new(config, listener)?))),
        })
    }

    /// Replaces the key table with `config`'s (validated first, with the
    /// rules of the address the daemon listens on: a reload cannot turn
    /// keys on in clear off loopback either). On error the keys in force
    /// stay as they were. Requests already admitted keep running.
    pub fn reload(&self, config: &AuthConfig) -> Result<()> {
        let table = Arc::new(Table::new(config, self.listener)?);
        *self.table.write().unwrap_or_else(|p| p.into_inner()) = table;
        Ok(())
    }

    fn current(&self) -> Arc<Table> {
        self.table.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the daemon listens on a loopback address only.
    pub fn loopback(&self) -> bool {
        self.listener.loopback
    }

    /// Whether keys are checked.
    pub fn enabled(&self) -> bool {
        self.current().enabled
    }

    /// How many keys are accepted.
    pub fn len(&self) -> usize {
        self.current().keys.len()
    }

    /// Whether no key is accepted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The caller `authorization` names, or UNAUTHENTICATED.
    pub fn caller(&self, authorization: Option<&[u8]>) -> Result<Caller> {
        let table = self.current();
        if !table.enabled {
            return Ok(Caller::Anyone);
        }
        let Some(value) = authorization else {
            return Err(Error::Unauthenticated(
                "missing API key: send the metadata `authorization: Bearer <key>`".into(),
            ));
        };
        let Some(key) = value.strip_prefix(b"Bearer ") else {
            return Err(Error::Unauthenticated(
                "the authorization metadata must be `Bearer <key>`".into(),
            ));
        };
        let presented: [u8; 32] = Sha256::digest(key.trim_ascii()).into();
        // Every entry is compared, so timing says nothing about which
        // (or whether one) matched.
        let mut found = None;
        for (hash, k) in table.keys.iter() {
            if bool::from(hash.ct_eq(&presented)) {
                found = Some(k);
            }
        }
        match found {
            Some(k) => Ok(Caller::Key {
                name: k.name.clone(),
                namespace: k.namespace.clone(),
                role: k.role,
                permissions: k.permissions.clone(),
            }),
            None => Err(Error::Unauthenticated(
                "unknown API key (revoked, mistyped, or for another daemon)".into(),
            )),
        }
    }

    /// The interceptor that attaches a [`Caller`] to every request.
    pub fn interceptor(&self) -> impl tonic::service::Interceptor + Clone + Send + Sync + 'static {
        let keys = self.clone();
        move |mut req: Request<()>| -> Result<Request<()>, Status> {
            let header = req
                .metadata()
                .get("authorization")
                .map(|v| v.as_bytes().to_vec());
            let caller = keys.caller(header.as_deref())?;
            req.extensions_mut().insert(caller);
            Ok(req)
        }
    }
}

/// What a daemon with auth off exposes, in its warnings: on loopback every
/// local process, beyond it every host that reaches the address.
pub fn exposure_without_auth(loopback: bool) -> &'static str {
    if loopback {
        "auth is off: any process on this machine may read, write, erase and resolve review \
         items (approve an agent's irreversible actions) in every namespace; configure \
         [[auth.keys]] to turn it on"
    } else {
        "auth is off on a non-loopback address: ANY HOST that can reach this address may read, \
         write, erase and resolve review items in every namespace; configure [[auth.keys]] \
         (with TLS) unless the network itself is trusted"
    }
}

/// A new key (`mnemo_` and 64 hex digits of OS randomness) and its hash.
pub fn new_key() -> Result<(String, String)> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::Internal(format!("the OS gave no randomness: {e}")))?;
    let key = format!("mnemo_{}", hex::encode(bytes));
    let hash = hex::encode(Sha256::digest(key.as_bytes()));
    Ok((key, hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config holding one key.
    fn one_key(name: &str, namespace: &str, role: Role, sha256: String) -> AuthConfig {
        AuthConfig {
            required: None,
            keys: vec![KeyConfig {
                name: name.into(),
                namespace: namespace.into(),
                role,
                permissions: Vec::new(),
                sha256,
            }],
        }
    }

    fn keys() -> (Keys, String) {
        let (key, sha256) = new_key().unwrap();
        let config = one_key("agent", "ns", Role::Write, sha256);
        (Keys::new(&config, true).unwrap(), key)
    }

    #[test]
    fn a_created_key_is_recognised_and_others_are_not() {
        let (keys, key) = keys();
        assert!(
            keys.enabled(),
            "configured keys turn auth on even on loopback"
        );
        let ok = keys
            .caller(Some(format!("Bearer {key}").as_bytes()))
            .unwrap();
        assert!(matches!(
            ok,
            Caller::Key {
                role: Role::Write,
                ..
            }
        ));
        for bad in [
            None,
            Some(key.as_bytes().to_vec()),
            Some(format!("Bearer {key}x").into_bytes()),
            Some(b"Bearer ".to_vec()),
        ] {
            let e = keys.caller(bad.as_deref()).unwrap_err();
            assert!(matches!(e, Error::Unauthenticated(_)), "{e:?}");
        }
    }

    #[test]
    fn a_reload_replaces_the_keys_and_a_bad_one_changes_nothing() {
        let (keys, old) = keys();
        let shared = keys.clone();
        let (new, sha256) = new_key().unwrap();
        keys.reload(&one_key("rotated", "*", Role::Read, sha256))
            .unwrap();
        let bearer = |k: &str| format!("Bearer {k}").into_bytes();
        assert!(
            shared.caller(Some(&bearer(&new))).is_ok(),
            "clones share the table"
        );
        assert!(
            shared.caller(Some(&bearer(&old))).is_err(),
            "the old key is revoked"
        );
        let broken = AuthConfig {
            required: Some(true),
            keys: vec![],
        };
        assert!(keys.reload(&broken).is_err());
        assert!(
            keys.caller(Some(&bearer(&new))).is_ok(),
            "a bad reload keeps the keys"
        );
        keys.reload(&AuthConfig::default()).unwrap();
        assert!(!keys.enabled(), "loopback without keys: auth off");
    }

    #[test]
    fn auth_off_only_on_loopback_without_keys() {
        let none = AuthConfig::default();
        assert!(!none.enabled(true));
        assert!(none.validate(true).is_ok());
        assert!(none.enabled(false));
        assert!(none.validate(false).is_err(), "non-loopback needs keys");
        let off = AuthConfig {
            required: Some(false),
            keys: vec![],
        };
        assert!(off.validate(false).is_ok());
        let bad = AuthConfig {
            required: None,
            keys: vec![KeyConfig {
                name: "x".into(),
                namespace: "ns".into(),
                role: Role::Read,
                permissions: Vec::new(),
                sha256: "ABC".into(),
            }],
        };
        assert!(bad.validate(true).is_err());
    }
}
