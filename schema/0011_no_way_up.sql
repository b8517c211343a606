-- Rolodex schema, version 11: no way up (API.md sections 12 and 13).
--
-- A company has at most 100 active keys: api_keys_active serves the count that a new key's INSERT
-- takes (keys.go), and the servers' rebuild of the active keys' hashes (auth.go); api_keys_made
-- their look-ups of the keys made since the last one, without a scan of every key ever made.
CREATE INDEX api_keys_active ON api_keys (company_id, expires_at) INCLUDE (hash) WHERE revoked_at IS NULL;
CREATE INDEX api_keys_made ON api_keys (created_at) INCLUDE (hash, expires_at) WHERE revoked_at IS NULL;

-- An endpoint is sent only the events of its families (contact, business, organization): those the
-- key which created or last changed it could read. Endpoints made before this version keep every
-- family; one written without families gets none.
ALTER TABLE webhook_endpoints ADD COLUMN families text[] NOT NULL DEFAULT '{contact,business,organization}';
ALTER TABLE webhook_endpoints ALTER COLUMN families SET DEFAULT '{}';

-- A rotated secret stays in previous_secret, and signs deliveries beside the new one for 24 hours
-- from secret_rotated_at.
ALTER TABLE webhook_endpoints ADD COLUMN previous_secret text, ADD COLUMN secret_rotated_at timestamptz;
