//! MCP servers as tools (OpenAI's `{type: "mcp"}` shape): the service is the MCP client,
//! lists the server's tools at the start of a run and calls them for the model.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::field::{check_function_name, InvalidField};
use super::outbound::{self, WebhookPolicy};

/// An MCP server whose tools the model may call, over the Streamable HTTP transport.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct McpTool {
    /// 1 to 64 characters of `A-Za-z0-9_-`, unique within the agent: names the server in
    /// its items (`mcp_list_tools`, `mcp_call`).
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub server_label: String,
    /// The server's Streamable HTTP endpoint: `http` or `https`, on a host listed in
    /// `TOOL_WEBHOOK_ALLOWED_HOSTS`.
    #[schema(pattern = "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#]")]
    pub server_url: String,
    /// Only these of the server's tools are offered to the model: a list of names, or
    /// `{tool_names}`. Absent: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<AllowedTools>,
    /// Which calls wait for a person's approval: `always`, `never` (the default), or
    /// `{never: {tool_names}}` (those run at once, the others wait).
    #[serde(default, skip_serializing_if = "McpApproval::is_never")]
    pub require_approval: McpApproval,
    /// Sent with every request to the server, e.g. an `Authorization` it expects. Answers
    /// show each value as `[REDACTED]`; a PATCH that sends `[REDACTED]` keeps the stored
    /// value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// The tools of a server the model may call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum AllowedTools {
    Names(Vec<String>),
    Filter(ToolNames),
}

/// A list of tool names, as OpenAI's filters give it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolNames {
    pub tool_names: Vec<String>,
}

/// Which of a server's calls wait for a person's approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum McpApproval {
    Every(ApprovalMode),
    /// `{never: {tool_names}}`: these tools run at once; every other call waits.
    Except {
        never: ToolNames,
    },
}

impl Default for McpApproval {
    fn default() -> Self {
        Self::Every(ApprovalMode::Never)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    Always,
    Never,
}

impl McpApproval {
    fn is_never(&self) -> bool {
        *self == Self::default()
    }

    /// Whether a call of the server's tool `name` waits for approval.
    pub fn requires(&self, name: &str) -> bool {
        match self {
            Self::Every(ApprovalMode::Never) => false,
            Self::Every(ApprovalMode::Always) => true,
            Self::Except { never } => !never.tool_names.iter().any(|n| n == name),
        }
    }
}

impl McpTool {
    /// Whether the model may be offered the server's tool `name`.
    pub fn allows(&self, name: &str) -> bool {
        match &self.allowed_tools {
            None => true,
            Some(
                AllowedTools::Names(names) | AllowedTools::Filter(ToolNames { tool_names: names }),
            ) => names.iter().any(|n| n == name),
        }
    }

    pub(super) fn validate(&self, at: &str, policy: &WebhookPolicy) -> Result<(), InvalidField> {
        check_function_name(&format!("{at}.server_label"), &self.server_label)?;
        policy.check_url(
            &format!("{at}.server_url"),
            &self.server_url,
            "MCP server",
            "the service",
        )?;
        outbound::check_headers(&format!("{at}.headers"), &self.headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(json: serde_json::Value) -> McpTool {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn approvals_and_filters_read_as_openai_writes_them() {
        let base = serde_json::json!({"server_label": "s", "server_url": "http://h/mcp"});
        let with = |key: &str, value: serde_json::Value| {
            let mut json = base.clone();
            json[key] = value;
            tool(json)
        };
        assert!(!tool(base.clone()).require_approval.requires("add"));
        assert!(with("require_approval", "always".into()).require_approval.requires("add"));
        assert!(!with("require_approval", "never".into()).require_approval.requires("add"));
        let except =
            with("require_approval", serde_json::json!({"never": {"tool_names": ["add"]}}));
        assert!(!except.require_approval.requires("add"));
        assert!(except.require_approval.requires("drop_table"));
        assert!(with("allowed_tools", serde_json::json!(["add"])).allows("add"));
        assert!(!with("allowed_tools", serde_json::json!({"tool_names": ["add"]})).allows("sub"));
        assert!(tool(base.clone()).allows("anything"));
        let shown = serde_json::to_value(with("require_approval", "never".into())).unwrap();
        assert!(shown.get("require_approval").is_none() && shown.get("headers").is_none());
    }
}
