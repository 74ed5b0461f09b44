//! The console: a web page for reading, running and repairing sessions. Its files are
//! embedded at build time, so the binary serves it with nothing beside it and no network
//! beyond itself; the page calls the same `/v1` API as any client (with the same auth).

use std::sync::LazyLock;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sha2::{Digest, Sha256};

use super::AppState;

/// Only the service's own files and API: no inline script or style, no other origin, no
/// framing. Stored items are rendered as text, and this is the second line of defence.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// One embedded file with its validator, computed once from its content so that a new
/// build invalidates what browsers cached.
struct Asset {
    body: &'static [u8],
    content_type: &'static str,
    etag: HeaderValue,
}

impl Asset {
    fn new(body: &'static [u8], content_type: &'static str) -> Self {
        let digest = Sha256::digest(body);
        let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        let etag = HeaderValue::from_str(&format!("\"{hex}\"")).expect("hex is a valid header");
        Self { body, content_type, etag }
    }

    /// The file, or 304 when the browser already holds this version. The file names
    /// carry no hash, so browsers revalidate each time (`no-cache`) and get a 304.
    fn serve(&self, request: &HeaderMap) -> Response {
        let headers = [
            (header::ETAG, self.etag.clone()),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY)),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
            (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        ];
        if self.matches(request) {
            return (StatusCode::NOT_MODIFIED, headers).into_response();
        }
        let content_type = [(header::CONTENT_TYPE, self.content_type)];
        (headers, content_type, self.body).into_response()
    }

    /// `If-None-Match` compares weakly (RFC 9110 §13.1.2): `W/"x"` matches `"x"`.
    fn matches(&self, request: &HeaderMap) -> bool {
        let ours = self.etag.as_bytes();
        request
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(|tag| tag.trim())
            .any(|tag| tag == "*" || tag.trim_start_matches("W/").as_bytes() == ours)
    }
}

static INDEX: LazyLock<Asset> = LazyLock::new(|| {
    Asset::new(include_bytes!("../../console/index.html"), "text/html; charset=utf-8")
});
static SCRIPT: LazyLock<Asset> = LazyLock::new(|| {
    Asset::new(include_bytes!("../../console/app.js"), "text/javascript; charset=utf-8")
});
static STYLE: LazyLock<Asset> = LazyLock::new(|| {
    Asset::new(include_bytes!("../../console/app.css"), "text/css; charset=utf-8")
});

/// `/console` needs no key: the page holds no data, its API calls do.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/console", get(|h: HeaderMap| async move { INDEX.serve(&h) }))
        .route("/console/app.js", get(|h: HeaderMap| async move { SCRIPT.serve(&h) }))
        .route("/console/app.css", get(|h: HeaderMap| async move { STYLE.serve(&h) }))
}
