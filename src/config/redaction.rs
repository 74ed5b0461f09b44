//! The configuration as logs may show it: the database password hidden.

use crate::secret::{Redaction, Secret};

/// A database URL, which keeps its password out of `Debug` output and so out of logs.
pub type DatabaseUrl = Secret<PasswordHidden>;

/// A URL without its password.
pub struct PasswordHidden;

impl Redaction for PasswordHidden {
    fn redact(url: &str) -> String {
        format!("{:?}", redact_password(url))
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
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
                None => format!("{scheme}://{userinfo}@{host}"),
            },
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
        // Without a password there is nothing to hide, and no `***` to suggest one.
        assert_eq!(redact_password("postgres://app@db/x"), "postgres://app@db/x");
    }
}
