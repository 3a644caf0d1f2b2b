//! `mnemo serve`: configuration, logging, key reloads on SIGHUP, and the
//! daemon itself until a shutdown signal.

use std::io::IsTerminal;

use tokio::sync::mpsc;

use crate::config::{Config, LogFormat, Overrides};
use crate::server::auth::AuthConfig;
use crate::server::{shutdown_signal, Daemon};

/// On each SIGHUP, reads the configuration again (file, environment and
/// flags, as at start) and sends its `[auth]` section to the daemon; a
/// config that does not parse is logged and ignored. Only the keys are
/// reloaded: other changed settings are reported and wait for a restart.
fn reload_on_sighup(overrides: Overrides, running: Config) -> mpsc::Receiver<AuthConfig> {
    let (tx, rx) = mpsc::channel(1);
    // The handler is installed here, before the daemon opens and says it
    // listens: from then on a SIGHUP never takes the default action (exit).
    #[cfg(unix)]
    let mut hangups = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGHUP; keys reload only at restart");
            return rx;
        }
    };
    #[cfg(unix)]
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let overrides = overrides.clone();
            let fresh = tokio::task::spawn_blocking(move || Config::resolve(&overrides)).await;
            let config = match fresh {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "SIGHUP: configuration not reloaded; the keys in force stay");
                    continue;
                }
                Err(e) => {
                    tracing::error!(error = %e, "SIGHUP: reading the configuration failed");
                    continue;
                }
            };
            let others_changed = Config {
                auth: running.auth.clone(),
                ..config.clone()
            } != running;
            if others_changed {
                tracing::warn!(
                    "SIGHUP: settings other than [auth] changed; they take effect at the next restart"
                );
            }
            tracing::info!("SIGHUP: reloading API keys");
            if tx.send(config.auth).await.is_err() {
                return;
            }
        }
    });
    #[cfg(not(unix))]
    let _ = (overrides, running, tx);
    rx
}

/// The log filter: `MNEMO_LOG`, else `RUST_LOG`, else `default`. tantivy
/// logs every index commit at INFO (about ten lines a second under load),
/// so it is held to WARN unless the filter names it.
fn log_filter(default: &str) -> String {
    let asked = std::env::var("MNEMO_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .filter(|f| !f.trim().is_empty())
        .unwrap_or_else(|| default.to_owned());
    if asked.contains("tantivy") {
        asked
    } else {
        format!("{asked},tantivy=warn")
    }
}

/// Logs to stderr (never stdout: `mnemo mcp` speaks MCP there) at
/// `default` unless `MNEMO_LOG` or `RUST_LOG` says otherwise.
pub(super) fn init_logging(format: LogFormat, default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(log_filter(default)).unwrap_or_else(|e| {
        eprintln!("invalid log filter in MNEMO_LOG or RUST_LOG ({e}); logging at {default}");
        tracing_subscriber::EnvFilter::new(format!("{default},tantivy=warn"))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}

pub(super) async fn serve(overrides: Overrides) -> Result<(), String> {
    let config = Config::resolve(&overrides).map_err(|e| e.to_string())?;
    init_logging(config.log_format, "info");
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let reloads = reload_on_sighup(overrides, config.clone());
    let daemon = Daemon::open(config).await.map_err(|e| e.to_string())?;
    daemon
        .reload_auth_from(reloads)
        .serve(listener, shutdown_signal())
        .await
        .map_err(|e| e.to_string())
}
