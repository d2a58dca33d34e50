//! The web console: static files compiled into the binary and served at
//! `/console`. It is a client of the JSON API like any other: every action
//! is an authenticated API request made by the browser with the key the
//! person signed in with (kept in the tab's `sessionStorage` only), so it
//! can never do what that key may not.
//!
//! The files (`console/` beside `src/`) are plain HTML, CSS and JavaScript
//! modules (`app.js` signs in and routes, importing the shared helpers of
//! `core.js` and the views of `memories.js`, `receipts.js`, `recall.js`
//! and `admin.js`): nothing to build, no framework. Every response carries a strict
//! Content-Security-Policy (scripts and styles from this origin only, no
//! inline script, API requests to this origin only, no framing), and the
//! script renders every stored text with `textContent`, never as markup.
//!
//! These routes are not part of the API, so the OpenAPI document does not
//! list them (and [`crate::http::registered_routes`] does not return them).

use axum::Router;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

/// Where the console is served.
pub const CONSOLE_PATH: &str = "/console";

/// The Content-Security-Policy of every console response.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The console's files: path under `/console/`, media type, bytes.
pub const FILES: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../console/index.html"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/app.js"),
    ),
    (
        "core.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/core.js"),
    ),
    (
        "receipts.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/receipts.js"),
    ),
    (
        "memories.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/memories.js"),
    ),
    (
        "recall.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/recall.js"),
    ),
    (
        "admin.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/admin.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("../console/app.css"),
    ),
    (
        "icon.svg",
        "image/svg+xml",
        include_str!("../console/icon.svg"),
    ),
];

fn file(name: &str) -> Response {
    let Some((_, media, body)) = FILES.iter().find(|(n, _, _)| *n == name) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut response = (*body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
    response
}

/// The console's routes: the page at `/console` (and `/console/`), its
/// assets under `/console/`, and `/` sending a browser to the console.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let mut router = Router::new()
        .route("/", get(|| async { Redirect::to(CONSOLE_PATH) }))
        .route(CONSOLE_PATH, get(|| async { file("index.html") }))
        .route("/console/", get(|| async { file("index.html") }));
    for (name, _, _) in FILES {
        router = router.route(
            &format!("{CONSOLE_PATH}/{name}"),
            get(move || async move { file(name) }),
        );
    }
    router
}
