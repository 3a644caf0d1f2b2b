//! `mnemo audit`: a session's audit log for people (one block per record:
//! which summarizer wrote or tried, whether validation passed, the health
//! flags with every model call's status, tokens, time and error text) or
//! as JSON lines; and the writer of a summary version, which `mnemo
//! summary` prints beside it.

use serde_json::{json, Value};

use super::{connect, status_line, ClientArgs, Target};
use crate::client::MemoryClient;
use crate::pb;

/// `mnemo audit`.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    #[command(flatten)]
    target: Target,
    /// Only the records of this summary version.
    #[arg(long)]
    version: Option<u64>,
    #[command(flatten)]
    client: ClientArgs,
}

/// Records per page asked for.
const PAGE: u32 = 500;

/// Every audit record of a session, oldest first, handed to `each` page by
/// page (a session's log is read in bounded pages, never whole).
async fn for_each_record(
    c: &mut MemoryClient,
    target: &Target,
    mut each: impl FnMut(pb::AuditRecord),
) -> Result<(), String> {
    let mut token = String::new();
    loop {
        let page = c
            .get_audit_log(pb::GetAuditLogRequest {
                namespace: target.namespace.clone(),
                session_id: target.session.clone(),
                page_size: PAGE,
                page_token: token,
            })
            .await
            .map_err(status_line)?
            .into_inner();
        page.records.into_iter().for_each(&mut each);
        if page.next_page_token.is_empty() {
            return Ok(());
        }
        token = page.next_page_token;
    }
}

/// Who wrote summary `version` (the summarizer of the attempt that stored
/// it), when the log has it.
pub(crate) async fn writer_of(
    c: &mut MemoryClient,
    target: &Target,
    version: u64,
) -> Result<Option<String>, String> {
    let mut writer = None;
    for_each_record(c, target, |r| {
        if r.summary_version == version && r.validation_passed {
            writer = Some(r.summarizer);
        }
    })
    .await?;
    Ok(writer)
}

fn kind(r: &pb::AuditRecord) -> String {
    pb::AuditKind::try_from(r.kind)
        .map_or("unknown", |k| k.as_str_name())
        .trim_start_matches("AUDIT_KIND_")
        .to_lowercase()
}

fn record_json(r: &pb::AuditRecord) -> Value {
    json!({
        "audit_seq": r.audit_seq,
        "kind": kind(r),
        "summary_version": r.summary_version,
        "covers_through_seq": r.covers_through_seq,
        "summarizer": r.summarizer,
        "validation_passed": r.validation_passed,
        "validation_errors": r.validation_errors,
        "decisions": r.decisions,
        "pending_actions": r.pending_actions,
        "open_questions": r.open_questions,
        "pre_summary_tokens": r.pre_summary_tokens,
        "post_summary_tokens": r.post_summary_tokens,
        "health_flags": r.health_flags,
        "review_id": r.review_id,
        "reviewer": r.reviewer,
        "reviewer_key": r.reviewer_key,
        "comment": r.comment,
    })
}

fn print_record(r: &pb::AuditRecord) {
    let stored = if r.summary_version > 0 {
        format!("stored as version {}", r.summary_version)
    } else if kind(r) == "summary_attempt" {
        "refused by validation, not stored".to_owned()
    } else {
        String::new()
    };
    println!("#{} {} {stored}", r.audit_seq, kind(r));
    if !r.summarizer.is_empty() {
        println!("  written by: {}", r.summarizer);
        println!(
            "  covers turns 1-{}: {} decisions, {} pending actions, {} open questions; {} -> {} tokens",
            r.covers_through_seq,
            r.decisions,
            r.pending_actions,
            r.open_questions,
            r.pre_summary_tokens,
            r.post_summary_tokens
        );
    }
    for e in &r.validation_errors {
        println!("  validation: {e}");
    }
    for f in &r.health_flags {
        println!("  {f}");
    }
    if !r.review_id.is_empty() {
        let key = if r.reviewer_key.is_empty() {
            String::new()
        } else {
            format!(" (key {})", r.reviewer_key)
        };
        println!(
            "  review {} by {}{key}: {}",
            r.review_id, r.reviewer, r.comment
        );
    }
}

/// Runs `mnemo audit`.
pub async fn audit(args: AuditArgs) -> Result<(), String> {
    let mut c = connect(&args.client).await?;
    let json = args.client.json;
    let version = args.version;
    for_each_record(&mut c, &args.target, |r| {
        if version.is_some_and(|v| v != r.summary_version) {
            return;
        }
        if json {
            println!("{}", record_json(&r));
        } else {
            print_record(&r);
        }
    })
    .await
}
