-- Rolodex schema, version 4: the trigram indexes of q (version 3) take each write directly.
--
-- A GIN index defaults to fastupdate: writes append to a pending list, and the write that finds the
-- list full (gin_pending_list_limit, 4 MB) merges all of it into the index before it returns. Every
-- contact write adds its trigrams (an UPDATE is never HOT: updated_at is indexed), so under a steady
-- PATCH load on a company of a million contacts about one write in ten thousand took 1 to 6 seconds
-- (make bench). PostgreSQL's manual: "If consistent response time is more important than update
-- speed, use of pending entries can be disabled by turning off the fastupdate storage parameter."
-- It is, for an API: a write now pays for its own trigrams. On the bench, writes at saturation
-- went a fifth to two fifths slower, and the longest write fell from 0.7-4 s to under 0.4 s. q no
-- longer scans a pending list either. The list left from before is merged here, once.
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
