-- Rolodex schema, version 13: merging duplicates (merge.go, API.md section 16).
--
-- Each merged object leaves its id here with the id of the object it was merged into (moved on when
-- that one is merged in turn), so that the old id answers 404 "merged" naming it. A row is a few
-- dozen bytes, kept for good: "as long as events are kept, at least". A merge's events keep their
-- more members of data (mergedInto, mergedIds) in events.previous, which *.updated alone uses else.
CREATE TABLE merged_objects (
    company_id  bigint NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    tbl         text   NOT NULL, -- contacts or organizations
    id          bigint NOT NULL,
    merged_into bigint NOT NULL,
    merged_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (company_id, tbl, id)
);
CREATE INDEX merged_objects_into ON merged_objects (company_id, tbl, merged_into);
