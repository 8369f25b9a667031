-- Spend limits (issue 32): a daily and a monthly budget in USD on a user, an
-- agent and an API key; NULL is no limit. DECIMAL(12,6): the API takes at
-- most 6 decimals and 999999.999999 (core/money's price format).
ALTER TABLE users
  ADD COLUMN IF NOT EXISTS max_cost_usd_per_day   DECIMAL(12,6) NULL,
  ADD COLUMN IF NOT EXISTS max_cost_usd_per_month DECIMAL(12,6) NULL;
ALTER TABLE agents
  ADD COLUMN IF NOT EXISTS max_cost_usd_per_day   DECIMAL(12,6) NULL,
  ADD COLUMN IF NOT EXISTS max_cost_usd_per_month DECIMAL(12,6) NULL;
ALTER TABLE api_keys
  ADD COLUMN IF NOT EXISTS max_cost_usd_per_day   DECIMAL(12,6) NULL,
  ADD COLUMN IF NOT EXISTS max_cost_usd_per_month DECIMAL(12,6) NULL;

-- What each scope spent in each UTC day and month, whether or not it has a
-- budget (so a budget set at noon counts the morning). One row per scope and
-- period, changed only by `spent = spent + ?` (API hosts at a call's end, the
-- runners' model gateways as each model answer comes): exact across the
-- cluster, never a per-process counter. inflight counts the calls admitted
-- and not yet charged, live until inflight_until (a call whose API worker
-- died stops holding the edge once its deadline is past); max_call is the
-- period's dearest call, what a call in flight may still cost.
CREATE TABLE IF NOT EXISTS budget_spend (
  scope          ENUM('user','agent','key') NOT NULL,
  scope_id       VARCHAR(32)    NOT NULL,
  period         ENUM('day','month') NOT NULL,
  period_start   DATE           NOT NULL,
  spent          DECIMAL(24,12) NOT NULL DEFAULT 0,
  inflight       INT            NOT NULL DEFAULT 0,
  inflight_until DATETIME(3)    NULL,
  max_call       DECIMAL(24,12) NOT NULL DEFAULT 0,
  PRIMARY KEY (scope, scope_id, period, period_start)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;
