//! Query parameters are checked against the OpenAPI document: a parameter an operation
//! does not declare, or a declared one given twice, is refused rather than ignored, so a
//! mistyped filter never silently returns everything. An array parameter is given once
//! per element.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::path::{ParameterIn, ParameterStyle};
use utoipa::openapi::schema::Schema;
use utoipa::openapi::RefOr;
use utoipa::OpenApi;

use super::error::ApiError;
use super::openapi::ApiDoc;

/// The query parameters one operation declares.
#[derive(Default)]
struct Declared {
    names: HashSet<String>,
    /// Array parameters, given as `name=a&name=b` or `name[]=a&name[]=b`.
    arrays: HashSet<String>,
    /// `deepObject` parameters, given as `name[key]=value`.
    objects: HashSet<String>,
}

impl Declared {
    fn allows(&self, name: &str) -> bool {
        self.names.contains(name)
            || self.is_array(name)
            || name
                .split_once('[')
                .is_some_and(|(object, rest)| rest.ends_with(']') && self.objects.contains(object))
    }

    /// Whether `name` is an element of an array parameter, which may come again.
    fn is_array(&self, name: &str) -> bool {
        // `name[]=value` is how OpenAI's clients send an array's elements.
        self.arrays.contains(name.strip_suffix("[]").unwrap_or(name))
    }
}

type Operations = HashMap<(Method, String), Declared>;

fn operations() -> &'static Operations {
    static OPERATIONS: OnceLock<Operations> = OnceLock::new();
    OPERATIONS.get_or_init(|| {
        let mut operations = Operations::new();
        for (path, item) in ApiDoc::openapi().paths.paths {
            let methods = [
                (Method::GET, item.get),
                (Method::POST, item.post),
                (Method::PUT, item.put),
                (Method::PATCH, item.patch),
                (Method::DELETE, item.delete),
            ];
            for (method, operation) in methods {
                let Some(operation) = operation else { continue };
                let mut declared = Declared::default();
                for parameter in operation.parameters.into_iter().flatten() {
                    if !matches!(parameter.parameter_in, ParameterIn::Query) {
                        continue;
                    }
                    if matches!(parameter.style, Some(ParameterStyle::DeepObject)) {
                        declared.objects.insert(parameter.name);
                    } else if matches!(parameter.schema, Some(RefOr::T(Schema::Array(_)))) {
                        declared.arrays.insert(parameter.name);
                    } else {
                        declared.names.insert(parameter.name);
                    }
                }
                operations.insert((method, path.clone()), declared);
            }
        }
        operations
    })
}

/// Refuses unknown and repeated query parameters of the operations in the document.
pub async fn check(matched: Option<MatchedPath>, request: Request, next: Next) -> Response {
    let declared = matched.and_then(|path| {
        let method = match *request.method() {
            Method::HEAD => Method::GET,
            ref method => method.clone(),
        };
        operations().get(&(method, path.as_str().to_owned()))
    });
    if let (Some(declared), Some(query)) = (declared, request.uri().query()) {
        if let Err(error) = check_query(declared, query) {
            return error.into_response();
        }
    }
    next.run(request).await
}

fn check_query(declared: &Declared, query: &str) -> Result<(), ApiError> {
    let mut seen = HashSet::new();
    for (name, _) in form_urlencoded::parse(query.as_bytes()) {
        if !declared.allows(&name) {
            return Err(ApiError::invalid(&name, "is not a query parameter of this operation"));
        }
        if !declared.is_array(&name) && !seen.insert(name.clone()) {
            return Err(ApiError::invalid(&name, "may be given only once"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing() -> Declared {
        Declared {
            names: HashSet::from(["limit".to_owned(), "order".to_owned()]),
            arrays: HashSet::from(["include".to_owned()]),
            objects: HashSet::from(["metadata".to_owned()]),
        }
    }

    #[test]
    fn unknown_and_repeated_parameters_are_named() {
        let declared = listing();
        assert!(check_query(&declared, "limit=2&metadata[user]=a&metadata[team]=b").is_ok());
        assert!(check_query(&declared, "include=a&include=b&include[]=c").is_ok());
        let refused = |query| match check_query(&declared, query) {
            Err(error @ ApiError::InvalidRequest { .. }) => error.to_string(),
            other => panic!("{query}: {other:?}"),
        };
        assert!(refused("user=alice").starts_with("user: "));
        assert!(refused("metadata.user=alice").starts_with("metadata.user: "));
        assert!(refused("limit=2&limit=3").starts_with("limit: may be given only once"));
        assert!(refused("metadata[u]=a&metadata[u]=b").starts_with("metadata[u]: "));
        assert!(refused("metadata=x").starts_with("metadata: "));
        assert!(refused("limit[]=2").starts_with("limit[]: "));
    }
}
