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
