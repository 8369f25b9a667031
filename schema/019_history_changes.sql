-- A change counter beside the history's count (issue 14): list_counts.changes
-- of kind 'inv' is bumped by every insert, update and delete of an agent's
-- invocations, in that statement's transaction. The authentication query of
-- GET /agents/{slug}/invocations reads it with the key and the agent, and each
-- API worker answers the history's first page from its own copy while the
-- number stands (handlers/list.c), instead of reading the page again; n alone
-- would not do (a purge and a call in the same moment leave it unchanged).
-- The other kinds leave it at 0. (Creating triggers needs what
-- 004_invocation_rollup.sql says.)
ALTER TABLE list_counts ADD COLUMN changes BIGINT NOT NULL DEFAULT 0;

DROP TRIGGER invocations_count_ins;
DROP TRIGGER invocations_count_del;
CREATE TRIGGER invocations_count_ins AFTER INSERT ON invocations FOR EACH ROW
  INSERT INTO list_counts (kind, owner_id, n, changes) VALUES ('inv', NEW.agent_id, 1, 1)
  ON DUPLICATE KEY UPDATE n = n + 1, changes = changes + 1;
CREATE TRIGGER invocations_count_del AFTER DELETE ON invocations FOR EACH ROW
  UPDATE list_counts SET n = n - 1, changes = changes + 1 WHERE kind = 'inv' AND owner_id = OLD.agent_id;
CREATE TRIGGER invocations_count_upd AFTER UPDATE ON invocations FOR EACH ROW
  UPDATE list_counts SET changes = changes + 1 WHERE kind = 'inv' AND owner_id IN (OLD.agent_id, NEW.agent_id);
