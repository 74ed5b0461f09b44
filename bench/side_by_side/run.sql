-- The minimal statements of a one-turn run (one item in, one out) as three transactions:
-- create the run with its session (upserted) and its first event; claim it; finish it
-- with its last events, its two items and the session's counters.
\set n random(1, 1000000000)
BEGIN;
INSERT INTO sessions (tenant_id, id, created_at, updated_at, last_active_at)
  VALUES ('default', 'raw-' || :client_id || '-' || :n, now(), now(), now())
  ON CONFLICT (tenant_id, id) DO UPDATE SET last_active_at = now() RETURNING pk \gset
INSERT INTO runs (tenant_id, id, session_pk, status, created_at, body)
  VALUES ('default', gen_random_uuid(), :pk, 'queued', now(), :body) RETURNING pk AS run \gset
INSERT INTO run_events (run_pk, seq, event, data, created_at)
  VALUES (:run, 1, 'run.created', :body, now());
END;
UPDATE runs SET status = 'running', lease_owner = gen_random_uuid(),
    lease_expires_at = now() + interval '30 seconds', attempts = attempts + 1, started_at = now()
  WHERE pk = :run;
BEGIN;
UPDATE runs SET status = 'completed', finished_at = now(), lease_owner = NULL,
    lease_expires_at = NULL, last_event_seq = 3, body = :body
  WHERE pk = :run;
INSERT INTO run_events (run_pk, seq, event, data, created_at)
  VALUES (:run, 2, 'run.started', :body, now()), (:run, 3, 'run.completed', :body, now());
INSERT INTO items (id, tenant_id, session_pk, seq, created_at, body)
  VALUES (gen_random_uuid(), 'default', :pk, 1, now(), :item),
         (gen_random_uuid(), 'default', :pk, 2, now(), :item);
UPDATE sessions SET last_seq = 2, item_count = 2, updated_at = now(), input_tokens = input_tokens + 12,
    output_tokens = output_tokens + 1, total_tokens = total_tokens + 13, llm_calls = llm_calls + 1
  WHERE pk = :pk;
END;
