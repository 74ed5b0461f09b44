//! Processes a benchmark starts beside itself: a free port to give one, and the wait
//! until it answers.

use std::time::Duration;

/// A loopback port free at the time of asking.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Whether `url` answered a 2xx within `patience`, asked every 100 ms.
pub async fn answers(url: &str, patience: Duration) -> bool {
    let http = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + patience;
    while tokio::time::Instant::now() < deadline {
        if http.get(url).send().await.is_ok_and(|r| r.status().is_success()) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}
