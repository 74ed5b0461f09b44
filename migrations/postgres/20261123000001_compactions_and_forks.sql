-- Compactions (summaries of a session's older items) and the origin of forked sessions.

alter table sessions add column forked_from_session_id text;
alter table sessions add column forked_from_item_id uuid;

create table compactions (
    pk              bigint generated always as identity primary key,
    tenant_id       text        not null,
    id              uuid        not null,
    session_pk      bigint      not null references sessions (pk) on delete cascade,
    created_at      timestamptz not null,
    -- The run that compacted automatically; null for an explicit compaction.
    run_id          uuid,
    -- The newest item the summary covers. Deleting an item at or before it deletes
    -- the compaction, so the item exists as long as the compaction does.
    through_item_id uuid        not null,
    through_seq     bigint      not null,
    items_compacted bigint      not null,
    model           text        not null,
    input_tokens    bigint      not null,
    output_tokens   bigint      not null,
    total_tokens    bigint      not null,
    llm_calls       bigint      not null,
    -- What the LLM wrote, through the payload codec like every conversation payload.
    summary         text        not null,
    constraint compactions_tenant_id_key unique (tenant_id, id)
);

create index compactions_session_idx on compactions (session_pk, pk);
