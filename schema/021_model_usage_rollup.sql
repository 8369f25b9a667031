-- The provider's own token counts (model_input_tokens, model_output_tokens of
-- invocations, written when the model gateway measured a call) summed per user
-- and day beside the prompt's BPE counts, so /usage shows the tokens the cost
-- was priced from (issue 27). model_invocations counts the measured calls: a
-- day whose calls ran without the gateway shows 0 of them, not "0 tokens used".
ALTER TABLE usage_daily
  ADD COLUMN model_invocations   INT    NOT NULL DEFAULT 0,
  ADD COLUMN model_input_tokens  BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN model_output_tokens BIGINT NOT NULL DEFAULT 0;

DROP TRIGGER invocations_rollup;

CREATE TRIGGER invocations_rollup AFTER INSERT ON invocations FOR EACH ROW
BEGIN
  INSERT INTO usage_daily (user_id, day, invocations, input_tokens, output_tokens, total_cost_usd,
                           model_invocations, model_input_tokens, model_output_tokens)
  VALUES (NEW.user_id, DATE(NEW.created_at), 1, NEW.input_tokens, NEW.output_tokens,
          NEW.total_cost_usd, NEW.model_input_tokens IS NOT NULL,
          COALESCE(NEW.model_input_tokens, 0), COALESCE(NEW.model_output_tokens, 0))
  ON DUPLICATE KEY UPDATE invocations = invocations + 1,
    input_tokens = input_tokens + VALUES(input_tokens),
    output_tokens = output_tokens + VALUES(output_tokens),
    total_cost_usd = total_cost_usd + VALUES(total_cost_usd),
    model_invocations = model_invocations + VALUES(model_invocations),
    model_input_tokens = model_input_tokens + VALUES(model_input_tokens),
    model_output_tokens = model_output_tokens + VALUES(model_output_tokens);
  -- A session ended meanwhile (stop, redeploy) keeps its state and no sandbox.
  -- An ephemeral call's fresh ses_ id has no row: nothing to update.
  UPDATE sessions SET last_invoked_at = NEW.created_at,
    invocation_count = invocation_count + 1,
    sandbox_id = IF(state = 'active', NEW.sandbox_id, NULL)
  WHERE agent_id = NEW.agent_id AND id = NEW.session_id;
END;
