//! The review queue: summaries of high-risk sessions whose irreversible
//! actions wait for a person. Approve and reject are shown only when the
//! inspector's key may resolve review items in the namespace (ADMIN, or
//! the review permission: an agent's write key may not); every decision
//! carries the CSRF token, and the daemon checks the key whatever the page
//! showed.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect};
use axum::Form;
use maud::html;
use serde::Deserialize;

use super::layout::{self, enc, ns_url, page, session_url, PageError, PageResult};
use super::{guard, Inspector};
use crate::pb;

/// Review items shown.
const ITEMS: u32 = 200;

/// Query of the queue page.
#[derive(Debug, Default, Deserialize)]
pub struct QueueQuery {
    /// Also show resolved items.
    #[serde(default)]
    all: Option<String>,
}

/// `GET /ns/{ns}/review`.
pub async fn page_route(
    State(inspector): State<Inspector>,
    Path(ns): Path<String>,
    Query(q): Query<QueueQuery>,
) -> PageResult {
    let items = inspector
        .client()
        .list_review_items(pb::ListReviewItemsRequest {
            namespace: ns.clone(),
            include_resolved: q.all.is_some(),
            page_size: ITEMS,
            page_token: String::new(),
        })
        .await?
        .into_inner()
        .items;
    let reviewable = inspector.may_review(&ns).await;
    let action = |id: &str| format!("{}/{}", ns_url(&ns, "review"), enc(id));
    let body = html! {
        h1 { "Review queue" }
        p.muted {
            @if reviewable { "This inspector's key may approve and reject." }
            @else { span #read-only { "This inspector's key may not resolve review items (that needs an ADMIN key or the review permission): no decision can be made here." } }
            " "
            @if q.all.is_some() { a href=(ns_url(&ns, "review")) { "Pending only" } }
            @else { a href={(ns_url(&ns, "review")) "?all=1"} { "Show resolved too" } }
        }
        @if items.is_empty() { p.muted #queue-empty { "Nothing to review." } }
        table.review #review-items {
            thead { tr { th { "Session" } th { "Irreversible items" } th { "State" } th { "Decision" } } }
            tbody { @for it in &items {
                @let st = layout::name(pb::ReviewStatus::try_from(it.status).ok().map(|s| s.as_str_name()), "REVIEW_STATUS_");
                tr #{"review-" (it.review_id)} {
                    td { a href={(session_url(&ns, &it.session_id)) "?v=" (it.summary_version)} { (it.session_id) " v" (it.summary_version) } div.muted { (layout::time(&it.create_time)) } }
                    td { ul { @for line in &it.items { li { (line) } } } }
                    td { span class={"badge " (st)} { (st) }
                        @if !it.reviewer.is_empty() {
                            div.muted { (it.reviewer) @if !it.reviewer_key.is_empty() { " (key " (it.reviewer_key) ")" } " " (layout::time(&it.resolve_time)) }
                            div { (it.comment) }
                        } }
                    td {
                        @if reviewable && it.status == pb::ReviewStatus::Pending as i32 {
                            form method="post" action=(action(&it.review_id)) {
                                input type="hidden" name="csrf" value=(inspector.csrf());
                                input name="reviewer" placeholder="your name" required;
                                input name="comment" placeholder="comment";
                                button.approve type="submit" name="decision" value="approve" { "Approve" }
                                button.reject type="submit" name="decision" value="reject" { "Reject" }
                            }
                        }
                    }
                }
            } }
        }
    };
    Ok(page("Review queue", Some(&ns), body))
}

/// A decision on a review item.
#[derive(Debug, Deserialize)]
pub struct Decision {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    decision: String,
    #[serde(default)]
    reviewer: String,
    #[serde(default)]
    comment: String,
}

/// `POST /ns/{ns}/review/{review_id}`.
pub async fn resolve(
    State(inspector): State<Inspector>,
    Path((ns, review_id)): Path<(String, String)>,
    headers: HeaderMap,
    Form(d): Form<Decision>,
) -> PageResult {
    if !guard::token_ok(&inspector, &headers, &d.csrf) {
        return Ok((
            StatusCode::FORBIDDEN,
            "refused: the form's CSRF token is missing or not this inspector's; reload the page",
        )
            .into_response());
    }
    let status = match d.decision.as_str() {
        "approve" => pb::ReviewStatus::Approved,
        "reject" => pb::ReviewStatus::Rejected,
        other => {
            return Err(PageError::BadRequest(format!(
                "decision must be approve or reject, not {other:?}"
            )))
        }
    };
    inspector
        .client()
        .resolve_review_item(pb::ResolveReviewItemRequest {
            namespace: ns.clone(),
            review_id,
            status: status as i32,
            reviewer: d.reviewer,
            comment: d.comment,
        })
        .await?;
    Ok(Redirect::to(&format!("{}?all=1", ns_url(&ns, "review"))).into_response())
}
