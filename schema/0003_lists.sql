-- Rolodex schema, version 3: what lists need (API.md section 6, list.go).
--
-- Every index leads with company_id and ends with id, so one company's rows come out of one index
-- range already in (sort key, id) order: keyset paging reads page 10,000 as cheaply as page 1.
-- Text sorts compare by code point (COLLATE "C"). A nullable sort key is indexed as
-- (is it null?, value with NULL replaced): NULLs come last in both directions, and the next page is one
-- row comparison. The expressions here are exactly the ones list.go writes (sortField.keys); the
-- EXPLAIN tests in list_test.go fail when the two part.

-- The key that signs list cursors (list.go), made once, shared by every server on this database.
CREATE TABLE server_secrets (
    name  text  PRIMARY KEY,
    value bytea NOT NULL CHECK (length(value) >= 32)
);
INSERT INTO server_secrets (name, value)
VALUES ('cursor', sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8')));

-- Contacts: sorts.
CREATE INDEX contacts_created ON contacts (company_id, created_at, id);
CREATE INDEX contacts_updated ON contacts (company_id, updated_at, id);
CREATE INDEX contacts_name ON contacts (company_id, (name COLLATE "C"), id);
CREATE INDEX contacts_surname_asc ON contacts (company_id, (surname IS NULL), (coalesce(surname, '') COLLATE "C"), id);
CREATE INDEX contacts_surname_desc ON contacts (company_id, (surname IS NOT NULL), (coalesce(surname, '') COLLATE "C"), id);
-- Contacts: filters.
CREATE INDEX contacts_organization ON contacts (company_id, organization_id, id);
CREATE INDEX contacts_assigned_to ON contacts (company_id, assigned_to_id, id);
CREATE INDEX contacts_stage ON contacts (company_id, stage_id, id);
CREATE INDEX contacts_country ON contacts (company_id, country_id, id);
CREATE INDEX contacts_user_creator ON contacts (company_id, user_creator_id, id);
CREATE INDEX contacts_email ON contacts (company_id, lower(email));

-- Business: sorts.
CREATE INDEX business_created ON business (company_id, created_at, id);
CREATE INDEX business_updated ON business (company_id, updated_at, id);
CREATE INDEX business_title ON business (company_id, (title COLLATE "C"), id);
CREATE INDEX business_value_asc ON business (company_id, (value IS NULL), (coalesce(value, 0)), id);
CREATE INDEX business_value_desc ON business (company_id, (value IS NOT NULL), (coalesce(value, 0)), id);
CREATE INDEX business_deadline_asc ON business (company_id, (deadline IS NULL), (coalesce(deadline, '-infinity')), id);
CREATE INDEX business_deadline_desc ON business (company_id, (deadline IS NOT NULL), (coalesce(deadline, '-infinity')), id);
CREATE INDEX business_position ON business (company_id, position, id);
-- Business: filters. The stage index also serves a board view (one stage, by position) and the
-- end-of-stage position of a new business.
DROP INDEX business_stage_position;
CREATE INDEX business_stage ON business (company_id, stage_id, position, id);
CREATE INDEX business_organization ON business (company_id, organization_id, id);
CREATE INDEX business_board ON business (company_id, board_id, id);
CREATE INDEX business_status ON business (company_id, status_id, id);
CREATE INDEX business_user_owner ON business (company_id, user_owner_id, id);
CREATE INDEX business_currency ON business (company_id, currency_id, id);

-- q (contains, case-insensitive) is served by trigram indexes when the pg_trgm extension can be
-- created (it ships with PostgreSQL; creating it needs the CREATE privilege on the database). When
-- it cannot, q still works without them (it filters the company's rows), and the migration says so
-- in a NOTICE.
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE INDEX contacts_q ON contacts USING gin ((name || E'\n' || coalesce(surname, '') || E'\n' ||
        coalesce(email, '') || E'\n' || coalesce(phone, '')) gin_trgm_ops);
    CREATE INDEX business_q ON business USING gin (title gin_trgm_ops);
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'pg_trgm is not available (%): q scans the company''s rows without an index', SQLERRM;
END
$$;
