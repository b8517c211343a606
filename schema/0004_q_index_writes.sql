-- Rolodex schema, version 4: the trigram indexes of q (version 3) take each write directly.
--
-- A GIN index defaults to fastupdate: writes append to a pending list, and the write that finds the
-- list full (gin_pending_list_limit, 4 MB) merges all of it into the index before it returns. Every
-- contact write adds its trigrams (an UPDATE is never HOT: updated_at is indexed), so under a steady
-- PATCH load on a company of a million contacts one write in a few thousand took 1 to 6 seconds
-- (make bench). PostgreSQL's manual: "If consistent response time is more important than update
-- speed, use of pending entries can be disabled by turning off the fastupdate storage parameter."
-- It is, for an API: a write now pays for its own trigrams (PATCH throughput on the bench fell by
-- about a fifth, its longest request from over a second to a third of one), and q no longer scans
-- a pending list. The list left from before is merged here, once.
DO $$
DECLARE
    ix text;
BEGIN
    FOREACH ix IN ARRAY ARRAY['contacts_q', 'business_q'] LOOP
        IF to_regclass(ix) IS NOT NULL THEN -- absent where pg_trgm was not available (version 3)
            EXECUTE format('ALTER INDEX %I SET (fastupdate = off)', ix);
            PERFORM gin_clean_pending_list(to_regclass(ix));
        END IF;
    END LOOP;
END
$$;
