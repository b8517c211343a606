-- Rolodex schema, version 10: what runs the same on one PostgreSQL and on a Citus cluster, where
-- every tenant table is split into shards on the workers (citus.go, docs/scaling.md).
--
-- On Citus a trigger fires on the shard, in the worker's transaction, and a statement's transition
-- table is not there; a function in an INSERT's DEFAULT or an UPDATE is evaluated on the coordinator
-- before the statement is sent, and refused when it is not IMMUTABLE and reads a column.

-- Counts (version 8): one trigger a row instead of one a statement. The table's name is an
-- argument, as a shard's own name is contacts_102008.
CREATE FUNCTION count_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO object_counts (company_id, tbl, stripe, n) VALUES (NEW.company_id, TG_ARGV[0], pg_backend_pid() % 16, 1)
            ON CONFLICT (company_id, tbl, stripe) DO UPDATE SET n = object_counts.n + 1;
    ELSIF EXISTS (SELECT FROM companies WHERE id = OLD.company_id) THEN -- not a company's own deletion
        INSERT INTO object_counts (company_id, tbl, stripe, n) VALUES (OLD.company_id, TG_ARGV[0], pg_backend_pid() % 16, -1)
            ON CONFLICT (company_id, tbl, stripe) DO UPDATE SET n = object_counts.n - 1;
    END IF;
    RETURN NULL;
END $$;

LOCK TABLE contacts, business IN SHARE ROW EXCLUSIVE MODE;
DROP TRIGGER contacts_inserted ON contacts;
DROP TRIGGER contacts_deleted ON contacts;
DROP TRIGGER business_inserted ON business;
DROP TRIGGER business_deleted ON business;
DROP FUNCTION count_inserted(), count_deleted();
CREATE TRIGGER contacts_counted AFTER INSERT OR DELETE ON contacts
    FOR EACH ROW EXECUTE FUNCTION count_row('contacts');
CREATE TRIGGER business_counted AFTER INSERT OR DELETE ON business
    FOR EACH ROW EXECUTE FUNCTION count_row('business');

-- Events (version 6): xid is the id of the transaction that writes the event on the node that
-- holds it, the one whose snapshot the feed reads (events.go). A trigger sets it there; a DEFAULT
-- would be the coordinator's.
CREATE FUNCTION event_xid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.xid := pg_current_xact_id();
    RETURN NEW;
END $$;
ALTER TABLE events ALTER COLUMN xid DROP DEFAULT;
CREATE TRIGGER events_xid BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION event_xid();

-- An UPDATE moves updated_at on by at least a millisecond. timestamptz + interval is STABLE (a day
-- depends on the time zone); a millisecond does not, so this is IMMUTABLE.
CREATE FUNCTION one_ms_after(t timestamptz) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN t + interval '1 millisecond';

-- API keys: Citus keeps a UNIQUE constraint only when it holds the company. A key's hash is SHA-256
-- of 192 random bits, so it needs an index, not a constraint; a prefix that names two keys is
-- refused by `rolodex key revoke` (keys.go).
ALTER TABLE api_keys DROP CONSTRAINT api_keys_hash_key, DROP CONSTRAINT api_keys_prefix_key;
CREATE INDEX api_keys_hash ON api_keys (hash);
CREATE INDEX api_keys_prefix ON api_keys (prefix);
