-- Customer buckets (s3, gcs, r2) and their mounts into agents' sandboxes.
-- Credentials are one JSON document sealed with crypto_secretbox under the
-- master key (as secrets are), NULL until set: never returned, never logged.
CREATE TABLE buckets (
  id            VARCHAR(32)   NOT NULL PRIMARY KEY,
  user_id       VARCHAR(32)   NOT NULL,
  name          VARCHAR(255)  NOT NULL,
  slug          VARCHAR(63)   NOT NULL,
  provider      ENUM('s3','gcs','r2') NOT NULL,
  bucket_name   VARCHAR(222)  NOT NULL,
  region        VARCHAR(64)   NULL,
  endpoint_url  VARCHAR(2048) NULL,
  cred_nonce    BINARY(24)    NULL,
  cred_sealed   MEDIUMBLOB    NULL,
  created_at    DATETIME(3)   NOT NULL,
  updated_at    DATETIME(3)   NOT NULL,
  UNIQUE KEY buckets_user_slug (user_id, slug),
  KEY buckets_user_created (user_id, created_at),
  CONSTRAINT buckets_user_fk FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- A bucket (under source_prefix) as a directory of an agent's sandboxes.
-- Removing a bucket that mounts use is refused (RESTRICT) unless the API
-- removes the mounts first (?force=true); an agent takes its mounts along.
CREATE TABLE mounts (
  id                VARCHAR(32)   NOT NULL PRIMARY KEY,
  agent_id          VARCHAR(32)   NOT NULL,
  bucket_id         VARCHAR(32)   NOT NULL,
  mount_path        VARCHAR(1024) NOT NULL,
  source_prefix     VARCHAR(1024) NOT NULL DEFAULT '',
  read_only         TINYINT(1)    NOT NULL DEFAULT 0,
  enabled           TINYINT(1)    NOT NULL DEFAULT 1,
  cache_enabled     TINYINT(1)    NOT NULL DEFAULT 0,
  cache_ttl_seconds INT           NOT NULL DEFAULT 60,
  created_at        DATETIME(3)   NOT NULL,
  updated_at        DATETIME(3)   NOT NULL,
  KEY mounts_agent (agent_id, created_at),
  KEY mounts_bucket (bucket_id),
  CONSTRAINT mounts_agent_fk FOREIGN KEY (agent_id) REFERENCES agents (id) ON DELETE CASCADE,
  CONSTRAINT mounts_bucket_fk FOREIGN KEY (bucket_id) REFERENCES buckets (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
