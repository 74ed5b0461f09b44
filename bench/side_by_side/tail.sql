-- The newest 20 items of one session, as the service reads them.
\set s random(1, :sessions)
SELECT id, seq, created_at, run_id, body FROM items
  WHERE tenant_id = 'default'
    AND session_pk = (SELECT pk FROM sessions WHERE tenant_id = 'default' AND id = 'bench-' || :s::text)
  ORDER BY seq DESC LIMIT 20;
