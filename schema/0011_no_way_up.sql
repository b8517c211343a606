-- Rolodex schema, version 11: no way up (API.md sections 12 and 13).
--
-- A company has at most 100 active keys: api_keys_active serves the count that a new key's INSERT
-- takes (keys.go), and the servers' rebuild of the active keys' hashes (auth.go).
CREATE INDEX api_keys_active ON api_keys (company_id, expires_at) INCLUDE (hash) WHERE revoked_at IS NULL;
