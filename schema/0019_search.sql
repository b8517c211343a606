-- Rolodex schema, version 19: search across resources (search.go, API.md section 20 of the
-- contract, docs/scaling.md). Each table has one search document, made of its own columns:
-- its searched fields, each between newlines, case- and accent-folded, and a contact's phone numbers
-- once more as their digits. One trigram index on it serves the search and the list's q (which
-- rechecks its own fields), in place of the q indexes of versions 3 and 17: a write pays for one
-- index, as before. Nothing is indexed later: the index is written with the row.
--
-- unaccent (contrib) takes the accents off; its function is STABLE, as it reads a dictionary named
-- by text, so search_unaccent is the same function of a dictionary given by OID (search_fold's
-- SQL-standard body is bound when it is made), IMMUTABLE. Where unaccent cannot be created,
-- search_fold only lowers the case, and where pg_trgm cannot, the documents have no index (version
-- 3): the same SQL, slower, and a NOTICE says so. The documents are written out, as search.go's
-- searchDoc writes them: a SQL function of an array of fields is never inlined, and cost 30 µs a row.
-- PARALLEL RESTRICTED: a search is one UNION ALL whose parts run in their order (search.go), which a
-- parallel plan above them would mix; the folding in every part keeps them in one process.
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS unaccent;
    BEGIN
        -- unaccent's own C function: a SQL wrapper is never inlined, and takes 3 times as long.
        -- Declaring a C function takes a superuser; without one, the wrapper.
        CREATE FUNCTION search_unaccent(regdictionary, text) RETURNS text LANGUAGE c IMMUTABLE STRICT PARALLEL RESTRICTED
            AS '$libdir/unaccent', 'unaccent_dict';
    EXCEPTION WHEN insufficient_privilege THEN
        CREATE FUNCTION search_unaccent(d regdictionary, t text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL RESTRICTED
            RETURN unaccent(d, t);
    END;
    CREATE FUNCTION search_fold(t text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL RESTRICTED
        RETURN lower(search_unaccent('unaccent'::regdictionary, t));
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'unaccent is not available (%): search compares case-insensitively only', SQLERRM;
    CREATE FUNCTION search_fold(t text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL RESTRICTED
        RETURN lower(t);
END
$$;

-- A phone number's digits: +34 600-12-34-56 is 34600123456 (translate: a tenth of regexp_replace's time).
CREATE FUNCTION search_digits(t text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN translate(t, ' +-().,/', '');

-- The LIKE pattern of a document holding needle, and the regular expression of one where a word
-- starts with it (after a character that is not a letter or digit: the newline before each field).
CREATE FUNCTION search_like(needle text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN '%' || replace(replace(replace(needle, '\', '\\'), '%', '\%'), '_', '\_') || '%';
CREATE FUNCTION search_word(needle text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN '[^[:alnum:]]' || regexp_replace(needle, '([^[:alnum:]])', '\\\1', 'g');

-- How doc matches needle: 0 a field is it, 1 a word of a field starts with it (never for an
-- e-mail, exact_only: a longer address is no match of it), 2 it is inside a field, NULL no match.
CREATE FUNCTION search_class(doc text, needle text, exact_only boolean) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE
        WHEN strpos(doc, E'\n' || needle || E'\n') > 0 THEN 0
        WHEN NOT exact_only AND doc ~ search_word(needle) THEN 1
        WHEN strpos(doc, needle) > 0 THEN 2
    END;

-- The documents of contacts, business records and organizations are stored, generated from the row:
-- the list's q and the search recheck each row the trigram index finds, and folding a contact's
-- document again for each took 4 µs, against 0.3 µs to read it (docs/scaling.md). An activity's body
-- may be long: its document is not stored twice.
ALTER TABLE contacts ADD COLUMN search_doc text GENERATED ALWAYS AS (search_fold(E'\n' || coalesce(name, '') || E'\n' ||
    coalesce(surname, '') || E'\n' || coalesce(email, '') || E'\n' || coalesce(secondary_email, '') || E'\n' ||
    coalesce(phone, '') || E'\n' || coalesce(mobile_phone, '') || E'\n' || coalesce(dni, '') || E'\n' ||
    coalesce(search_digits(phone), '') || E'\n' || coalesce(search_digits(mobile_phone), '') || E'\n')) STORED;
ALTER TABLE business ADD COLUMN search_doc text GENERATED ALWAYS AS (search_fold(E'\n' || coalesce(title, '') || E'\n')) STORED;
ALTER TABLE organizations ADD COLUMN search_doc text GENERATED ALWAYS AS (search_fold(E'\n' || coalesce(name, '') || E'\n')) STORED;

DO $$
BEGIN
    DROP INDEX IF EXISTS contacts_q, business_q, activities_q;
    CREATE INDEX contacts_search ON contacts USING gin (search_doc gin_trgm_ops) WITH (fastupdate = off);
    CREATE INDEX business_search ON business USING gin (search_doc gin_trgm_ops) WITH (fastupdate = off);
    CREATE INDEX organizations_search ON organizations USING gin (search_doc gin_trgm_ops) WITH (fastupdate = off);
    CREATE INDEX activities_search ON activities USING gin (search_fold(E'\n' || coalesce(subject, '') || E'\n' ||
        coalesce(body, '') || E'\n') gin_trgm_ops) WITH (fastupdate = off);
    -- Custom values: those of text, e-mail and URL fields are searched (search.go picks the fields).
    CREATE INDEX custom_values_search ON custom_values USING gin (search_fold(E'\n' || coalesce(text_value, '') || E'\n') gin_trgm_ops)
        WITH (fastupdate = off) WHERE text_value IS NOT NULL;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'pg_trgm is not available (%): search and q scan the company''s rows without an index', SQLERRM;
END
$$;
