//! When the database last dropped a connection in use. A server that drops one (a
//! restart) has dropped every connection opened before, so a connection idle since
//! then is checked before its next use, however short its idle time: an outage costs
//! about one failed statement, not one per connection that was in steady use.
//!
//! And when an operation last missed its deadline: the connection it abandoned
//! mid-statement goes back to its pool, whose own check of it would wait for an answer
//! without end if the peer went silent; given back soon after such a miss, a
//! connection is checked under a deadline first (see the backends' `after_release`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

static START: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Microseconds after `START` of the last lost connection; 0 for none.
static LOST_AT: AtomicU64 = AtomicU64::new(0);

/// Notes `error` if it says the connection was lost.
pub(super) fn note(error: &sqlx::Error) {
    let lost = match error {
        sqlx::Error::Io(_) => true,
        // Postgres: 08 connection exception, 57P admin shutdown, crash, cannot connect now.
        sqlx::Error::Database(error) => {
            error.code().is_some_and(|code| code.starts_with("08") || code.starts_with("57P"))
        }
        _ => false,
    };
    if lost {
        let now = START.elapsed().as_micros().max(1) as u64;
        LOST_AT.fetch_max(now, Ordering::Relaxed);
    }
}

/// Microseconds after `START` of the last missed deadline; 0 for none.
static MISSED_AT: AtomicU64 = AtomicU64::new(0);

/// Notes that an operation missed its deadline and abandoned its connection.
pub(super) fn missed_deadline() {
    MISSED_AT.fetch_max(START.elapsed().as_micros().max(1) as u64, Ordering::Relaxed);
}

/// Whether a connection given back now may be one abandoned at a missed deadline: its
/// pool gets it back at once, so a miss within the last second covers it.
pub(super) fn deadline_missed_lately() -> bool {
    let missed_at = MISSED_AT.load(Ordering::Relaxed);
    let window = Duration::from_secs(1).as_micros() as u64;
    missed_at != 0 && (START.elapsed().as_micros() as u64).saturating_sub(missed_at) <= window
}

/// Whether a connection idle for `idle_for` must be checked before use: idle for
/// `window` or longer, or since before a connection was lost.
pub(super) fn needs_check(idle_for: Duration, window: Duration) -> bool {
    if idle_for >= window {
        return true;
    }
    let lost_at = LOST_AT.load(Ordering::Relaxed);
    let idle_since = START.elapsed().saturating_sub(idle_for).as_micros() as u64;
    lost_at != 0 && idle_since <= lost_at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_connection_has_the_ones_idle_since_before_it_checked() {
        let window = Duration::from_millis(500);
        assert!(needs_check(window, window));
        note(&sqlx::Error::Io(std::io::Error::other("connection reset")));
        // Idle since 100 ms ago: before the loss just noted.
        assert!(needs_check(Duration::from_millis(100), window));
    }

    #[test]
    fn a_missed_deadline_has_connections_given_back_soon_after_checked() {
        missed_deadline();
        assert!(deadline_missed_lately());
    }
}
