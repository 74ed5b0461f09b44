use axum::http::StatusCode;
use serde_json::json;

use crate::helpers::TestApp;

#[tokio::test]
async fn session_lifecycle_over_http() {
    let app = TestApp::sqlite().await;
    // An agent that does not exist is refused at once, not at the first run.
    let detail = app
        .post("/v1/sessions", json!({"id": "s1", "agent_id": "triage"}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "agent_not_found");
    assert!(detail.contains("`triage`"), "{detail}");
    let agent = app.post("/v1/agents", json!({"name": "triage"})).await.expect(StatusCode::CREATED);
    let created = app
        .post(
            "/v1/sessions",
            json!({"id": "chat:42@web", "metadata": {"user": "alice"}, "agent_id": agent["id"]}),
        )
        .await;
    assert_eq!(created.header("location"), Some("/v1/sessions/chat:42@web"));
    let session = created.expect(StatusCode::CREATED);
    assert_eq!(session["id"], "chat:42@web");
    assert_eq!(session["metadata"], json!({"user": "alice"}));
    assert_eq!(session["agent_id"], agent["id"]);
    assert_eq!(session["item_count"], 0);
    assert_eq!(
        session["usage"],
        json!({"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "llm_calls": 0})
    );
    let created_at = session["created_at"].as_str().unwrap();
    assert!(created_at.ends_with('Z'), "RFC 3339 UTC: {created_at}");
    assert!(chrono::DateTime::parse_from_rfc3339(created_at).is_ok());

    assert_eq!(app.get("/v1/sessions/chat:42@web").await.expect(StatusCode::OK), session);

    app.patch("/v1/sessions/chat:42@web", json!({"agent_id": "typo"}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "agent_not_found");
    let patched = app
        .patch(
            "/v1/sessions/chat:42@web",
            json!({"metadata": {"user": null, "lang": "de"}, "agent_id": null}),
        )
        .await
        .expect(StatusCode::OK);
    assert_eq!(patched["metadata"], json!({"lang": "de"}));
    assert_eq!(patched["agent_id"], json!(null));
    let cleared = app
        .patch("/v1/sessions/chat:42@web", json!({"metadata": null}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(cleared["metadata"], json!({}));

    assert_eq!(
        app.delete("/v1/sessions/chat:42@web").await.expect(StatusCode::NO_CONTENT),
        json!(null)
    );
    app.get("/v1/sessions/chat:42@web")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    let detail = app
        .delete("/v1/sessions/chat:42@web")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    assert!(detail.contains("chat:42@web"), "{detail}");
}

#[tokio::test]
async fn generated_ids_are_uuid_v7_and_taken_ids_conflict() {
    let app = TestApp::sqlite().await;
    let session = app.post("/v1/sessions", json!({})).await.expect(StatusCode::CREATED);
    let id = uuid::Uuid::parse_str(session["id"].as_str().unwrap()).unwrap();
    assert_eq!(id.get_version_num(), 7);
    let nulls = app
        .post("/v1/sessions", json!({"id": null, "metadata": null, "agent_id": null}))
        .await
        .expect(StatusCode::CREATED);
    assert_ne!(nulls["id"], session["id"]);
    assert_eq!(nulls["metadata"], json!({}));

    app.post("/v1/sessions", json!({"id": "taken"})).await.expect(StatusCode::CREATED);
    let detail = app
        .post("/v1/sessions", json!({"id": "taken"}))
        .await
        .expect_problem(StatusCode::CONFLICT, "session_exists");
    assert!(detail.contains("taken"));
}

#[tokio::test]
async fn sessions_list_by_metadata_and_page_with_cursors() {
    let app = TestApp::sqlite().await;
    for (id, user) in [("a", "alice"), ("b", "bob"), ("c", "alice"), ("d", "alice")] {
        app.post("/v1/sessions", json!({"id": id, "metadata": {"user": user, "app": "web"}}))
            .await
            .expect(StatusCode::CREATED);
    }
    let ids = |page: &serde_json::Value| -> Vec<String> {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = app.get("/v1/sessions").await.expect(StatusCode::OK);
    assert_eq!(ids(&all), ["d", "c", "b", "a"]);
    assert_eq!(
        (all["first_id"].as_str(), all["last_id"].as_str(), all["has_more"].as_bool()),
        (Some("d"), Some("a"), Some(false))
    );

    // Brackets percent-encoded, as clients send them, and raw.
    let alice =
        app.get("/v1/sessions?metadata%5Buser%5D=alice&limit=2").await.expect(StatusCode::OK);
    assert_eq!(ids(&alice), ["d", "c"]);
    assert_eq!(alice["has_more"], true);
    let rest = app
        .get("/v1/sessions?metadata[user]=alice&metadata[app]=web&limit=2&after=c")
        .await
        .expect(StatusCode::OK);
    assert_eq!(ids(&rest), ["a"]);
    assert_eq!(rest["has_more"], false);
    let asc = app.get("/v1/sessions?order=asc&before=c").await.expect(StatusCode::OK);
    assert_eq!(ids(&asc), ["a", "b"]);
    let none = app.get("/v1/sessions?metadata[user]=carol").await.expect(StatusCode::OK);
    assert_eq!(none, json!({"data": [], "first_id": null, "last_id": null, "has_more": false}));
    let detail = app
        .get("/v1/sessions?after=zzz")
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("after"), "{detail}");
}
