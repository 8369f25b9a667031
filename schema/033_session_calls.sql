-- A session's call count and last call time move out of its row (issue 31).
-- Every call in a session wrote them into `sessions` (the history INSERT's
-- trigger), and a write to a table drops every result MariaDB's query cache
-- holds for it: the call's environment statement (secrets, the session's
-- state, files: handlers/invoke.c), which reads `sessions`, was planned and
-- run again on every session call (about 0.5 ms of the call's path), and an
-- ephemeral call after any session call missed the cache as well. `sessions`
-- now changes only when a session starts, ends or moves to another sandbox.
--
-- The old columns stay (the previous version reads them during an upgrade,
-- tests/integration/test_migrate.py); nothing writes them any more.
CREATE TABLE IF NOT EXISTS session_calls (
  agent_id          VARCHAR(32)  NOT NULL,
  id                VARCHAR(128) NOT NULL,
  last_invoked_at   DATETIME(3)  NOT NULL,
  invocation_count  INT          NOT NULL DEFAULT 0,
  PRIMARY KEY (agent_id, id),
  CONSTRAINT session_calls_session_fk FOREIGN KEY (agent_id, id)
    REFERENCES sessions (agent_id, id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- What the sessions counted so far (run again: the rows already copied stay,
-- with whatever calls counted since).
INSERT IGNORE INTO session_calls (agent_id, id, last_invoked_at, invocation_count)
  SELECT agent_id, id, last_invoked_at, invocation_count FROM sessions
  WHERE last_invoked_at IS NOT NULL;

-- As 021's, but the session's counts go to session_calls, and the session's
-- row is written only when its sandbox changed (an UPDATE that changes no row
-- keeps the cached results). A call of a session that ended meanwhile (stop,
-- redeploy) is counted and leaves it without a sandbox, as before; an
-- ephemeral call's fresh ses_ id has no session row: nothing is written.
CREATE OR REPLACE TRIGGER invocations_rollup AFTER INSERT ON invocations FOR EACH ROW
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
  -- One look decides: an ephemeral call (most calls) writes nothing more.
  IF EXISTS (SELECT 1 FROM sessions WHERE agent_id = NEW.agent_id AND id = NEW.session_id) THEN
    UPDATE sessions SET sandbox_id = IF(state = 'active', NEW.sandbox_id, NULL)
    WHERE agent_id = NEW.agent_id AND id = NEW.session_id
      AND NOT (sandbox_id <=> IF(state = 'active', NEW.sandbox_id, NULL));
    -- From the row as it is now (a locking read): a session deleted since
    -- the look is not counted, where a VALUES row would fail its foreign key
    -- and with it the history row.
    INSERT INTO session_calls (agent_id, id, last_invoked_at, invocation_count)
      SELECT s.agent_id, s.id, NEW.created_at, 1 FROM sessions s
      WHERE s.agent_id = NEW.agent_id AND s.id = NEW.session_id
    ON DUPLICATE KEY UPDATE session_calls.last_invoked_at = VALUES(last_invoked_at),
      session_calls.invocation_count = session_calls.invocation_count + 1;
  END IF;
END;
