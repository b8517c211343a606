-- Rolodex schema, version 20: an activity's target rows carry its place (activities.go, timeline.go).
--
-- The activities of a target, sorted by occurredAt or dueAt (target= on activities, a timeline's
-- activities), were read whole and sorted: each of a business record's 400 activities cost a probe
-- of activities_pkey before a page of 100 was picked. A target row (an association of an activity,
-- without a label) now holds copies of its activity's occurred_at, due_at, done_at and type, so that a page
-- walks the target's rows in its order and stops at its end. The copies are written with the row
-- (insertAssociations reads them from the activity) and moved with the activity (updateActivity);
-- the other associations keep them NULL.
--
-- placed is the transaction that last wrote a target row's copies, which a timeline's walk compares
-- with its snapshot (timeline.go). A trigger sets it, so that on Citus it is the worker's, as
-- events.xid is (schema/0010). The rows copied here are older than every snapshot: '3'.
ALTER TABLE associations ADD COLUMN occurred_at timestamptz, ADD COLUMN due_at timestamptz, ADD COLUMN done_at timestamptz,
    ADD COLUMN type text, ADD COLUMN placed xid8;

UPDATE associations t SET occurred_at = a.occurred_at, due_at = a.due_at, done_at = a.done_at, type = a.type, placed = '3'
    FROM activities a
    WHERE a.company_id = t.company_id AND a.id = t.a_id AND t.a_kind = 'activities' AND t.label = '';

CREATE FUNCTION target_placed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.placed := pg_current_xact_id();
    RETURN NEW;
END $$;
SELECT set_config('citus.enable_unsafe_triggers', 'on', true);
CREATE TRIGGER associations_placed BEFORE INSERT OR UPDATE OF occurred_at, due_at, done_at ON associations
    FOR EACH ROW WHEN (NEW.a_kind = 'activities' AND NEW.label = '') EXECUTE FUNCTION target_placed();

-- The walks, index-only: the sort's keys as list.go writes them (sortField.keys), then the
-- activity's id; the copies the page's filters read are included. dueAt ascending only (unset last):
-- a task list's order; -dueAt reads the target's activities whole, as before.
CREATE INDEX associations_targets_occurred ON associations (company_id, b_kind, b_id, occurred_at, a_id)
    INCLUDE (type, due_at, done_at, placed) WHERE a_kind = 'activities' AND label = '';
-- associations_targets_occurred holds every target row of an object: it serves what
-- associations_targets (version 18) did, index-only, and takes its place.
DROP INDEX associations_targets;
CREATE INDEX associations_targets_due ON associations (company_id, b_kind, b_id, (due_at IS NULL), (coalesce(due_at, '-infinity')), a_id)
    INCLUDE (type, occurred_at, due_at, done_at) WHERE a_kind = 'activities' AND label = '';

-- An activity's targets (the subquery of its selectSQL) by an index-only scan: with b_id and label
-- in associations_a, a page of 100 activities no longer reads 100 association rows.
DROP INDEX associations_a;
CREATE INDEX associations_a ON associations (company_id, a_kind, a_id, b_kind, id) INCLUDE (b_id, label);
