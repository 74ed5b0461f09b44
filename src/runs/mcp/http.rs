//! The MCP client's HTTP side (rmcp's `StreamableHttpClient`) over the service's own
//! reqwest client, so that rmcp is built without its reqwest feature and the service's
//! rules apply to MCP servers as to webhooks: no redirects past the allow-list, bounded
//! answers, the run's trace context on every request.
//!
//! rmcp drives the protocol (initialise, session ids, re-initialising on a 404, SSE or
//! JSON answers, cancellation); this only moves one message per HTTP request.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use reqwest::header::{self, HeaderName, HeaderValue};
use reqwest::StatusCode;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    HttpStatusError, SseError, StreamableHttpClient, StreamableHttpError,
    StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};

const SESSION_ID: &str = "mcp-session-id";
const TRACEPARENT: &str = "traceparent";

/// The most bytes one answer of a server may have. Tool results over
/// [`super::MAX_OUTPUT_BYTES`] are refused after they are read; this bounds what is read
/// (a list of a thousand tools is a few hundred KiB).
pub const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// HTTP for one MCP server.
#[derive(Clone)]
pub struct McpHttp {
    pub http: reqwest::Client,
    /// The trace context of requests whose message carries none of its own (SEP-414's
    /// `params._meta.traceparent`, which a tool call sets).
    pub traceparent: Option<HeaderValue>,
}

type Error = StreamableHttpError<reqwest::Error>;

/// Why a body was not read whole.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    #[error("the server's answer is over {MAX_ANSWER_BYTES} bytes")]
    TooLarge,
}

fn media_is(content_type: Option<&HeaderValue>, wanted: &str) -> bool {
    content_type
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|value| value.trim().eq_ignore_ascii_case(wanted))
}

/// The body's bytes, failing once they pass [`MAX_ANSWER_BYTES`].
fn limited(response: reqwest::Response) -> impl Stream<Item = Result<bytes::Bytes, BodyError>> {
    let mut read = 0;
    response.bytes_stream().map_err(BodyError::from).and_then(move |chunk| {
        read += chunk.len();
        futures::future::ready(if read > MAX_ANSWER_BYTES {
            Err(BodyError::TooLarge)
        } else {
            Ok(chunk)
        })
    })
}

async fn read_body(response: reqwest::Response) -> Result<Vec<u8>, Error> {
    let chunks: Vec<bytes::Bytes> =
        limited(response).try_collect().await.map_err(|error| match error {
            BodyError::Http(error) => StreamableHttpError::Client(error),
            too_large => {
                StreamableHttpError::UnexpectedServerResponse(Cow::Owned(too_large.to_string()))
            }
        })?;
    Ok(chunks.concat())
}

fn sse(response: reqwest::Response) -> BoxStream<'static, Result<Sse, SseError>> {
    SseStream::from_bytes_stream(limited(response)).boxed()
}

impl McpHttp {
    /// A request with the configured headers, the session and one `traceparent`.
    fn request(
        &self, builder: reqwest::RequestBuilder, traceparent: Option<&HeaderValue>,
        session_id: Option<&str>, auth: Option<String>, custom: HashMap<HeaderName, HeaderValue>,
    ) -> reqwest::RequestBuilder {
        let traceparent = traceparent.or(self.traceparent.as_ref());
        let mut builder = builder;
        for (name, value) in custom {
            // The call's own context, in place of any the configured headers name.
            if !(traceparent.is_some() && name.as_str() == TRACEPARENT) {
                builder = builder.header(name, value);
            }
        }
        if let Some(token) = auth {
            builder = builder.bearer_auth(token);
        }
        if let Some(session_id) = session_id {
            builder = builder.header(SESSION_ID, session_id);
        }
        if let Some(traceparent) = traceparent {
            builder = builder.header(TRACEPARENT, traceparent.clone());
        }
        builder
    }
}

impl StreamableHttpClient for McpHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self, uri: Arc<str>, message: ClientJsonRpcMessage, session_id: Option<Arc<str>>,
        auth: Option<String>, custom: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let body = serde_json::to_value(&message)?;
        let own_context = (body.pointer("/params/_meta/traceparent"))
            .and_then(|value| value.as_str())
            .and_then(|value| HeaderValue::from_str(value).ok());
        let post = self
            .http
            .post(uri.as_ref())
            .header(header::ACCEPT, "application/json, text/event-stream");
        let post = self.request(post, own_context.as_ref(), session_id.as_deref(), auth, custom);
        let response = post.json(&body).send().await.map_err(StreamableHttpError::Client)?;
        let status = response.status();
        let expects_answer = matches!(message, ClientJsonRpcMessage::Request(_));
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            // The server forgot the session: rmcp initialises a new one and sends again.
            return Err(StreamableHttpError::SessionExpired);
        }
        let new_session = (response.headers().get(SESSION_ID))
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
        if !status.is_success() {
            let retry_after = (response.headers().get(header::RETRY_AFTER))
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let body = read_body(response).await.unwrap_or_default();
            // A JSON-RPC error says more than its status.
            if let Ok(error @ ServerJsonRpcMessage::Error(_)) = serde_json::from_slice(&body) {
                return Ok(StreamableHttpPostResponse::Json(error, new_session));
            }
            if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
                return Err(HttpStatusError::new(status.as_u16(), retry_after).into());
            }
            let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
                "HTTP {status}: {text}"
            ))));
        }
        if media_is(content_type.as_ref(), "text/event-stream") {
            return Ok(StreamableHttpPostResponse::Sse(sse(response), new_session));
        }
        if media_is(content_type.as_ref(), "application/json") {
            let body = read_body(response).await?;
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(answer) => Ok(StreamableHttpPostResponse::Json(answer, new_session)),
                Err(_) if !expects_answer => Ok(StreamableHttpPostResponse::Accepted),
                Err(error) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                    format!("not a JSON-RPC answer: {error}"),
                ))),
            };
        }
        if !expects_answer {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        let shown =
            content_type.map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
        Err(StreamableHttpError::UnexpectedContentType(shown))
    }

    async fn delete_session(
        &self, uri: Arc<str>, session_id: Arc<str>, auth: Option<String>,
        custom: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        let delete =
            self.request(self.http.delete(uri.as_ref()), None, Some(&session_id), auth, custom);
        let response = delete.send().await.map_err(StreamableHttpError::Client)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportDeleteSession);
        }
        response.error_for_status().map_err(StreamableHttpError::Client)?;
        Ok(())
    }

    /// Only the resumption of a POST's stream: the standing stream of messages the server
    /// starts itself (progress, log lines) is not opened, as tool calls do not need it
    /// and it would hold a connection per server for the whole run.
    async fn get_stream(
        &self, uri: Arc<str>, session_id: Option<Arc<str>>, last_event_id: Option<String>,
        auth: Option<String>, custom: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let Some(last_event_id) = last_event_id else {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        };
        let get = self.http.get(uri.as_ref()).header(header::ACCEPT, "text/event-stream");
        let get = self.request(get, None, session_id.as_deref(), auth, custom);
        let response = get
            .header("last-event-id", last_event_id)
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        let response = response.error_for_status().map_err(StreamableHttpError::Client)?;
        let content_type = response.headers().get(header::CONTENT_TYPE);
        if !media_is(content_type, "text/event-stream") {
            let shown =
                content_type.map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
            return Err(StreamableHttpError::UnexpectedContentType(shown));
        }
        Ok(sse(response))
    }
}
