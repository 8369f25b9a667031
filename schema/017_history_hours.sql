-- Where a deep offset of an agent's history lies, without walking to it
-- (issue 14): how many invocations each hour of the agent holds, kept by
-- triggers in the transaction of the row's own INSERT or DELETE, so exact
-- whoever writes (the API, retention, a seeding script). GET …/invocations at
-- offset N sums the hours from the newest until it passes N, then walks only
-- within that hour: a few thousand small rows and at most one hour of index,
-- instead of N index entries.
--
-- Hours by created_at (UTC, as stored), so an invocation recorded late, after
-- newer ones, still counts where the history sorts it. The agent's rows go with
-- it by the foreign key (cascades fire no triggers); an hour emptied by
-- retention keeps a row of 0, which paging steps over and the agent's delete
-- removes. (Creating triggers needs what 004_invocation_rollup.sql says.)
CREATE TABLE history_hours (
  agent_id  VARCHAR(32)  NOT NULL,
  hour      DATETIME     NOT NULL,
  n         BIGINT       NOT NULL DEFAULT 0,
  PRIMARY KEY (agent_id, hour),
  CONSTRAINT history_hours_agent_fk FOREIGN KEY (agent_id) REFERENCES agents (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TRIGGER invocations_hours_ins AFTER INSERT ON invocations FOR EACH ROW
  INSERT INTO history_hours (agent_id, hour, n)
  VALUES (NEW.agent_id, DATE_FORMAT(NEW.created_at, '%Y-%m-%d %H:00:00'), 1)
  ON DUPLICATE KEY UPDATE n = n + 1;
CREATE TRIGGER invocations_hours_del AFTER DELETE ON invocations FOR EACH ROW
  UPDATE history_hours SET n = n - 1
  WHERE agent_id = OLD.agent_id AND hour = DATE_FORMAT(OLD.created_at, '%Y-%m-%d %H:00:00');

-- The history recorded so far, after the triggers: an invocation recorded
-- meanwhile is counted by both, and the count of the rows is what stays.
INSERT INTO history_hours (agent_id, hour, n)
  SELECT agent_id, DATE_FORMAT(created_at, '%Y-%m-%d %H:00:00'), COUNT(*)
  FROM invocations GROUP BY agent_id, DATE_FORMAT(created_at, '%Y-%m-%d %H:00:00')
  ON DUPLICATE KEY UPDATE n = VALUES(n);
