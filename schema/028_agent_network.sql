-- Egress allow-lists (issue 32): an agent's `network` setting as the API
-- stored it after checking it, canonical JSON {"mode":"allow","allow":[...]}.
-- NULL: mode "open", the sandbox network every agent had before.
ALTER TABLE agents ADD COLUMN IF NOT EXISTS network TEXT NULL;
