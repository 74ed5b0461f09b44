-- How many times a session's history changed other than by an append: a delete, a pop,
-- a clear, a replacement of items or of the suffix after one, a compaction. A run keeps
-- a session's prepared history in memory between its turns and reads only the items
-- appended since, as long as this count is what it was when the history was read.
alter table sessions add column rewrites bigint not null default 0;
