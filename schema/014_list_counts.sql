-- Counts behind X-Total-Count that do not scan (issue 14): one row per list and
-- owner, kept by triggers in the transaction of the row's own INSERT or DELETE,
-- so they are exact whoever writes. (Numbered 014 after its issue, leaving room
-- for other branches' migrations.)
--
-- kind      owner_id   counts
-- inv       agent      invocations (history)
-- ses       agent      sessions
-- att       agent      agent_files (attachments)
-- agt       user       agents
-- key       user       api_keys
-- file      user       files (every scope)
-- file:S    user       files of scope S (user, agent, session)
--
-- Foreign-key cascades fire no triggers in MariaDB, so the parents' triggers
-- account for what a cascade removes: an agent's delete drops its own rows, a
-- file's delete removes its attachments first (their triggers count that), a
-- user's delete drops the rows of the user and of the user's agents.
-- (Creating triggers needs what 004_invocation_rollup.sql says.)
CREATE TABLE list_counts (
  kind      VARCHAR(16)  NOT NULL,
  owner_id  VARCHAR(32)  NOT NULL,
  n         BIGINT       NOT NULL DEFAULT 0,
  PRIMARY KEY (kind, owner_id)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

-- Keyset pages of sessions and attachments walk (agent_id, created_at, id);
-- their primary keys (agent_id, id) order by id only.
ALTER TABLE sessions ADD KEY sessions_agent_created (agent_id, created_at);
ALTER TABLE agent_files ADD KEY agent_files_agent_created (agent_id, created_at);
-- Retention (history_retention_days) deletes the oldest invocations in small
-- batches: a range walk on this index, far from where new rows are added.
ALTER TABLE invocations ADD KEY invocations_created (created_at);

CREATE TRIGGER invocations_count_ins AFTER INSERT ON invocations FOR EACH ROW
  INSERT INTO list_counts (kind, owner_id, n) VALUES ('inv', NEW.agent_id, 1)
  ON DUPLICATE KEY UPDATE n = n + 1;
CREATE TRIGGER invocations_count_del AFTER DELETE ON invocations FOR EACH ROW
  UPDATE list_counts SET n = n - 1 WHERE kind = 'inv' AND owner_id = OLD.agent_id;

CREATE TRIGGER sessions_count_ins AFTER INSERT ON sessions FOR EACH ROW
  INSERT INTO list_counts (kind, owner_id, n) VALUES ('ses', NEW.agent_id, 1)
  ON DUPLICATE KEY UPDATE n = n + 1;
CREATE TRIGGER sessions_count_del AFTER DELETE ON sessions FOR EACH ROW
  UPDATE list_counts SET n = n - 1 WHERE kind = 'ses' AND owner_id = OLD.agent_id;

CREATE TRIGGER agent_files_count_ins AFTER INSERT ON agent_files FOR EACH ROW
  INSERT INTO list_counts (kind, owner_id, n) VALUES ('att', NEW.agent_id, 1)
  ON DUPLICATE KEY UPDATE n = n + 1;
CREATE TRIGGER agent_files_count_del AFTER DELETE ON agent_files FOR EACH ROW
  UPDATE list_counts SET n = n - 1 WHERE kind = 'att' AND owner_id = OLD.agent_id;

CREATE TRIGGER api_keys_count_ins AFTER INSERT ON api_keys FOR EACH ROW
  INSERT INTO list_counts (kind, owner_id, n) VALUES ('key', NEW.user_id, 1)
  ON DUPLICATE KEY UPDATE n = n + 1;
CREATE TRIGGER api_keys_count_del AFTER DELETE ON api_keys FOR EACH ROW
  UPDATE list_counts SET n = n - 1 WHERE kind = 'key' AND owner_id = OLD.user_id;

CREATE TRIGGER agents_count_ins AFTER INSERT ON agents FOR EACH ROW
  INSERT INTO list_counts (kind, owner_id, n) VALUES ('agt', NEW.user_id, 1)
  ON DUPLICATE KEY UPDATE n = n + 1;
-- Its invocations, sessions and attachments go by cascade: their counts with it.
CREATE TRIGGER agents_count_del AFTER DELETE ON agents FOR EACH ROW
BEGIN
  UPDATE list_counts SET n = n - 1 WHERE kind = 'agt' AND owner_id = OLD.user_id;
  DELETE FROM list_counts WHERE kind IN ('inv', 'ses', 'att') AND owner_id = OLD.id;
END;

CREATE TRIGGER files_count_ins AFTER INSERT ON files FOR EACH ROW
  INSERT INTO list_counts (kind, owner_id, n)
  VALUES ('file', NEW.user_id, 1), (CONCAT('file:', NEW.scope), NEW.user_id, 1)
  ON DUPLICATE KEY UPDATE n = n + 1;
-- The attachments first, by hand: a cascade would not count them down.
CREATE TRIGGER files_count_before_del BEFORE DELETE ON files FOR EACH ROW
  DELETE FROM agent_files WHERE file_id = OLD.id;
CREATE TRIGGER files_count_del AFTER DELETE ON files FOR EACH ROW
  UPDATE list_counts SET n = n - 1
  WHERE kind IN ('file', CONCAT('file:', OLD.scope)) AND owner_id = OLD.user_id;

-- Everything of the user goes by cascade (agents, keys, files): their counts too.
CREATE TRIGGER users_count_del BEFORE DELETE ON users FOR EACH ROW
BEGIN
  DELETE FROM list_counts WHERE owner_id IN (SELECT id FROM agents WHERE user_id = OLD.id);
  DELETE FROM list_counts WHERE owner_id = OLD.id;
END;

-- The counts of the rows already there (migrate runs before the services start).
INSERT INTO list_counts (kind, owner_id, n)
  SELECT 'inv', agent_id, COUNT(*) FROM invocations GROUP BY agent_id;
INSERT INTO list_counts (kind, owner_id, n)
  SELECT 'ses', agent_id, COUNT(*) FROM sessions GROUP BY agent_id;
INSERT INTO list_counts (kind, owner_id, n)
  SELECT 'att', agent_id, COUNT(*) FROM agent_files GROUP BY agent_id;
INSERT INTO list_counts (kind, owner_id, n)
  SELECT 'key', user_id, COUNT(*) FROM api_keys GROUP BY user_id;
INSERT INTO list_counts (kind, owner_id, n)
  SELECT 'agt', user_id, COUNT(*) FROM agents GROUP BY user_id;
INSERT INTO list_counts (kind, owner_id, n)
  SELECT 'file', user_id, COUNT(*) FROM files GROUP BY user_id;
INSERT INTO list_counts (kind, owner_id, n)
  SELECT CONCAT('file:', scope), user_id, COUNT(*) FROM files GROUP BY user_id, scope;

-- Prompts and responses over 64 KB live in the file store (lib/files/history.c):
-- the row keeps an empty value and the blob's hash, history_blobs one
-- reference per (invocation, blob) in file_blobs' refcount. Its rows are
-- written before their invocation's and released by a sweep once the
-- invocation is gone (retention, the agent deleted): no trigger can reach the
-- store, and a cascade fires none.
ALTER TABLE invocations ADD COLUMN prompt_sha256 CHAR(64) NULL,
  ADD COLUMN response_sha256 CHAR(64) NULL;
CREATE TABLE history_blobs (
  invocation_id  VARCHAR(32)  NOT NULL,
  sha256         CHAR(64)     NOT NULL,
  agent_id       VARCHAR(32)  NOT NULL,
  created_at     DATETIME(3)  NOT NULL,
  PRIMARY KEY (invocation_id, sha256),
  KEY history_blobs_agent (agent_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
