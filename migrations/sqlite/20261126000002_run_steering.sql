-- Input that joins a session's unfinished run (`if_busy: "steer"`), numbered from 1
-- within the run. The run's worker takes it into its next model call (the run's record
-- keeps the number it took through); input a run finished without is queued as a run of
-- its own, and the rows go.
create table run_steering (
    run_pk     integer not null references runs (pk) on delete cascade,
    n          integer not null,
    -- The input with the configuration of its run (model::Steer).
    body       text    not null,
    created_at integer not null,
    constraint run_steering_pkey primary key (run_pk, n)
);
