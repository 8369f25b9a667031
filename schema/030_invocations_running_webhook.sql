-- A call in progress keeps where its record goes (issue 28): the call's own
-- webhook_url, else its agent's, as the call resolved it. A call whose owner
-- process died is recorded failed by whoever settles it (the API's periodic
-- sweep, handlers/invocation_sweep.c), and that record is delivered there
-- as any other call's.
ALTER TABLE invocations_running ADD COLUMN IF NOT EXISTS webhook_url VARCHAR(2048) NULL;
