//! `mnemo subject export|erase`: a subject's access and erasure requests
//! against a running daemon (admin key). Erase asks for the subject id to
//! be typed back unless `--yes` is given; without a terminal it needs
//! `--yes`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use clap::Subcommand;

use super::{connect, status_line, ClientArgs};
use crate::pb;

/// `mnemo subject …`
#[derive(Debug, Subcommand)]
pub enum SubjectCommand {
    /// Write everything the namespace holds about a subject as JSON lines
    /// (header, records, end line; see docs/operations.md).
    Export {
        /// Namespace.
        #[arg(long, short)]
        namespace: String,
        /// The subject.
        #[arg(long)]
        subject: String,
        /// Write here instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Erase everything the namespace holds about a subject (sessions,
    /// turns, summaries, facts, episodes, audit). Cannot be undone.
    Erase {
        /// Namespace.
        #[arg(long, short)]
        namespace: String,
        /// The subject.
        #[arg(long)]
        subject: String,
        /// Do not ask for confirmation (scripts).
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// List the namespace's erasure records (when, by which key, what was
    /// removed; the subject only as a hash), oldest first.
    Erasures {
        /// Namespace.
        #[arg(long, short)]
        namespace: String,
        /// Only this subject's records (matched by its hash).
        #[arg(long)]
        subject: Option<String>,
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// Runs a `subject` subcommand.
pub async fn subject(cmd: SubjectCommand) -> Result<(), String> {
    match cmd {
        SubjectCommand::Export {
            namespace,
            subject,
            output,
            client,
        } => {
            let mut c = connect(&client).await.map_err(|e| e.to_string())?;
            let mut stream = c
                .export_subject(pb::ExportSubjectRequest {
                    namespace,
                    subject_id: subject,
                })
                .await
                .map_err(status_line)?
                .into_inner();
            let mut out: Box<dyn Write> = match &output {
                Some(p) => Box::new(std::io::BufWriter::new(super::create_private_file(p)?)),
                None => Box::new(std::io::BufWriter::new(std::io::stdout())),
            };
            let mut n = 0u64;
            while let Some(item) = stream.message().await.map_err(status_line)? {
                writeln!(out, "{}", item.json).map_err(|e| e.to_string())?;
                n += 1;
            }
            out.flush().map_err(|e| e.to_string())?;
            drop(out);
            if let Some(p) = &output {
                std::fs::File::open(p)
                    .and_then(|f| f.sync_all())
                    .map_err(|e| format!("cannot sync {}: {e}", p.display()))?;
            }
            eprintln!("exported {} records", n.saturating_sub(2));
            Ok(())
        }
        SubjectCommand::Erase {
            namespace,
            subject,
            yes,
            client,
        } => {
            if !yes {
                confirm(&namespace, &subject)?;
            }
            let json = client.json;
            let mut c = connect(&client).await.map_err(|e| e.to_string())?;
            let r = c
                .erase_subject(pb::EraseSubjectRequest {
                    namespace,
                    subject_id: subject,
                })
                .await
                .map_err(status_line)?
                .into_inner();
            let counts = r.counts.unwrap_or_default();
            if json {
                let v = serde_json::json!({
                    "erasure_id": r.erasure_id,
                    "subject_sha256": r.subject_sha256,
                    "requested_by": r.requested_by,
                    "counts": {
                        "sessions": counts.sessions,
                        "turns": counts.turns,
                        "summaries": counts.summaries,
                        "fold_states": counts.fold_states,
                        "audit_records": counts.audit_records,
                        "review_items": counts.review_items,
                        "action_statuses": counts.action_statuses,
                        "idempotency_records": counts.idempotency_records,
                        "facts": counts.facts,
                        "episodes": counts.episodes,
                        "carried_actions": counts.carried_actions,
                    },
                });
                println!("{v}");
            } else {
                println!(
                    "erased (erasure {}, subject sha256 {})",
                    r.erasure_id, r.subject_sha256
                );
                println!(
                    "  sessions {}, turns {}, summaries {}, fold states {}, audit records {}, review items {}, action statuses {}, idempotency records {}, facts {}, episodes {}, carried actions {}",
                    counts.sessions,
                    counts.turns,
                    counts.summaries,
                    counts.fold_states,
                    counts.audit_records,
                    counts.review_items,
                    counts.action_statuses,
                    counts.idempotency_records,
                    counts.facts,
                    counts.episodes,
                    counts.carried_actions
                );
                println!("the bytes leave the data directory at the next `mnemo compact` (see docs/operations.md)");
            }
            Ok(())
        }
        SubjectCommand::Erasures {
            namespace,
            subject,
            client,
        } => erasures(namespace, subject.unwrap_or_default(), client).await,
    }
}

/// `mnemo subject erasures`: every page, one line (or JSON object) per
/// record.
async fn erasures(namespace: String, subject_id: String, client: ClientArgs) -> Result<(), String> {
    let json = client.json;
    let mut c = connect(&client).await.map_err(|e| e.to_string())?;
    let mut token = String::new();
    let mut n = 0u64;
    loop {
        let page = c
            .list_erasures(pb::ListErasuresRequest {
                namespace: namespace.clone(),
                subject_id: subject_id.clone(),
                page_size: 0,
                page_token: token,
            })
            .await
            .map_err(status_line)?
            .into_inner();
        for r in &page.erasures {
            n += 1;
            let counts = r.counts.unwrap_or_default();
            let total = counts.sessions
                + counts.turns
                + counts.summaries
                + counts.fold_states
                + counts.audit_records
                + counts.review_items
                + counts.action_statuses
                + counts.idempotency_records
                + counts.facts
                + counts.episodes
                + counts.carried_actions;
            let secs = |t: &Option<prost_types::Timestamp>| t.as_ref().map_or(0, |t| t.seconds);
            if json {
                let v = serde_json::json!({
                    "erasure_id": r.erasure_id,
                    "subject_sha256": r.subject_sha256,
                    "requested_by": r.requested_by,
                    "request_time": secs(&r.request_time),
                    "complete_time": secs(&r.complete_time),
                    "records": total,
                    "sessions": counts.sessions,
                    "turns": counts.turns,
                    "facts": counts.facts,
                });
                println!("{v}");
            } else {
                println!(
                    "{}  completed {}  by {}  subject sha256 {}  {} records ({} sessions, {} turns, {} facts)",
                    r.erasure_id,
                    secs(&r.complete_time),
                    r.requested_by,
                    r.subject_sha256,
                    total,
                    counts.sessions,
                    counts.turns,
                    counts.facts
                );
            }
        }
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    if !json {
        eprintln!("{n} erasure records");
    }
    Ok(())
}

/// Asks for the subject id to be typed back.
fn confirm(namespace: &str, subject: &str) -> Result<(), String> {
    if !std::io::stdin().is_terminal() {
        return Err(
            "erase asks for confirmation on a terminal; pass --yes to erase without asking".into(),
        );
    }
    eprint!(
        "This erases everything namespace {namespace:?} holds about subject {subject:?} and cannot be undone.\nType the subject id to confirm: "
    );
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    if line.trim_end_matches(['\r', '\n']) == subject {
        Ok(())
    } else {
        Err("not confirmed; nothing was erased".into())
    }
}
