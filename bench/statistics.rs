//! The planner's statistics of a benchmark's database.

/// Gathers the planner's statistics, as autovacuum does on Postgres within a minute of a
/// database's first writes: runs measured on younger tables would be planned for empty
/// ones (a session looked up by scanning its tenant's sessions).
pub async fn analyze(url: &str) {
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        sqlx::query("analyze").execute(&pool).await.unwrap();
        pool.close().await;
    } else {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        sqlx::query("analyze").execute(&pool).await.unwrap();
        pool.close().await;
    }
}
