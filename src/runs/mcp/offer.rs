//! The tools a run offers the model, by the names the model calls them: its function
//! tools under their own names, then the tools its MCP servers listed (in the order of
//! the servers, then of their lists), each under its own name when that is a valid
//! function name no earlier tool has, else as `<server_label>__<name>` (characters
//! outside `A-Za-z0-9_-` become `_`, cut to 64), numbered `_2`, `_3`, … if even that is
//! taken. The names follow from the run's configuration and its `mcp_list_tools` items
//! alone, so every execution of the run offers the same ones.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::llm::ToolSpec;
use crate::model::{McpTool, RunConfig};

/// The most tools one request may offer a model (OpenAI's limit).
pub const MAX_TOOLS: usize = 128;

pub struct Offer<'a> {
    pub specs: Vec<ToolSpec>,
    /// Offered name → (server, the server's name of the tool).
    mcp: HashMap<String, (&'a McpTool, String)>,
}

impl<'a> Offer<'a> {
    /// `listed`: what each server listed, by its label (`None`: it could not list).
    pub fn new(config: &'a RunConfig, listed: &[(String, Option<Vec<Value>>)]) -> Self {
        let mut specs: Vec<ToolSpec> = (config.functions())
            .map(|tool| ToolSpec {
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters: tool.parameters.clone(),
            })
            .collect();
        let mut taken: HashSet<String> = specs.iter().map(|spec| spec.name.clone()).collect();
        let mut mcp = HashMap::new();
        for server in config.mcp_servers() {
            let tools = listed.iter().find(|(label, _)| *label == server.server_label);
            for tool in tools.and_then(|(_, tools)| tools.as_ref()).into_iter().flatten() {
                let Some(name) = tool["name"].as_str().filter(|name| server.allows(name)) else {
                    continue;
                };
                let offered = unique(&mut taken, name, &server.server_label);
                specs.push(ToolSpec {
                    name: offered.clone(),
                    description: tool["description"].as_str().map(str::to_owned),
                    parameters: match &tool["input_schema"] {
                        schema @ Value::Object(_) => schema.clone(),
                        _ => serde_json::json!({"type": "object", "properties": {}}),
                    },
                });
                mcp.insert(offered, (server, name.to_owned()));
            }
        }
        Self { specs, mcp }
    }

    /// The server and its name of the tool the model called `offered`, if it is an MCP
    /// tool.
    pub fn mcp(&self, offered: &str) -> Option<(&'a McpTool, &str)> {
        self.mcp.get(offered).map(|(server, name)| (*server, name.as_str()))
    }

    /// Whether the run offers an MCP tool under another name than its server's.
    pub fn renames(&self) -> bool {
        self.mcp.iter().any(|(offered, (_, own))| offered != own)
    }

    /// Names the calls of MCP items (`mcp_call`, `mcp_approval_request`) as the model is
    /// offered their tools, so that what it reads of earlier calls, and the loop guard,
    /// name each tool as its calls do. A tool the run does not offer keeps its name.
    pub fn rename(&self, items: &mut [Value]) {
        for item in items {
            if !matches!(item["type"].as_str(), Some("mcp_call" | "mcp_approval_request")) {
                continue;
            }
            let (label, name) = (&item["server_label"], &item["name"]);
            let offered = (self.mcp.iter())
                .find(|(_, (server, own))| server.server_label == *label && own == name)
                .map(|(offered, _)| offered.clone());
            if let Some(offered) = offered {
                item["name"] = offered.into();
            }
        }
    }
}

/// Whether `name` is what a function may be called.
fn is_function_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn unique(taken: &mut HashSet<String>, name: &str, label: &str) -> String {
    let offered = if is_function_name(name) && !taken.contains(name) {
        name.to_owned()
    } else {
        let clean: String = format!("{label}__{name}")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
            .take(64)
            .collect();
        let mut candidate = clean.clone();
        let mut n = 2;
        while taken.contains(&candidate) {
            let suffix = format!("_{n}");
            candidate = format!("{}{suffix}", &clean[..clean.len().min(64 - suffix.len())]);
            n += 1;
        }
        candidate
    };
    taken.insert(offered.clone());
    offered
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(tools: Value) -> RunConfig {
        serde_json::from_value(serde_json::json!({
            "model": "m", "instructions": null, "temperature": null, "max_output_tokens": null,
            "tools": tools, "max_turns": 10, "max_input_tokens": null,
        }))
        .unwrap()
    }

    #[test]
    fn mcp_tools_keep_their_names_unless_taken() {
        let config = config(serde_json::json!([
            {"type": "function", "name": "add"},
            {"type": "mcp", "server_label": "calc", "server_url": "http://c/mcp", "allowed_tools": ["add", "sub", "x.y"]},
            {"type": "mcp", "server_label": "more", "server_url": "http://m/mcp"},
        ]));
        let tool =
            |name: &str| serde_json::json!({"name": name, "input_schema": {"type": "object"}});
        let listed = [
            ("calc".to_owned(), Some(vec![tool("add"), tool("sub"), tool("x.y"), tool("mul")])),
            ("more".to_owned(), Some(vec![tool("sub")])),
        ];
        let offer = Offer::new(&config, &listed);
        let names: Vec<&str> = offer.specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["add", "calc__add", "sub", "calc__x_y", "more__sub"]);
        assert_eq!(
            offer.mcp("calc__add").map(|(s, n)| (s.server_label.as_str(), n)),
            Some(("calc", "add"))
        );
        assert_eq!(offer.mcp("calc__x_y").map(|(_, n)| n), Some("x.y"));
        assert!(offer.mcp("add").is_none(), "the function keeps its name");
        assert!(offer.mcp("mul").is_none(), "not allowed");
        let mut items = [
            serde_json::json!({"type": "mcp_call", "server_label": "calc", "name": "add"}),
            serde_json::json!({"type": "mcp_call", "server_label": "gone", "name": "add"}),
            serde_json::json!({"type": "function_call", "name": "add"}),
        ];
        offer.rename(&mut items);
        let named: Vec<&str> = items.iter().map(|i| i["name"].as_str().unwrap()).collect();
        assert_eq!(named, ["calc__add", "add", "add"], "as offered, where offered");
        let again = Offer::new(&config, &listed);
        assert_eq!(
            again.specs.iter().map(|s| &s.name).collect::<Vec<_>>(),
            names,
            "the same every time"
        );
    }
}
