//! The writer behind the run creation queue (`store::combiner`): a batch of creations
//! in one transaction, each made as `run_creation` makes one alone. What a batch cannot
//! make the same way (an expired session, one with an agent, a busy one when the run
//! would not queue) is left to its caller.

use async_trait::async_trait;

use super::backend::run_batch::{insert_runs, upsert_run_sessions};
use super::backend::{Db, Store};
use crate::model::ExpiresAfter;
use crate::store::combined_writes::Creation;
use crate::store::combiner::{BatchFailed, Combiner, Writer};
use crate::store::payload::PayloadCodec;
use crate::store::rows::expiry_columns;
use crate::store::run_rows::{self, NewRunRow};
use crate::store::timestamp::Timestamp;
use crate::store::{CreatedRun, Result, StoreError};

/// What the creation queue's writer task writes with.
struct Creations {
    pool: sqlx::Pool<Db>,
    codec: PayloadCodec,
    default_expiry: Option<ExpiresAfter>,
}

#[async_trait]
impl Writer for Creations {
    type Job = Creation;
    /// None: the caller makes the creation alone.
    type Done = Option<CreatedRun>;

    /// A creation with none to share its transaction is a batch of one, made here and not
    /// by its caller: the creations that arrive while it commits queue behind it and
    /// commit together next. One that fails before its commit is made again by its
    /// caller, so that it fails alone, with the answer its own path gives.
    async fn one(&self, creation: &Creation) -> Result<Option<CreatedRun>> {
        match self.many(std::slice::from_ref(creation)).await {
            Ok(mut made) => Ok(made.pop().flatten().flatten()),
            Err(BatchFailed::BeforeCommit(_)) => Ok(None),
            Err(BatchFailed::AtCommit(error)) => Err(error),
        }
    }

    /// Left out of a batch or rolled back with it: made by its caller, in parallel with
    /// the others' and not in turn while the queue waits.
    async fn again(&self, _: &Creation) -> Result<Option<CreatedRun>> {
        Ok(None)
    }

    async fn many(
        &self, creations: &[Creation],
    ) -> std::result::Result<Vec<Option<Option<CreatedRun>>>, BatchFailed> {
        let before = |e: StoreError| BatchFailed::BeforeCommit(e);
        let now = Timestamp::now();
        let mut tx = self.pool.begin().await.map_err(|e| before(e.into()))?;
        let retention = expiry_columns(self.default_expiry, now, now);
        let sessions =
            upsert_run_sessions(&mut tx, creations, retention, now).await.map_err(before)?;
        // The leases run from now: the sessions' locks may have kept the batch waiting.
        let started = Timestamp::now();
        let made: Vec<_> = creations
            .iter()
            .zip(&sessions)
            .filter_map(|(creation, session)| {
                let (session_pk, empty) = (*session)?;
                let (record, created) =
                    run_rows::new_run(&creation.session_id, creation.run.clone(), now.0);
                Some((creation, session_pk, empty, record, created))
            })
            .collect();
        let rows: Vec<NewRunRow> = made
            .iter()
            .map(|(creation, session_pk, _, record, created)| NewRunRow {
                tenant: &creation.tenant,
                session_pk: *session_pk,
                record,
                first_event: created,
                start: creation.start,
                if_busy: creation.if_busy,
                created_at: now,
                started_at: started,
            })
            .collect();
        let inserted = insert_runs(&mut tx, &self.codec, &rows).await.map_err(before)?;
        if inserted.iter().any(Option::is_none) {
            // A run that would not queue found its session busy, a run committed there
            // after the sessions' statement looked. Its session's activity must not stay,
            // so nothing of the batch does: every creation is made alone.
            return Ok(creations.iter().map(|_| None).collect());
        }
        tx.commit().await.map_err(|e| BatchFailed::AtCommit(e.into()))?;
        let mut made = made.into_iter().zip(inserted);
        Ok(sessions
            .iter()
            .map(|session| {
                session.map(|_| {
                    let ((creation, _, empty, record, _), inserted) =
                        made.next().expect("a run for each session upserted");
                    let inserted = inserted.expect("every run inserted");
                    let start = creation.start.filter(|_| inserted.started);
                    let claim = start.map(|s| {
                        let (tenant, record) = (&creation.tenant, record.clone());
                        run_rows::claim_new(tenant, inserted.pk, s.worker, record, started.0, empty)
                    });
                    Some(CreatedRun { run: record.run, claim, replayed: false })
                })
            })
            .collect())
    }
}

impl Store {
    /// The queue that combines run creations, started by the first one.
    pub(super) fn creations(&self) -> &Combiner<Creation, Option<CreatedRun>> {
        self.creations.get_or_init(|| {
            Combiner::start(
                Creations {
                    pool: self.writer().clone(),
                    codec: self.codec.clone(),
                    default_expiry: self.default_expiry,
                },
                self.deadline,
            )
        })
    }
}
