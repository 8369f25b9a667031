-- Deploys as records (issue 29): one row per deploy job, written by the API
-- when it queues the job and by the runner as the job runs. The job's own
-- state, error and times stay in deploy_jobs (joined when read); this row adds
-- what the user asked for (the source, who started it), what was built (the
-- commit, the image), the build's output, and whether the image is still kept
-- in the file store for a rollback.
CREATE TABLE deploys (
  id              VARCHAR(32)   NOT NULL PRIMARY KEY,
  agent_id        VARCHAR(32)   NOT NULL,
  job_id          BIGINT        NULL,
  source_type     ENUM('git','local') NOT NULL,
  git_repo_url    VARCHAR(2048) NULL,
  git_branch      VARCHAR(255)  NULL,
  git_commit      CHAR(40)      NULL,   -- the commit actually built (runner)
  code_sha256     CHAR(64)      NULL,   -- the upload a local agent was built from
  user_id         VARCHAR(32)   NOT NULL,
  api_key_id      VARCHAR(32)   NULL,   -- NULL: started with a JWT
  api_key_name    VARCHAR(255)  NULL,
  started_at      DATETIME(3)   NULL,   -- first claimed by a runner
  -- Set when the runner switched the agent to this deploy's image.
  image_path      VARCHAR(1024) NULL,
  image_sha256    CHAR(64)      NULL,
  entrypoint      VARCHAR(1024) NULL,
  -- The image's reference in the file store (file_blobs) belongs to this row
  -- while image_kept is 1: the agent's last deploy_images_kept are kept.
  image_kept      TINYINT(1)    NOT NULL DEFAULT 0,
  activated_at    DATETIME(3)   NULL,   -- last made the agent's image (deploy or rollback)
  -- The build's output: its last 256 KiB (the tail is what explains a failed
  -- build); log_bytes counts all that was written.
  log             MEDIUMBLOB    NULL,
  log_bytes       BIGINT        NOT NULL DEFAULT 0,
  created_at      DATETIME(3)   NOT NULL,
  UNIQUE KEY deploys_job (job_id),
  KEY deploys_agent_created (agent_id, created_at),
  CONSTRAINT deploys_agent_fk FOREIGN KEY (agent_id) REFERENCES agents (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
