//! The interactive docs' "Try it out" works as shipped: every operation's example
//! request, sent in the order create → use → delete, is answered with a 2xx. With
//! authentication on, as "Authorize" sends it: the admin key makes the tenant's key.

use std::collections::{BTreeSet, HashMap};

use axum::body::Body;
use axum::http::{Method, Request};
use serde_json::Value;

use super::RunsApp;
use crate::fake_llm::Reply;
use crate::helpers::TestDb;

/// Every operation, in an order in which each example request can succeed. Ids the
/// server makes are taken from the answer that made them, as a docs user would.
const WALK: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/livez"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.yaml"),
    ("POST", "/v1/api_keys"),
    ("GET", "/v1/api_keys"),
    ("POST", "/v1/agents"),
    ("GET", "/v1/agents"),
    ("GET", "/v1/agents/{agent_id}"),
    ("PATCH", "/v1/agents/{agent_id}"),
    ("POST", "/v1/sessions"),
    ("GET", "/v1/sessions"),
    ("GET", "/v1/sessions/{session_id}"),
    ("PATCH", "/v1/sessions/{session_id}"),
    ("PUT", "/v1/sessions/{session_id}/state"),
    ("PATCH", "/v1/sessions/{session_id}/state"),
    ("GET", "/v1/sessions/{session_id}/state"),
    ("PUT", "/v1/apps/{app_id}/state"),
    ("PATCH", "/v1/apps/{app_id}/state"),
    ("GET", "/v1/apps/{app_id}/state"),
    ("PUT", "/v1/apps/{app_id}/users/{user_id}/state"),
    ("PATCH", "/v1/apps/{app_id}/users/{user_id}/state"),
    ("GET", "/v1/apps/{app_id}/users/{user_id}/state"),
    ("PUT", "/v1/sessions/{session_id}/checkpoints/{checkpoint_id}"),
    ("POST", "/v1/sessions/{session_id}/checkpoints/{checkpoint_id}/writes"),
    ("GET", "/v1/sessions/{session_id}/checkpoints/{checkpoint_id}"),
    ("GET", "/v1/sessions/{session_id}/checkpoints"),
    ("GET", "/v1/checkpoints"),
    ("POST", "/v1/checkpoints/prune"),
    ("POST", "/v1/checkpoints/delete"),
    ("DELETE", "/v1/sessions/{session_id}/checkpoints"),
    ("POST", "/v1/sessions/{session_id}/items"),
    ("GET", "/v1/sessions/{session_id}/items"),
    ("GET", "/v1/sessions/{session_id}/items/{item_id}"),
    ("PUT", "/v1/sessions/{session_id}/items/{item_id}"),
    // The model calls the example's client tool: the run waits for its output.
    ("POST", "/v1/sessions/{session_id}/runs"),
    ("GET", "/v1/sessions/{session_id}/runs"),
    ("GET", "/v1/sessions/{session_id}/runs/{run_id}"),
    ("POST", "/v1/sessions/{session_id}/runs/{run_id}/tool_outputs"),
    ("GET", "/v1/sessions/{session_id}/runs/{run_id}/events"),
    // A second run, waiting again, to cancel.
    ("POST", "/v1/sessions/{session_id}/runs"),
    ("POST", "/v1/sessions/{session_id}/runs/{run_id}/approvals"),
    ("POST", "/v1/sessions/{session_id}/runs/{run_id}/cancel"),
    ("POST", "/v1/sessions/{session_id}/compact"),
    ("GET", "/v1/sessions/{session_id}/compactions"),
    ("GET", "/v1/sessions/{session_id}/context"),
    ("POST", "/v1/sessions/{session_id}/fork"),
    // A chat message on the session, its history as messages, and nothing to resume.
    ("POST", "/v1/chat"),
    ("GET", "/v1/chat/{session_id}/messages"),
    ("GET", "/v1/chat/{session_id}/stream"),
    ("PUT", "/v1/sessions/{session_id}/items"),
    ("DELETE", "/v1/sessions/{session_id}/items/last"),
    ("DELETE", "/v1/sessions/{session_id}/items/{item_id}"),
    ("DELETE", "/v1/sessions/{session_id}/items"),
    ("DELETE", "/v1/sessions/{session_id}"),
    ("DELETE", "/v1/agents/{agent_id}"),
    ("POST", "/v1/conversations"),
    ("GET", "/v1/conversations/{conversation_id}"),
    ("POST", "/v1/conversations/{conversation_id}"),
    ("POST", "/v1/conversations/{conversation_id}/items"),
    ("GET", "/v1/conversations/{conversation_id}/items"),
    ("GET", "/v1/conversations/{conversation_id}/items/{item_id}"),
    ("DELETE", "/v1/conversations/{conversation_id}/items/{item_id}"),
    ("GET", "/v1/models"),
    ("GET", "/v1/models/{model}"),
    ("POST", "/v1/responses"),
    ("GET", "/v1/responses/{response_id}"),
    ("GET", "/v1/responses/{response_id}/input_items"),
    // A finished response is answered as it is.
    ("POST", "/v1/responses/{response_id}/cancel"),
    ("POST", "/v1/responses/compact"),
    ("DELETE", "/v1/responses/{response_id}"),
    ("DELETE", "/v1/conversations/{conversation_id}"),
    ("DELETE", "/v1/api_keys/{key_id}"),
];

/// Operations whose example is refused as shown: a run waits for approvals only when it
/// calls a webhook tool, whose host the operator must allow, so the example run waits
/// for tool outputs instead and its approvals are a conflict.
const REFUSED: &[(&str, &str, u16)] =
    &[("POST", "/v1/sessions/{session_id}/runs/{run_id}/approvals", 409)];

const ADMIN_KEY: &str = "examples-admin-key-of-at-least-32-chars";

#[tokio::test]
async fn every_example_request_succeeds_in_order() {
    let t = RunsApp::configured(TestDb::sqlite().await, |config| {
        config.admin_api_key = Some(ADMIN_KEY.into());
    })
    .await;
    t.llm.push(Reply::tool_call("call_1", "lookup_order", r#"{"number":"4711"}"#));
    t.llm.push(Reply::text("Order 4711 has shipped."));
    t.llm.push(Reply::tool_call("call_1", "lookup_order", r#"{"number":"4711"}"#));
    let spec: Value = serde_norway::from_str(agent_sessions::http::openapi::yaml()).unwrap();

    let mut documented = BTreeSet::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.insert((method.to_uppercase(), path.clone()));
        }
    }
    let walked: BTreeSet<_> = WALK.iter().map(|(m, p)| (m.to_string(), p.to_string())).collect();
    assert_eq!(documented, walked, "every operation is walked");

    let mut ids: HashMap<&str, String> = HashMap::new();
    for (method, path) in WALK {
        let operation = &spec["paths"][*path][method.to_lowercase()];
        let mut uri = path.to_string();
        let mut query = Vec::new();
        for parameter in operation["parameters"].as_array().into_iter().flatten() {
            let name = parameter["name"].as_str().unwrap();
            let example = parameter["example"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| parameter["example"].as_i64().map(|n| n.to_string()));
            match (parameter["in"].as_str().unwrap(), example) {
                ("path", Some(example)) => uri = uri.replace(&format!("{{{name}}}"), &example),
                ("path", None) => {
                    let id = ids.get(name).unwrap_or_else(|| panic!("{path}: no {name} yet"));
                    uri = uri.replace(&format!("{{{name}}}"), id);
                }
                ("query", Some(example)) => query.push(format!("{name}={example}")),
                _ => {}
            }
        }
        if !query.is_empty() {
            uri = format!("{uri}?{}", query.join("&"));
        }
        let body = &operation["requestBody"]["content"]["application/json"]["example"];
        let mut request =
            Request::builder().method(Method::from_bytes(method.as_bytes()).unwrap()).uri(&uri);
        if path.starts_with("/v1/api_keys") {
            request = request.header("authorization", format!("Bearer {ADMIN_KEY}"));
        } else if path.starts_with("/v1/") {
            let key = ids.get("key").expect("the tenant's key is made first");
            request = request.header("authorization", format!("Bearer {key}"));
        }
        let request = if body.is_null() {
            assert!(
                operation["requestBody"].is_null(),
                "{method} {path} has a body but no example"
            );
            request.body(Body::empty())
        } else {
            request.header("content-type", "application/json").body(Body::from(body.to_string()))
        };
        let response = t.app.send(request.unwrap()).await;
        if let Some((_, _, status)) = REFUSED.iter().find(|(m, p, _)| (m, p) == (method, path)) {
            assert_eq!(response.status.as_u16(), *status, "{method} {uri}: {}", response.text);
            continue;
        }
        assert!(
            response.status.is_success(),
            "{method} {uri}: {} {}",
            response.status,
            response.text
        );
        let answer: Value = serde_json::from_str(&response.text).unwrap_or(Value::Null);
        match (*method, *path) {
            ("POST", "/v1/api_keys") => {
                ids.insert("key_id", answer["id"].as_str().unwrap().into());
                ids.insert("key", answer["key"].as_str().unwrap().into())
            }
            ("POST", "/v1/agents") => ids.insert("agent_id", answer["id"].as_str().unwrap().into()),
            ("GET", "/v1/models") => {
                ids.insert("model", answer["data"][0]["id"].as_str().unwrap().into())
            }
            ("POST", "/v1/conversations") => {
                ids.insert("conversation_id", answer["id"].as_str().unwrap().into())
            }
            ("POST", "/v1/conversations/{conversation_id}/items") => {
                ids.insert("item_id", answer["data"][0]["id"].as_str().unwrap().into())
            }
            ("POST", "/v1/responses") => {
                assert_eq!(answer["status"], "completed", "{answer}");
                ids.insert("response_id", answer["id"].as_str().unwrap().into())
            }
            ("POST", "/v1/sessions/{session_id}/items")
            | ("PUT", "/v1/sessions/{session_id}/items") => {
                ids.insert("item_id", answer["data"][0]["id"].as_str().unwrap().into())
            }
            ("POST", "/v1/sessions/{session_id}/runs") => {
                assert_eq!(answer["status"], "requires_action", "{answer}");
                ids.insert("run_id", answer["id"].as_str().unwrap().into())
            }
            _ => None,
        };
    }
}
