-- A session's revision: raised by one with every committed change to what its GET, its
-- state or its items return, so that a writer can ask that nobody wrote in between
-- (If-Match). A session is at 1 after the write that made it; sessions made before
-- revisions are at 1 too.
alter table sessions add column revision integer not null default 1;
-- The session's state document as the client gave it (sealed at rest like items); null
-- is the empty object.
alter table sessions add column state text;
