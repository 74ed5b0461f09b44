//! What a run costs as its session's history grows: CPU per run of the service and of its
//! Postgres backends, with sessions of 10, 1,000 and 10,000 items, with the histories
//! kept between runs and without (`HISTORY_CACHE_MB=0`, every run reading and translating
//! its whole history), in one sitting.
//!
//! `cargo bench --bench history -- [sqlite|postgres] [runs] [sizes]`
//!
//! For each size and setting, the release binary runs as a process of its own
//! (`RUN_WORKERS=4`) on a fresh scratch database; four clients each fill a session of
//! their own (user messages, assistant answers, tool calls and their outputs, about 120
//! bytes each), run one turn on it, then `runs` more (default 30) one after another: sync
//! runs, one input item, an instant one-delta answer from an in-process LLM, no
//! token budget, so that every run sends its whole history. CPU comes from /proc (the
//! service's process, the client backends in `pg_stat_activity`: not autovacuum's), over
//! the measured runs only.

mod cpu;
mod database;
mod process;
mod statistics;

use serde_json::{json, Value};

use cpu::{clock_ticks, cpu, rss, tree, Backends, Service};
use database::BenchDatabase;

const CLIENTS: usize = 4;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let backend = args.first().map_or("postgres", String::as_str).to_owned();
    let runs: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(30);
    let sizes: Vec<usize> = (args.get(2).map_or("10,1000,10000", String::as_str).split(','))
        .map(|size| size.parse().expect("sizes are numbers of items, comma-separated"))
        .collect();
    let llm = instant_llm().await;
    println!("backend {backend}, {CLIENTS} clients, {runs} runs each after one to warm up");
    println!(
        "| items | history kept | CPU per run: service + database = total | runs/s | service RSS |"
    );
    println!("|---|---|---|---|---|");
    let mut totals = Vec::new();
    for &items in &sizes {
        for cache in ["64", "0"] {
            let (service_ms, database_ms, rate, rss_mb) =
                measure(&backend, &llm, items, runs, cache).await;
            let total = service_ms + database_ms;
            let kept = if cache == "0" { "no" } else { "yes" };
            println!(
                "| {items} | {kept} | {service_ms:.2} + {database_ms:.2} = {total:.2} ms | {rate:.0} \
                 | {rss_mb:.1} MB |"
            );
            totals.push(((items, cache), total));
        }
    }
    let total = |items, cache| totals.iter().find(|(k, _)| *k == (items, cache)).map(|t| t.1);
    let ratio = |items, cache| Some(total(items, cache)? / total(10, cache)?);
    for cache in ["64", "0"] {
        let kept = if cache == "0" { "not kept" } else { "kept" };
        println!(
            "history {kept}: 1,000 items / 10 = {:.2}×, 10,000 / 10 = {:.2}×",
            ratio(1_000, cache).unwrap_or(f64::NAN),
            ratio(10_000, cache).unwrap_or(f64::NAN)
        );
    }
}

/// CPU per run in ms (service, database), runs per second and the service's resident MB
/// at the end, on a fresh database.
async fn measure(
    backend: &str, llm_url: &str, items: usize, runs: usize, cache: &str,
) -> (f64, f64, f64, f64) {
    let database = BenchDatabase::create(backend).await;
    let settings = [("HISTORY_CACHE_MB", cache)];
    let service = Service::start(&database.url, llm_url, CLIENTS, &settings).await;
    let backends = Backends::of(backend, &database.url).await;
    let http = reqwest::Client::new();
    for client in 0..CLIENTS {
        fill(&http, &service.base, client, items).await;
    }
    statistics::analyze(&database.url).await;
    let turns = |n: usize| {
        let (http, base) = (http.clone(), service.base.clone());
        let clients = (0..CLIENTS).map(move |client| {
            let (http, base) = (http.clone(), base.clone());
            tokio::spawn(async move {
                for turn in 0..n {
                    run(&http, &base, client, turn).await;
                }
            })
        });
        futures::future::join_all(clients)
    };
    turns(1).await;
    let (service_before, database_before) =
        (cpu(&tree(service.process.id())), backends.cpu().await);
    let started = std::time::Instant::now();
    turns(runs).await;
    let elapsed = started.elapsed().as_secs_f64();
    let service_ticks = cpu(&tree(service.process.id())) - service_before;
    let database_ticks: u64 = (backends.cpu().await.iter())
        .map(|(pid, t)| t.saturating_sub(*database_before.get(pid).unwrap_or(&0)))
        .sum();
    let rss_mb = rss(&tree(service.process.id())) as f64 / 1024.0;
    drop(service);
    database.drop().await;
    let done = (runs * CLIENTS) as f64;
    let per_run = |ticks: u64| ticks as f64 * 1000.0 / clock_ticks() as f64 / done;
    (per_run(service_ticks), per_run(database_ticks), done / elapsed, rss_mb)
}

/// An LLM that answers every call at once with the same one-delta stream, reading the
/// request but not parsing it: a request of 10,000 messages costs it what one of 10
/// does, so that runs on long histories are not paced by the fake.
async fn instant_llm() -> String {
    const STREAM: &str = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"done\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":1,\"total_tokens\":13}}\n\n",
        "data: [DONE]\n\n",
    );
    let answer = |_: axum::body::Bytes| async {
        ([(axum::http::header::CONTENT_TYPE, "text/event-stream")], STREAM)
    };
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(answer));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}/v1")
}

/// Fills the client's session with `items` items, a thousand per append.
async fn fill(http: &reqwest::Client, base: &str, client: usize, items: usize) {
    let all: Vec<Value> = (0..items).map(item).collect();
    for chunk in all.chunks(1_000) {
        let url = format!("{base}/v1/sessions/history-{client}/items");
        let response = http.post(url).json(&json!({"items": chunk})).send().await.unwrap();
        assert!(response.status().is_success(), "{}", response.status());
    }
}

/// The item at `n`: a user message, a tool call, its output, an answer, in turn.
fn item(n: usize) -> Value {
    let id = format!("call_{}", n / 4);
    match n % 4 {
        0 => json!({"role": "user", "content": format!("What is the weather in city number {n}?")}),
        1 => json!({"type": "function_call", "call_id": id, "name": "weather",
                    "arguments": format!("{{\"city\":\"city {n}\"}}")}),
        2 => json!({"type": "function_call_output", "call_id": id,
                    "output": "{\"temperature\":21,\"sky\":\"clear\"}"}),
        _ => json!({"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": format!("It is 21 degrees and clear in city {n}.")}]}),
    }
}

async fn run(http: &reqwest::Client, base: &str, client: usize, turn: usize) {
    let url = format!("{base}/v1/sessions/history-{client}/runs");
    let body = json!({"input": format!("turn {turn}")});
    let response = http.post(url).json(&body).send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let run: Value = response.json().await.unwrap();
    assert_eq!(run["status"], "completed", "{run}");
}
