-- Core tables: users, API keys, agents, secrets, the deploy queue, runners and
-- rate-limit counters. Times are DATETIME(3) in UTC (every connection sets
-- time_zone = '+00:00'). Ids are prefixed base62 strings made by the application.

CREATE TABLE users (
  id            VARCHAR(32)  NOT NULL PRIMARY KEY,
  email         VARCHAR(320) NOT NULL,
  plan          ENUM('free','pro','enterprise') NOT NULL DEFAULT 'free',
  quota_bytes   BIGINT       NOT NULL,
  disabled      TINYINT(1)   NOT NULL DEFAULT 0,
  created_at    DATETIME(3)  NOT NULL,
  updated_at    DATETIME(3)  NOT NULL,
  UNIQUE KEY users_email (email)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Only a keyed BLAKE2b hash of each key is kept; key_id is the public 8-char part.
CREATE TABLE api_keys (
  id            VARCHAR(32)  NOT NULL PRIMARY KEY,
  user_id       VARCHAR(32)  NOT NULL,
  name          VARCHAR(255) NOT NULL,
  key_id        CHAR(8)      NOT NULL,
  key_hash      BINARY(32)   NOT NULL,
  created_at    DATETIME(3)  NOT NULL,
  last_used_at  DATETIME(3)  NULL,
  expires_at    DATETIME(3)  NULL,
  UNIQUE KEY api_keys_key_id (key_id),
  KEY api_keys_user (user_id, created_at),
  CONSTRAINT api_keys_user_fk FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE agents (
  id              VARCHAR(32)   NOT NULL PRIMARY KEY,
  user_id         VARCHAR(32)   NOT NULL,
  name            VARCHAR(255)  NOT NULL,
  slug            VARCHAR(63)   NOT NULL,
  description     TEXT          NULL,
  source_type     ENUM('git','local') NOT NULL DEFAULT 'git',
  git_repo_url    VARCHAR(2048) NULL,
  git_branch      VARCHAR(255)  NULL,
  timeout_seconds INT           NOT NULL DEFAULT 120,
  status          ENUM('draft','deploying','active','error','stopped') NOT NULL DEFAULT 'draft',
  status_message  TEXT          NULL,
  sandbox_id      VARCHAR(32)   NULL,
  needs_redeploy  TINYINT(1)    NOT NULL DEFAULT 0,
  -- Set by the runner on a successful deploy: where the read-only image lives,
  -- which runner holds it, and the manifest's entrypoint.
  image_path      VARCHAR(1024) NULL,
  runner_id       VARCHAR(64)   NULL,
  entrypoint      VARCHAR(1024) NULL,
  -- Uploaded tarball of a `local` agent (content under the data directory).
  code_sha256     CHAR(64)      NULL,
  code_size       BIGINT        NULL,
  code_uploaded_at DATETIME(3)  NULL,
  created_at      DATETIME(3)   NOT NULL,
  updated_at      DATETIME(3)   NOT NULL,
  deployed_at     DATETIME(3)   NULL,
  UNIQUE KEY agents_user_slug (user_id, slug),
  KEY agents_user_created (user_id, created_at),
  CONSTRAINT agents_user_fk FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Values sealed with crypto_secretbox under the master key; a fresh nonce each.
CREATE TABLE secrets (
  agent_id    VARCHAR(32)  NOT NULL,
  name        VARCHAR(128) NOT NULL,
  nonce       BINARY(24)   NOT NULL,
  ciphertext  MEDIUMBLOB   NOT NULL,
  created_at  DATETIME(3)  NOT NULL,
  updated_at  DATETIME(3)  NOT NULL,
  PRIMARY KEY (agent_id, name),
  CONSTRAINT secrets_agent_fk FOREIGN KEY (agent_id) REFERENCES agents (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The queue the runners consume, each claim a conditional UPDATE (lib/runner/jobs.c). A running
-- job whose lease_until has passed belongs to a dead runner and is taken again.
CREATE TABLE deploy_jobs (
  id           BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
  agent_id     VARCHAR(32)  NOT NULL,
  state        ENUM('queued','running','done','failed') NOT NULL DEFAULT 'queued',
  attempts     INT          NOT NULL DEFAULT 0,
  runner_id    VARCHAR(64)  NULL,
  lease_until  DATETIME(3)  NULL,
  error        TEXT         NULL,
  created_at   DATETIME(3)  NOT NULL,
  updated_at   DATETIME(3)  NOT NULL,
  KEY deploy_jobs_claim (state, lease_until),
  KEY deploy_jobs_agent (agent_id, state),
  CONSTRAINT deploy_jobs_agent_fk FOREIGN KEY (agent_id) REFERENCES agents (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE runners (
  id            VARCHAR(64)  NOT NULL PRIMARY KEY,
  address       VARCHAR(255) NOT NULL,
  capacity      INT          NOT NULL,
  started_at    DATETIME(3)  NOT NULL,
  heartbeat_at  DATETIME(3)  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Fixed one-minute windows per subject ("u:<user id>" or "ip:<address>") and
-- class ('c' CRUD, 'i' invoke). Shared by every worker on every API host.
CREATE TABLE rate_limits (
  subject       VARCHAR(80)  NOT NULL,
  class         CHAR(1)      NOT NULL,
  window_start  BIGINT       NOT NULL,
  hits          INT          NOT NULL,
  PRIMARY KEY (subject, class, window_start)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;
