-- Invocation timing (issue 31): where a call's milliseconds went, as the
-- JSON object the API returns in the invocation's "timing" (queue_ms,
-- take_ms, start_ms, run_ms, collect_ms, record_ms). NULL for invocations
-- recorded before it. A column of the row itself: no second statement.
ALTER TABLE invocations ADD COLUMN IF NOT EXISTS timing VARCHAR(255) NULL;
