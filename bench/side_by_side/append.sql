-- The shape of one append in one transaction: lock the session row, insert the item,
-- move the session's counters.
\set s random(1, :sessions)
BEGIN;
SELECT pk, last_seq FROM sessions WHERE tenant_id = 'default' AND id = 'bench-' || :s::text FOR UPDATE \gset
INSERT INTO items (id, tenant_id, session_pk, seq, created_at, body)
  VALUES (gen_random_uuid(), 'default', :pk, :last_seq + 1, now(), :body);
UPDATE sessions SET last_seq = last_seq + 1, item_count = item_count + 1, updated_at = now(), last_active_at = now()
  WHERE pk = :pk;
END;
