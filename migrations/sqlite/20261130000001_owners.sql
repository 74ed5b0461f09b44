-- A session's owners: the app and the user it belongs to, taken once from the first
-- write that names them and fixed after that.
alter table sessions add column app_id text;
alter table sessions add column user_id text;
-- Listings filtered by owner, newest first.
create index sessions_owner_idx on sessions (tenant_id, app_id, user_id, created_at, pk);

-- The state documents shared by an app's sessions (`user_id` empty) and by one user's
-- sessions of that app; sealed at rest like a session's state.
create table owner_states (
    tenant_id  text    not null,
    app_id     text    not null,
    user_id    text    not null,
    state      text,
    revision   integer not null,
    updated_at integer not null,
    primary key (tenant_id, app_id, user_id)
);
