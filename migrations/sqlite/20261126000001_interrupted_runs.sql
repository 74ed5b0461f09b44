-- A run a client interrupts ends `interrupted`, with what it finished kept as a turn.
-- SQLite cannot change a check constraint, so `runs` is built anew. Its events are
-- moved to a new table first: dropping `runs` while `run_events` refers to it would
-- delete them (foreign keys stay on inside the migration's transaction).

create table runs_new (
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
    constraint runs_status_check check (status in
        ('queued', 'running', 'requires_action', 'completed', 'failed', 'cancelled', 'interrupted'))
);
insert into runs_new select pk, tenant_id, id, session_pk, status, created_at, started_at,
    finished_at, lease_owner, lease_expires_at, attempts, last_event_seq, body from runs;

create table run_events_new (
    run_pk     integer not null references runs_new (pk) on delete cascade,
    seq        integer not null,
    event      text    not null,
    data       text    not null,
    created_at integer not null,
    constraint run_events_pkey primary key (run_pk, seq)
);
insert into run_events_new select run_pk, seq, event, data, created_at from run_events;

drop table run_events;
drop table runs;
-- Renaming rewrites run_events_new's reference to runs_new as well.
alter table runs_new rename to runs;
alter table run_events_new rename to run_events;

-- The queue: unfinished runs, oldest first.
create index runs_active_idx on runs (pk) where status in ('queued', 'running', 'requires_action');
-- One run of a session executes at a time, whatever the workers race to claim.
create unique index runs_one_executing_per_session on runs (session_pk)
    where status in ('running', 'requires_action');
create index runs_session_idx on runs (session_pk, pk);
create index runs_session_unfinished_idx on runs (session_pk, pk)
    where status in ('queued', 'running', 'requires_action');
