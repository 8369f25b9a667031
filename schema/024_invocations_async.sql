-- Asynchronous invocations and cancel (issue 28). A call that ended as the
-- caller asked it to stop is 'cancelled' in the history, priced like a
-- failure (its prompt and the output it wrote before it stopped).
ALTER TABLE invocations MODIFY status ENUM('completed','failed','cancelled') NOT NULL;

-- An asynchronous call while it runs: the process that runs it (a child of
-- the API worker that answered 202) holds the database lock named
-- 'agenthost_inv_<id>' on its own connection until it has recorded the call
-- in invocations and removed this row. A row whose lock nobody holds has
-- lost its owner (the API's host or process died): whoever reads it next
-- records it as failed with that reason (handlers/invocation.c; on Galera,
-- whose nodes see only their own clients' locks, once 700 s have passed). The prompt
-- is kept for that record; the row goes with its agent.
CREATE TABLE IF NOT EXISTS invocations_running (
  id                VARCHAR(32)  NOT NULL PRIMARY KEY,
  agent_id          VARCHAR(32)  NOT NULL,
  session_id        VARCHAR(128) NOT NULL,
  runner_id         VARCHAR(64)  NULL,
  prompt            LONGBLOB     NOT NULL,
  input_tokens      BIGINT       NOT NULL DEFAULT 0,
  created_at        DATETIME(3)  NOT NULL,
  cancel_requested  TINYINT(1)   NOT NULL DEFAULT 0,
  KEY invocations_running_agent (agent_id),
  CONSTRAINT invocations_running_agent_fk FOREIGN KEY (agent_id) REFERENCES agents (id)
    ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
