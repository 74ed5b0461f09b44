-- A run a client interrupts ends `interrupted`, with what it finished kept as a turn.
alter table runs drop constraint runs_status_check;
alter table runs add constraint runs_status_check check (status in
    ('queued', 'running', 'requires_action', 'completed', 'failed', 'cancelled', 'interrupted'));
