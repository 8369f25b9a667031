-- Schedules (issue 32): an agent invoked with a prompt at the times of a
-- five-field cron expression in an IANA time zone. next_run_at is the one
-- tick to run next, in UTC; a scheduler claims it by moving it on with a
-- conditional UPDATE (… WHERE id = ? AND next_run_at = <the value it read>),
-- so across all API hosts exactly one claims each tick, and a scheduler that
-- finds a tick long past moves it to the next one after the database's now:
-- ticks missed while nothing ran collapse into one run.
CREATE TABLE IF NOT EXISTS schedules (
  id                  VARCHAR(32)   NOT NULL PRIMARY KEY,
  agent_id            VARCHAR(32)   NOT NULL,
  cron                VARCHAR(256)  NOT NULL,
  timezone            VARCHAR(64)   NOT NULL,
  prompt              MEDIUMBLOB    NOT NULL,
  session_id          VARCHAR(128)  NULL,     -- NULL: a fresh session per run
  webhook_url         VARCHAR(2048) NULL,     -- told of each run's end (webhooks)
  paused              TINYINT(1)    NOT NULL DEFAULT 0,
  next_run_at         DATETIME(3)   NULL,     -- NULL while paused
  last_run_at         DATETIME(3)   NULL,     -- the tick last claimed
  last_invocation_id  VARCHAR(32)   NULL,
  last_status         VARCHAR(16)   NULL,     -- completed | failed | refused
  last_error          VARCHAR(1024) NULL,
  run_count           BIGINT        NOT NULL DEFAULT 0,
  created_at          DATETIME(3)   NOT NULL,
  updated_at          DATETIME(3)   NOT NULL,
  KEY schedules_due (next_run_at),
  KEY schedules_agent (agent_id, created_at),
  CONSTRAINT schedules_agent_fk FOREIGN KEY (agent_id) REFERENCES agents (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- What started an invocation: the API (a client's call) or a schedule.
ALTER TABLE invocations
  ADD COLUMN IF NOT EXISTS trigger_type ENUM('api','schedule') NOT NULL DEFAULT 'api',
  ADD COLUMN IF NOT EXISTS schedule_id  VARCHAR(32) NULL;
