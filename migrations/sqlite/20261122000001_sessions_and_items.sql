-- Sessions and their items. Every row carries its tenant; every query filters by it.
-- Timestamps are microseconds since the Unix epoch, so they sort as numbers.

create table sessions (
    -- Insertion order: breaks ties between equal created_at values in listings.
    pk            integer primary key,
    tenant_id     text    not null,
    id            text    not null,
    created_at    integer not null,
    updated_at    integer not null,
    metadata      text    not null default '{}',
    agent_id      text,
    item_count    integer not null default 0,
    -- The highest seq ever given out in this session; seqs are never reused.
    last_seq      integer not null default 0,
    input_tokens  integer not null default 0,
    output_tokens integer not null default 0,
    total_tokens  integer not null default 0,
    llm_calls     integer not null default 0,
    constraint sessions_tenant_id_key unique (tenant_id, id)
);

create index sessions_listing_idx on sessions (tenant_id, created_at, pk);

create table items (
    id         blob    primary key,
    tenant_id  text    not null,
    session_pk integer not null references sessions (pk) on delete cascade,
    seq        integer not null,
    created_at integer not null,
    run_id     blob,
    -- The client's JSON text, kept verbatim so it reads back exactly as given.
    body       text    not null,
    constraint items_session_seq_key unique (session_pk, seq)
);

-- Responses to appends made with an Idempotency-Key, kept for 24 hours.
create table idempotency_keys (
    tenant_id   text    not null,
    key         text    not null,
    fingerprint blob    not null,
    response    text,
    created_at  integer not null,
    constraint idempotency_keys_pkey primary key (tenant_id, key)
);

create index idempotency_keys_created_at_idx on idempotency_keys (created_at);
