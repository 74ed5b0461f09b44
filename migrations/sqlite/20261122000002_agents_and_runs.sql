-- Agents, runs and their event streams. Documents are JSON text; the columns are the
-- parts that queries filter, sort or lock on.

create table agents (
    pk         integer primary key,
    tenant_id  text    not null,
    id         text    not null,
    created_at integer not null,
    -- The whole agent as the API returns it.
    body       text    not null,
    constraint agents_tenant_id_key unique (tenant_id, id)
);

create index agents_listing_idx on agents (tenant_id, created_at, pk);

create table runs (
    pk               integer primary key,
    tenant_id        text    not null,
    id               blob    not null,
    session_pk       integer not null references sessions (pk) on delete cascade,
    status           text    not null,
    created_at       integer not null,
    started_at       integer,
    finished_at      integer,
    -- The worker holding the run and until when; a lapsed lease means the worker died.
    lease_owner      blob,
    lease_expires_at integer,
    attempts         integer not null default 0,
    -- The seq of the run's newest event.
    last_event_seq   integer not null default 0,
    -- The run, its resolved configuration and progress (model::RunRecord).
    body             text    not null,
    constraint runs_tenant_id_key unique (tenant_id, id),
    constraint runs_status_check check (status in ('queued', 'running', 'requires_action', 'completed', 'failed', 'cancelled'))
);

create index runs_session_idx on runs (session_pk, created_at, pk);
-- The queue: unfinished runs, oldest first.
create index runs_active_idx on runs (pk) where status in ('queued', 'running', 'requires_action');
-- One run of a session executes at a time, whatever the workers race to claim.
create unique index runs_one_executing_per_session on runs (session_pk)
    where status in ('running', 'requires_action');

create table run_events (
    run_pk     integer not null references runs (pk) on delete cascade,
    seq        integer not null,
    event      text    not null,
    data       text    not null,
    created_at integer not null,
    constraint run_events_pkey primary key (run_pk, seq)
);
