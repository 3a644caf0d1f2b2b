//! The `[postgres]` section: the shared database of `store = "postgres"`,
//! where several daemons keep one memory. The URL's password is better
//! given by `PGPASSWORD`-style means outside the file (the URL is
//! accepted from `MNEMO_POSTGRES_URL` for that reason) and is never logged.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Accepted pool sizes.
pub const POOL_SIZE_RANGE: std::ops::RangeInclusive<u32> = 1..=1024;

/// `[postgres]`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PostgresConfig {
    /// `postgres://user:password@host:5432/db?sslmode=require` or
    /// libpq's `host=… user=… dbname=…` (`MNEMO_POSTGRES_URL`).
    pub url: String,
    /// Most connections this daemon holds (`MNEMO_POSTGRES_POOL_SIZE`).
    pub pool_size: u32,
    /// Seconds a request waits for a connection before UNAVAILABLE.
    pub connect_timeout_secs: u64,
    /// CA certificate (PEM) to trust for TLS to the database; the public
    /// web roots when unset. TLS is used as the URL's `sslmode` says.
    pub ca_file: Option<PathBuf>,
}

impl Default for PostgresConfig {
    fn default() -> Self {
        PostgresConfig {
            url: String::new(),
            pool_size: 16,
            connect_timeout_secs: 5,
            ca_file: None,
        }
    }
}

impl std::fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("url", &redacted(&self.url))
            .field("pool_size", &self.pool_size)
            .field("connect_timeout_secs", &self.connect_timeout_secs)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

/// The URL with any password replaced by `***`.
pub fn redacted(url: &str) -> String {
    static PASSWORD: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = PASSWORD.get_or_init(|| {
        regex::Regex::new(r"(://[^:/@]*:)[^/]*@|(password\s*=\s*)('[^']*'|\S+)")
            .expect("a valid pattern")
    });
    re.replace_all(url, |c: &regex::Captures<'_>| match (c.get(1), c.get(2)) {
        (Some(user), _) => format!("{}***@", user.as_str()),
        (_, Some(key)) => format!("{}***", key.as_str()),
        _ => String::new(),
    })
    .into_owned()
}

impl PostgresConfig {
    /// Checks the section when the store is PostgreSQL.
    pub fn validate(&self) -> Result<()> {
        if self.url.trim().is_empty() {
            return Err(Error::invalid(
                "store = postgres needs a database: give --postgres-url (MNEMO_POSTGRES_URL) or [postgres] url",
            ));
        }
        if !POOL_SIZE_RANGE.contains(&self.pool_size) {
            return Err(Error::invalid(format!(
                "postgres.pool_size must be from {} to {}",
                POOL_SIZE_RANGE.start(),
                POOL_SIZE_RANGE.end()
            )));
        }
        if self.connect_timeout_secs == 0 {
            return Err(Error::invalid(
                "postgres.connect_timeout_secs must be positive",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redacted("postgres://mnemo:s3cr@t@db:5432/m"),
            "postgres://mnemo:***@db:5432/m"
        );
        assert_eq!(
            redacted("host=db user=m password='a b' dbname=x"),
            "host=db user=m password=*** dbname=x"
        );
        assert_eq!(redacted("postgres://db/m"), "postgres://db/m");
    }
}
