-- Sessions and their items. Every row carries its tenant; every query filters by it.

create table sessions (
    -- Insertion order: breaks ties between equal created_at values in listings.
    pk            bigint generated always as identity primary key,
    tenant_id     text        not null,
    id            text        not null,
    created_at    timestamptz not null,
    updated_at    timestamptz not null,
    metadata      jsonb       not null default '{}',
    agent_id      text,
    item_count    bigint      not null default 0,
    -- The highest seq ever given out in this session; seqs are never reused.
    last_seq      bigint      not null default 0,
    input_tokens  bigint      not null default 0,
    output_tokens bigint      not null default 0,
    total_tokens  bigint      not null default 0,
    llm_calls     bigint      not null default 0,
    constraint sessions_tenant_id_key unique (tenant_id, id)
);

create index sessions_listing_idx on sessions (tenant_id, created_at, pk);
create index sessions_metadata_idx on sessions using gin (metadata jsonb_path_ops);

create table items (
    id         uuid        primary key,
    tenant_id  text        not null,
    session_pk bigint      not null references sessions (pk) on delete cascade,
    seq        bigint      not null,
    created_at timestamptz not null,
    run_id     uuid,
    -- The client's JSON text, kept verbatim so it reads back exactly as given.
    body       text        not null,
    constraint items_session_seq_key unique (session_pk, seq)
);

-- Responses to appends made with an Idempotency-Key, kept for 24 hours.
create table idempotency_keys (
    tenant_id   text        not null,
    key         text        not null,
    fingerprint bytea       not null,
    response    text,
    created_at  timestamptz not null,
    constraint idempotency_keys_pkey primary key (tenant_id, key)
);

create index idempotency_keys_created_at_idx on idempotency_keys (created_at);
