-- API keys of the tenants. The key itself is never stored: only its SHA-256, which a
-- request's key is looked up by.

create table api_keys (
    pk           bigint generated always as identity primary key,
    id           uuid        not null unique,
    tenant_id    text        not null,
    name         text        not null,
    prefix       text        not null,
    key_hash     text        not null unique,
    -- Space-separated: "read" or "read write".
    scopes       text        not null,
    created_at   timestamptz not null,
    expires_at   timestamptz,
    last_used_at timestamptz
);

create index api_keys_listing_idx on api_keys (created_at, pk);
