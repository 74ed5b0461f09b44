-- A listing's metadata filter looks up its tenant's matching sessions only. The index of
-- metadata alone found the matches of every tenant and the listing dropped the others':
-- a filter that few of a tenant's sessions match cost as much as the matches of all
-- tenants (docs/benchmarks.md, "Flat at scale"). `btree_gin` lets one GIN index hold the
-- tenant beside the metadata; it ships with Postgres and is trusted, so a database owner
-- can create it.
create extension if not exists btree_gin;
create index sessions_tenant_metadata_idx on sessions using gin (tenant_id, metadata jsonb_path_ops);
drop index sessions_metadata_idx;
