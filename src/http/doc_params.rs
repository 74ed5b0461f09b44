//! Optional parameters as the OpenAPI document lists them, for the extractors that
//! describe themselves (headers, queries).

use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::Schema;
use utoipa::openapi::{RefOr, Required};

/// An optional query parameter.
pub fn query_param(name: &str, schema: impl Into<RefOr<Schema>>, description: &str) -> Parameter {
    optional(ParameterIn::Query, name, schema, description)
}

/// An optional header.
pub fn header_param(name: &str, schema: impl Into<RefOr<Schema>>, description: &str) -> Parameter {
    optional(ParameterIn::Header, name, schema, description)
}

fn optional(
    place: ParameterIn, name: &str, schema: impl Into<RefOr<Schema>>, description: &str,
) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(place)
        .required(Required::False)
        .schema(Some(schema))
        .description(Some(description))
        .build()
}
