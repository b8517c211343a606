-- Rolodex schema, version 8: counts in constant time. GET /v1/{resource}/count without filters
-- adds up object_counts instead of counting a company's rows (about 1 s of CPU at a million).
--
-- The database keeps the counts itself: a trigger on every INSERT and DELETE adds, in the
-- statement's transaction, the rows it made or removed, so the counts are exact whichever server
-- (of whichever version) writes. Each company's count is 16 stripes, one chosen by the backend
-- (pg_backend_pid() % 16), so that concurrent writes of one company rarely wait for one row. The
-- trigger is created and the counts filled under the same lock, which holds writers off meanwhile.
CREATE TABLE object_counts (
    company_id bigint   NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    tbl        text     NOT NULL,
    stripe     smallint NOT NULL,
    n          bigint   NOT NULL,
    PRIMARY KEY (company_id, tbl, stripe)
);

CREATE FUNCTION count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO object_counts (company_id, tbl, stripe, n)
        SELECT company_id, TG_TABLE_NAME, pg_backend_pid() % 16, count(*) FROM new_rows GROUP BY company_id
        ON CONFLICT (company_id, tbl, stripe) DO UPDATE SET n = object_counts.n + excluded.n;
    RETURN NULL;
END $$;

CREATE FUNCTION count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO object_counts (company_id, tbl, stripe, n)
        SELECT company_id, TG_TABLE_NAME, pg_backend_pid() % 16, -count(*) FROM old_rows
        WHERE EXISTS (SELECT FROM companies WHERE id = old_rows.company_id) -- not a company's own deletion
        GROUP BY company_id
        ON CONFLICT (company_id, tbl, stripe) DO UPDATE SET n = object_counts.n + excluded.n;
    RETURN NULL;
END $$;

LOCK TABLE contacts, business IN SHARE ROW EXCLUSIVE MODE;
CREATE TRIGGER contacts_inserted AFTER INSERT ON contacts REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION count_inserted();
CREATE TRIGGER contacts_deleted AFTER DELETE ON contacts REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION count_deleted();
CREATE TRIGGER business_inserted AFTER INSERT ON business REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION count_inserted();
CREATE TRIGGER business_deleted AFTER DELETE ON business REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION count_deleted();
INSERT INTO object_counts (company_id, tbl, stripe, n)
    SELECT company_id, 'contacts', 0, count(*) FROM contacts GROUP BY company_id;
INSERT INTO object_counts (company_id, tbl, stripe, n)
    SELECT company_id, 'business', 0, count(*) FROM business GROUP BY company_id;
