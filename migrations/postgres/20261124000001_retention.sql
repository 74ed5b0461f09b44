-- Retention: a session may expire `expires_seconds` after its creation or its last
-- activity. `expires_at` is kept with the row, so reads check it without arithmetic and
-- the sweeper finds expired sessions by index.

alter table sessions add column last_active_at timestamptz;
update sessions set last_active_at = updated_at;
alter table sessions alter column last_active_at set not null;
alter table sessions add column expires_anchor text;
alter table sessions add column expires_seconds bigint;
alter table sessions add column expires_at timestamptz;
alter table sessions add constraint sessions_expires_anchor_check
    check (expires_anchor in ('last_active_at', 'created_at'));

create index sessions_expires_at_idx on sessions (expires_at) where expires_at is not null;
