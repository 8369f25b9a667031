-- What the model provider itself counted for an invocation, when the model
-- gateway (model_gateway = on) forwarded the agent's model calls: NULL when the
-- gateway was off (not measured), 0 when the agent made no model call.
ALTER TABLE invocations
  ADD COLUMN model_input_tokens  BIGINT NULL,
  ADD COLUMN model_output_tokens BIGINT NULL;
