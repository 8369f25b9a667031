-- Several runners (docs/cluster.md): the SHA-256 of the agent's built image,
-- packed into the file store by the runner that deployed it, so that another
-- runner can take the agent over when that one is gone. NULL: not kept (an
-- older deploy, or the store was unavailable); only its runner can run it.
ALTER TABLE agents ADD COLUMN image_sha256 CHAR(64) NULL AFTER entrypoint;
