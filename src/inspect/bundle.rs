//! Bundle preview: the context bundle exactly as an agent would get it for
//! a budget and a query, beside its manifest: what each section took, what
//! was shortened or left out, and what was recalled from other sessions.

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use maud::{html, Markup};
use serde::Deserialize;

use super::layout::{self, fragment, page, session_url, turn_url, PageError, PageResult};
use super::Inspector;
use crate::pb;

/// The budgets the daemon accepts.
const BUDGET_RANGE: std::ops::RangeInclusive<u32> = 256..=1_000_000;

/// The preview's form.
#[derive(Debug, Deserialize)]
pub struct BundleQuery {
    #[serde(default = "default_budget")]
    budget: u32,
    #[serde(default)]
    query: String,
    #[serde(default)]
    agent: String,
    #[serde(default)]
    skip_recall: Option<String>,
}

fn default_budget() -> u32 {
    2000
}

/// `GET /ns/{ns}/sessions/{id}/bundle`: the whole page, or (for htmx) just
/// the result.
pub async fn page_route(
    State(inspector): State<Inspector>,
    Path((ns, id)): Path<(String, String)>,
    Query(q): Query<BundleQuery>,
    headers: HeaderMap,
) -> PageResult {
    if !BUDGET_RANGE.contains(&q.budget) {
        return Err(PageError::BadRequest(format!(
            "the budget must be from {} to {} tokens",
            BUDGET_RANGE.start(),
            BUDGET_RANGE.end()
        )));
    }
    let bundle = inspector
        .client()
        .get_context_bundle(pb::GetContextBundleRequest {
            namespace: ns.clone(),
            session_id: id.clone(),
            budget_tokens: q.budget,
            query: q.query.clone(),
            agent_id: q.agent.clone(),
            skip_recall: q.skip_recall.is_some(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .bundle
        .unwrap_or_default();
    let result = result(&ns, &id, &bundle);
    if headers.contains_key("hx-request") {
        return Ok(fragment(result));
    }
    let url = format!("{}/bundle", session_url(&ns, &id));
    let body = html! {
        h1 { "Bundle preview of " a href=(session_url(&ns, &id)) { (id) } }
        form.filters #bundle-form method="get" action=(url) hx-get=(url) hx-target="#bundle-result" hx-push-url="true" {
            label { "Budget (tokens)" input #budget type="number" name="budget" min=(BUDGET_RANGE.start()) max=(BUDGET_RANGE.end()) value=(q.budget); }
            label { "Query" input name="query" value=(q.query) size="40"; }
            label { "Agent" input name="agent" value=(q.agent); }
            label { "Skip recall" input type="checkbox" name="skip_recall" checked[q.skip_recall.is_some()]; }
            button #bundle-submit type="submit" { "Build bundle" }
        }
        div #bundle-result { (result) }
    };
    Ok(page(&format!("Bundle of {id}"), Some(&ns), body))
}

fn ranges(r: &[pb::SeqRange]) -> String {
    r.iter()
        .map(|r| {
            if r.first_seq == r.last_seq {
                format!("{}", r.first_seq)
            } else {
                format!("{}–{}", r.first_seq, r.last_seq)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn result(ns: &str, id: &str, b: &pb::ContextBundle) -> Markup {
    let m = b.manifest.clone().unwrap_or_default();
    let pct = u64::from(b.token_count) * 100 / u64::from(b.budget_tokens.max(1));
    html! {
        p #bundle-usage {
            strong #bundle-tokens { (b.token_count) } " of " (b.budget_tokens) " tokens · as of turn " (b.as_of_seq)
            @if m.summary_version > 0 { " · summary v" (m.summary_version) }
            @if let Some(s) = &m.summarized { " covering turns " (s.first_seq) "–" (s.last_seq) }
            @if m.transcript { " · the whole transcript fitted" }
            @if m.complete { " · complete" } @else { " · something was shortened or left out" }
        }
        // A meter element, not a styled bar: the page's policy refuses
        // inline styles.
        meter #bundle-meter value=(b.token_count) max=(b.budget_tokens.max(1)) title={(pct) "% of the budget"} {}
        div.bundle {
            section {
                h2 { "As the agent gets it" }
                pre.rendered #bundle-text { (b.rendered_text) }
            }
            section {
                h2 { "Manifest" }
                table #manifest {
                    thead { tr { th { "Section" } th.num { "Offered" } th.num { "Whole" } th.num { "Shortened" } th.num { "Left out" } th.num { "Tokens" } th { "Turns" } } }
                    tbody { @for e in &m.sections {
                        @let name = layout::name(pb::BundleSection::try_from(e.section).ok().map(|s| s.as_str_name()), "BUNDLE_SECTION_");
                        tr {
                            td { (name) }
                            td.num { (e.available) }
                            td.num { (e.included) }
                            td.num { (e.shortened) }
                            td.num.omitted { (e.omitted) }
                            td.num { (e.tokens) }
                            td {
                                @if !e.included_seqs.is_empty() { div { "whole " (ranges(&e.included_seqs)) } }
                                @if !e.shortened_seqs.is_empty() { div { "shortened " (ranges(&e.shortened_seqs)) } }
                                @if !e.omitted_seqs.is_empty() { div.err { "left out " (ranges(&e.omitted_seqs)) } }
                            }
                        }
                    } }
                }
                h3 { "Recalled memory that fitted" }
                @if b.recalled.is_empty() { p.muted { "None." } }
                ol #recalled { @for r in &b.recalled {
                    li {
                        "rank " (r.rank) ": "
                        @if let Some(f) = &r.fact { "fact " a href={(layout::subject_url(ns, &f.subject_id)) "#fact-" (f.fact_id)} { (f.text) } }
                        @else if let Some(e) = &r.episode { "episode " a href=(session_url(ns, &e.session_id)) { (e.session_id) } ": " (e.topic) }
                        @else {
                            @if r.session_id != id { span.badge { "other session" } " " }
                            a href=(turn_url(ns, &r.session_id, r.hit_seq)) { (r.session_id) " #" (r.hit_seq) }
                            @for t in &r.turns { div.muted { "#" (t.seq) " " (t.speaker) ": " (layout_short(&t.content)) } }
                        }
                    }
                } }
                h3 { "Recalled but left out for the budget" }
                @if m.recalled_left_out.is_empty() { p.muted { "None." } }
                ul #recalled-left-out { @for r in &m.recalled_left_out {
                    li { "rank " (r.rank) ": "
                        @if !r.fact_id.is_empty() { "fact " (r.fact_id) }
                        @else if r.seq > 0 { a href=(turn_url(ns, &r.session_id, r.seq)) { (r.session_id) " #" (r.seq) } }
                        @else { "episode " a href=(session_url(ns, &r.session_id)) { (r.session_id) } }
                    }
                } }
            }
        }
    }
}

/// The first 200 characters of a text.
fn layout_short(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}
