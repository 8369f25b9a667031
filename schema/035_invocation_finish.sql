-- A call's end in one round trip and one transaction (issue 31): its history
-- row, its logs row when the agent wrote to stderr, and its budgets' charge.
-- The charge was a statement of its own after the history's write: a round
-- trip on every call (about 0.3 ms here, Server-Timing's `record`), and a
-- call whose history was written could miss its charge (the worker killed
-- between the two) or, when the history's write was retried after a lost
-- answer, keep a charge made twice. Now both commit or neither does.
--
-- Parameters: invocation_record_logs's (schema/032; the logs row is written
-- when there is stderr or it was cut short), then the charge: the UTC day and month
-- the spend rows are for (p_day NULL: no charge), the API key's id (NULL: a
-- JWT's call, which has no key rows), the cost left to charge (the model
-- gateway charged the rest as it went) and which rows release the call's
-- place at the budget's edge (bit 0 the user's day, 1 its month, 2 and 3 the
-- agent's, 4 and 5 the key's). The rows are the API's (handlers/budgets.c
-- ah_budget_finish, the statement this one folds in) and are locked in the
-- order admission locks them: user, agent, key; day, then month.
--
-- The API calls it for every row with logs or a charge (a plain INSERT
-- otherwise); invocation_record_logs (032) stays for API hosts of the
-- version before while a cluster is upgraded one host at a time.
--
-- Creating it needs what the triggers need with binary logging on (SUPER or
-- log_bin_trust_function_creators=1, README); CREATE OR REPLACE: re-runnable.
CREATE OR REPLACE PROCEDURE invocation_finish(
  p_id VARCHAR(32), p_agent_id VARCHAR(32), p_user_id VARCHAR(32), p_session_id VARCHAR(128),
  p_sandbox_id VARCHAR(32), p_prompt LONGBLOB, p_response LONGBLOB, p_input_tokens BIGINT,
  p_output_tokens BIGINT, p_cost DECIMAL(24,12), p_duration_ms BIGINT, p_status VARCHAR(16),
  p_error TEXT, p_created_at DATETIME(3), p_model_input_tokens BIGINT,
  p_model_output_tokens BIGINT, p_prompt_sha256 CHAR(64), p_response_sha256 CHAR(64),
  p_files_error TEXT, p_schedule_for_type VARCHAR(32), p_schedule_id VARCHAR(32),
  p_timing VARCHAR(255), p_stderr MEDIUMBLOB, p_truncated TINYINT,
  p_day DATE, p_month DATE, p_key_id VARCHAR(32), p_rest DECIMAL(24,12), p_release INT)
MODIFIES SQL DATA
BEGIN
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  START TRANSACTION;
  INSERT INTO invocations (id, agent_id, user_id, session_id, sandbox_id, prompt,
    response_content, input_tokens, output_tokens, total_cost_usd, duration_ms, status, error,
    created_at, model_input_tokens, model_output_tokens, prompt_sha256, response_sha256,
    files_error, trigger_type, schedule_id, timing)
  VALUES (p_id, p_agent_id, p_user_id, p_session_id, p_sandbox_id, p_prompt, p_response,
    p_input_tokens, p_output_tokens, p_cost, p_duration_ms, p_status, p_error, p_created_at,
    p_model_input_tokens, p_model_output_tokens, p_prompt_sha256, p_response_sha256,
    p_files_error, IF(p_schedule_for_type IS NULL, 'api', 'schedule'), p_schedule_id, p_timing);
  IF LENGTH(p_stderr) > 0 OR p_truncated THEN
    INSERT INTO invocation_logs (invocation_id, stderr, truncated)
    VALUES (p_id, p_stderr, p_truncated);
  END IF;
  IF p_day IS NOT NULL THEN
    INSERT INTO budget_spend (scope, scope_id, period, period_start, spent, inflight, max_call)
    VALUES ('user', p_user_id, 'day', p_day, p_rest, p_release & 1, p_cost),
      ('user', p_user_id, 'month', p_month, p_rest, p_release >> 1 & 1, p_cost),
      ('agent', p_agent_id, 'day', p_day, p_rest, p_release >> 2 & 1, p_cost),
      ('agent', p_agent_id, 'month', p_month, p_rest, p_release >> 3 & 1, p_cost)
    ON DUPLICATE KEY UPDATE spent = spent + VALUES(spent),
      inflight = GREATEST(inflight - VALUES(inflight), 0), max_call = GREATEST(max_call, VALUES(max_call));
    IF p_key_id IS NOT NULL THEN
      INSERT INTO budget_spend (scope, scope_id, period, period_start, spent, inflight, max_call)
      VALUES ('key', p_key_id, 'day', p_day, p_rest, p_release >> 4 & 1, p_cost),
        ('key', p_key_id, 'month', p_month, p_rest, p_release >> 5 & 1, p_cost)
      ON DUPLICATE KEY UPDATE spent = spent + VALUES(spent),
        inflight = GREATEST(inflight - VALUES(inflight), 0), max_call = GREATEST(max_call, VALUES(max_call));
    END IF;
  END IF;
  COMMIT;
END;
