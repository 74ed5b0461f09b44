//! Load phases of the benchmarks: many client loops against the service for a while.

use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs `clients` loops of `call` for `seconds`; returns every call's latency.
pub async fn run_phase<F, Fut>(clients: usize, seconds: u64, call: F) -> Vec<Duration>
where
    F: Fn(usize, u64) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let call = Arc::new(call);
    let mut tasks = Vec::new();
    for client in 0..clients {
        let call = call.clone();
        tasks.push(async move {
            let mut latencies = Vec::new();
            let mut n = 0;
            while Instant::now() < deadline {
                let started = Instant::now();
                call(client, n).await;
                latencies.push(started.elapsed());
                n += 1;
            }
            latencies
        });
    }
    futures::future::join_all(tasks).await.into_iter().flatten().collect()
}

/// Prints a phase's throughput and latency; returns its requests per second.
pub fn report(name: &str, latencies: &[Duration], seconds: u64) -> f64 {
    let mut sorted = latencies.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)];
    println!(
        "{name:<40} {:>8.0} req/s   p50 {:>7.2} ms   p99 {:>7.2} ms   ({} requests)",
        sorted.len() as f64 / seconds as f64,
        at(0.50).as_secs_f64() * 1000.0,
        at(0.99).as_secs_f64() * 1000.0,
        sorted.len()
    );
    sorted.len() as f64 / seconds as f64
}
