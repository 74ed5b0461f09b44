//! The database a benchmark runs on: a SQLite file in a temp dir, or a scratch database
//! on the Postgres server named by `DATABASE_URL`, dropped when the benchmark is done.

use sqlx::PgPool;
use tempfile::TempDir;

pub struct BenchDatabase {
    pub url: String,
    _dir: TempDir,
    /// The admin pool and the scratch database's name, on Postgres.
    scratch: Option<(PgPool, String)>,
}

impl BenchDatabase {
    /// `postgres` for a scratch Postgres database, anything else for SQLite.
    pub async fn create(backend: &str) -> Self {
        let dir = TempDir::new().unwrap();
        if backend != "postgres" {
            return Self {
                url: format!("sqlite://{}", dir.path().join("bench.db").display()),
                _dir: dir,
                scratch: None,
            };
        }
        let admin_url =
            std::env::var("DATABASE_URL").expect("DATABASE_URL names a Postgres server");
        let name = format!("bench_{}", uuid::Uuid::new_v4().simple());
        let admin = PgPool::connect(&admin_url).await.unwrap();
        sqlx::query(&format!("create database {name}")).execute(&admin).await.unwrap();
        let base = admin_url.rsplit_once('/').map_or(admin_url.as_str(), |(b, _)| b);
        Self { url: format!("{base}/{name}"), _dir: dir, scratch: Some((admin, name)) }
    }

    pub async fn drop(self) {
        if let Some((admin, name)) = self.scratch {
            sqlx::query(&format!("drop database {name} with (force)"))
                .execute(&admin)
                .await
                .unwrap();
        }
    }
}
