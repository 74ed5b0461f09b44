//! The configuration as logs may show it: every secret hidden.

use std::fmt;

use super::Config;

/// Hides the database password, which must never reach a log.
impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("listen_addr", &self.listen_addr)
            .field("database", &redact_password(self.database_url()))
            .field("database_max_connections", &self.database_max_connections)
            .field("log_format", &self.log_format)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("request_timeout_secs", &self.request_timeout_secs)
            .field("cors_allowed_origins", &self.cors_allowed_origins)
            .field("llm_base_url", &self.llm_base_url)
            .field("llm_api_key", &self.llm_api_key.as_ref().map(|_| "***"))
            .field("llm_model", &self.llm_model)
            .field("llm_max_retries", &self.llm_max_retries)
            .field("llm_idle_timeout_secs", &self.llm_idle_timeout_secs)
            .field("llm_timeout_secs", &self.llm_timeout_secs)
            .field("run_workers", &self.run_workers)
            .field("run_lease_secs", &self.run_lease_secs)
            .field("run_max_attempts", &self.run_max_attempts)
            .field("run_wait_secs", &self.run_wait_secs)
            .field("tool_webhook_allowed_hosts", &self.tool_webhook_allowed_hosts)
            .field("admin_api_key", &self.admin_api_key.as_ref().map(|_| "***"))
            .field("allow_unauthenticated", &self.allow_unauthenticated)
            .field("auth_cache_secs", &self.auth_cache_secs)
            .field("rate_limit_per_key", &self.rate_limit_per_key)
            .field("tenant_max_active_runs", &self.tenant_max_active_runs)
            .field("session_expires_after_secs", &self.session_expires_after_secs)
            .field("sweep_interval_secs", &self.sweep_interval_secs)
            .field("key_census_interval_secs", &self.key_census_interval_secs)
            .field("encryption_keys", &self.encryption_keys.as_ref().map(|_| "***"))
            .finish()
    }
}

/// The database of `url` for people: the SQLite file, or the Postgres URL without its
/// password.
pub fn describe_database(url: &str) -> String {
    match url.strip_prefix("sqlite:") {
        Some(path) => format!("SQLite file {}", path.trim_start_matches("//")),
        None => redact_password(url),
    }
}

/// Hides the password of a URL, given before the host or as a `password=` parameter.
fn redact_password(url: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let mut redacted = match base.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((userinfo, host)) => {
                let user = userinfo.split(':').next().unwrap_or_default();
                format!("{scheme}://{user}:***@{host}")
            }
            None => base.to_owned(),
        },
        None => base.to_owned(),
    };
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|param| match param.split_once('=') {
                Some((name, _)) if name.eq_ignore_ascii_case("password") => format!("{name}=***"),
                _ => param.to_owned(),
            })
            .collect();
        redacted.push('?');
        redacted.push_str(&params.join("&"));
    }
    redacted
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::config::Cli;

    #[test]
    fn passwords_never_reach_debug_output() {
        let cli = Cli::parse_from([
            "agent-sessions",
            "--database-url",
            "postgres://app:s3cret@db:5432/x",
        ]);
        let printed = format!("{:?}", cli.config);
        assert!(!printed.contains("s3cret"), "{printed}");
        assert!(printed.contains("postgres://app:***@db:5432/x"), "{printed}");
        let in_query = redact_password("postgres://db/x?user=app&password=s3cret&sslmode=require");
        assert_eq!(in_query, "postgres://db/x?user=app&password=***&sslmode=require");
    }
}
