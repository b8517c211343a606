-- Rolodex schema, version 7: API keys with a name, scopes, an expiry and the minute of their last
-- use (API.md section 13). scopes is comma-separated ("contacts:read,events:read"); every key made
-- before this version keeps doing everything ("*").
ALTER TABLE api_keys
    ADD COLUMN name         text NOT NULL DEFAULT '' CHECK (length(name) <= 255),
    ADD COLUMN scopes       text NOT NULL DEFAULT '*' CHECK (scopes <> ''),
    ADD COLUMN expires_at   timestamptz,
    ADD COLUMN last_used_at timestamptz;
