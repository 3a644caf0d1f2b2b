//! Search across a namespace (or one subject or session): BM25 hits with
//! links into the sessions and subjects they come from.

use axum::extract::{Path, Query, State};
use maud::html;
use serde::Deserialize;

use super::layout::{self, page, session_url, subject_url, turn_url, PageResult};
use super::Inspector;
use crate::pb;

/// The search form.
#[derive(Debug, Default, Deserialize)]
pub struct SearchQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    subject: String,
    #[serde(default)]
    session: String,
}

/// Hits shown (the contract's most).
const LIMIT: u32 = 100;

/// `GET /ns/{ns}/search`.
pub async fn page_route(
    State(inspector): State<Inspector>,
    Path(ns): Path<String>,
    Query(q): Query<SearchQuery>,
) -> PageResult {
    let hits = if q.q.trim().is_empty() {
        None
    } else {
        Some(
            inspector
                .client()
                .search(pb::SearchRequest {
                    namespace: ns.clone(),
                    subject_id: q.subject.trim().to_owned(),
                    session_id: q.session.trim().to_owned(),
                    query: q.q.clone(),
                    kinds: Vec::new(),
                    limit: LIMIT,
                })
                .await?
                .into_inner(),
        )
    };
    let body = html! {
        h1 { "Search" }
        form.filters method="get" {
            label { "Words" input #search-q name="q" value=(q.q) size="40" required; }
            label { "Subject" input name="subject" value=(q.subject); }
            label { "Session" input name="session" value=(q.session); }
            button type="submit" { "Search" }
        }
        @if let Some(r) = &hits {
            p.muted { (r.hits.len()) " hits" @if r.index_lag > 0 { " (" (r.index_lag) " writes not indexed yet)" } }
            ol #hits { @for h in &r.hits {
                @let kind = layout::name(pb::SearchKind::try_from(h.kind).ok().map(|k| k.as_str_name()), "SEARCH_KIND_");
                li {
                    span.badge { (kind) } " "
                    @match pb::SearchKind::try_from(h.kind) {
                        Ok(pb::SearchKind::Turn) => { a.hit href=(turn_url(&ns, &h.session_id, h.seq)) { (h.session_id) " #" (h.seq) } " " span.muted { (layout::role(h.role)) } }
                        Ok(pb::SearchKind::Fact) => { a.hit href={(subject_url(&ns, &h.subject_id)) "#fact-" (h.fact_id)} { "fact of " (h.subject_id) } }
                        _ => { a.hit href=(session_url(&ns, &h.session_id)) { "episode " (h.session_id) } }
                    }
                    span.muted { " score " (format!("{:.2}", h.score)) }
                    pre { (h.snippet) }
                }
            } }
        }
    };
    Ok(page("Search", Some(&ns), body))
}
