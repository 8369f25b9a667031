-- An invocation whose agent wrote to stderr is recorded with its logs row in
-- one transaction (issue 29). From the API that was four round trips (START
-- TRANSACTION, the history INSERT, the logs INSERT, COMMIT) where a call
-- without stderr makes one; this procedure makes it one CALL: the same two
-- INSERTs, in one transaction, one commit (handlers/invoke_record.c). Its
-- parameters are SQL_RECORD's, in order, then the logs row's. An error rolls
-- both back and reaches the caller as it was (a repeated id is a duplicate
-- key, as from the INSERT alone).
--
-- Creating it needs what the triggers need with binary logging on (SUPER or
-- log_bin_trust_function_creators=1, README); CREATE OR REPLACE: re-runnable.
CREATE OR REPLACE PROCEDURE invocation_record_logs(
  p_id VARCHAR(32), p_agent_id VARCHAR(32), p_user_id VARCHAR(32), p_session_id VARCHAR(128),
  p_sandbox_id VARCHAR(32), p_prompt LONGBLOB, p_response LONGBLOB, p_input_tokens BIGINT,
  p_output_tokens BIGINT, p_cost DECIMAL(24,12), p_duration_ms BIGINT, p_status VARCHAR(16),
  p_error TEXT, p_created_at DATETIME(3), p_model_input_tokens BIGINT,
  p_model_output_tokens BIGINT, p_prompt_sha256 CHAR(64), p_response_sha256 CHAR(64),
  p_files_error TEXT, p_schedule_for_type VARCHAR(32), p_schedule_id VARCHAR(32),
  p_timing VARCHAR(255), p_stderr MEDIUMBLOB, p_truncated TINYINT)
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
  INSERT INTO invocation_logs (invocation_id, stderr, truncated)
  VALUES (p_id, p_stderr, p_truncated);
  COMMIT;
END;
