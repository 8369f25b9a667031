-- Warm agents (issue 15): how many sandboxes with the agent's process already
-- started, waiting for its prompt, the runner holding the agent keeps. 0: none,
-- and no process of the agent ever starts without an invocation.
ALTER TABLE agents ADD COLUMN min_warm INT NOT NULL DEFAULT 0;
