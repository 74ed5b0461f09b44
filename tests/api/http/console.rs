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

/// The relative module paths a script imports (`import … from './x.js';`).
fn imports(script: &str) -> Vec<String> {
    script
        .lines()
        .filter(|line| line.starts_with("import "))
        .filter_map(|line| line.split(" from '").nth(1))
        .map(|rest| rest.trim_end_matches("';").to_owned())
        .collect()
}

#[tokio::test]
async fn every_module_the_console_imports_is_served_as_javascript() {
    let app = TestApp::sqlite().await;
    let mut pending = vec!["/console/app.js".to_owned()];
    let mut served = std::collections::BTreeSet::new();
    while let Some(path) = pending.pop() {
        if !served.insert(path.clone()) {
            continue;
        }
        let response = app.get(&path).await;
        assert_eq!(response.status, StatusCode::OK, "{path}");
        assert_eq!(response.header("content-type"), Some("text/javascript; charset=utf-8"));
        assert!(response.header("content-security-policy").is_some(), "{path}");
        let assigns_markup = ["innerHTML =", "innerHTML=", "outerHTML", "insertAdjacentHTML"];
        assert!(!assigns_markup.iter().any(|s| response.text.contains(s)), "{path} assigns markup");
        let dir = &path[..path.rfind('/').expect("a path with a folder")];
        for import in imports(&response.text) {
            let mut parts: Vec<&str> = dir.split('/').collect();
            for segment in import.split('/') {
                match segment {
                    "." => {}
                    ".." => {
                        parts.pop();
                    }
                    name => parts.push(name),
                }
            }
            pending.push(parts.join("/"));
        }
    }
    // The entry point and at least a module per view: the script is split, and each
    // piece is reachable from the page.
    assert!(served.len() >= 10, "{served:?}");
    assert!(served.contains("/console/views/session.js"), "{served:?}");
    let page = app.get("/console").await.text;
    assert!(page.contains("type=\"module\""), "the page loads app.js as a module");
}
