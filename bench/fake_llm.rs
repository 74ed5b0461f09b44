//! The fake OpenAI-compatible LLM of the tests, for the benchmarks that run agent turns:
//! one copy of it, mounted here once, so a benchmark measures against the same fake that
//! the tests prove the service with.

#[path = "../tests/api/fake_llm.rs"]
mod shared;

pub use shared::*;
