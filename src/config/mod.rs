//! Typed configuration of the daemon. Precedence, lowest first: built-in
//! defaults < TOML config file < environment variables < command-line
//! flags. Environment and flags arrive together through clap (`Overrides`);
//! `Config::resolve` applies them over the file.

pub mod auth;
pub mod data_home;
pub mod model;
pub mod postgres;
pub mod retention;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use self::auth::AuthConfig;
pub use self::model::{ModelConfig, SummarizerKind};
pub use self::postgres::PostgresConfig;
pub use self::retention::{RetentionPolicy, RetentionRule};
use crate::error::{Error, Result};
use crate::model::limits::{
    MAX_METADATA_ENTRIES, MAX_METADATA_KEY_BYTES, MAX_METADATA_VALUE_BYTES, MAX_NAME_BYTES,
};

/// Which storage engine to run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// Embedded sled database in `data_dir` (durable; the default).
    Sled,
    /// In process memory only: nothing survives a restart.
    Memory,
    /// A PostgreSQL database shared by several daemons (`[postgres]`).
    Postgres,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The most a turn's metadata, speaker and framing add to its text in a
/// response: every metadata entry at its limits (8 bytes of framing each),
/// two names, and 1 KiB of fields and framing. 272,384 bytes.
pub const MAX_TURN_OVERHEAD_BYTES: usize = MAX_METADATA_ENTRIES
    * (MAX_METADATA_KEY_BYTES + MAX_METADATA_VALUE_BYTES + 8)
    + 2 * MAX_NAME_BYTES
    + 1024;
// The README and docs quote the figure.
const _: () = assert!(MAX_TURN_OVERHEAD_BYTES == 272_384);

/// Limits that keep every request and queue bounded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest gRPC message accepted or sent, in bytes.
    pub max_message_bytes: usize,
    /// Most turns in one AppendTurns call.
    pub max_turns_per_append: usize,
    /// Most bytes of content plus tool-call text in one turn.
    pub max_turn_bytes: usize,
    /// Largest page a list call returns.
    pub max_page_size: u32,
    /// Requests that may wait for the group-commit thread at once.
    pub sync_queue: usize,
    /// Concurrent HTTP/2 streams per client connection.
    pub max_concurrent_streams: u32,
    /// Requests in flight per connection; more wait in the connection.
    pub concurrency_per_connection: usize,
    /// Requests in flight across all connections; one more is refused at
    /// once with RESOURCE_EXHAUSTED.
    pub max_concurrent_requests: usize,
    /// Server-side time limit for one request, in seconds.
    pub request_timeout_secs: u64,
    /// At shutdown, how long in-flight requests may take to finish.
    pub shutdown_grace_secs: u64,
    /// Notices buffered per watched session; a watcher further behind is
    /// disconnected with the seq to resume from.
    pub watch_buffer: usize,
    /// Open WatchSession streams allowed per namespace.
    pub max_watches_per_namespace: usize,
    /// Of those, most that observers (the inspector's live pages,
    /// `observer = true`) may hold: the rest stays for the agents' own
    /// watches. Below `max_watches_per_namespace`; unset: half of it.
    pub max_observer_watches_per_namespace: Option<usize>,
    /// Longest a search or a bundle's retrieval waits for the index to
    /// apply the writes acknowledged before it (read-your-writes), in
    /// milliseconds. Past it, a read without a consistency token is
    /// answered with what is indexed (`index_lag` > 0); one with a token
    /// gets UNAVAILABLE.
    pub read_your_writes_wait_ms: u64,
    /// On a shared database: an erase job whose daemon made no progress
    /// for this many seconds is taken over by another daemon.
    pub erase_take_over_secs: u64,
    /// How often retention policies (`[[retention]]`) are applied, in
    /// seconds.
    pub retention_sweep_secs: u64,
}

impl Limits {
    /// Most watches observers may hold in one namespace (see
    /// [`Limits::max_observer_watches_per_namespace`]).
    pub fn observer_watches(&self) -> usize {
        self.max_observer_watches_per_namespace
            .unwrap_or(self.max_watches_per_namespace / 2)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: 4 * 1024 * 1024,
            max_turns_per_append: 256,
            max_turn_bytes: 1024 * 1024,
            max_page_size: 1000,
            sync_queue: 4096,
            max_concurrent_streams: 256,
            concurrency_per_connection: 256,
            max_concurrent_requests: 1024,
            request_timeout_secs: 30,
            shutdown_grace_secs: 10,
            watch_buffer: 256,
            max_watches_per_namespace: 64,
            max_observer_watches_per_namespace: None,
            read_your_writes_wait_ms: 2000,
            erase_take_over_secs: 30,
            retention_sweep_secs: 3600,
        }
    }
}

/// Running-summary settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SummaryConfig {
    /// Sessions waiting for the summary worker; when full, automatic
    /// summaries are deferred (counted) and retried on the next append.
    pub queue: usize,
    /// Summarize when unsummarized tokens pass this percent of the
    /// session's `context_limit_tokens`.
    pub token_threshold_percent: u32,
    /// Audit flag below this compression ratio (pre / post tokens).
    pub compression_min_ratio: f64,
    /// Audit flag above this compression ratio.
    pub compression_max_ratio: f64,
    /// Check the compression band only from this many covered tokens on:
    /// a short session's structured summary is naturally longer than it.
    pub compression_check_min_tokens: u64,
    /// Seconds a worker holds a claimed summary; a claim whose worker died
    /// (a daemon killed while sharing a database) is taken over by another
    /// after this long.
    pub lease_secs: u64,
}

impl Default for SummaryConfig {
    fn default() -> Self {
        SummaryConfig {
            queue: 1024,
            token_threshold_percent: 80,
            compression_min_ratio: 1.0,
            compression_max_ratio: 1000.0,
            compression_check_min_tokens: 2000,
            lease_secs: 300,
        }
    }
}

/// sled's own default page cache: 1 GiB.
pub const DEFAULT_CACHE_MB: u64 = 1024;
/// Accepted `cache_mb` values: from 8 MiB to 1 TiB.
pub const CACHE_MB_RANGE: std::ops::RangeInclusive<u64> = 8..=1 << 20;

/// The daemon's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address to listen on (`MNEMO_LISTEN`).
    pub listen: SocketAddr,
    /// Address of the Prometheus metrics endpoint (`GET /metrics`); off
    /// when unset (`MNEMO_METRICS_LISTEN`).
    pub metrics_listen: Option<SocketAddr>,
    /// Directory of the sled database (`MNEMO_DATA_DIR`).
    pub data_dir: PathBuf,
    /// Storage engine.
    pub store: StoreKind,
    /// Memory for sled's page cache, in MiB (`MNEMO_CACHE_MB`): the main
    /// part of the daemon's RSS on a large store.
    pub cache_mb: u64,
    /// Log format.
    pub log_format: LogFormat,
    /// Request and queue limits.
    pub limits: Limits,
    /// Running summaries.
    pub summaries: SummaryConfig,
    /// API keys (`[auth]`, `[[auth.keys]]`).
    pub auth: AuthConfig,
    /// TLS for the gRPC listener (`[tls]`); plaintext when unset.
    pub tls: Option<TlsConfig>,
    /// Accept API keys over plaintext on a non-loopback address
    /// (`--allow-plaintext-keys-off-loopback`). Off: such a daemon refuses
    /// to start, since every key would cross the network in clear. For a
    /// daemon behind a TLS-terminating proxy on a private link only.
    pub allow_plaintext_keys_off_loopback: bool,
    /// The model that writes summaries (`[model]`); off by default.
    pub model: ModelConfig,
    /// The shared database of `store = "postgres"` (`[postgres]`).
    pub postgres: PostgresConfig,
    /// Retention policies (`[[retention]]`), per namespace; none keeps
    /// everything.
    pub retention: Vec<RetentionRule>,
}

/// TLS settings: PEM files read at start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The server's certificate chain (PEM).
    pub cert: PathBuf,
    /// The certificate's private key (PEM).
    pub key: PathBuf,
    /// When set, clients must present a certificate signed by one of
    /// these CAs (PEM): mutual TLS.
    pub client_ca: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 50051)),
            metrics_listen: None,
            data_dir: PathBuf::from("./mnemo-data"),
            store: StoreKind::Sled,
            cache_mb: DEFAULT_CACHE_MB,
            log_format: LogFormat::Text,
            limits: Limits::default(),
            summaries: SummaryConfig::default(),
            auth: AuthConfig::default(),
            tls: None,
            allow_plaintext_keys_off_loopback: false,
            model: ModelConfig::default(),
            postgres: PostgresConfig::default(),
            retention: Vec::new(),
        }
    }
}

/// Values from the environment and the command line; `None` = not given.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Overrides {
    /// TOML config file.
    #[arg(long, env = "MNEMO_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:50051].
    #[arg(long, env = "MNEMO_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Serve Prometheus metrics on this address [default: off].
    #[arg(long, env = "MNEMO_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Data directory [default: ./mnemo-data].
    #[arg(long, env = "MNEMO_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Storage engine [default: sled]; `postgres` shares one database
    /// between daemons (needs --postgres-url).
    #[arg(long, env = "MNEMO_STORE", value_enum)]
    pub store: Option<StoreKind>,
    /// The PostgreSQL database of --store postgres, e.g.
    /// postgres://mnemo:PASSWORD@db:5432/mnemo?sslmode=require.
    #[arg(long, env = "MNEMO_POSTGRES_URL", hide_env_values = true)]
    pub postgres_url: Option<String>,
    /// Most database connections this daemon holds [default: 16].
    #[arg(long, env = "MNEMO_POSTGRES_POOL_SIZE")]
    pub postgres_pool_size: Option<u32>,
    /// CA certificate (PEM) to trust for TLS to the database [default:
    /// the public web roots].
    #[arg(long, env = "MNEMO_POSTGRES_CA_FILE")]
    pub postgres_ca_file: Option<PathBuf>,
    /// sled page cache in MiB [default: 1024].
    #[arg(long, env = "MNEMO_CACHE_MB")]
    pub cache_mb: Option<u64>,
    /// Log format [default: text].
    #[arg(long, env = "MNEMO_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// TLS: the server's certificate chain (PEM); with --tls-key, replaces
    /// the file's `[tls]`.
    #[arg(long, env = "MNEMO_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS: the certificate's private key (PEM).
    #[arg(long, env = "MNEMO_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Mutual TLS: clients must present a certificate signed by this CA
    /// (PEM). Needs TLS (flags or the file's `[tls]`).
    #[arg(long, env = "MNEMO_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<PathBuf>,
    /// Accept API keys without TLS on a non-loopback address: keys then
    /// cross the network in clear (only behind a TLS-terminating proxy on
    /// a private link) [default: refuse to start].
    #[arg(long, env = "MNEMO_ALLOW_PLAINTEXT_KEYS_OFF_LOOPBACK")]
    pub allow_plaintext_keys_off_loopback: Option<bool>,
    /// Require an API key on every call (`auth.required`) [default: when
    /// listening beyond loopback or keys are configured].
    #[arg(long, env = "MNEMO_AUTH_REQUIRED")]
    pub auth_required: Option<bool>,
    /// An accepted API key, as NAME:NAMESPACE:ROLE:SHA256 (what `mnemo key
    /// create` prints; role read, write or admin; namespace `*` for all).
    /// Repeat the flag, or separate keys by commas in MNEMO_AUTH_KEYS;
    /// added to the file's `[[auth.keys]]`.
    #[arg(long = "auth-key", env = "MNEMO_AUTH_KEYS", value_delimiter = ',', value_parser = auth::parse_key_flag, hide_env_values = true)]
    pub auth_keys: Vec<auth::KeyConfig>,
    /// Who writes summaries: `rules` (default) or `model` (needs
    /// --model-url and --model-name; the key from MNEMO_MODEL_API_KEY).
    #[arg(long, env = "MNEMO_SUMMARIZER", value_enum)]
    pub summarizer: Option<SummarizerKind>,
    /// Base URL of an OpenAI-compatible API (`/v1/chat/completions` is
    /// appended).
    #[arg(long, env = "MNEMO_MODEL_URL")]
    pub model_url: Option<String>,
    /// The model's name on that server.
    #[arg(long, env = "MNEMO_MODEL_NAME")]
    pub model_name: Option<String>,
}

impl Config {
    /// Parses a TOML config file; missing keys keep their defaults.
    pub fn from_file(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::invalid(format!("cannot read config file {}: {e}", path.display()))
        })?;
        toml::from_str(&text)
            .map_err(|e| Error::invalid(format!("invalid config file {}: {e}", path.display())))
    }

    /// Defaults, then the file named in `overrides` (if any), then the
    /// overrides themselves.
    pub fn resolve(overrides: &Overrides) -> Result<Config> {
        let mut c = match &overrides.config {
            Some(p) => Config::from_file(p)?,
            None => Config::default(),
        };
        if let Some(v) = overrides.listen {
            c.listen = v;
        }
        if let Some(v) = overrides.metrics_listen {
            c.metrics_listen = Some(v);
        }
        if let Some(v) = &overrides.data_dir {
            c.data_dir = v.clone();
        }
        if let Some(v) = overrides.store {
            c.store = v;
        }
        if let Some(v) = overrides.cache_mb {
            c.cache_mb = v;
        }
        if let Some(v) = &overrides.postgres_url {
            c.postgres.url = v.clone();
        }
        if let Some(v) = overrides.postgres_pool_size {
            c.postgres.pool_size = v;
        }
        if let Some(v) = &overrides.postgres_ca_file {
            c.postgres.ca_file = Some(v.clone());
        }
        if let Some(v) = overrides.log_format {
            c.log_format = v;
        }
        if let (Some(cert), Some(key)) = (&overrides.tls_cert, &overrides.tls_key) {
            let client_ca = c.tls.take().and_then(|t| t.client_ca);
            c.tls = Some(TlsConfig {
                cert: cert.clone(),
                key: key.clone(),
                client_ca,
            });
        }
        if let Some(ca) = &overrides.tls_client_ca {
            match &mut c.tls {
                Some(tls) => tls.client_ca = Some(ca.clone()),
                None => {
                    return Err(Error::invalid(
                        "--tls-client-ca needs TLS: give --tls-cert and --tls-key (or [tls] in the config file)",
                    ))
                }
            }
        }
        if let Some(v) = overrides.auth_required {
            c.auth.required = Some(v);
        }
        if let Some(v) = overrides.allow_plaintext_keys_off_loopback {
            c.allow_plaintext_keys_off_loopback = v;
        }
        c.auth.keys.extend(overrides.auth_keys.iter().cloned());
        if let Some(v) = overrides.summarizer {
            c.model.summarizer = v;
        }
        if let Some(v) = &overrides.model_url {
            c.model.url = v.clone();
        }
        if let Some(v) = &overrides.model_name {
            c.model.name = v.clone();
        }
        c.model.api_key = std::env::var("MNEMO_MODEL_API_KEY")
            .ok()
            .filter(|k| !k.trim().is_empty());
        c.validate()?;
        Ok(c)
    }

    /// Rejects limits that would make the daemon unusable.
    pub fn validate(&self) -> Result<()> {
        self.model.validate()?;
        if self.store == StoreKind::Postgres {
            self.postgres.validate()?;
        }
        if !CACHE_MB_RANGE.contains(&self.cache_mb) {
            return Err(Error::invalid(format!(
                "cache_mb must be from {} to {} (MiB of sled page cache)",
                CACHE_MB_RANGE.start(),
                CACHE_MB_RANGE.end()
            )));
        }
        let l = &self.limits;
        if l.max_message_bytes < 64 * 1024 {
            return Err(Error::invalid(
                "limits.max_message_bytes must be at least 65536",
            ));
        }
        // A stored turn must fit in a response: its text plus the most
        // its metadata and names can add.
        let room = l.max_message_bytes.saturating_sub(MAX_TURN_OVERHEAD_BYTES);
        if l.max_turn_bytes == 0 || l.max_turn_bytes > room {
            return Err(Error::invalid(format!(
                "limits.max_turn_bytes must be between 1 and limits.max_message_bytes - {MAX_TURN_OVERHEAD_BYTES} ({room}), \
                 so that every stored turn can be read back in one message"
            )));
        }
        if l.max_turns_per_append == 0
            || l.max_page_size == 0
            || l.sync_queue == 0
            || l.watch_buffer == 0
            || l.erase_take_over_secs == 0
            || l.retention_sweep_secs == 0
        {
            return Err(Error::invalid(
                "limits.max_turns_per_append, limits.max_page_size, limits.sync_queue, limits.watch_buffer, limits.erase_take_over_secs and limits.retention_sweep_secs must be positive",
            ));
        }
        if l.max_observer_watches_per_namespace
            .is_some_and(|n| n == 0 || n >= l.max_watches_per_namespace)
        {
            return Err(Error::invalid(format!(
                "limits.max_observer_watches_per_namespace must be from 1 to \
                 limits.max_watches_per_namespace - 1 ({}): observers (the inspector) must leave \
                 room for the agents' own watches",
                l.max_watches_per_namespace.saturating_sub(1)
            )));
        }
        let sm = &self.summaries;
        if sm.queue == 0 || !(1..=100).contains(&sm.token_threshold_percent) {
            return Err(Error::invalid(
                "summaries.queue must be positive and summaries.token_threshold_percent 1 to 100",
            ));
        }
        if !(1..=86_400).contains(&sm.lease_secs) {
            return Err(Error::invalid(
                "summaries.lease_secs must be from 1 to 86400",
            ));
        }
        if l.max_concurrent_streams == 0
            || l.concurrency_per_connection == 0
            || l.max_concurrent_requests == 0
            || l.request_timeout_secs == 0
        {
            return Err(Error::invalid(
                "limits.max_concurrent_streams, limits.concurrency_per_connection, limits.max_concurrent_requests and limits.request_timeout_secs must be positive",
            ));
        }
        self.auth.validate(self.listen.ip().is_loopback())?;
        auth::plaintext_keys_check(
            &self.auth,
            self.listen.ip().is_loopback(),
            self.tls.is_some(),
            self.allow_plaintext_keys_off_loopback,
        )?;
        retention::validate(&self.retention)?;
        Ok(())
    }
}
