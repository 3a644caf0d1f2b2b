//! The sessions of a namespace: filtered by state and subject (by the
//! daemon) and by owner and creation date (here), paged, with counts,
//! token totals and a chart of tokens per session over time.

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect};
use maud::html;
use serde::Deserialize;

use super::layout::{self, enc, ns_url, page, session_url, subject_url, PageError, PageResult};
use super::{chart, Inspector, MAX_SESSIONS_COUNTED, SESSIONS_PER_PAGE};
use crate::pb;

/// `GET /`: the default namespace's sessions, or a form asking for one.
#[derive(Debug, Deserialize)]
pub struct HomeQuery {
    #[serde(default)]
    namespace: String,
}

/// `GET /`.
pub async fn home(State(inspector): State<Inspector>, Query(q): Query<HomeQuery>) -> PageResult {
    let chosen = if q.namespace.trim().is_empty() {
        inspector.inner.default_namespace.clone()
    } else {
        Some(q.namespace.trim().to_owned())
    };
    if let Some(ns) = chosen {
        return Ok(Redirect::to(&ns_url(&ns, "sessions")).into_response());
    }
    Ok(page(
        "Choose a namespace",
        None,
        html! {
            h1 { "Choose a namespace" }
            form.filters method="get" action="/" {
                label { "Namespace" input name="namespace" required; }
                button type="submit" { "Open" }
            }
        },
    ))
}

/// Filters of the sessions list.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    state: String,
    #[serde(default)]
    subject: String,
    #[serde(default)]
    owner: String,
    /// Created on or after this date (YYYY-MM-DD).
    #[serde(default)]
    since: String,
    /// Created on or before this date (YYYY-MM-DD).
    #[serde(default)]
    until: String,
    /// Page number, from 0.
    #[serde(default)]
    page: usize,
}

impl ListQuery {
    fn query_string(&self, page: usize) -> String {
        format!(
            "?state={}&subject={}&owner={}&since={}&until={}&page={page}",
            enc(&self.state),
            enc(&self.subject),
            enc(&self.owner),
            enc(&self.since),
            enc(&self.until)
        )
    }
}

/// Every session of `ns` the daemon's filters select, up to
/// [`MAX_SESSIONS_COUNTED`]; true when there were more.
pub async fn walk(
    inspector: &Inspector,
    ns: &str,
    subject: &str,
    state: pb::SessionState,
) -> Result<(Vec<pb::Session>, bool), PageError> {
    let mut out = Vec::new();
    let mut token = String::new();
    let mut client = inspector.client();
    loop {
        let r = client
            .list_sessions(pb::ListSessionsRequest {
                namespace: ns.to_owned(),
                subject_id: subject.to_owned(),
                state: state as i32,
                page_size: 1000,
                page_token: token,
            })
            .await?
            .into_inner();
        out.extend(r.sessions);
        if out.len() >= MAX_SESSIONS_COUNTED {
            out.truncate(MAX_SESSIONS_COUNTED);
            return Ok((out, true));
        }
        if r.next_page_token.is_empty() {
            return Ok((out, false));
        }
        token = r.next_page_token;
    }
}

/// `GET /ns/{ns}/sessions`.
pub async fn list(
    State(inspector): State<Inspector>,
    Path(ns): Path<String>,
    Query(q): Query<ListQuery>,
) -> PageResult {
    let state = match q.state.as_str() {
        "" => pb::SessionState::Unspecified,
        "active" => pb::SessionState::Active,
        "idle" => pb::SessionState::Idle,
        "closed" => pb::SessionState::Closed,
        other => {
            return Err(PageError::BadRequest(format!(
                "state must be active, idle or closed, not {other:?}"
            )))
        }
    };
    let since = match q.since.trim() {
        "" => None,
        d => Some(layout::parse_date(d)? * 86_400),
    };
    let until = match q.until.trim() {
        "" => None,
        d => Some(layout::parse_date(d)? * 86_400 + 86_399),
    };
    let (all, capped) = walk(&inspector, &ns, q.subject.trim(), state).await?;
    let owner = q.owner.trim();
    // Newest first (ids sort by creation for server-made ids).
    let chosen: Vec<&pb::Session> = all
        .iter()
        .filter(|s| owner.is_empty() || s.owner_agent == owner)
        .filter(|s| {
            let created = s.create_time.as_ref().map_or(0, |t| t.seconds);
            since.is_none_or(|a| created >= a) && until.is_none_or(|b| created <= b)
        })
        .rev()
        .collect();
    let per_page = SESSIONS_PER_PAGE as usize;
    let pages = chosen.len().div_ceil(per_page).max(1);
    if q.page >= pages {
        return Err(PageError::BadRequest(format!(
            "page {} is past the last page ({})",
            q.page,
            pages - 1
        )));
    }
    let shown = &chosen[q.page * per_page..((q.page + 1) * per_page).min(chosen.len())];
    let count = |st: pb::SessionState| chosen.iter().filter(|s| s.state == st as i32).count();
    let turns: u64 = chosen.iter().map(|s| s.turn_count).sum();
    let tokens: u64 = chosen.iter().map(|s| s.total_tokens).sum();
    let mut by_time: Vec<&&pb::Session> = chosen.iter().collect();
    by_time.sort_by_key(|s| {
        s.create_time
            .as_ref()
            .map_or((0, 0), |t| (t.seconds, t.nanos))
    });
    let recent = &by_time[by_time.len().saturating_sub(chart::MAX_BARS)..];
    let bars: Vec<(String, u64)> = recent
        .iter()
        .map(|s| (s.session_id.clone(), s.total_tokens))
        .collect();
    let body = html! {
        h1 { "Sessions" }
        form.filters method="get" {
            label { "State"
                select name="state" {
                    @for (v, label) in [("", "any"), ("active", "active"), ("idle", "idle"), ("closed", "closed")] {
                        option value=(v) selected[q.state == v] { (label) }
                    }
                }
            }
            label { "Subject" input name="subject" value=(q.subject); }
            label { "Owner agent" input name="owner" value=(q.owner); }
            label { "Created from" input type="date" name="since" value=(q.since); }
            label { "to" input type="date" name="until" value=(q.until); }
            button type="submit" { "Filter" }
        }
        p #totals {
            strong { (chosen.len()) } " sessions"
            @if capped { " (the first " (MAX_SESSIONS_COUNTED) " only)" }
            " · " (count(pb::SessionState::Active)) " active, "
            (count(pb::SessionState::Idle)) " idle, "
            (count(pb::SessionState::Closed)) " closed · "
            (turns) " turns · " (tokens) " tokens"
        }
        table #sessions {
            thead { tr {
                th { "Session" } th { "Title" } th { "Subject" } th { "Owner" } th { "State" }
                th.num { "Turns" } th.num { "Tokens" } th.num { "Summary" } th { "Created" } th { "Updated" }
            } }
            tbody {
                @for s in shown {
                    tr {
                        td { a href=(session_url(&ns, &s.session_id)) { (s.session_id) } }
                        td { (s.title) }
                        td { @if !s.subject_id.is_empty() { a href=(subject_url(&ns, &s.subject_id)) { (s.subject_id) } } }
                        td { (s.owner_agent) }
                        td { span class={"badge " (layout::state(s.state))} { (layout::state(s.state)) } }
                        td.num { (s.turn_count) }
                        td.num { (s.total_tokens) }
                        td.num { @if s.summary_version > 0 { "v" (s.summary_version) " → #" (s.summarized_through_seq) } @else { "—" } }
                        td { (layout::time(&s.create_time)) }
                        td { (layout::time(&s.update_time)) }
                    }
                }
            }
        }
        div.pager {
            @if q.page > 0 { a href=(q.query_string(q.page - 1)) { "← newer" } }
            span.muted { "page " (q.page + 1) " of " (pages) }
            @if q.page + 1 < pages { a #next-page href=(q.query_string(q.page + 1)) { "older →" } }
        }
        h2 { "Tokens per session over time" }
        p.muted { "The last " (bars.len()) " sessions by creation time." }
        (chart::bars(&bars, "tokens"))
    };
    Ok(page(&format!("Sessions of {ns}"), Some(&ns), body))
}
