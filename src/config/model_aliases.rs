//! `MODEL_ALIASES`: OpenAI clients hard-code OpenAI's model names; the aliases send each
//! to a model the upstream LLM serves.

/// `requested=upstream` pairs, and the upstream model of every other name (`*`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelAliases {
    aliases: Vec<(String, String)>,
    fallback: Option<String>,
}

impl ModelAliases {
    /// Parses `gpt-4.1=qwen2.5:7b,gpt-4o-mini=llama3.2,*=llama3.2`; empty is no alias.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parsed = Self::default();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (requested, upstream) = entry
                .split_once('=')
                .map(|(r, u)| (r.trim(), u.trim()))
                .filter(|(r, u)| !r.is_empty() && !u.is_empty())
                .ok_or_else(|| format!("`{entry}` is not `requested=upstream`"))?;
            let taken = requested == "*" && parsed.fallback.is_some()
                || parsed.aliases.iter().any(|(known, _)| known == requested);
            if taken {
                return Err(format!("`{requested}` is given twice"));
            }
            if requested == "*" {
                parsed.fallback = Some(upstream.to_owned());
            } else {
                parsed.aliases.push((requested.to_owned(), upstream.to_owned()));
            }
        }
        Ok(parsed)
    }

    /// The model to send upstream for `requested`.
    pub fn resolve<'a>(&'a self, requested: &'a str) -> &'a str {
        self.aliases
            .iter()
            .find(|(name, _)| name == requested)
            .map(|(_, upstream)| upstream.as_str())
            .or(self.fallback.as_deref())
            .unwrap_or(requested)
    }

    /// The requested names that have an alias, in the order given.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.aliases.iter().map(|(name, _)| name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_to_their_alias_then_the_fallback_then_themselves() {
        let aliases = ModelAliases::parse("gpt-4.1=qwen2.5:7b, *=llama3.2").unwrap();
        assert_eq!(aliases.resolve("gpt-4.1"), "qwen2.5:7b");
        assert_eq!(aliases.resolve("o3"), "llama3.2");
        assert_eq!(ModelAliases::parse("").unwrap().resolve("o3"), "o3");
        assert_eq!(aliases.names().collect::<Vec<_>>(), ["gpt-4.1"]);
        assert!(ModelAliases::parse("gpt-4.1").is_err());
        assert!(ModelAliases::parse("a=b,a=c").is_err());
        assert!(ModelAliases::parse("*=b,*=c").is_err());
    }
}
