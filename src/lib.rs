//! mnemo: a persistent memory daemon for AI agents.
//!
//! The map, one line per module, from the top layer down (each imports
//! only what is below it; see docs/architecture.md):
//! - [`cli`]: the `mnemo` command line (serve, client and admin commands).
//! - [`mcp`]: the MCP server (`mnemo mcp`), a client of the daemon that
//!   serves memory as Model Context Protocol tools.
//! - [`inspect`]: the web inspector (`mnemo inspect`), a client of the
//!   daemon that shows people what the memory holds.
//! - [`hosts`]: which `Host` headers the inspector and MCP over HTTP
//!   answer to (pure).
//! - [`client`]: the typed Rust client used by the CLI, MCP and tests.
//! - [`server`]: the daemon: listener, TLS, guard, auth, metrics, shutdown.
//! - [`api`]: thin gRPC handlers and the one `Error` to `Status` mapping.
//! - [`runtime`]: the summary worker, idle sweeper, watch streams and
//!   search indexer, behind claims, the `Notifier` and an outbox cursor.
//! - [`memory`]: the domain: sessions, turns, the summary pipeline,
//!   handoff, facts, episodes and bundle gathering.
//! - [`bundle`]: packs a context bundle into a token budget (pure).
//! - [`search`]: ranked retrieval (tantivy, BM25) over turns, facts and
//!   episodes; an index derived from the store through the outbox.
//! - [`llm`]: the optional model-backed summarizer (OpenAI-compatible API,
//!   PII redaction, validated, the rules as fallback).
//! - [`summarize`]: the `Summarizer` trait, the rule-based summarizer,
//!   the faithfulness validator and renderings (pure).
//! - [`store`]: storage ports and the sled and in-memory engines.
//! - [`model`]: the data every layer shares.
//! - [`config`], [`error`], [`tokens`], [`pb`]: settings, the error type,
//!   token counting, the generated contract.

#![warn(missing_docs)]

pub mod api;
pub mod bundle;
pub mod cli;
pub mod client;
pub mod config;
pub mod error;
pub mod hosts;
pub mod inspect;
pub mod llm;
pub mod mcp;
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
