-- Compactions (summaries of a session's older items) and the origin of forked sessions.

alter table sessions add column forked_from_session_id text;
alter table sessions add column forked_from_item_id blob;

create table compactions (
    pk              integer primary key,
    tenant_id       text        not null,
    id              blob        not null,
    session_pk      integer     not null references sessions (pk) on delete cascade,
    created_at      integer     not null,
    -- The run that compacted automatically; null for an explicit compaction.
    run_id          blob,
    -- The newest item the summary covers. Deleting an item at or before it deletes
    -- the compaction, so the item exists as long as the compaction does.
    through_item_id blob        not null,
    through_seq     integer     not null,
    items_compacted integer     not null,
    model           text        not null,
    input_tokens    integer     not null,
    output_tokens   integer     not null,
    total_tokens    integer     not null,
    llm_calls       integer     not null,
    -- What the LLM wrote, through the payload codec like every conversation payload.
    summary         text        not null,
    constraint compactions_tenant_id_key unique (tenant_id, id)
);

create index compactions_session_idx on compactions (session_pk, pk);
