//! The page shell and the small renderings every page shares: times, enum
//! names, links, and the error page a failed RPC becomes. Every value goes
//! through maud, which escapes it: transcripts are untrusted input.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};
use prost_types::Timestamp;

/// A page that could not be built: the daemon's status, or a bad request.
#[derive(Debug)]
pub enum PageError {
    /// The daemon refused or failed the RPC.
    Rpc(tonic::Status),
    /// A query parameter is out of range.
    BadRequest(String),
}

impl From<tonic::Status> for PageError {
    fn from(s: tonic::Status) -> Self {
        PageError::Rpc(s)
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        use tonic::Code;
        let (code, title, message) = match self {
            PageError::BadRequest(m) => (StatusCode::BAD_REQUEST, "Bad request", m),
            PageError::Rpc(s) => {
                let code = match s.code() {
                    Code::NotFound => StatusCode::NOT_FOUND,
                    Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
                    Code::PermissionDenied => StatusCode::FORBIDDEN,
                    Code::Unauthenticated => StatusCode::UNAUTHORIZED,
                    Code::FailedPrecondition | Code::Aborted | Code::AlreadyExists => {
                        StatusCode::CONFLICT
                    }
                    Code::Unavailable | Code::ResourceExhausted => StatusCode::SERVICE_UNAVAILABLE,
                    Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
                    _ => StatusCode::BAD_GATEWAY,
                };
                (
                    code,
                    "The daemon refused",
                    format!("{:?}: {}", s.code(), s.message()),
                )
            }
        };
        let body = html! {
            div.error-page {
                h1 { (title) }
                p #error-message { (message) }
            }
        };
        (code, shell(title, None, body)).into_response()
    }
}

/// A handler's result.
pub type PageResult = Result<Response, PageError>;

/// A full HTML page: title, navigation for `namespace`, `body`.
pub fn page(title: &str, namespace: Option<&str>, body: Markup) -> Response {
    shell(title, namespace, body).into_response()
}

fn shell(
    title: &str,
    namespace: Option<&str>,
    body: Markup,
) -> (StatusCode, [(header::HeaderName, &'static str); 1], String) {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                // htmx must not add an inline style element: the page's
                // policy allows only our own stylesheet.
                meta name="htmx-config" content=r#"{"includeIndicatorStyles":false,"allowEval":false}"#;
                title { (title) " · mnemo inspect" }
                link rel="stylesheet" href="/static/style.css";
                script src="/static/htmx.min.js" defer {}
                script src="/static/inspector.js" defer {}
            }
            body {
                header.top {
                    a.brand href="/" { "mnemo inspect" }
                    @if let Some(ns) = namespace {
                        span.muted { "namespace " strong { (ns) } }
                        a href=(ns_url(ns, "sessions")) { "Sessions" }
                        a href=(ns_url(ns, "search")) { "Search" }
                        a href=(ns_url(ns, "review")) { "Review queue" }
                    }
                }
                main { (body) }
            }
        }
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
}

/// An HTML fragment (for htmx swaps and live events).
pub fn fragment(body: Markup) -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body.into_string(),
    )
        .into_response()
}

/// Percent-encodes `s` for a URL path segment or query value.
pub fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `/ns/{ns}/{rest}`.
pub fn ns_url(ns: &str, rest: &str) -> String {
    format!("/ns/{}/{rest}", enc(ns))
}

/// A session's page.
pub fn session_url(ns: &str, id: &str) -> String {
    format!("/ns/{}/sessions/{}", enc(ns), enc(id))
}

/// A subject's page.
pub fn subject_url(ns: &str, subject: &str) -> String {
    format!("/ns/{}/subjects/{}", enc(ns), enc(subject))
}

/// The first seq of the conversation page that holds `seq`.
pub fn page_start(seq: u64) -> u64 {
    (seq.max(1) - 1) / super::TURNS_PER_PAGE * super::TURNS_PER_PAGE + 1
}

/// A link to turn `seq` of a session, on the conversation page that holds
/// it; `#t{seq}` makes the browser scroll to it and `:target` highlight it.
pub fn turn_url(ns: &str, id: &str, seq: u64) -> String {
    format!("{}?from={}#t{seq}", session_url(ns, id), page_start(seq))
}

/// A UTC time as `YYYY-MM-DD HH:MM:SS`; "—" when unset.
pub fn time(t: &Option<Timestamp>) -> String {
    match t {
        Some(t) => {
            let days = t.seconds.div_euclid(86_400);
            let secs = t.seconds.rem_euclid(86_400);
            let (y, m, d) = civil_from_days(days);
            format!(
                "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
                secs / 3600,
                secs / 60 % 60,
                secs % 60
            )
        }
        None => "—".to_owned(),
    }
}

/// The calendar date of a day count since 1970-01-01 (proleptic
/// Gregorian), by the usual era arithmetic.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Days since 1970-01-01 of a calendar date; the inverse of
/// [`civil_from_days`].
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses `YYYY-MM-DD` into days since the epoch.
pub fn parse_date(s: &str) -> Result<i64, PageError> {
    let bad = || PageError::BadRequest(format!("{s:?} is not a date (YYYY-MM-DD)"));
    let mut parts = s.trim().splitn(3, '-');
    let y: i64 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let m: u32 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let d: u32 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || !(1970..=9999).contains(&y) {
        return Err(bad());
    }
    let days = days_from_civil(y, m, d);
    // 30 February and the like come back as another date.
    if civil_from_days(days) != (y, m, d) {
        return Err(bad());
    }
    Ok(days)
}

/// An enum value's name without its prefix, lowercase ("active").
pub fn name(full: Option<&str>, prefix: &str) -> String {
    full.map_or("unknown", |n| n.trim_start_matches(prefix))
        .to_ascii_lowercase()
        .replace('_', " ")
}

/// A role's name.
pub fn role(r: i32) -> String {
    name(
        crate::pb::Role::try_from(r).ok().map(|v| v.as_str_name()),
        "ROLE_",
    )
}

/// A session state's name.
pub fn state(s: i32) -> String {
    name(
        crate::pb::SessionState::try_from(s)
            .ok()
            .map(|v| v.as_str_name()),
        "SESSION_STATE_",
    )
}

/// A summary trigger's name.
pub fn trigger(t: i32) -> String {
    name(
        crate::pb::SummaryTrigger::try_from(t)
            .ok()
            .map(|v| v.as_str_name()),
        "SUMMARY_TRIGGER_",
    )
}

/// Citation links to the turns an item came from.
pub fn cites(ns: &str, id: &str, seqs: &[u64], on_page: std::ops::RangeInclusive<u64>) -> Markup {
    html! {
        @for seq in seqs {
            @if on_page.contains(seq) {
                a.cite href={"#t" (seq)} title="the turn this cites" { "#" (seq) }
            } @else {
                a.cite href=(turn_url(ns, id, *seq)) title="the turn this cites" { "#" (seq) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_through_day_counts() {
        for days in [-800_000, -1, 0, 1, 59, 365, 11_016, 20_000, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{days} -> {y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(
            time(&Some(Timestamp {
                seconds: 1_796_559_707,
                nanos: 0
            })),
            "2026-12-06 12:21:47"
        );
    }

    #[test]
    fn urls_escape_what_a_path_cannot_hold() {
        assert_eq!(enc("a b/c?d#e<f>"), "a%20b%2Fc%3Fd%23e%3Cf%3E");
        assert_eq!(subject_url("ns", "user:42"), "/ns/ns/subjects/user%3A42");
        assert_eq!(page_start(1), 1);
        assert_eq!(page_start(100), 1);
        assert_eq!(page_start(101), 101);
        assert_eq!(turn_url("n", "s", 250), "/ns/n/sessions/s?from=201#t250");
    }

    #[test]
    fn dates_outside_the_calendar_are_refused() {
        assert_eq!(parse_date("1970-01-02").unwrap(), 1);
        assert!(parse_date("2024-02-29").is_ok());
        assert!(parse_date("2026-02-30").is_err());
        assert!(parse_date("2026-13-01").is_err());
        assert!(parse_date("yesterday").is_err());
    }
}
