//! A session's page: its turns as a conversation (one page of
//! [`TURNS_PER_PAGE`] turns at a time, so a session of any length loads in
//! the same time), beside its summary with every item linked to the turns
//! it cites, the summary versions, the audit log and the handoff history.
//! The last page follows the session live (see `live.rs`).

use axum::extract::{Path, Query, State};
use maud::{html, Markup};
use serde::Deserialize;

use super::layout::{
    self, fragment, page, page_start, session_url, subject_url, PageError, PageResult,
};
use super::{chart, summary, Inspector, TURNS_PER_PAGE};
use crate::pb;

/// The metadata the daemon puts on a handoff's event turn, as the contract
/// documents it (docs/api.md); the inspector reads the wire, not the
/// domain.
const EVENT_KEY: &str = "mnemo.event";
mod handoff_keys {
    pub const EVENT: &str = "handoff";
    pub const FROM: &str = "mnemo.from_agent";
    pub const TO: &str = "mnemo.to_agent";
    pub const REASON: &str = "mnemo.reason";
    pub const EPOCH: &str = "mnemo.lease_epoch";
}

/// Audit records the page reads at most (the newest are shown).
const MAX_AUDIT_RECORDS: usize = 5_000;
/// Audit records shown in the table, newest first.
const AUDIT_ROWS: usize = 50;
/// Turns the handoff history reads at most.
const MAX_HANDOFF_SCAN: u64 = 100_000;

/// Query of a session's page.
#[derive(Debug, Default, Deserialize)]
pub struct PageQuery {
    /// First seq of the conversation page; default the last page.
    #[serde(default)]
    from: Option<u64>,
    /// Summary version to show; 0 = the latest.
    #[serde(default)]
    v: u64,
}

/// Turns `from..=to` of a session, following pages the daemon cut short,
/// and what retention removed from it, if anything.
pub async fn turns(
    inspector: &Inspector,
    ns: &str,
    id: &str,
    from: u64,
    to: u64,
) -> Result<(Vec<pb::Turn>, Option<pb::TurnsRemoved>), tonic::Status> {
    let mut client = inspector.client();
    let mut out = Vec::new();
    let mut token = String::new();
    loop {
        let r = client
            .list_turns(pb::ListTurnsRequest {
                namespace: ns.to_owned(),
                session_id: id.to_owned(),
                from_seq: from,
                to_seq: to,
                page_size: (to - from + 1).min(1000) as u32,
                page_token: token,
                ..Default::default()
            })
            .await?
            .into_inner();
        out.extend(r.turns);
        if r.next_page_token.is_empty() {
            return Ok((out, r.turns_removed));
        }
        token = r.next_page_token;
    }
}

/// `GET /ns/{ns}/sessions/{id}`.
pub async fn show(
    State(inspector): State<Inspector>,
    Path((ns, id)): Path<(String, String)>,
    Query(q): Query<PageQuery>,
) -> PageResult {
    let mut client = inspector.client();
    let session = client
        .get_session(pb::GetSessionRequest {
            namespace: ns.clone(),
            session_id: id.clone(),
        })
        .await?
        .into_inner()
        .session
        .unwrap_or_default();
    let last = session.next_seq.saturating_sub(1);
    let from = page_start(q.from.unwrap_or(last.max(1)));
    // A client-chosen `from` near u64::MAX must not wrap into a page
    // that starts after it ends.
    let to = from.checked_add(TURNS_PER_PAGE - 1).ok_or_else(|| {
        PageError::BadRequest(format!(
            "from={} is beyond any turn (the largest page starts below {})",
            from,
            u64::MAX - TURNS_PER_PAGE
        ))
    })?;
    let (shown, removed) = if last >= from {
        turns(&inspector, &ns, &id, from, to).await?
    } else {
        (Vec::new(), None)
    };
    let latest = summary::fetch(&inspector, &ns, &id, q.v).await?;
    let versions = client
        .list_summaries(pb::ListSummariesRequest {
            namespace: ns.clone(),
            session_id: id.clone(),
            page_size: 100,
            page_token: String::new(),
        })
        .await?
        .into_inner()
        .summaries;
    let audit = audit_log(&inspector, &ns, &id).await?;
    let is_last_page = to >= last;
    let live = is_last_page && session.state != pb::SessionState::Closed as i32;
    let after = shown.last().map_or(from.saturating_sub(1), |t| t.seq);
    let events = format!("{}/events?after={after}", session_url(&ns, &id));
    let on_page = from..=to;
    let body = html! {
        h1 { "Session " (id) @if !session.title.is_empty() { ": " (session.title) } }
        (header(&ns, &session))
        div.cols {
            section {
                h2 { "Conversation " span.muted { "turns " (from) "–" (to.min(last.max(from))) " of " span #turn-count { (last) } } }
                (pager(&ns, &id, from, last))
                @if let Some(r) = removed.as_ref().filter(|r| r.through_seq >= from) {
                    p.muted #turns-removed { "Turns 1–" (r.through_seq) " (" (r.count) ") were removed by a retention policy on " (layout::time(&r.remove_time)) "; summaries and episodes that cite them say so." }
                }
                @if live { p.muted { "Following live: " span #live-status { "connecting…" } } div #live-notices {} }
                ol #turns.turns data-events=[live.then_some(&events)] {
                    @for t in &shown { (turn(t)) }
                }
                (pager(&ns, &id, from, last))
            }
            aside {
                (summary::panel(&ns, &id, latest.as_ref(), &versions, on_page.clone()))
                h2 { "Handoff history" }
                div #handoffs {
                    p.muted { "Owner " strong { (session.owner_agent) } ", lease epoch " (session.lease_epoch) ". " }
                    button hx-get={(session_url(&ns, &id)) "/handoffs"} hx-target="#handoffs" { "Show every handoff" }
                }
                (audit_table(&audit))
            }
        }
    };
    Ok(page(&format!("Session {id}"), Some(&ns), body))
}

fn header(ns: &str, s: &pb::Session) -> Markup {
    let st = layout::state(s.state);
    html! {
        dl.facts #session-facts {
            dt { "State" } dd { span class={"badge " (st)} #session-state { (st) } }
            dt { "Subject" } dd { @if s.subject_id.is_empty() { "—" } @else { a href=(subject_url(ns, &s.subject_id)) { (s.subject_id) } } }
            dt { "Owner" } dd { (s.owner_agent) " (lease epoch " (s.lease_epoch) ")" }
            dt { "Turns" } dd { (s.turn_count) " · " (s.total_tokens) " tokens" }
            dt { "Summary" } dd { @if s.summary_version > 0 { "v" (s.summary_version) " covers turns 1–" (s.summarized_through_seq) } @else { "none yet" } }
            dt { "Created" } dd { (layout::time(&s.create_time)) " · updated " (layout::time(&s.update_time)) }
            dt { "Tools" } dd {
                a #bundle-link href={(session_url(ns, &s.session_id)) "/bundle"} { "Bundle preview" }
                " · "
                a href={(layout::ns_url(ns, "search")) "?session=" (layout::enc(&s.session_id))} { "Search this session" }
            }
        }
    }
}

fn pager(ns: &str, id: &str, from: u64, last: u64) -> Markup {
    let base = session_url(ns, id);
    html! {
        div.pager {
            @if from > 1 {
                a href={(base) "?from=1"} { "first" }
                a.prev href={(base) "?from=" (from.saturating_sub(TURNS_PER_PAGE).max(1))} { "← earlier" }
            }
            @if let Some(next) = from.checked_add(TURNS_PER_PAGE).filter(|n| *n <= last) {
                a.next href={(base) "?from=" (next)} { "later →" }
                a href={(base) "?from=" (page_start(last))} { "last" }
            }
        }
    }
}

fn is_error(t: &pb::Turn) -> bool {
    t.tool_call.as_ref().is_some_and(|c| {
        !c.error_details.is_empty()
            || matches!(
                pb::ToolCallStatus::try_from(c.status),
                Ok(pb::ToolCallStatus::Failure | pb::ToolCallStatus::Timeout)
            )
    })
}

/// One turn as an article with the anchor `t{seq}`; used by the page and
/// by live updates. Content is escaped (a `<script>` in a turn is text).
pub fn turn(t: &pb::Turn) -> Markup {
    let role = layout::role(t.role);
    let handoff = t.metadata.get(EVENT_KEY).map(String::as_str) == Some(handoff_keys::EVENT);
    html! {
        li.turn.(role).error[is_error(t)] #{"t" (t.seq)} {
            div.meta {
                a href={"#t" (t.seq)} { "#" (t.seq) }
                span.speaker { (t.speaker) }
                span.role { (role) }
                span title="server time (UTC)" { (layout::time(&t.server_time)) }
                @if t.client_time.is_some() { span title="client time (UTC)" { "client " (layout::time(&t.client_time)) } }
                span { (t.token_count) " tokens" }
                @if handoff {
                    span.badge { "handoff "
                        (t.metadata.get(handoff_keys::FROM).map_or("", String::as_str)) " → "
                        (t.metadata.get(handoff_keys::TO).map_or("", String::as_str))
                        ", epoch " (t.metadata.get(handoff_keys::EPOCH).map_or("", String::as_str)) }
                }
            }
            @if !t.content.is_empty() { pre.content { (t.content) } }
            @if let Some(c) = &t.tool_call {
                @let status = layout::name(pb::ToolCallStatus::try_from(c.status).ok().map(|s| s.as_str_name()), "TOOL_CALL_STATUS_");
                div.tool-call {
                    strong { "tool " (c.tool_name) } " " span class={"badge " (status)} { (status) }
                    @if !c.arguments_json.is_empty() { div.muted { "arguments" } pre.args { (c.arguments_json) } }
                    @if !c.result.is_empty() { div.muted { "result" } pre.result { (c.result) } }
                    @if !c.error_details.is_empty() { div.err { "error" } pre.err { (c.error_details) } }
                }
            }
            @let others: Vec<(&String, &String)> = t.metadata.iter().filter(|(k, _)| !k.starts_with("mnemo.")).collect();
            @if !others.is_empty() {
                div.muted { @for (k, v) in others { span { (k) "=" (v) " " } } }
            }
        }
    }
}

/// The session's audit log, oldest first, up to [`MAX_AUDIT_RECORDS`]
/// (the newest kept when there are more).
async fn audit_log(
    inspector: &Inspector,
    ns: &str,
    id: &str,
) -> Result<Vec<pb::AuditRecord>, tonic::Status> {
    let mut client = inspector.client();
    let mut out: Vec<pb::AuditRecord> = Vec::new();
    let mut token = String::new();
    loop {
        let r = client
            .get_audit_log(pb::GetAuditLogRequest {
                namespace: ns.to_owned(),
                session_id: id.to_owned(),
                page_size: 1000,
                page_token: token,
            })
            .await?
            .into_inner();
        out.extend(r.records);
        if out.len() > MAX_AUDIT_RECORDS {
            out.drain(..out.len() - MAX_AUDIT_RECORDS);
        }
        if r.next_page_token.is_empty() {
            return Ok(out);
        }
        token = r.next_page_token;
    }
}

fn audit_table(audit: &[pb::AuditRecord]) -> Markup {
    let sizes: Vec<(String, u64, u64)> = audit
        .iter()
        .filter(|a| a.summary_version > 0)
        .map(|a| {
            (
                format!("v{}", a.summary_version),
                a.pre_summary_tokens,
                a.post_summary_tokens,
            )
        })
        .collect();
    html! {
        h2 { "Audit log" }
        @if audit.is_empty() { p.muted { "No summary attempt yet." } }
        @else {
            p.muted { (audit.len()) " records; the newest " (AUDIT_ROWS.min(audit.len())) " below." }
            table #audit {
                thead { tr { th { "#" } th { "When" } th { "What" } th { "Summarizer" } th { "Verdict" } th.num { "Tokens" } } }
                tbody {
                    @for a in audit.iter().rev().take(AUDIT_ROWS) {
                        tr {
                            td { (a.audit_seq) }
                            td { (layout::time(&a.create_time)) }
                            @if a.kind == pb::AuditKind::ReviewResolved as i32 {
                                @let st = layout::name(pb::ReviewStatus::try_from(a.review_status).ok().map(|s| s.as_str_name()), "REVIEW_STATUS_");
                                td { "review " (a.review_id) }
                                td { (a.reviewer) }
                                td { span class={"badge " (st)} { (st) } " " (a.comment) }
                                td {}
                            } @else {
                                td { (layout::trigger(a.trigger)) " → v" (a.summary_version) " (turns 1–" (a.covers_through_seq) ")" }
                                td { (a.summarizer) }
                                td {
                                    @if a.validation_passed { span.badge.passed { "passed" } }
                                    @else { span.badge.refused { "refused" } }
                                    @for e in &a.validation_errors { div.err { (e) } }
                                    @for f in &a.health_flags { div.muted { (f) } }
                                }
                                td.num { (a.pre_summary_tokens) " → " (a.post_summary_tokens) }
                            }
                        }
                    }
                }
            }
            h3 { "Transcript size against summary size, per version" }
            (chart::pairs(&sizes, "transcript tokens", "summary tokens"))
        }
    }
}

/// `GET /ns/{ns}/sessions/{id}/handoffs`: every handoff event turn, read
/// through the turns (up to [`MAX_HANDOFF_SCAN`] of them).
pub async fn handoffs(
    State(inspector): State<Inspector>,
    Path((ns, id)): Path<(String, String)>,
) -> PageResult {
    let mut client = inspector.client();
    let mut token = String::new();
    let mut found = Vec::new();
    let mut read = 0u64;
    loop {
        let r = client
            .list_turns(pb::ListTurnsRequest {
                namespace: ns.clone(),
                session_id: id.clone(),
                page_size: 1000,
                page_token: token,
                ..Default::default()
            })
            .await?
            .into_inner();
        read += r.turns.len() as u64;
        found.extend(r.turns.into_iter().filter(|t| {
            t.metadata.get(EVENT_KEY).map(String::as_str) == Some(handoff_keys::EVENT)
        }));
        if r.next_page_token.is_empty() || read >= MAX_HANDOFF_SCAN {
            break;
        }
        token = r.next_page_token;
    }
    let get = |t: &pb::Turn, k: &str| t.metadata.get(k).cloned().unwrap_or_default();
    Ok(fragment(html! {
        @if found.is_empty() { p.muted { "No handoff in the first " (read) " turns." } }
        @else {
            table {
                thead { tr { th { "Turn" } th { "When" } th { "From" } th { "To" } th.num { "Epoch" } th { "Why" } } }
                tbody {
                    @for t in &found {
                        tr {
                            td { a href=(layout::turn_url(&ns, &id, t.seq)) { "#" (t.seq) } }
                            td { (layout::time(&t.server_time)) }
                            td { (get(t, handoff_keys::FROM)) }
                            td { (get(t, handoff_keys::TO)) }
                            td.num { (get(t, handoff_keys::EPOCH)) }
                            td { (get(t, handoff_keys::REASON)) }
                        }
                    }
                }
            }
        }
    }))
}
