-- LLM requests that executions of a run made and stored as they went (with their
-- events), which no write of the run's document counts yet: an execution that lost
-- its lease or its process never writes its count. Reads of a run add them to its
-- usage; each write of the document, which counts them from then on, sets it back to 0.
alter table runs add column unsettled_llm_calls integer not null default 0;
