-- Recording an invocation is one INSERT into invocations: this trigger adds it
-- to the user's daily usage and to its session (if the call ran in one) within
-- that statement's own transaction. One round trip to the server instead of
-- five (BEGIN, three statements, COMMIT) on every invocation, and the rollup
-- stays exact whoever writes the history.
--
-- With binary logging on and log_bin_trust_function_creators off, creating a
-- trigger needs the SUPER privilege: run `agenthost-admin migrate` as a user
-- that has it once, or set log_bin_trust_function_creators=1 (README).
CREATE TRIGGER invocations_rollup AFTER INSERT ON invocations FOR EACH ROW
BEGIN
  INSERT INTO usage_daily (user_id, day, invocations, input_tokens, output_tokens, total_cost_usd)
  VALUES (NEW.user_id, DATE(NEW.created_at), 1, NEW.input_tokens, NEW.output_tokens,
          NEW.total_cost_usd)
  ON DUPLICATE KEY UPDATE invocations = invocations + 1,
    input_tokens = input_tokens + VALUES(input_tokens),
    output_tokens = output_tokens + VALUES(output_tokens),
    total_cost_usd = total_cost_usd + VALUES(total_cost_usd);
  -- A session ended meanwhile (stop, redeploy) keeps its state and no sandbox.
  -- An ephemeral call's fresh ses_ id has no row: nothing to update.
  UPDATE sessions SET last_invoked_at = NEW.created_at,
    invocation_count = invocation_count + 1,
    sandbox_id = IF(state = 'active', NEW.sandbox_id, NULL)
  WHERE agent_id = NEW.agent_id AND id = NEW.session_id;
END;
