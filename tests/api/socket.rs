//! The application over a real socket, bound to port 0, in process.

use std::collections::HashSet;

use agent_sessions::app::Application;
use futures::future::join_all;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::helpers::{get_json, test_config, TestDb};

async fn concurrent_http_appends_stay_whole(db: TestDb) {
    let app = Application::with_store(&test_config(), db.store.clone()).await.unwrap();
    let base = format!("http://{}", app.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(app.run(shutdown.clone()));

    let http = reqwest::Client::new();
    let appends = (0..64).map(|client| {
        let http = http.clone();
        let url = format!("{base}/v1/sessions/shared/items");
        async move {
            let body =
                json!({"items": [{"client": client, "part": 0}, {"client": client, "part": 1}]});
            let response = http.post(url).json(&body).send().await.unwrap();
            assert_eq!(response.status(), 201);
            assert!(response.headers().contains_key("x-request-id"));
        }
    });
    join_all(appends).await;

    let page: Value = get_json(&http, format!("{base}/v1/sessions/shared/items?limit=1000")).await;
    let items = page["data"].as_array().unwrap();
    assert_eq!(items.len(), 128);
    let mut clients = HashSet::new();
    for (i, pair) in items.chunks(2).enumerate() {
        assert_eq!(pair[0]["seq"].as_i64(), Some(2 * i as i64 + 1));
        assert_eq!(pair[0]["item"]["client"], pair[1]["item"]["client"]);
        assert_eq!(
            (pair[0]["item"]["part"].as_i64(), pair[1]["item"]["part"].as_i64()),
            (Some(0), Some(1))
        );
        clients.insert(pair[0]["item"]["client"].as_i64().unwrap());
    }
    assert_eq!(clients.len(), 64);

    shutdown.cancel();
    server.await.unwrap().expect("the server stops cleanly");
    assert!(
        http.get(format!("{base}/healthz")).send().await.is_err(),
        "still serving after shutdown"
    );
}

#[sqlx::test(migrations = "./migrations/postgres")]
async fn concurrent_http_appends_stay_whole_on_postgres(pool: sqlx::PgPool) {
    concurrent_http_appends_stay_whole(TestDb::postgres(pool)).await;
}

#[tokio::test]
async fn concurrent_http_appends_stay_whole_on_sqlite() {
    concurrent_http_appends_stay_whole(TestDb::sqlite().await).await;
}

/// Sends a request with a body of `size` bytes whole, as a client that does not wait for
/// an early answer, and returns the status line of the answer.
async fn status_after_sending(base: &str, path: &str, content_type: &str, size: usize) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream =
        tokio::net::TcpStream::connect(base.trim_start_matches("http://")).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: test\r\ncontent-type: {content_type}\r\ncontent-length: {size}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let body = vec![b'a'; size];
    stream.write_all(&body).await.unwrap_or_else(|e| panic!("{path}: the body was cut off: {e}"));
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap_or_else(|e| panic!("{path}: {e}"));
    String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn bodies_refused_before_they_are_read_still_get_their_answer() {
    let app = Application::with_store(&test_config(), TestDb::sqlite().await.store).await.unwrap();
    let base = format!("http://{}", app.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(app.run(shutdown.clone()));
    let cases = [
        ("/v1/sessions/s/items", "application/json", 17 << 20, "413"),
        ("/v1/no-such-route", "application/json", 11 << 20, "404"),
        ("/v1/sessions/s/items", "text/plain", 11 << 20, "415"),
    ];
    for (path, content_type, size, status) in cases {
        for _ in 0..3 {
            let line = status_after_sending(&base, path, content_type, size).await;
            assert!(line.starts_with(&format!("HTTP/1.1 {status}")), "{path}: {line}");
        }
    }
    shutdown.cancel();
    server.await.unwrap().unwrap();
}

/// The server as a client sees it over TCP, on a SQLite store.
async fn serving() -> (String, CancellationToken, tokio::task::JoinHandle<std::io::Result<()>>) {
    let app = Application::with_store(&test_config(), TestDb::sqlite().await.store).await.unwrap();
    let address = app.local_addr().unwrap().to_string();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(app.run(shutdown.clone()));
    (address, shutdown, server)
}

/// Each HTTP the server speaks, told from what the client sends first: HTTP/2 with prior
/// knowledge answers its preface with its own settings, and an HTTP/1 request whose first
/// byte comes alone (the preface begins with it too) is still answered.
#[tokio::test]
async fn a_connection_is_served_in_the_http_its_client_speaks() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (address, shutdown, server) = serving().await;

    let mut http2 = tokio::net::TcpStream::connect(&address).await.unwrap();
    http2.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.unwrap();
    // An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
    http2.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
    let mut frame = [0; 9];
    http2.read_exact(&mut frame).await.unwrap();
    assert_eq!((frame[3], &frame[5..]), (4, &[0, 0, 0, 0][..]), "a SETTINGS frame: {frame:?}");
    drop(http2);

    let mut http1 = tokio::net::TcpStream::connect(&address).await.unwrap();
    http1.write_all(b"P").await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let body = r#"{"items": [{"role": "user", "content": "hi"}]}"#;
    let rest = format!(
        "OST /v1/sessions/spoken/items HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    http1.write_all(rest.as_bytes()).await.unwrap();
    let mut answer = String::new();
    http1.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");

    shutdown.cancel();
    server.await.unwrap().unwrap();
}

/// A client that connects and sends nothing holds neither its connection past the
/// request time limit nor the server's shutdown.
#[tokio::test]
async fn a_client_that_sends_nothing_holds_nothing() {
    use tokio::io::AsyncReadExt;
    let (address, shutdown, server) = serving().await;
    let mut silent = tokio::net::TcpStream::connect(&address).await.unwrap();
    // Accepted, and waiting for its first bytes.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    shutdown.cancel();
    // Well within the request time limit (30 s here), which would otherwise bound both.
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(10), server).await;
    stopped.expect("the server stops without waiting for the silent client").unwrap().unwrap();
    let mut rest = Vec::new();
    let closed =
        tokio::time::timeout(std::time::Duration::from_secs(10), silent.read_to_end(&mut rest));
    assert_eq!(closed.await.expect("the connection is closed").unwrap(), 0);
}
