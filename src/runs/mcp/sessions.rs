//! The MCP sessions of one execution of a run: one per server, opened when the run first
//! needs the server and reused for every list and call of the execution; rmcp opens a new
//! one when the server forgets it (a 404). An execution that resumes a run (after a pause,
//! on another replica, after a restart) opens its own. Every failure is text the model
//! can read: a server that cannot be reached, answers wrongly, fails or hangs never makes
//! a run fail. Dropped with the execution, the sessions end (rmcp tells each server with
//! a DELETE).

use std::collections::HashMap;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
    Implementation, PaginatedRequestParams, ProtocolVersion, RequestParamsMeta,
};
use rmcp::service::{ClientInitializeError, RoleClient, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};

use super::http::McpHttp;
use crate::model::{McpTool, WebhookPolicy};
use crate::telemetry;

/// The most text a tool's result may be: larger results are refused, as a webhook's are
/// cut, so one call cannot fill the model's context or the session.
pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;

/// The most pages of tools a server's list may have: a list is read whole, and a server
/// must not make it endless.
const MAX_PAGES: usize = 100;

/// A tool a server lists, as the `mcp_list_tools` item keeps it.
pub type ListedTool = Value;

type Client = RunningService<RoleClient, ClientConfig>;

pub struct McpSessions {
    http: reqwest::Client,
    timeout: Duration,
    /// Checked again when a session opens: the allow-list may have shrunk since the run
    /// was configured.
    hosts: WebhookPolicy,
    open: HashMap<String, Client>,
    /// Why a server could not be opened: it is not tried again in this execution, so that
    /// a server that does not answer costs one timeout, not one per call.
    failed: HashMap<String, String>,
}

impl McpSessions {
    pub fn new(http: reqwest::Client, timeout: Duration, hosts: WebhookPolicy) -> Self {
        Self { http, timeout, hosts, open: HashMap::new(), failed: HashMap::new() }
    }

    /// Opens a session with each server not yet tried, all at once; returns why each of
    /// `servers` that is not open could not be opened. Its calls then fail with that.
    pub async fn open(&mut self, servers: &[&McpTool]) -> HashMap<String, String> {
        let mut new: Vec<&McpTool> = Vec::new();
        for server in servers {
            let label = &server.server_label;
            let tried = self.open.contains_key(label) || self.failed.contains_key(label);
            if !tried && !new.iter().any(|s| s.server_label == *label) {
                new.push(server);
            }
        }
        let opened = futures::future::join_all(new.iter().map(|server| self.connect(server))).await;
        for (server, opened) in new.into_iter().zip(opened) {
            let label = server.server_label.clone();
            match opened {
                Ok(client) => _ = self.open.insert(label, client),
                Err(why) => _ = self.failed.insert(label, why),
            }
        }
        (servers.iter())
            .filter_map(|s| self.failed.get_key_value(&s.server_label))
            .map(|(label, why)| (label.clone(), why.clone()))
            .collect()
    }

    async fn connect(&self, server: &McpTool) -> Result<Client, String> {
        let label = &server.server_label;
        if !self.hosts.allows_url(&server.server_url) {
            return Err(format!("the host of MCP server `{label}` is not allowed"));
        }
        let mut headers = HashMap::new();
        for (name, value) in &server.headers {
            let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::try_from(value))
            else {
                return Err(format!("the header `{name}` of MCP server `{label}` is not valid"));
            };
            headers.insert(name, value);
        }
        let traceparent = telemetry::traceparent().and_then(|t| HeaderValue::try_from(t).ok());
        let http = McpHttp { http: self.http.clone(), traceparent };
        let config = StreamableHttpClientTransportConfig::with_uri(server.server_url.as_str())
            .custom_headers(headers);
        let transport = StreamableHttpClientTransport::with_client(http, config);
        let info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("agent-sessions", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
        match tokio::time::timeout(self.timeout, info.serve(transport)).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(error)) => Err(format!(
                "MCP server `{label}` could not be opened: {}",
                opening_failure(&error)
            )),
            Err(_) => Err(format!(
                "MCP server `{label}` did not answer within {} s",
                self.timeout.as_secs()
            )),
        }
    }

    /// The server's tools that the run may offer, every page of them (up to
    /// [`MAX_PAGES`]).
    pub async fn list(&self, server: &McpTool) -> Result<Vec<ListedTool>, String> {
        let label = &server.server_label;
        let client =
            self.open.get(label).ok_or_else(|| format!("MCP server `{label}` is not open"))?;
        let listed = tokio::time::timeout(self.timeout, async {
            let (mut tools, mut cursor) = (Vec::new(), None);
            for _ in 0..MAX_PAGES {
                let page = PaginatedRequestParams::default().with_cursor(cursor);
                let page = client.list_tools(Some(page)).await?;
                tools.extend(page.tools.into_iter().filter(|tool| server.allows(&tool.name)));
                cursor = page.next_cursor;
                if cursor.is_none() {
                    return Ok(Some(tools));
                }
            }
            Ok(None)
        })
        .await;
        let tools = match listed {
            Ok(Ok(Some(tools))) => tools,
            Ok(Ok(None)) => {
                return Err(format!(
                    "MCP server `{label}` lists more than {MAX_PAGES} pages of tools"
                ))
            }
            Ok(Err(error)) => return Err(failure(label, "could not list its tools", &error)),
            Err(_) => return Err(self.late(label, "list its tools")),
        };
        Ok(tools
            .into_iter()
            .map(|tool| {
                let mut listed = json!({"name": tool.name, "input_schema": *tool.input_schema});
                if let Some(description) = tool.description {
                    listed["description"] = description.into();
                }
                if let Some(annotations) = tool.annotations {
                    listed["annotations"] =
                        serde_json::to_value(annotations).unwrap_or(Value::Null);
                }
                listed
            })
            .collect())
    }

    /// Calls the server's tool `name`: its result as text, or why there is none.
    pub async fn call(
        &self, server: &McpTool, name: &str, arguments: &str,
    ) -> Result<String, String> {
        let label = &server.server_label;
        let client =
            self.open.get(label).ok_or_else(|| format!("MCP server `{label}` is not open"))?;
        let arguments = match serde_json::from_str(arguments) {
            Ok(Value::Object(arguments)) => arguments,
            Ok(Value::Null) | Err(_) if arguments.trim().is_empty() => Default::default(),
            _ => return Err(format!("the arguments of `{name}` are not a JSON object")),
        };
        let mut params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        if let Some(traceparent) = telemetry::traceparent() {
            params.set_traceparent(&traceparent);
        }
        // A call cut off by the timeout is cancelled at the server too (rmcp sends
        // `notifications/cancelled` when the call's future is dropped).
        let result = match tokio::time::timeout(self.timeout, client.call_tool(params)).await {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => {
                return Err(failure(label, &format!("could not call `{name}`"), &error))
            }
            Err(_) => return Err(self.late(label, &format!("answer `{name}`"))),
        };
        let text = result_text(&result);
        if text.len() > MAX_OUTPUT_BYTES {
            return Err(format!(
                "the result of `{name}` is {} bytes, over the {MAX_OUTPUT_BYTES} a tool's result may have",
                text.len()
            ));
        }
        match result.is_error {
            Some(true) => Err(text),
            _ => Ok(text),
        }
    }

    fn late(&self, label: &str, what: &str) -> String {
        format!("MCP server `{label}` did not {what} within {} s", self.timeout.as_secs())
    }
}

/// What a failed request says to the model, without the transport's internals.
fn failure(label: &str, what: &str, error: &ServiceError) -> String {
    let why = match error {
        ServiceError::McpError(error) => {
            format!("it answered error {}: {}", error.code.0, error.message)
        }
        ServiceError::TransportSend(sent) => transport_failure(&*sent.error),
        other => other.to_string(),
    };
    format!("MCP server `{label}` {what}: {why}")
}

fn opening_failure(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::TransportError { error, .. } => transport_failure(&*error.error),
        ClientInitializeError::JsonRpcError(error) => {
            format!("it answered error {}: {}", error.code.0, error.message)
        }
        other => other.to_string(),
    }
}

fn transport_failure(error: &(dyn std::error::Error + Send + Sync + 'static)) -> String {
    type HttpError = StreamableHttpError<reqwest::Error>;
    match error.downcast_ref::<HttpError>() {
        Some(StreamableHttpError::Client(error)) if error.is_connect() => {
            "it cannot be reached".to_owned()
        }
        Some(StreamableHttpError::Client(error)) if error.is_timeout() => {
            "it did not answer".to_owned()
        }
        // A URL may hold a secret (some servers take a token in their path): the
        // request's error is told without it.
        Some(StreamableHttpError::Client(error)) => {
            format!("the request failed: {}", clean(error))
        }
        Some(StreamableHttpError::HttpStatus(status)) => {
            format!("it answered HTTP {}", status.status)
        }
        Some(StreamableHttpError::SessionExpired) => "it forgot the session".to_owned(),
        Some(StreamableHttpError::UnexpectedServerResponse(text)) => {
            format!("its answer was not understood: {text}")
        }
        Some(StreamableHttpError::UnexpectedContentType(kind)) => {
            format!("it answered with content type {}", kind.as_deref().unwrap_or("none"))
        }
        _ => error.to_string(),
    }
}

/// A request's error without its URL.
fn clean(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    if let Some(url) = error.url() {
        text = text.replace(url.as_str(), "the server");
    }
    text
}

/// A tool's result as the text the model reads: its text blocks joined, anything else as
/// its JSON; the structured result when there is no content.
fn result_text(result: &CallToolResult) -> String {
    let blocks: Vec<String> = (result.content.iter())
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.clone(),
            other => serde_json::to_string(other).unwrap_or_default(),
        })
        .collect();
    if blocks.is_empty() {
        return result.structured_content.as_ref().map(Value::to_string).unwrap_or_default();
    }
    blocks.join("\n")
}
