-- Completion webhooks: each finish or pause of a run with a `webhook` is a row, written
-- with the run, that delivery workers of any replica claim, post and retry with backoff
-- for an hour. Gone with its run.
create table webhook_deliveries (
    pk               integer primary key,
    -- The `webhook-id` header: the same on every retry, so receivers can deduplicate.
    id               blob not null,
    tenant_id        text not null,
    run_pk           integer not null references runs (pk) on delete cascade,
    -- The URL and the signed body (JSON), kept as conversation payloads are.
    payload          text not null,
    status           text not null,
    attempts         integer not null default 0,
    last_status_code integer,
    -- When the next attempt is due; while one is in flight, when its claim lapses.
    next_attempt_at  integer not null,
    created_at       integer not null,
    constraint webhook_deliveries_status_check check (status in ('pending', 'delivered', 'failed'))
);
create index webhook_deliveries_due_idx on webhook_deliveries (next_attempt_at) where status = 'pending';
create index webhook_deliveries_run_idx on webhook_deliveries (run_pk, pk);
