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

/// Embedded files of `console/` of one content type, each served at its path under
/// `/console/`.
macro_rules! console_files {
    ($content_type:expr; $($name:literal),+ $(,)?) => {
        [$((
            concat!("/console/", $name),
            Asset::new(include_bytes!(concat!("../../console/", $name)), $content_type),
        )),+]
    };
}

/// Every file of the console: the page, its style, and its script as native ES modules
/// (`app.js` imports the rest), so the browser needs no build step.
static FILES: LazyLock<Vec<(&str, Asset)>> = LazyLock::new(|| {
    const SCRIPT: &str = "text/javascript; charset=utf-8";
    let page = Asset::new(include_bytes!("../../console/index.html"), "text/html; charset=utf-8");
    let mut files = vec![("/console", page)];
    files.extend(console_files!["text/css; charset=utf-8"; "app.css"]);
    files.extend(console_files![SCRIPT;
        "app.js", "api.js", "dialogs.js", "dom.js", "events.js", "markdown.js", "page.js",
        "views/agents.js", "views/items.js", "views/runs.js", "views/session.js",
        "views/sessions.js", "views/turn.js",
    ]);
    files
});

/// `/console` needs no key: the page holds no data, its API calls do.
pub fn router() -> Router<AppState> {
    FILES.iter().fold(Router::new(), |router, (path, asset)| {
        router.route(path, get(move |h: HeaderMap| async move { asset.serve(&h) }))
    })
}
