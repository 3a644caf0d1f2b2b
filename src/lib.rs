//! mnemo: a persistent memory daemon for AI agents.
//!
//! The map, one line per module:
//! - [`config`]: typed configuration (defaults < file < env < flags).
//! - [`error`]: the one error type and its mapping to gRPC status codes.
//! - [`pb`]: code generated from `proto/mnemo/v1` (the public contract).
//! - [`metrics`]: Prometheus metrics on their own HTTP listener.
//! - [`server`]: the daemon: listener, limits, health, reflection, shutdown.
//! - [`api`]: thin gRPC handlers: convert, call the domain, map errors.
//! - [`memory`]: the domain: sessions, turns, facts, episodes, validation,
//!   pagination.
//! - [`store`]: the `Store` trait, sled and in-memory stores, key layout,
//!   checksummed records and group commit.
//! - [`bundle`]: context bundles: a session rehydrated within a token
//!   budget, with a manifest of what was left out.
//! - [`summarize`]: running summaries: rules, incremental fold, validator,
//!   renderings, pipeline and scheduler.
//! - [`search`]: ranked retrieval (tantivy, BM25) over turns, facts and
//!   episodes; an index derived from the store through an outbox.
//! - [`tokens`]: token counting (linear-time BPE, tiktoken-identical).
//! - [`cli`]: the `mnemo` command line (serve and client subcommands).

#![warn(missing_docs)]

pub mod api;
pub mod bundle;
pub mod cli;
pub mod client;
pub mod config;
pub mod error;
pub mod memory;
pub mod model;
pub mod pb;
pub mod runtime;
pub mod search;
pub mod server;
pub mod store;
pub mod summarize;
pub mod tokens;

pub use error::{Error, Result};
