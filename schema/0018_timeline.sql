-- Rolodex schema, version 18: the timeline (API.md section 19, timeline.go). Each event names the
-- object it is about: about is "contact:12" of a contact.* event, and the from end of an
-- association.* event, whose to end is about_other ("business:7"). A timeline reads an object's
-- events newest first through these indexes; the rest of the events table is not touched.
ALTER TABLE events ADD COLUMN about text, ADD COLUMN about_other text;

UPDATE events SET
    about = CASE WHEN type LIKE 'association.%'
        THEN (object::json #>> '{from,object}') || ':' || (object::json #>> '{from,id}')
        ELSE split_part(type, '.', 1) || ':' || (object::json ->> 'id') END,
    about_other = CASE WHEN type LIKE 'association.%'
        THEN (object::json #>> '{to,object}') || ':' || (object::json #>> '{to,id}') END;

CREATE INDEX events_about ON events (company_id, about, created_at, id);
CREATE INDEX events_about_other ON events (company_id, about_other, created_at, id) WHERE about_other IS NOT NULL;

-- The activities of a target (target= on activities, timeline.go) by an index-only walk: a target is
-- an activity's association without a label. Through associations_b_other, which lacks the label,
-- each of a business record's 400 activities cost a read of its association's row.
CREATE INDEX associations_targets ON associations (company_id, b_kind, b_id, a_id) WHERE a_kind = 'activities' AND label = '';
