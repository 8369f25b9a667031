-- Invocation logs (issue 29): the end of what an invocation's agent wrote to
-- stderr (at most 64 KiB, the agent's secrets, the model key and the gateway
-- token already replaced by "[redacted]" in the runner), kept beside its
-- history row and gone with it: the history's retention purge and the
-- agent's deletion (invocations cascade from agents) remove it through the
-- foreign key. An invocation that wrote nothing to stderr has no row.
CREATE TABLE invocation_logs (
  invocation_id  VARCHAR(32)  NOT NULL PRIMARY KEY,
  stderr         MEDIUMBLOB   NOT NULL,
  truncated      TINYINT(1)   NOT NULL DEFAULT 0,
  CONSTRAINT invocation_logs_inv_fk FOREIGN KEY (invocation_id) REFERENCES invocations (id)
    ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
