-- Sessions, invocation history and the per-user daily usage rollup.

-- A session id is the client's own (1-128 of [A-Za-z0-9._:-]) or a fresh ses_ id.
CREATE TABLE sessions (
  agent_id          VARCHAR(32)  NOT NULL,
  id                VARCHAR(128) NOT NULL,
  sandbox_id        VARCHAR(32)  NULL,
  state             ENUM('active','expired','ended') NOT NULL DEFAULT 'active',
  created_at        DATETIME(3)  NOT NULL,
  last_invoked_at   DATETIME(3)  NULL,
  invocation_count  INT          NOT NULL DEFAULT 0,
  PRIMARY KEY (agent_id, id),
  KEY sessions_idle (state, last_invoked_at),
  CONSTRAINT sessions_agent_fk FOREIGN KEY (agent_id) REFERENCES agents (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE invocations (
  id                VARCHAR(32)  NOT NULL PRIMARY KEY,
  agent_id          VARCHAR(32)  NOT NULL,
  user_id           VARCHAR(32)  NOT NULL,
  session_id        VARCHAR(128) NOT NULL,
  sandbox_id        VARCHAR(32)  NULL,
  prompt            LONGBLOB     NOT NULL,
  response_content  LONGBLOB     NULL,
  input_tokens      BIGINT       NOT NULL DEFAULT 0,
  output_tokens     BIGINT       NOT NULL DEFAULT 0,
  total_cost_usd    DECIMAL(24,12) NOT NULL DEFAULT 0,
  duration_ms       BIGINT       NOT NULL DEFAULT 0,
  status            ENUM('completed','failed') NOT NULL,
  error             TEXT         NULL,
  created_at        DATETIME(3)  NOT NULL,
  KEY invocations_agent (agent_id, created_at),
  CONSTRAINT invocations_agent_fk FOREIGN KEY (agent_id) REFERENCES agents (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Updated in the same transaction that records an invocation. Keyed by user, not
-- agent, so deleting an agent never lowers what the user consumed.
CREATE TABLE usage_daily (
  user_id         VARCHAR(32)  NOT NULL,
  day             DATE         NOT NULL,
  invocations     BIGINT       NOT NULL DEFAULT 0,
  input_tokens    BIGINT       NOT NULL DEFAULT 0,
  output_tokens   BIGINT       NOT NULL DEFAULT 0,
  total_cost_usd  DECIMAL(24,12) NOT NULL DEFAULT 0,
  PRIMARY KEY (user_id, day),
  CONSTRAINT usage_daily_user_fk FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
