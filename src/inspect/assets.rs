//! The static files, embedded in the binary (no CDN, no build step): the
//! vendored htmx, our own script and stylesheet. See `static/README.md`.

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

const HTMX: &str = include_str!("static/htmx.min.js");
const SCRIPT: &str = include_str!("static/inspector.js");
const STYLE: &str = include_str!("static/style.css");

/// `GET /static/{file}`.
pub async fn serve(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "htmx.min.js" => (HTMX, "text/javascript; charset=utf-8"),
        "inspector.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "style.css" => (STYLE, "text/css; charset=utf-8"),
        _ => return (StatusCode::NOT_FOUND, "no such file").into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            // The files change only with the binary.
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}
