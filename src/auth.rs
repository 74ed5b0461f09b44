//! Who is calling: the admin key, a tenant's API key, or anyone while auth is off; and
//! how often each key may call.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use uuid::Uuid;

use crate::model::{ApiKey, KeyHash, DEFAULT_TENANT};
use crate::store::{SessionStore, StoreError};

/// `last_used_at` is written at most this often per key.
const TOUCH_INTERVAL: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct AuthSettings {
    /// `ADMIN_API_KEY`; none turns auth off.
    pub admin_key: Option<String>,
    /// How long a looked-up key is trusted before it is looked up again.
    pub cache_ttl: Duration,
    /// Requests per second per key (burst twice that); none is no limit.
    pub rate_limit_per_key: Option<NonZeroU32>,
}

/// The caller a request's credentials name.
#[derive(Debug, Clone)]
pub enum Caller {
    /// Auth is off: every request acts for tenant `default`, with every scope.
    Anonymous,
    /// `ADMIN_API_KEY`: manages API keys, and nothing else.
    Admin,
    Key(Arc<ApiKey>),
}

impl Caller {
    /// The tenant whose data the caller reaches; the admin reaches none.
    pub fn tenant(&self) -> Option<&str> {
        match self {
            Self::Anonymous => Some(DEFAULT_TENANT),
            Self::Admin => None,
            Self::Key(key) => Some(&key.tenant),
        }
    }

    /// How logs and the rate limiter name the caller; never the key itself.
    pub fn key_id(&self) -> String {
        match self {
            Self::Anonymous => "anonymous".into(),
            Self::Admin => "admin".into(),
            Self::Key(key) => key.id.to_string(),
        }
    }

    pub fn can_write(&self) -> bool {
        match self {
            Self::Anonymous | Self::Admin => true,
            Self::Key(key) => key.can_write(),
        }
    }
}

/// Why a request's credentials were not accepted.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("{0}")]
    Unauthenticated(&'static str),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The rate limiter's answer.
#[derive(Debug, Clone, Copy)]
pub struct RateState {
    /// Requests a full bucket allows at once.
    pub limit: u32,
    pub remaining: u32,
    /// Seconds until the bucket is full again (allowed) or the next request is (refused).
    pub reset_secs: u64,
    pub allowed: bool,
}

type KeyedLimiter =
    RateLimiter<String, DefaultKeyedStateStore<String>, DefaultClock, StateInformationMiddleware>;

struct Limiter {
    limiter: KeyedLimiter,
    per_second: u32,
    burst: u32,
}

/// Authentication with a cache of looked-up keys, so that a request costs no database
/// round trip in the steady state.
pub struct Auth {
    admin: Option<KeyHash>,
    store: Arc<dyn SessionStore>,
    ttl: Duration,
    cache: Mutex<HashMap<KeyHash, (Instant, Arc<ApiKey>)>>,
    touched: Mutex<HashMap<Uuid, Instant>>,
    limiter: Option<Limiter>,
}

impl Auth {
    pub fn new(settings: &AuthSettings, store: Arc<dyn SessionStore>) -> Self {
        let limiter = settings.rate_limit_per_key.map(|per_second| {
            let burst = per_second.saturating_mul(NonZeroU32::new(2).expect("2 is not 0"));
            Limiter {
                limiter: RateLimiter::dashmap(Quota::per_second(per_second).allow_burst(burst))
                    .with_middleware::<StateInformationMiddleware>(),
                per_second: per_second.get(),
                burst: burst.get(),
            }
        });
        Self {
            admin: settings.admin_key.as_deref().map(KeyHash::of),
            store,
            ttl: settings.cache_ttl,
            cache: Mutex::default(),
            touched: Mutex::default(),
            limiter,
        }
    }

    pub fn enabled(&self) -> bool {
        self.admin.is_some()
    }

    /// The caller of a request with this `Authorization` header value.
    pub async fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Caller, Refused> {
        let Some(admin) = self.admin else {
            return Ok(Caller::Anonymous);
        };
        let secret = authorization
            .and_then(|value| std::str::from_utf8(value).ok())
            .and_then(bearer_token)
            .ok_or(Refused::Unauthenticated("send an API key as `Authorization: Bearer <key>`"))?;
        let hash = KeyHash::of(secret);
        if hash == admin {
            return Ok(Caller::Admin);
        }
        let key = self
            .lookup(&hash)
            .await?
            .ok_or(Refused::Unauthenticated("the API key is unknown or revoked"))?;
        if key.is_expired(chrono::Utc::now()) {
            return Err(Refused::Unauthenticated("the API key has expired"));
        }
        self.touch(&key);
        Ok(Caller::Key(key))
    }

    async fn lookup(&self, hash: &KeyHash) -> Result<Option<Arc<ApiKey>>, StoreError> {
        let cached = lock(&self.cache).get(hash).cloned();
        if let Some((at, key)) = cached {
            if at.elapsed() < self.ttl {
                return Ok(Some(key));
            }
        }
        let found = self.store.find_api_key(hash).await?.map(Arc::new);
        let mut cache = lock(&self.cache);
        match &found {
            Some(key) => cache.insert(*hash, (Instant::now(), key.clone())),
            None => cache.remove(hash),
        };
        Ok(found)
    }

    /// Forgets a revoked key at once on this replica; the others forget it when their
    /// cache entry lapses.
    pub fn forget(&self, id: Uuid) {
        lock(&self.cache).retain(|_, (_, key)| key.id != id);
        lock(&self.touched).remove(&id);
    }

    /// Records that the key was used, at most once a minute per key, off the request path.
    fn touch(&self, key: &ApiKey) {
        let now = Instant::now();
        {
            let mut touched = lock(&self.touched);
            if touched.get(&key.id).is_some_and(|at| now.duration_since(*at) < TOUCH_INTERVAL) {
                return;
            }
            touched.insert(key.id, now);
        }
        let (store, id) = (self.store.clone(), key.id);
        tokio::spawn(async move {
            if let Err(error) = store.touch_api_key(id, crate::store::now()).await {
                tracing::warn!(%error, key_id = %id, "cannot record that an API key was used");
            }
        });
    }

    /// Takes one request from the caller's bucket; none when there is no limit.
    pub fn take(&self, caller: &Caller) -> Option<RateState> {
        let limiter = self.limiter.as_ref()?;
        let state = match limiter.limiter.check_key(&caller.key_id()) {
            Ok(snapshot) => {
                let remaining = snapshot.remaining_burst_capacity();
                let missing = limiter.burst.saturating_sub(remaining);
                RateState {
                    limit: limiter.burst,
                    remaining,
                    reset_secs: u64::from(missing.div_ceil(limiter.per_second)),
                    allowed: true,
                }
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                RateState {
                    limit: limiter.burst,
                    remaining: 0,
                    reset_secs: wait.as_secs_f64().ceil().max(1.0) as u64,
                    allowed: false,
                }
            }
        };
        Some(state)
    }
}

/// The key of `Bearer <key>` (the scheme in any case).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_in_any_case() {
        assert_eq!(bearer_token("Bearer ask_x"), Some("ask_x"));
        assert_eq!(bearer_token("bearer  ask_x "), Some("ask_x"));
        assert_eq!(bearer_token("Basic YWxhZGRpbjpvcGVu"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("ask_x"), None);
    }
}
