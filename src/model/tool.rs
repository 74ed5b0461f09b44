//! Tools an agent offers the model: functions (answered by a webhook or by the client)
//! and MCP servers, whose tools the service lists and calls.

use std::collections::BTreeMap;

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use super::field::{check_function_name, InvalidField};
use super::mcp_tool::McpTool;
use super::outbound::{self, WebhookPolicy};
use super::whole_number;

const DEFAULT_WEBHOOK_TIMEOUT_MS: u64 = 10_000;
const MAX_WEBHOOK_TIMEOUT_MS: u64 = 300_000;

/// A tool, by its `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Tool {
    Function(FunctionTool),
    Mcp(McpTool),
}

/// A function the model may call. With a `webhook` the service calls it; without, the
/// run pauses as `requires_action` and the client answers with the tool's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FunctionTool {
    /// 1 to 64 characters of `A-Za-z0-9_-`, unique within the agent.
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema object describing the arguments.
    #[serde(default = "empty_parameters")]
    #[schema(value_type = Object)]
    pub parameters: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<Webhook>,
    /// `always`: a person approves each call of this webhook tool before it runs (the
    /// run pauses with `required_action.type` `approve_tool_calls`).
    #[serde(default, skip_serializing_if = "RequireApproval::is_never")]
    pub require_approval: RequireApproval,
}

/// Whether a server-side tool's calls wait for a person's approval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RequireApproval {
    Always,
    #[default]
    Never,
}

impl RequireApproval {
    fn is_never(&self) -> bool {
        *self == Self::Never
    }
}

/// One of the kinds, each a component that says its `type` (as serde's tag: a tag added
/// by `allOf` would be an unknown field of the kind's closed object).
impl PartialSchema for Tool {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(Ref::from_schema_name(FunctionTool::name()))
            .item(Ref::from_schema_name(McpTool::name()))
            .description(Some("A tool, by its `type`: a function, or an MCP server."))
            .into()
    }
}

impl ToSchema for Tool {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        fn tagged(schema: RefOr<Schema>, kind: &str) -> RefOr<Schema> {
            let RefOr::T(Schema::Object(mut object)) = schema else {
                unreachable!("a tool kind's schema is an object")
            };
            let tag = ObjectBuilder::new().schema_type(Type::String).enum_values(Some([kind]));
            object.properties.insert("type".to_owned(), tag.into());
            object.required.insert(0, "type".to_owned());
            RefOr::T(Schema::Object(object))
        }
        schemas.push((FunctionTool::name().into(), tagged(FunctionTool::schema(), "function")));
        schemas.push((McpTool::name().into(), tagged(McpTool::schema(), "mcp")));
        FunctionTool::schemas(schemas);
        McpTool::schemas(schemas);
    }
}

/// Read by its `type`, so that an error inside a tool still names its field
/// (`tools[0]: webhook.timeout_ms: …`): serde's own tagged enums lose the path.
impl<'de> Deserialize<'de> for Tool {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        fn read<T: DeserializeOwned, E: serde::de::Error>(fields: Value) -> Result<T, E> {
            serde_path_to_error::deserialize(fields).map_err(|error| {
                match error.path().to_string() {
                    path if path == "." => E::custom(error.into_inner()),
                    path => E::custom(format!("{path}: {}", error.into_inner())),
                }
            })
        }
        let Value::Object(mut fields) = Value::deserialize(deserializer)? else {
            return Err(D::Error::custom("a tool must be an object"));
        };
        match fields.remove("type") {
            Some(Value::String(kind)) if kind == "function" => {
                read(Value::Object(fields)).map(Tool::Function)
            }
            Some(Value::String(kind)) if kind == "mcp" => {
                read(Value::Object(fields)).map(Tool::Mcp)
            }
            Some(other) => {
                Err(D::Error::custom(format!("type: must be `function` or `mcp`, got {other}")))
            }
            None => Err(D::Error::missing_field("type")),
        }
    }
}

impl Tool {
    /// The tool as answers show it: header values replaced by [`outbound::REDACTED`].
    pub fn redacted(mut self) -> Self {
        match &mut self {
            Tool::Function(FunctionTool { webhook: Some(webhook), .. }) => {
                outbound::redact(&mut webhook.headers)
            }
            Tool::Mcp(mcp) => outbound::redact(&mut mcp.headers),
            Tool::Function(_) => {}
        }
        self
    }

    /// Puts back the stored value of every header sent as redacted, taken from the stored
    /// tool of the same name (a function) or server label (an MCP server); a redacted
    /// header with no stored value is refused.
    pub fn restore_redacted(&mut self, stored: &[Tool], at: &str) -> Result<(), InvalidField> {
        match self {
            Tool::Function(FunctionTool { name, webhook: Some(webhook), .. }) => {
                let previous = stored.iter().find_map(|tool| match tool {
                    Tool::Function(f) if f.name == *name => f.webhook.as_ref(),
                    _ => None,
                });
                let previous = previous.map(|webhook| &webhook.headers);
                outbound::restore(&mut webhook.headers, previous, &format!("{at}.webhook.headers"))
            }
            Tool::Mcp(mcp) => {
                let previous = stored.iter().find_map(|tool| match tool {
                    Tool::Mcp(m) if m.server_label == mcp.server_label => Some(&m.headers),
                    _ => None,
                });
                outbound::restore(&mut mcp.headers, previous, &format!("{at}.headers"))
            }
            Tool::Function(_) => Ok(()),
        }
    }

    /// What the tool is known by within an agent: a function's name, a server's label.
    pub fn key(&self) -> (&'static str, &str) {
        match self {
            Tool::Function(function) => ("name", &function.name),
            Tool::Mcp(mcp) => ("server_label", &mcp.server_label),
        }
    }

    pub(super) fn validate(&self, at: &str, policy: &WebhookPolicy) -> Result<(), InvalidField> {
        match self {
            Tool::Function(function) => function.validate(at, policy),
            Tool::Mcp(mcp) => mcp.validate(at, policy),
        }
    }
}

fn empty_parameters() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// Where the service POSTs `{call_id, name, arguments, session_id, run_id}`; the
/// response body becomes the tool's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// `http` or `https`, on a host listed in `TOOL_WEBHOOK_ALLOWED_HOSTS`.
    #[schema(pattern = "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#]")]
    pub url: String,
    #[serde(default = "default_webhook_timeout", deserialize_with = "whole_number::required")]
    #[schema(minimum = 1, maximum = 300000, default = 10000)]
    pub timeout_ms: u64,
    /// Sent with every call, e.g. an `Authorization` the webhook expects. Answers show
    /// each value as `[REDACTED]`; a PATCH that sends `[REDACTED]` keeps the stored value.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

fn default_webhook_timeout() -> u64 {
    DEFAULT_WEBHOOK_TIMEOUT_MS
}

impl FunctionTool {
    fn validate(&self, at: &str, policy: &WebhookPolicy) -> Result<(), InvalidField> {
        check_function_name(&format!("{at}.name"), &self.name)?;
        if !self.parameters.is_object() {
            return Err(InvalidField::new(
                format!("{at}.parameters"),
                "must be a JSON Schema object",
            ));
        }
        if let Some(webhook) = &self.webhook {
            webhook.validate(&format!("{at}.webhook"), policy)?;
        } else if self.require_approval == RequireApproval::Always {
            return Err(InvalidField::new(
                format!("{at}.require_approval"),
                "applies only to a tool with a webhook: the client runs the others",
            ));
        }
        Ok(())
    }
}

impl Webhook {
    fn validate(&self, at: &str, policy: &WebhookPolicy) -> Result<(), InvalidField> {
        policy.check_url(&format!("{at}.url"), &self.url, "webhook", "tools")?;
        if !(1..=MAX_WEBHOOK_TIMEOUT_MS).contains(&self.timeout_ms) {
            return Err(InvalidField::new(
                format!("{at}.timeout_ms"),
                format!("must be between 1 and {MAX_WEBHOOK_TIMEOUT_MS}"),
            ));
        }
        outbound::check_headers(&format!("{at}.headers"), &self.headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_read_by_their_type_and_name_the_field_at_fault() {
        let read = |json: Value| serde_json::from_value::<Vec<Tool>>(json);
        let tools = read(serde_json::json!([
            {"type": "function", "name": "f"},
            {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example/mcp"},
        ]))
        .unwrap();
        assert!(matches!(&tools[0], Tool::Function(f) if f.name == "f"));
        assert!(matches!(&tools[1], Tool::Mcp(m) if m.server_label == "docs"));
        let wrong = read(
            serde_json::json!([{"type": "function", "name": "f", "webhook": {"url": "x", "timeout_ms": "soon"}}]),
        );
        assert!(wrong.unwrap_err().to_string().starts_with("webhook.timeout_ms: invalid type"));
        let unknown = read(serde_json::json!([{"type": "web_search"}]));
        assert!(unknown.unwrap_err().to_string().starts_with("type: must be `function` or `mcp`"));
        let round_trip = serde_json::to_value(&tools).unwrap();
        assert_eq!(round_trip[0]["type"], "function");
        assert_eq!(read(round_trip).unwrap(), tools);
    }
}
