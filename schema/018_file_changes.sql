-- A change counter per user's files (issue 10): bumped by triggers on every
-- insert, update and delete of a file, in that statement's transaction. A
-- filtered GET /files must count its matches (X-Total-Count), a scan of the
-- user's files; API workers keep that count and reuse it while this number
-- stays the same, so paging through a search does not scan again per page,
-- and another user's uploads do not invalidate it (as they do MariaDB's query
-- cache, which drops every cached result of a table on any write to it).
-- (Creating triggers needs what 004_invocation_rollup.sql says.)
CREATE TABLE file_changes (
  user_id  VARCHAR(32)  NOT NULL PRIMARY KEY,
  n        BIGINT       NOT NULL DEFAULT 0,
  CONSTRAINT file_changes_user_fk FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TRIGGER files_changes_ins AFTER INSERT ON files FOR EACH ROW
  INSERT INTO file_changes (user_id, n) VALUES (NEW.user_id, 1) ON DUPLICATE KEY UPDATE n = n + 1;
CREATE TRIGGER files_changes_upd AFTER UPDATE ON files FOR EACH ROW
  INSERT INTO file_changes (user_id, n) VALUES (NEW.user_id, 1) ON DUPLICATE KEY UPDATE n = n + 1;
CREATE TRIGGER files_changes_del AFTER DELETE ON files FOR EACH ROW
  INSERT INTO file_changes (user_id, n) VALUES (OLD.user_id, 1) ON DUPLICATE KEY UPDATE n = n + 1;
