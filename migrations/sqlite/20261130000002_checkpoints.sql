-- Checkpoints of an agent's execution (LangGraph's model), per session and namespace.
-- The payload, metadata, blobs and writes are the framework's own serialization, kept
-- sealed at rest like items; `run_id` is `metadata.run_id`, kept apart so that a run's
-- checkpoints can be found without opening them.
create table checkpoints (
    pk               integer primary key,
    tenant_id        text        not null,
    session_pk       integer     not null references sessions (pk) on delete cascade,
    namespace        text        not null,
    id               text        not null,
    parent_id        text,
    payload_type     text        not null,
    payload          text        not null,
    metadata         text        not null,
    channel_versions text        not null,
    run_id           text,
    created_at       integer     not null,
    constraint checkpoints_id_key unique (session_pk, namespace, id)
);
-- Newest first: of one session in every namespace, and of the whole tenant.
create index checkpoints_session_idx on checkpoints (session_pk, id);
create index checkpoints_tenant_idx on checkpoints (tenant_id, id);
create index checkpoints_run_idx on checkpoints (tenant_id, run_id) where run_id is not null;

-- A channel's value at one version, stored once however many checkpoints name it.
create table checkpoint_blobs (
    tenant_id  text   not null,
    session_pk integer not null references sessions (pk) on delete cascade,
    namespace  text   not null,
    channel    text   not null,
    version    text   not null,
    value_type text   not null,
    data       text,
    primary key (session_pk, namespace, channel, version)
);

-- Writes of a task that hang off a checkpoint, idempotent by (task_id, idx).
create table checkpoint_writes (
    tenant_id     text   not null,
    session_pk    integer not null references sessions (pk) on delete cascade,
    namespace     text   not null,
    checkpoint_id text   not null,
    task_id       text   not null,
    task_path     text   not null,
    idx           integer not null,
    channel       text   not null,
    value_type    text   not null,
    data          text,
    primary key (session_pk, namespace, checkpoint_id, task_id, idx)
);
