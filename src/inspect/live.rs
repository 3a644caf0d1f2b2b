//! Live updates of a session's page: WatchSession behind server-sent
//! events. Each new turn goes to the browser as HTML rendered (and
//! escaped) here; summaries, handoffs and state changes as notices. Each
//! stream is one task with a bounded channel; at most
//! `Settings::max_live_streams` run at once, and all end when the
//! inspector shuts down.

use std::convert::Infallible;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use maud::html;
use serde::Deserialize;
use tokio_stream::wrappers::ReceiverStream;

use super::layout::{self, session_url, PageError};
use super::{session, Inspector};
use crate::pb;

/// Events buffered per stream before the task waits for the browser.
const BUFFER: usize = 64;

/// Query of the events stream.
#[derive(Debug, Deserialize)]
pub struct LiveQuery {
    /// The newest turn the page already shows.
    #[serde(default)]
    after: u64,
}

/// `GET /ns/{ns}/sessions/{id}/events?after=N`: turns after `after` (or
/// after the browser's `Last-Event-ID` when it reconnects), then live.
pub async fn events(
    State(inspector): State<Inspector>,
    Path((ns, id)): Path<(String, String)>,
    Query(q): Query<LiveQuery>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    // A stream holds one of the daemon's watches for as long as it is
    // open: another site's page must not open them in the user's browser.
    if headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site"))
    {
        return Ok((
            axum::http::StatusCode::FORBIDDEN,
            "cross-site live stream refused: open the session page of this inspector",
        )
            .into_response());
    }
    let permit = inspector
        .inner
        .live
        .clone()
        .try_acquire_owned()
        .map_err(|_| {
            tonic::Status::resource_exhausted(format!(
                "the inspector already follows {} sessions live; close a tab",
                inspector.inner.max_live_streams
            ))
        })?;
    let resumed = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let after = q.after.max(resumed);
    // The first turn to send; none can follow u64::MAX.
    let from_seq = after.checked_add(1).ok_or_else(|| {
        PageError::BadRequest(format!(
            "after={after} is beyond any turn: no turn can follow it"
        ))
    })?;
    let mut watch = inspector
        .client()
        .watch_session(pb::WatchSessionRequest {
            namespace: ns.clone(),
            session_id: id.clone(),
            from_seq,
            // A person's view: the daemon keeps the rest of the
            // namespace's watches for the agents.
            observer: true,
        })
        .await?
        .into_inner();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(BUFFER);
    let stop = inspector.inner.stop.clone();
    tokio::spawn(async move {
        let _permit = permit;
        let base = session_url(&ns, &id);
        loop {
            let next = tokio::select! {
                m = watch.message() => m,
                () = tx.closed() => return,
                () = stop.cancelled() => {
                    let _ = tx.send(Ok(end("the inspector is shutting down"))).await;
                    return;
                }
            };
            let last = matches!(next, Ok(None) | Err(_));
            let event = match next {
                Ok(Some(ev)) => match ev.event {
                    Some(e) => render(&base, e),
                    None => continue,
                },
                Ok(None) => end("the daemon ended the stream"),
                Err(s) => end(&format!("{:?}: {}", s.code(), s.message())),
            };
            if tx.send(Ok(event)).await.is_err() || last {
                return;
            }
        }
    });
    Ok(Sse::new(ReceiverStream::new(rx))
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// SSE data may not hold a carriage return; in HTML `&#13;` is the same
/// character.
fn data(html: String) -> String {
    html.replace('\r', "&#13;")
}

fn end(why: &str) -> Event {
    Event::default()
        .event("end")
        .data(data(format!("stopped: {why}")))
}

fn render(base: &str, e: pb::watch_session_response::Event) -> Event {
    use pb::watch_session_response::Event as E;
    let notice = |m: maud::Markup| {
        Event::default()
            .event("notice")
            .data(data(html! { div.notice { (m) } }.into_string()))
    };
    match e {
        E::Turn(t) => Event::default()
            .event("turn")
            .id(t.seq.to_string())
            .data(data(session::turn(&t).into_string())),
        E::SummaryWritten(s) => notice(html! {
            "Summary v" (s.version) " written (" (layout::trigger(s.trigger)) ", turns 1–" (s.covers_through_seq) "). "
            a href={(base) "?v=" (s.version)} { "Show it" }
        }),
        E::Handoff(h) => notice(html! {
            "Handed off from " strong { (h.from_agent) } " to " strong { (h.to_agent) }
            " (lease epoch " (h.lease_epoch) ")" @if !h.reason.is_empty() { ": " (h.reason) }
        }),
        E::StateChanged(s) => notice(html! {
            "The session is now " strong { (layout::state(s.state)) } " (at turn " (s.at_seq) ")."
        }),
    }
}
