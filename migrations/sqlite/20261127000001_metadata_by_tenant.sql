-- A listing's metadata filter reads its tenant's matching sessions newest first from an
-- index of metadata pairs. Testing each of the tenant's sessions' JSON instead cost the
-- tenant's size when few match (docs/benchmarks.md, "Flat at scale"). Triggers keep the
-- pairs beside the JSON that stays the session's truth; `created` is the session's
-- `created_at`, which never changes, so that the pairs are in the listing's order.
create table session_metadata (
    tenant     text    not null,
    key        text    not null,
    value      text    not null,
    created    integer not null,
    session_pk integer not null references sessions (pk) on delete cascade,
    primary key (tenant, key, value, created, session_pk)
) without rowid;
create index session_metadata_session_idx on session_metadata (session_pk);

insert into session_metadata (tenant, key, value, created, session_pk)
select s.tenant_id, m.key, m.value, s.created_at, s.pk from sessions s, json_each(s.metadata) m;

create trigger sessions_metadata_inserted after insert on sessions
begin
    insert into session_metadata (tenant, key, value, created, session_pk)
    select new.tenant_id, key, value, new.created_at, new.pk from json_each(new.metadata);
end;

create trigger sessions_metadata_updated after update of metadata on sessions
when new.metadata is not old.metadata
begin
    delete from session_metadata where session_pk = old.pk;
    insert into session_metadata (tenant, key, value, created, session_pk)
    select new.tenant_id, key, value, new.created_at, new.pk from json_each(new.metadata);
end;
