-- Retention: a session may expire `expires_seconds` after its creation or its last
-- activity. `expires_at` is kept with the row, so reads check it without arithmetic and
-- the sweeper finds expired sessions by index.

alter table sessions add column last_active_at integer not null default 0;
update sessions set last_active_at = updated_at;
alter table sessions add column expires_anchor text
    check (expires_anchor in ('last_active_at', 'created_at'));
alter table sessions add column expires_seconds integer;
alter table sessions add column expires_at integer;

create index sessions_expires_at_idx on sessions (expires_at) where expires_at is not null;
