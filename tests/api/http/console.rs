use axum::body::Body;
use axum::http::{Request, StatusCode};

use crate::helpers::TestApp;

#[tokio::test]
async fn the_console_is_served_with_its_content_types() {
    let app = TestApp::sqlite().await;
    for (path, content_type, needle) in [
        ("/console", "text/html; charset=utf-8", "<script src=\"/console/app.js\""),
        ("/console/app.js", "text/javascript; charset=utf-8", "'use strict';"),
        ("/console/app.css", "text/css; charset=utf-8", ":root"),
    ] {
        let response = app.get(path).await;
        assert_eq!(response.status, StatusCode::OK, "{path}");
        assert_eq!(response.header("content-type"), Some(content_type), "{path}");
        assert_eq!(response.header("x-content-type-options"), Some("nosniff"));
        assert!(response.text.contains(needle), "{path}: {}", response.text);
    }
}

#[tokio::test]
async fn the_console_forbids_inline_script_and_other_origins() {
    let app = TestApp::sqlite().await;
    for path in ["/console", "/console/app.js", "/console/app.css"] {
        let response = app.get(path).await;
        let policy = response.header("content-security-policy").expect("a content security policy");
        for directive in [
            "default-src 'self'",
            "script-src 'self'",
            "object-src 'none'",
            "frame-ancestors 'none'",
        ] {
            assert!(policy.contains(directive), "{path}: {policy}");
        }
        assert!(!policy.contains("unsafe-inline"), "{policy}");
        assert!(!policy.contains("unsafe-eval"), "{policy}");
    }
    let page = app.get("/console").await.text;
    assert!(!page.contains("<script>"), "no inline script in the page");
    assert!(!page.contains("style="), "no inline style in the page");
}

#[tokio::test]
async fn a_known_etag_is_answered_with_304_and_no_body() {
    let app = TestApp::sqlite().await;
    let first = app.get("/console/app.js").await;
    let etag = first.header("etag").expect("an etag").to_owned();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    assert_eq!(first.header("cache-control"), Some("no-cache"));

    let revalidate = |tag: String| {
        Request::get("/console/app.js").header("if-none-match", tag).body(Body::empty()).unwrap()
    };
    for tag in [etag.clone(), format!("W/{etag}"), format!("\"other\", {etag}")] {
        let again = app.send(revalidate(tag.clone())).await;
        assert_eq!(again.status, StatusCode::NOT_MODIFIED, "{tag}");
        assert!(again.text.is_empty());
        assert_eq!(again.header("etag"), Some(etag.as_str()));
        assert!(again.header("content-security-policy").is_some());
    }
    let stale = app.send(revalidate("\"stale\"".into())).await;
    assert_eq!(stale.status, StatusCode::OK);
    assert_eq!(stale.text, first.text);
}

#[tokio::test]
async fn each_console_file_has_its_own_etag() {
    let app = TestApp::sqlite().await;
    let mut tags = Vec::new();
    for path in ["/console", "/console/app.js", "/console/app.css"] {
        tags.push(app.get(path).await.header("etag").unwrap().to_owned());
    }
    tags.sort();
    tags.dedup();
    assert_eq!(tags.len(), 3, "{tags:?}");
}
