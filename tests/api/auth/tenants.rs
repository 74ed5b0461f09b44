//! Two tenants with the same session ids, idempotency keys and names: neither reads,
//! lists, changes or learns of the other's data.

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::{new_key, with_auth, As};
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};
use crate::runs::RunsApp;

on_both_backends!(tenants_never_touch_each_other);

/// A tenant's session `shared` with one item appended under Idempotency-Key `k1`, an
/// agent and a run started under Idempotency-Key `r1`.
async fn populate(t: &As<'_>, who: &str) -> (Value, Value, Value) {
    t.post("/v1/sessions", json!({"id": "shared", "metadata": {"user": who}}))
        .await
        .expect(StatusCode::CREATED);
    let request = axum::http::Request::post("/v1/sessions/shared/items")
        .header("authorization", format!("Bearer {}", t.key.unwrap()))
        .header("content-type", "application/json")
        .header("idempotency-key", "k1")
        .body(axum::body::Body::from(
            json!({"items": [{"role": "user", "content": format!("I am {who}")}]}).to_string(),
        ))
        .unwrap();
    let item = t.app.send(request).await.expect(StatusCode::CREATED)["data"][0].clone();
    assert_eq!(item["item"]["content"], format!("I am {who}"), "not replayed across tenants");
    let agent = t
        .post("/v1/agents", json!({"name": who, "tools": [{"type": "function", "name": "lookup"}]}))
        .await
        .expect(StatusCode::CREATED);
    let request = axum::http::Request::post("/v1/sessions/shared/runs")
        .header("authorization", format!("Bearer {}", t.key.unwrap()))
        .header("content-type", "application/json")
        .header("idempotency-key", "r1")
        .body(axum::body::Body::from(
            json!({"input": format!("run of {who}"), "agent_id": agent["id"]}).to_string(),
        ))
        .unwrap();
    let run = t.app.send(request).await.expect(StatusCode::OK);
    assert_eq!(run["status"], "requires_action", "{run}");
    (item, agent, run)
}

async fn tenants_never_touch_each_other(db: TestDb) {
    let t = RunsApp::configured(db, with_auth).await;
    // Each run waits on a client tool, so it can be cancelled and answered.
    t.llm.set_default(Reply::tool_call("call_1", "lookup", "{}"));
    let (_, alpha_key) = new_key(&t.app, "alpha", json!(["read", "write"])).await;
    let (_, beta_key) = new_key(&t.app, "beta", json!(["read", "write"])).await;
    let (_, gamma_key) = new_key(&t.app, "gamma", json!(["read", "write"])).await;
    let alpha = As { app: &t.app, key: Some(&alpha_key) };
    let beta = As { app: &t.app, key: Some(&beta_key) };
    let gamma = As { app: &t.app, key: Some(&gamma_key) };

    let (alpha_item, alpha_agent, alpha_run) = populate(&alpha, "alpha").await;
    let (_, _, beta_run) = populate(&beta, "beta").await;
    assert_ne!(alpha_run["id"], beta_run["id"], "the same key in two tenants is two keys");
    alpha
        .post("/v1/sessions", json!({"id": "alpha-only", "metadata": {"user": "alpha"}}))
        .await
        .expect(StatusCode::CREATED);

    // Reads: another tenant's object is missing, byte for byte (gamma has a `shared`
    // session too, with nothing in it).
    gamma.post("/v1/sessions", json!({"id": "shared"})).await.expect(StatusCode::CREATED);
    let item_id = alpha_item["id"].as_str().unwrap();
    let (run_id, agent_id) =
        (alpha_run["id"].as_str().unwrap(), alpha_agent["id"].as_str().unwrap());
    for uri in [
        "/v1/sessions/alpha-only".to_owned(),
        "/v1/sessions/alpha-only/items".to_owned(),
        "/v1/sessions/alpha-only/runs".to_owned(),
        format!("/v1/sessions/shared/items/{item_id}"),
        format!("/v1/sessions/shared/runs/{run_id}"),
        format!("/v1/sessions/shared/runs/{run_id}/events"),
        format!("/v1/agents/{agent_id}"),
    ] {
        let seen = beta.get(&uri).await;
        let missing = gamma.get(&uri).await;
        assert_eq!(seen.status, StatusCode::NOT_FOUND, "{uri}: {}", seen.text);
        assert_eq!(seen.text, missing.text, "{uri}");
    }
    // Lists and filters show only one's own.
    let listed = beta.get("/v1/sessions").await.expect(StatusCode::OK);
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    assert_eq!(listed["data"][0]["metadata"]["user"], "beta");
    let filtered = beta.get("/v1/sessions?metadata[user]=alpha").await.expect(StatusCode::OK);
    assert_eq!(filtered["data"], json!([]));
    let agents = beta.get("/v1/agents").await.expect(StatusCode::OK);
    assert!(agents["data"].as_array().unwrap().iter().all(|a| a["id"] != agent_id));
    let items = beta.get("/v1/sessions/shared/items").await.expect(StatusCode::OK);
    assert_eq!(items["data"].as_array().unwrap().len(), 1);
    assert_eq!(items["data"][0]["item"]["content"], "I am beta");
    let runs = beta.get("/v1/sessions/shared/runs").await.expect(StatusCode::OK);
    assert_eq!(runs["data"].as_array().unwrap().len(), 1);
    assert_eq!(runs["data"][0]["id"], beta_run["id"]);
    // A cursor from another tenant is unknown, not a leak.
    for uri in [
        "/v1/sessions?after=alpha-only".to_owned(),
        format!("/v1/sessions/shared/items?after={item_id}"),
        format!("/v1/sessions/shared/runs?before={run_id}"),
        format!("/v1/agents?after={agent_id}"),
    ] {
        beta.get(&uri).await.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    }

    // Writes: none reaches the other tenant's data.
    beta.delete("/v1/sessions/alpha-only")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    beta.delete("/v1/sessions/alpha-only/items/last")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    beta.delete("/v1/sessions/alpha-only/items")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    beta.delete(&format!("/v1/sessions/shared/items/{item_id}"))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "item_not_found");
    beta.patch("/v1/sessions/alpha-only", json!({"metadata": {"user": "mallory"}}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    beta.post(&format!("/v1/sessions/shared/runs/{run_id}/cancel"), json!({}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "run_not_found");
    beta.post(
        &format!("/v1/sessions/shared/runs/{run_id}/tool_outputs"),
        json!({"outputs": [{"call_id": "call_1", "output": "x"}]}),
    )
    .await
    .expect_problem(StatusCode::NOT_FOUND, "run_not_found");
    beta.patch(&format!("/v1/agents/{agent_id}"), json!({"name": "mallory"}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "agent_not_found");
    beta.delete(&format!("/v1/agents/{agent_id}"))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "agent_not_found");
    beta.post("/v1/sessions", json!({"id": "borrow", "agent_id": agent_id}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "agent_not_found");
    // Clearing one's own `shared` leaves the other's.
    beta.post(
        &format!("/v1/sessions/shared/runs/{}/cancel", beta_run["id"].as_str().unwrap()),
        json!({}),
    )
    .await
    .expect(StatusCode::OK);
    beta.delete("/v1/sessions/shared/items").await.expect(StatusCode::NO_CONTENT);

    // Alpha's data is as it was.
    let session = alpha.get("/v1/sessions/alpha-only").await.expect(StatusCode::OK);
    assert_eq!(session["metadata"]["user"], "alpha");
    let items = alpha.get("/v1/sessions/shared/items").await.expect(StatusCode::OK);
    assert_eq!(items["data"].as_array().unwrap().len(), 1);
    assert_eq!(items["data"][0]["id"], item_id);
    let run = alpha.get(&format!("/v1/sessions/shared/runs/{run_id}")).await.expect(StatusCode::OK);
    assert_eq!(run["status"], "requires_action");
    let agent = alpha.get(&format!("/v1/agents/{agent_id}")).await.expect(StatusCode::OK);
    assert_eq!(agent["name"], "alpha");
}
