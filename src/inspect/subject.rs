//! A subject: its facts with their supersede history, its episodes (past
//! sessions as their final summaries left them) and its sessions.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use maud::html;

use super::layout::{self, page, session_url, PageResult};
use super::{sessions, Inspector};
use crate::pb;

/// Facts the page reads at most (history included).
const MAX_FACTS: usize = 2_000;
/// Episodes the page shows, newest first.
const EPISODES: u32 = 50;

/// `GET /ns/{ns}/subjects/{subject}`.
pub async fn page_route(
    State(inspector): State<Inspector>,
    Path((ns, subject)): Path<(String, String)>,
) -> PageResult {
    let mut client = inspector.client();
    let mut facts = Vec::new();
    let mut token = String::new();
    loop {
        let r = client
            .list_facts(pb::ListFactsRequest {
                namespace: ns.clone(),
                subject_id: subject.clone(),
                include_history: true,
                page_size: 1000,
                page_token: token,
                ..Default::default()
            })
            .await?
            .into_inner();
        facts.extend(r.facts);
        if r.next_page_token.is_empty() || facts.len() >= MAX_FACTS {
            break;
        }
        token = r.next_page_token;
    }
    let episodes = client
        .list_episodes(pb::ListEpisodesRequest {
            namespace: ns.clone(),
            subject_id: subject.clone(),
            page_size: EPISODES,
            page_token: String::new(),
        })
        .await?
        .into_inner()
        .episodes;
    let (subject_sessions, capped) =
        sessions::walk(&inspector, &ns, &subject, pb::SessionState::Unspecified).await?;
    // A current fact and the versions it replaced, newest first.
    let by_id: BTreeMap<&str, &pb::Fact> = facts.iter().map(|f| (f.fact_id.as_str(), f)).collect();
    let current: Vec<&pb::Fact> = facts
        .iter()
        .filter(|f| f.superseded_by.is_empty())
        .collect();
    let history = |f: &pb::Fact| {
        let mut chain = Vec::new();
        let mut at = f.supersedes.as_str();
        while let Some(old) = by_id.get(at) {
            if chain.len() >= MAX_FACTS {
                break;
            }
            chain.push(*old);
            at = old.supersedes.as_str();
        }
        chain
    };
    let origin = |o: i32| {
        layout::name(
            pb::FactOrigin::try_from(o).ok().map(|v| v.as_str_name()),
            "FACT_ORIGIN_",
        )
    };
    let body = html! {
        h1 { "Subject " (subject) }
        h2 { "Facts" }
        @if current.is_empty() { p.muted { "No current fact." } }
        table #facts {
            thead { tr { th { "Key" } th { "Fact" } th { "Origin" } th { "Sources" } th { "Since" } th { "Replaced" } } }
            tbody { @for f in &current {
                tr #{"fact-" (f.fact_id)} {
                    td { code { (f.key) } }
                    td { (f.text) }
                    td { (origin(f.origin)) }
                    td { @for s in &f.sources {
                        @if s.turn_removed { span.muted { (s.session_id) " #" (s.seq) " (removed by retention)" } " " }
                        @else if s.seq > 0 { a href=(layout::turn_url(&ns, &s.session_id, s.seq)) { (s.session_id) " #" (s.seq) } " " }
                        @else { a href=(session_url(&ns, &s.session_id)) { (s.session_id) } " " }
                    } }
                    td { (layout::time(&f.create_time)) }
                    td { ul.history { @for old in history(f) {
                        li #{"fact-" (old.fact_id)} { del { (old.text) } span.muted { " (" (layout::time(&old.create_time)) ", " (origin(old.origin)) ")" } }
                    } } }
                }
            } }
        }
        h2 { "Episodes" }
        @if episodes.is_empty() { p.muted { "No episode yet (one is written when a session closes or goes idle)." } }
        table #episodes {
            thead { tr { th { "Session" } th { "Ended" } th { "Topic" } th { "Outcome" } th { "Still pending" } } }
            tbody { @for e in &episodes {
                tr {
                    td { a href=(session_url(&ns, &e.session_id)) { (e.session_id) }
                        @if let Some(r) = &e.turns_removed { div.muted { "turns 1–" (r.through_seq) " removed by retention" } } }
                    td { (layout::time(&e.end_time)) " (" (layout::state(e.ended_as)) ")" }
                    td { (e.topic) div.muted { (e.prose) } }
                    td { (layout::name(pb::Outcome::try_from(e.outcome).ok().map(|o| o.as_str_name()), "OUTCOME_")) }
                    td { ul { @for a in &e.pending_actions { li { (a.action) span.muted { " — " (a.owner) } } } } }
                }
            } }
        }
        h2 { "Sessions" }
        p.muted { (subject_sessions.len()) " sessions" @if capped { " (the first only)" } }
        ul #subject-sessions { @for s in subject_sessions.iter().rev() {
            li { a href=(session_url(&ns, &s.session_id)) { (s.session_id) } " " span class={"badge " (layout::state(s.state))} { (layout::state(s.state)) } " " (s.title) span.muted { " · " (s.turn_count) " turns · " (layout::time(&s.create_time)) } }
        } }
    };
    Ok(page(&format!("Subject {subject}"), Some(&ns), body))
}
