//! What the run engine records as it goes: its model calls (latency, time to the first
//! token, tokens by model), how its runs end, and its webhook deliveries.

use std::collections::HashSet;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ModelLabels {
    model: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TokenLabels {
    model: String,
    /// `input` or `output`.
    token_type: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RunLabels {
    status: &'static str,
    /// The error's code for a failed run; empty otherwise.
    code: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

type Histograms = Family<ModelLabels, Histogram, fn() -> Histogram>;

/// Distinct `model` labels kept: a run names its model, so callers could otherwise grow
/// the series without end. Calls of models beyond these count under [`OTHER_MODELS`].
const MAX_MODELS: usize = 100;
const OTHER_MODELS: &str = "other";

pub struct EngineMetrics {
    llm_duration: Histograms,
    llm_first_token: Histograms,
    llm_tokens: Family<TokenLabels, Counter>,
    runs: Family<RunLabels, Counter>,
    deliveries: Family<OutcomeLabels, Counter>,
    /// The models that have a label of their own.
    models: Mutex<HashSet<String>>,
}

impl Default for EngineMetrics {
    fn default() -> Self {
        // 50 ms to about 100 s.
        let seconds: fn() -> Histogram = || Histogram::new(exponential_buckets(0.05, 2.0, 12));
        Self {
            llm_duration: Family::new_with_constructor(seconds),
            llm_first_token: Family::new_with_constructor(seconds),
            llm_tokens: Family::default(),
            runs: Family::default(),
            deliveries: Family::default(),
            models: Mutex::default(),
        }
    }
}

impl EngineMetrics {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "llm_request_duration_seconds",
            "Time a run's call of the LLM took, retries included, by the model asked",
            self.llm_duration.clone(),
        );
        registry.register(
            "llm_time_to_first_token_seconds",
            "Time from a run's call of the LLM to the first text it streamed, by model",
            self.llm_first_token.clone(),
        );
        registry.register(
            "llm_tokens",
            "Tokens the LLM reported for runs' calls, by model and token_type (input, output)",
            self.llm_tokens.clone(),
        );
        registry.register(
            "runs",
            "Runs that ended or paused, by status and, for failed runs, error code",
            self.runs.clone(),
        );
        registry.register(
            "webhook_deliveries",
            "Completion webhook attempts by outcome: delivered, retried (to be tried again) or failed (given up after an hour)",
            self.deliveries.clone(),
        );
    }

    /// Records one call of the LLM: how long it took, when its first text came (if
    /// any did), and the tokens it reported.
    pub fn llm_called(
        &self, model: &str, seconds: f64, first_token: Option<f64>, tokens: (u64, u64),
    ) {
        let model = self.model_label(model);
        let labels = ModelLabels { model: model.clone() };
        self.llm_duration.get_or_create(&labels).observe(seconds);
        if let Some(first) = first_token {
            self.llm_first_token.get_or_create(&labels).observe(first);
        }
        for (token_type, count) in [("input", tokens.0), ("output", tokens.1)] {
            let labels = TokenLabels { model: model.clone(), token_type };
            self.llm_tokens.get_or_create(&labels).inc_by(count);
        }
    }

    /// Records a run that ended, or paused for the client.
    pub fn run_ended(&self, status: &'static str, code: Option<&str>) {
        let code = code.unwrap_or_default().to_owned();
        self.runs.get_or_create(&RunLabels { status, code }).inc();
    }

    /// Records runs that the recovery failed with `worker_lost`: out of attempts.
    pub fn runs_lost(&self, count: u64) {
        let labels = RunLabels { status: "failed", code: "worker_lost".to_owned() };
        self.runs.get_or_create(&labels).inc_by(count);
    }

    fn model_label(&self, model: &str) -> String {
        let mut models = self.models.lock().expect("no holder of the lock panics");
        if models.contains(model) || models.len() < MAX_MODELS {
            models.insert(model.to_owned());
            model.to_owned()
        } else {
            OTHER_MODELS.to_owned()
        }
    }

    /// Records one attempt of a webhook delivery: `delivered`, `retried` or `failed`.
    pub fn delivery(&self, outcome: &'static str) {
        self.deliveries.get_or_create(&OutcomeLabels { outcome }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_beyond_the_cap_count_together() {
        let metrics = EngineMetrics::default();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        for n in 0..=MAX_MODELS {
            metrics.llm_called(&format!("model-{n}"), 0.1, None, (1, 1));
        }
        metrics.llm_called("model-0", 0.1, None, (1, 1));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let tokens = |model: &str| {
            let series = format!("llm_tokens_total{{model=\"{model}\",token_type=\"input\"}} ");
            text.lines().find_map(|line| line.strip_prefix(series.as_str()).map(str::to_owned))
        };
        assert_eq!(tokens("model-0").as_deref(), Some("2"));
        assert_eq!(tokens(&format!("model-{}", MAX_MODELS - 1)).as_deref(), Some("1"));
        assert_eq!(tokens(&format!("model-{MAX_MODELS}")), None);
        assert_eq!(tokens(OTHER_MODELS).as_deref(), Some("1"));
    }
}
