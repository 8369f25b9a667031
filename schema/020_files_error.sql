-- Why some of the files an invocation's agent wrote were not kept (issue 26:
-- past the call's caps on files and bytes, its timeout, a sparse file, the
-- quota): NULL when all were, or nothing was written. The invocation itself
-- may still have completed; this is the record of its outputs failing.
ALTER TABLE invocations ADD COLUMN files_error TEXT NULL;
