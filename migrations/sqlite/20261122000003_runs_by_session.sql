-- A session's runs are listed, and checked for an unfinished one, by pk; nothing reads
-- runs by created_at.
drop index runs_session_idx;
create index runs_session_idx on runs (session_pk, pk);
create index runs_session_unfinished_idx on runs (session_pk, pk)
    where status in ('queued', 'running', 'requires_action');
