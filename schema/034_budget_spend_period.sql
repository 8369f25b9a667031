-- Spend rows of periods that are over are deleted once a minute by every
-- runner (lib/runner/heartbeat.c), and nothing indexed them: the DELETE walked
-- the whole table and, under REPEATABLE READ, kept a lock on every row it
-- walked until it ended. When a call's admission or charge held some user's
-- current rows, the purge waited for them, and every admission and charge of
-- the users whose rows it had walked by then waited for the purge (on a
-- cluster, its write set conflicted with theirs). With this index each of
-- its two DELETEs (day rows, month rows) walks only rows of periods that are
-- over, and the first current row after them.
ALTER TABLE budget_spend ADD INDEX IF NOT EXISTS budget_spend_period (period, period_start);
