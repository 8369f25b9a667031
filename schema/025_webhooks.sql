-- Webhooks (issue 28): a finished invocation's record POSTed to a URL the
-- call or its agent names, signed with the user's secret.
--
-- An agent's default URL (a call's own webhook_url wins over it).
ALTER TABLE agents ADD COLUMN IF NOT EXISTS webhook_url VARCHAR(2048) NULL;

-- Each user's signing secret, sealed under the master key as agent secrets
-- are (crypto_secretbox, a fresh nonce each time); shown once when made.
CREATE TABLE IF NOT EXISTS webhook_secrets (
  user_id     VARCHAR(32)  NOT NULL PRIMARY KEY,
  nonce       VARBINARY(24) NOT NULL,
  ciphertext  VARBINARY(255) NOT NULL,
  created_at  DATETIME(3)  NOT NULL,
  CONSTRAINT webhook_secrets_user_fk FOREIGN KEY (user_id) REFERENCES users (id)
    ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The durable queue of deliveries, one row per finished invocation and URL:
-- the delivery daemon (agenthost-webhooks) claims due rows with a
-- conditional UPDATE (claim_token and claimed_until), so two daemons never
-- send one attempt twice; a daemon that died leaves its claim to expire.
-- attempt_log: a JSON array, one {"at","status_code","error","duration_ms"}
-- per attempt, the list endpoint's view of them.
CREATE TABLE IF NOT EXISTS webhook_deliveries (
  id               VARCHAR(32)   NOT NULL PRIMARY KEY,
  user_id          VARCHAR(32)   NOT NULL,
  agent_id         VARCHAR(32)   NOT NULL,
  invocation_id    VARCHAR(32)   NOT NULL,
  url              VARCHAR(2048) NOT NULL,
  payload          LONGBLOB      NOT NULL,
  state            ENUM('pending','delivered','failed') NOT NULL DEFAULT 'pending',
  attempts         INT           NOT NULL DEFAULT 0,
  last_status_code INT           NULL,
  last_error       VARCHAR(512)  NULL,
  attempt_log      LONGTEXT      NOT NULL DEFAULT '[]',
  next_attempt_at  DATETIME(3)   NOT NULL,
  claim_token      VARCHAR(32)   NULL,
  claimed_until    DATETIME(3)   NULL,
  created_at       DATETIME(3)   NOT NULL,
  updated_at       DATETIME(3)   NOT NULL,
  delivered_at     DATETIME(3)   NULL,
  KEY webhook_deliveries_due (state, next_attempt_at),
  KEY webhook_deliveries_agent (agent_id, created_at, id),
  KEY webhook_deliveries_claim (claim_token),
  CONSTRAINT webhook_deliveries_agent_fk FOREIGN KEY (agent_id) REFERENCES agents (id)
    ON DELETE CASCADE,
  CONSTRAINT webhook_deliveries_user_fk FOREIGN KEY (user_id) REFERENCES users (id)
    ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
