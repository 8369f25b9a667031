-- Managed files: metadata and quota here, bytes in the storage backend (a local
-- directory or an S3 bucket), content-addressed by SHA-256 so identical uploads
-- share one blob. (Numbered 010 to leave room for other branches' migrations.)

-- Bytes of the user's file records (pending uploads included: they hold their
-- reservation). Raised by one conditional UPDATE per upload, so parallel uploads
-- cannot pass quota_bytes together.
ALTER TABLE users ADD COLUMN storage_used_bytes BIGINT NOT NULL DEFAULT 0;

-- One row per stored blob; refcount = file records using it. The row lock is
-- what orders placing bytes against removing them.
CREATE TABLE file_blobs (
  sha256        CHAR(64)     NOT NULL PRIMARY KEY,
  size_bytes    BIGINT       NOT NULL,
  refcount      INT          NOT NULL,
  created_at    DATETIME(3)  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- tags: sorted, each in commas (",a,,b,"; tags cannot hold commas), so that
-- "has tags a and b" is one LIKE '%,a,%,b,%'. sha256 is NULL while pending.
-- uploaded: a pending upload whose bytes arrived (the URL is spent).
CREATE TABLE files (
  id                VARCHAR(32)   NOT NULL PRIMARY KEY,
  user_id           VARCHAR(32)   NOT NULL,
  filename          VARCHAR(255)  NOT NULL,
  size_bytes        BIGINT        NOT NULL,
  content_type      VARCHAR(255)  NOT NULL,
  scope             ENUM('user','agent','session') NOT NULL,
  status            ENUM('pending','confirmed') NOT NULL,
  description       VARCHAR(2000) NULL,
  tags              VARCHAR(1400) NOT NULL DEFAULT '',
  sha256            CHAR(64)      NULL,
  agent_id          VARCHAR(32)   NULL,
  session_id        VARCHAR(128)  NULL,
  upload_expires_at DATETIME(3)   NULL,
  uploaded          TINYINT(1)    NOT NULL DEFAULT 0,
  created_at        DATETIME(3)   NOT NULL,
  updated_at        DATETIME(3)   NOT NULL,
  KEY files_user_created (user_id, created_at, id),
  KEY files_user_scope (user_id, scope, created_at, id),
  KEY files_agent_session (agent_id, session_id),
  KEY files_pending (status, upload_expires_at),
  CONSTRAINT files_user_fk FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Files attached to an agent: seen in its sandboxes at mount_path.
CREATE TABLE agent_files (
  agent_id      VARCHAR(32)   NOT NULL,
  file_id       VARCHAR(32)   NOT NULL,
  mount_path    VARCHAR(1024) NOT NULL,
  read_only     TINYINT(1)    NOT NULL DEFAULT 1,
  created_at    DATETIME(3)   NOT NULL,
  PRIMARY KEY (agent_id, file_id),
  KEY agent_files_file (file_id),
  CONSTRAINT agent_files_agent_fk FOREIGN KEY (agent_id) REFERENCES agents (id) ON DELETE CASCADE,
  CONSTRAINT agent_files_file_fk FOREIGN KEY (file_id) REFERENCES files (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
